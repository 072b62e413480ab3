/**
 * A real PostgreSQL for the distributed (BullMQ) suites on its PostgreSQL backend: Debian's
 * `postgresql` (initdb and postgres, on the PATH or in /usr/lib/postgresql/<version>/bin), a
 * cluster made in a temporary directory and served on a free 127.0.0.1 port with fsync off.
 * PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (or the
 * tests' second local user), and the server runs as it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { it } from 'vitest';
import { freePort } from './io.js';
import { until } from './redis.js';
import { onPath } from './system.js';
import { otherUser } from './users.js';

/** The directory of PostgreSQL's programs, or null when it is not installed. */
function binDir(): string | null {
  if (onPath('initdb') && onPath('postgres')) {
    const found = spawnSync('sh', ['-c', 'dirname "$(readlink -f "$(command -v postgres)")"'], { encoding: 'utf8' });
    if (found.status === 0) return found.stdout.trim();
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((name) => /^\d+$/.test(name) && existsSync(join(root, name, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0] as string, 'bin');
}

const BIN = binDir();

/**
 * Whether the suite needing PostgreSQL can run. When it cannot, prints one
 * "skipped: install postgresql" line, and under CI registers a failing test saying so.
 *
 * @example
 * ```ts
 * const hasPostgres = needPostgres('the BullMQ PostgreSQL tests');
 * describe.runIf(hasPostgres)('on PostgreSQL', () => { ... });
 * ```
 */
export function needPostgres(what: string): boolean {
  if (BIN !== null) return true;
  const line = `skipped: install postgresql (apt-get install postgresql) — ${what} did not run`;
  console.log(line);
  if (process.env.CI === 'true') {
    it(`${what} need postgresql (CI=true: a skip is a failure)`, () => {
      throw new Error(line);
    });
  }
  return false;
}

/** The user the cluster belongs to: this one, or as root the `postgres` user (else the tests' second user). */
function clusterOwner(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status === 0 && gid.status === 0) return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  const other = otherUser('the BullMQ PostgreSQL tests');
  if (other === null) throw new Error('PostgreSQL refuses to run as root, and there is no other user to run it as');
  return other;
}

/** A PostgreSQL this test started, with an empty database `postgres` (superuser `postgres`, no password). */
export interface PostgresServer {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  /** Run `sql` on a connection of its own to `database` (default `postgres`) and return the rows. */
  query<T = Record<string, unknown>>(sql: string, values?: unknown[], database?: string): Promise<T[]>;
  /**
   * Restart it as `pg_ctl restart` does (a fast shutdown: sessions are ended, what committed
   * stays) on the same port and cluster: down for `pauseMs` milliseconds, and until `whileDown()`,
   * called as the shutdown begins, resolved.
   */
  restart(pauseMs: number, whileDown?: () => Promise<void>): Promise<void>;
  /** Stop it (immediate shutdown) and remove its cluster. */
  stop(): Promise<void>;
}

/**
 * Make a cluster in a temporary directory and serve it on a free port of 127.0.0.1, fsync off.
 *
 * @example
 * ```ts
 * const postgres = await startPostgres();
 * afterAll(() => postgres.stop());
 * ```
 */
export async function startPostgres(): Promise<PostgresServer> {
  if (BIN === null) throw new Error('PostgreSQL is not installed (apt-get install postgresql)');
  const owner = clusterOwner();
  const dir = mkdtempSync(join(tmpdir(), 'multiloop-pg-'));
  if (owner !== null) chownSync(dir, owner.uid, owner.gid);
  const as = owner === null ? {} : { uid: owner.uid, gid: owner.gid };
  const data = join(dir, 'data');
  const made = spawnSync(join(BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], { ...as, encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr || made.error?.message}`);
  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess = await serve();

  async function serve(): Promise<ChildProcess> {
    const started: ChildProcess = spawn(join(BIN as string, 'postgres'), args, { ...as, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    started.stderr?.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
    await until(() => {
      if (started.exitCode !== null) throw new Error(`postgres exited with ${started.exitCode}:\n${log}`);
      return log.includes('ready to accept connections');
    }, `postgres listens on port ${port}`);
    return started;
  }

  async function end(signal: NodeJS.Signals): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }

  return {
    port,
    url,
    async query<T>(sql: string, values?: unknown[], database = 'postgres'): Promise<T[]> {
      const client = new pg.Client({ connectionString: url.replace(/\/postgres$/, `/${database}`) });
      await client.connect();
      try {
        return (await client.query(sql, values)).rows as T[];
      } finally {
        await client.end();
      }
    },
    async restart(pauseMs: number, whileDown?: () => Promise<void>) {
      // SIGINT: a fast shutdown, pg_ctl's default.
      await Promise.all([end('SIGINT').then(() => new Promise((resolve) => setTimeout(resolve, pauseMs))), whileDown?.()]);
      child = await serve();
    },
    async stop() {
      // SIGQUIT: immediate shutdown, the server's children end with it.
      await end('SIGQUIT');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
