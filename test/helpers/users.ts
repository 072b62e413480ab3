/**
 * A second local user for the tests that play an attacker (or a target) of another user: made
 * when the suite runs as root; otherwise the suite is skipped with one clear line — and under CI
 * (CI=true) that skip is a failure.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';

/** The repository's root. */
const ROOT_DIR = fileURLToPath(new URL('../../', import.meta.url));

/** The user the tests make: a system account without a home or a login shell. */
export const PROBE_USER = 'multiloop-probe';

/** A local user other than the one running the tests. */
export interface OtherUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

function lookUp(name: string): OtherUser | null {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * The second user (made now if missing), or null when this is not root: then prints one
 * "skipped: needs root" line, and under CI registers a failing test saying so.
 *
 * @example
 * ```ts
 * const other = otherUser('the attach security tests');
 * describe.runIf(other !== null)('attach', () => { ... });
 * ```
 */
export function otherUser(what: string): OtherUser | null {
  let found: OtherUser | null = null;
  let why = 'needs root, to make a second local user';
  if (process.getuid?.() === 0) {
    found = lookUp(PROBE_USER);
    if (found === null) {
      const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', PROBE_USER], { encoding: 'utf8' });
      found = lookUp(PROBE_USER);
      if (found === null) why = `useradd could not make ${PROBE_USER}: ${(made.stderr || made.error?.message || '').trim()}`;
    }
  }
  if (found !== null) return found;
  const line = `skipped: ${why} — ${what} did not run`;
  console.log(line);
  if (process.env.CI === 'true') {
    it(`${what} need a second local user (CI=true: a skip is a failure)`, () => {
      throw new Error(line);
    });
  }
  return null;
}

/** A copy of the built package and of some fixtures that every user can read. */
export interface ReadableCopy {
  /** The copy of `test/fixtures/<name>`. */
  fixture(name: string): string;
  /** The copy of the `multiloop` command (dist/bin/multiloop.js). */
  readonly cli: string;
  /**
   * The node every user can run: this process's own, or a copy of it when another user cannot
   * reach it (a Node fetched into root's home, as scripts/test-nodes.mjs does).
   */
  readonly node: string;
  /** Remove the copy. */
  remove(): void;
}

/** Give every user read access (and search access to directories) under `path`, whatever the umask made it. */
function openToAll(path: string): void {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(path, 0o755);
    for (const entry of readdirSync(path)) openToAll(join(path, entry));
  } else chmodSync(path, (stat.mode & 0o100) !== 0 ? 0o755 : 0o644);
}

/** Whether every user may run `file`: it and each folder above it are open to others. */
function everyoneRuns(file: string): boolean {
  if ((statSync(file).mode & 0o001) === 0) return false;
  for (let folder = dirname(file); ; folder = dirname(folder)) {
    if ((statSync(folder).mode & 0o001) === 0) return false;
    if (dirname(folder) === folder) return true;
  }
}

/**
 * Copy the built package (as `node_modules/multiloop`, with the dependencies it loads at once)
 * and `fixtures` (names in test/fixtures) to a fresh directory in /tmp that every user can read: the second user runs them there, wherever the clone lives
 * (a home directory of mode 700 keeps it out of the clone itself).
 *
 * @example
 * ```ts
 * const copy = readableCopy(['ps-target.mjs', 'ps-chain.mjs']);
 * spawn(process.execPath, [copy.fixture('ps-target.mjs')], { uid: other.uid, gid: other.gid });
 * ```
 */
export function readableCopy(fixtures: readonly string[]): ReadableCopy {
  // /tmp, as the scratch directories of these tests: a TMPDIR of the user's own may be private too.
  const root = mkdtempSync('/tmp/multiloop-readable-');
  const modules = join(root, 'node_modules');
  const own = join(modules, 'multiloop');
  cpSync(join(ROOT_DIR, 'package.json'), join(own, 'package.json'));
  for (const part of ['dist/lib', 'dist/src', 'dist/bin']) cpSync(join(ROOT_DIR, part), join(own, part), { recursive: true });
  // The dependencies dist/ imports statically (the others load when used), with theirs.
  const pending = ['piscina', 'comlink'];
  const copied = new Set<string>();
  while (pending.length > 0) {
    const name = pending.pop() as string;
    const from = join(ROOT_DIR, 'node_modules', name);
    if (copied.has(name) || !existsSync(from)) continue;
    copied.add(name);
    cpSync(from, join(modules, name), { recursive: true, dereference: true });
    const manifest = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8')) as { dependencies?: object; optionalDependencies?: object };
    pending.push(...Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies }));
  }
  for (const name of fixtures) cpSync(join(ROOT_DIR, 'test/fixtures', name), join(root, 'fixtures', name));
  const node = everyoneRuns(process.execPath) ? process.execPath : join(root, 'bin', 'node');
  if (node !== process.execPath) cpSync(process.execPath, node);
  openToAll(root);
  return {
    fixture: (name) => join(root, 'fixtures', name),
    cli: join(own, 'dist/bin/multiloop.js'),
    node,
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}
