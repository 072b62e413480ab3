/**
 * Connection strings in the errors and lines of BullMQExecutor, serveBullMQ and `multiloop worker`:
 * a password is never shown, whatever its form (an unencoded '/', '?', '#', '@' or ':', a URL that
 * parses as another host and port, a URL missing its host, a `?password=` query, a host option
 * holding credentials). No server is needed: each of these fails before connecting, or names
 * where it connects without connecting.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BullMQExecutor, serveBullMQ } from '../src/bullmq.js';
import { redactConnection } from '../src/internal/bullmq/redact.js';
import { ROOT } from './helpers/redis.js';

/** Odd connection strings, and the pieces of their passwords that must never be shown. */
const ODD: ReadonlyArray<[connection: string, secrets: string[]]> = [
  ['postgres://app:s3cr/et9@db.local/jobs', ['s3cr', 'et9']],
  ['postgresql://app:s3cr/et9@db.local:5433/jobs?sslmode=require', ['s3cr', 'et9']],
  ['redis://app:s3cr/et9@db.local:6390', ['s3cr', 'et9']],
  // These two parse, as host 'app' and port 4711, with the rest of the password in the path.
  ['redis://app:4711/sekrit@db.local', ['4711', 'sekrit']],
  ['postgres://app:4711/sekrit@db.local/jobs', ['4711', 'sekrit']],
  ['postgres://app:s3c@r/et9@db.local/jobs', ['s3c', 'r/et9', 'et9']],
  ['redis://app:s3:cr?et9@db.local', ['s3', 'cr', 'et9']],
  ['redis://:s3cr#et9@db.local', ['s3cr', 'et9']],
  ['rediss://app:s3cr/et9@[::1]:6390/0', ['s3cr', 'et9']],
  ['mysql://app:4711/sekrit@db.local', ['4711', 'sekrit']],
  // The host was forgotten: 'app:sekrit' reads as a host and a port that is not a number.
  ['redis://app:sekrit', ['sekrit']],
  ['redis://app:sekrit/x', ['sekrit']],
];

/** Fail unless `text` shows none of `secrets`. */
function expectNone(text: string, secrets: readonly string[]): void {
  for (const secret of secrets) expect(text, `${JSON.stringify(text)} shows ${JSON.stringify(secret)}`).not.toContain(secret);
}

function thrown(make: () => unknown): Error {
  try {
    make();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

describe('redactConnection', () => {
  it('shows the scheme and where, never what may be credentials', () => {
    expect(redactConnection('postgres://app:s3cr/et9@db.local/jobs')).toBe('postgres://***@db.local/jobs');
    expect(redactConnection('postgres://app:s3c@r/et9@db.local/jobs')).toBe('postgres://***@db.local/jobs');
    expect(redactConnection('redis://app:sekrit')).toBe('redis://app:***');
    expect(redactConnection('redis://app:sekrit/x')).toBe('redis://app:***');
    expect(redactConnection('redis://127.0.0.1:6379/2')).toBe('redis://127.0.0.1:6379/2');
    expect(redactConnection('redis://[::1]:6379')).toBe('redis://[::1]:6379');
    expect(redactConnection('postgres://db.local/jobs?sslmode=require')).toBe('postgres://db.local/jobs?sslmode=require');
    expect(redactConnection('postgres://db.local/jobs?sslmode=require&password=se&cr=et')).toBe('postgres://db.local/jobs?***');
    expect(redactConnection('app:sekrit@db.local:6379')).toBe('***@db.local:6379');
  });
});

describe('BullMQ connection strings in errors', () => {
  it('refuses odd connection strings with a TypeError that shows no password (executor and worker)', async () => {
    for (const [connection, secrets] of ODD) {
      const error = thrown(() => new BullMQExecutor({ connection, unreachableTimeout: 1 }));
      expect(error, connection).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(/^BullMQExecutor: options\.connection /);
      expectNone(error.message, secrets);
      const refused = await serveBullMQ({ connection, allow: [] }).then(
        () => null,
        (failure: unknown) => failure as Error,
      );
      expect(refused, connection).toBeInstanceOf(TypeError);
      expect((refused as Error).message).toMatch(/^serveBullMQ\(\): options\.connection /);
      expectNone((refused as Error).message, secrets);
    }
  });

  it('says a URL that parses as another host was cut short by its password, and how to fix it', () => {
    expect(() => new BullMQExecutor({ connection: 'redis://app:4711/sekrit@db.local' })).toThrow(
      new TypeError(
        "BullMQExecutor: options.connection has an '@' after its host: a '/', '?' or '#' in its user name or password must be percent-encoded (encodeURIComponent), got 'redis://***@db.local'",
      ),
    );
    expect(() => new BullMQExecutor({ connection: { postgres: { connectionString: 'postgres://app:4711/sekrit@db.local/jobs' } } })).toThrow(
      new TypeError(
        "BullMQExecutor: options.connection.postgres.connectionString has an '@' after its host: a '/', '?' or '#' in its user name or password must be percent-encoded (encodeURIComponent), got 'postgres://***@db.local/jobs'",
      ),
    );
    // Percent-encoded, the same password is taken: the executor names where it connects.
    const made = new BullMQExecutor({ connection: `postgres://app:${encodeURIComponent('4711/sekrit')}@127.0.0.1:1/jobs`, unreachableTimeout: 1 });
    try {
      expect(String(made)).toBe("<BullMQExecutor queue='multiloop' postgres=127.0.0.1:1 queued=0 in_flight=0 completed=0>");
    } finally {
      void made.shutdown(false);
    }
  });

  it('refuses a host option holding credentials, without showing them', () => {
    expect(() => new BullMQExecutor({ connection: { host: 'app:sekrit@127.0.0.1', port: 1 } })).toThrow(
      new TypeError("BullMQExecutor: options.connection.host must be a host name or address, without credentials (give them as username and password), got one with '@'"),
    );
    expect(() => new BullMQExecutor({ connection: { postgres: { host: 'app:sekrit@127.0.0.1', port: 1 } } })).toThrow(
      new TypeError(
        "BullMQExecutor: options.connection.postgres.host must be a host name, an address or a socket directory, without credentials (give them as user and password), got one with '@'",
      ),
    );
  });
});

describe('multiloop worker: connection strings in its output', () => {
  const entry = join(ROOT, 'dist/bin/multiloop.js');

  function worker(args: string[], env: Record<string, string> = {}): { status: number | null; output: string } {
    const run = spawnSync(process.execPath, [entry, 'worker', '--allow', './x.js', ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  }

  it('cannot start on an odd connection string, and says so without its password', { timeout: 60_000 }, () => {
    for (const [connection, secrets] of ODD.filter(([, pieces]) => pieces.includes('sekrit') || pieces.includes('et9')).slice(0, 6)) {
      for (const run of [worker(['--connection', connection]), worker(['--connection-env', 'QUEUE_URL'], { QUEUE_URL: connection })]) {
        expect(run.status, connection).toBe(1);
        expect(run.output).toMatch(/^multiloop worker: cannot start: serveBullMQ\(\): options\.connection /);
        expectNone(run.output, secrets);
      }
    }
  });

  it('names a mistyped option without the value given with it', () => {
    const run = worker(['--conection=postgres://app:sekrit@db.local/jobs']);
    expect(run.status).toBe(2);
    expect(run.output).toMatch(/^multiloop worker: unknown option "--conection"\n/);
    expectNone(run.output, ['sekrit']);
  });
});
