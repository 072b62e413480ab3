/**
 * `multiloop worker`: a process that serves a BullMQ queue (`serveBullMQ`) until SIGTERM or
 * SIGINT, for `BullMQExecutor`s on any machine that reaches the same Redis or PostgreSQL.
 */
import { readFileSync } from 'node:fs';
import { serveBullMQ, type BullMQWorker } from './bullmq.js';
import { redactConnection } from './internal/bullmq/redact.js';

const USAGE = `Usage: multiloop worker --allow SPEC[,SPEC...] [options]

Run jobs of a BullMQ queue sent by BullMQExecutor, until SIGTERM or SIGINT.

Options:
  --connection URL     the Redis (redis://, rediss://) or PostgreSQL (postgres://) to serve
                       (--redis URL is the same); a URL given here is visible to every local
                       user (ps, /proc): keep passwords in one of these instead:
  --connection-env NAME  the URL is in environment variable NAME
  --connection-file PATH the URL is the content of file PATH
                       (default: $MULTILOOP_CONNECTION, else $REDIS_URL, else redis://127.0.0.1:6379)
  --queue NAME         queue to serve (default: multiloop)
  --prefix PREFIX      BullMQ key prefix on Redis (default: bull)
  --no-migrate         PostgreSQL: do not migrate a database without BullMQ's schema, nor make
                       multiloop's tables (then such a database fails the start)
  --concurrency N      the most jobs run at once (default: 16)
  --allow SPECS        modules jobs may name, comma-separated (repeatable): ./relative paths
                       (from --root), package names, file: URLs or absolute paths
  --root DIR           where ./relative specifiers resolve (default: the working directory)
  --grace SECONDS      on SIGTERM/SIGINT, how long running calls may finish before their jobs
                       are handed back to the queue (default: 10); a second signal: at once;
                       a third ends the process
  --lock-duration MS   BullMQ lockDuration: how soon a dead worker's jobs run elsewhere (default: 30000)
  --stalled-interval MS  BullMQ stalledInterval (default: 30000)
  --max-stalled-count N  how often a job may lose its worker before it fails (default: 1)
  --max-job-bytes N    larger jobs fail without being decoded (default: 16777216)
  --max-outcome-bytes N  the most bytes of outcomes one job sends back (default: 16777216)
  --help               show this help

Prints "multiloop worker: serving ..." once it takes jobs. Exit code 0 after a graceful
shutdown, 2 for a bad command line, 1 when the worker cannot start.
`;

/** Options that take a value, and the key each fills. */
const VALUED = new Map([
  ['--connection', 'connection'],
  ['--redis', 'connection'],
  ['--connection-env', 'connectionEnv'],
  ['--connection-file', 'connectionFile'],
  ['--queue', 'queue'],
  ['--prefix', 'prefix'],
  ['--concurrency', 'concurrency'],
  ['--allow', 'allow'],
  ['--root', 'root'],
  ['--grace', 'grace'],
  ['--lock-duration', 'lockDuration'],
  ['--stalled-interval', 'stalledInterval'],
  ['--max-stalled-count', 'maxStalledCount'],
  ['--max-job-bytes', 'maxJobBytes'],
  ['--max-outcome-bytes', 'maxOutcomeBytes'],
]);

interface Parsed {
  values: Map<string, string>;
  allow: string[];
  help: boolean;
  migrate: boolean;
}

function parse(argv: readonly string[]): Parsed {
  const values = new Map<string, string>();
  const allow: string[] = [];
  let help = false;
  let migrate = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') {
      help = true;
      continue;
    }
    if (arg === '--no-migrate') {
      migrate = false;
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    const key = VALUED.get(flag);
    // Only the flag: a mistyped --connection=URL must not print its password.
    if (key === undefined) throw new UsageError(`unknown option ${JSON.stringify(flag)}`);
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else value = argv[++i];
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    if (key === 'allow') allow.push(...value.split(',').map((spec) => spec.trim()).filter((spec) => spec !== ''));
    else if (values.has(key) || (key.startsWith('connection') && [...values.keys()].some((other) => other.startsWith('connection')))) {
      throw new UsageError(key.startsWith('connection') ? 'give the connection once: --connection (--redis), --connection-env or --connection-file' : `${flag} is given twice`);
    } else values.set(key, value);
  }
  return { values, allow, help, migrate };
}

class UsageError extends Error {}

function integer(values: Map<string, string>, key: string, flag: string): number | undefined {
  const value = values.get(key);
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number)) throw new UsageError(`${flag} must be a whole number, got ${JSON.stringify(value)}`);
  return number;
}

/**
 * The connection URL: from --connection (--redis), the variable --connection-env names, the file
 * --connection-file names (trimmed), else $MULTILOOP_CONNECTION, $REDIS_URL or the local default.
 */
function connectionUrl(values: Map<string, string>): string {
  const given = values.get('connection');
  if (given !== undefined) return given;
  const name = values.get('connectionEnv');
  if (name !== undefined) {
    const value = process.env[name];
    if (value === undefined || value === '') throw new UsageError(`--connection-env ${name}: the environment variable ${name} is not set`);
    return value;
  }
  const file = values.get('connectionFile');
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new UsageError(`--connection-file ${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    const url = text.trim();
    if (url === '') throw new UsageError(`--connection-file ${file}: the file is empty`);
    return url;
  }
  return process.env.MULTILOOP_CONNECTION || process.env.REDIS_URL || 'redis://127.0.0.1:6379';
}

/** The URL without credentials (in its user part, or a PostgreSQL URL's query) for the line that says where the worker serves. */
function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return redactConnection(url).replace(/\?.*$/, '');
  }
}

/**
 * Run `multiloop worker` with `argv` (the arguments after `worker`): serve the queue until
 * SIGTERM or SIGINT; resolves with the process's exit code.
 *
 * @example
 * ```ts
 * // bin: multiloop worker --connection-env REDIS_URL --allow ./jobs/images.js --concurrency 8
 * process.exitCode = await workerCommand(process.argv.slice(3));
 * ```
 */
export async function workerCommand(argv: string[]): Promise<number> {
  let parsed: Parsed;
  let concurrency: number | undefined;
  let lockDuration: number | undefined;
  let stalledInterval: number | undefined;
  let maxStalledCount: number | undefined;
  let maxJobBytes: number | undefined;
  let maxOutcomeBytes: number | undefined;
  let grace = 10;
  try {
    parsed = parse(argv);
    if (parsed.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    if (parsed.allow.length === 0) throw new UsageError('--allow is required: name the modules jobs may run');
    concurrency = integer(parsed.values, 'concurrency', '--concurrency');
    lockDuration = integer(parsed.values, 'lockDuration', '--lock-duration');
    stalledInterval = integer(parsed.values, 'stalledInterval', '--stalled-interval');
    maxStalledCount = integer(parsed.values, 'maxStalledCount', '--max-stalled-count');
    maxJobBytes = integer(parsed.values, 'maxJobBytes', '--max-job-bytes');
    maxOutcomeBytes = integer(parsed.values, 'maxOutcomeBytes', '--max-outcome-bytes');
    const graceValue = parsed.values.get('grace');
    if (graceValue !== undefined) {
      grace = Number(graceValue);
      if (graceValue === '' || !Number.isFinite(grace) || grace < 0) throw new UsageError(`--grace must be a number of seconds, got ${JSON.stringify(graceValue)}`);
    }
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`multiloop worker: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  let url: string;
  try {
    url = connectionUrl(parsed.values);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`multiloop worker: ${error.message}\n`);
    return 2;
  }
  const queue = parsed.values.get('queue') ?? 'multiloop';
  let worker: BullMQWorker;
  try {
    worker = await serveBullMQ({
      connection: url,
      queue,
      migrate: parsed.migrate,
      prefix: parsed.values.get('prefix'),
      concurrency,
      allow: parsed.allow,
      root: parsed.values.get('root'),
      lockDuration,
      stalledInterval,
      maxStalledCount,
      maxJobBytes,
      maxOutcomeBytes,
      closeTimeout: grace,
    });
  } catch (error) {
    process.stderr.write(`multiloop worker: cannot start: ${(error as Error).message}\n`);
    return 1;
  }
  const where = shownUrl(url);
  process.stdout.write(`multiloop worker: serving queue '${queue}' on ${where} (pid ${process.pid}, concurrency ${concurrency ?? 16}, allow ${parsed.allow.join(', ')})\n`);
  await worker.closed;
  process.stdout.write('multiloop worker: closed\n');
  return 0;
}
