/**
 * The Node options a thread multiloop starts gets by default: the parent's `execArgv`, less what
 * a worker refuses or should not repeat.
 *
 * Node refuses a worker whose `execArgv` holds a V8 option (`--max-old-space-size`, `--expose-gc`,
 * `--stack-size`, ...) or an option of the whole process (`--title`, `--use-openssl-ca`, ...):
 * `new Worker` throws ERR_WORKER_INVALID_EXEC_ARGV. Both kinds are process-wide and already in
 * force in every thread (V8's flags are global: a worker of `node --expose-gc` has `gc()`, and its
 * default heap limit follows `--max-old-space-size`), so dropping them loses nothing; a thread's
 * own heap is set with `resourceLimits`. NODE_OPTIONS is not `execArgv`: workers inherit it
 * through the environment, and Node checks it there itself.
 *
 * What a worker takes is what Node's per-thread option parser knows. That parser cannot be asked,
 * so an option is passed on when Node lists it among the options `NODE_OPTIONS` may carry
 * (`process.allowedNodeEnvironmentFlags`) or it is one of the few per-thread options Node keeps
 * out of NODE_OPTIONS, and it is not one of the process-wide options that list also holds
 * (tried on Node 20, 22, 24 and 26: `new Worker` with each option alone). Any other option is
 * V8's, as Node itself treats an option it does not know.
 */

/** Options whose value is the next element, whatever it looks like (`-e -1`). */
const TAKES_VALUE = new Set(['-e', '--eval', '-p', '--print', '-r', '--require', '--import', '--loader', '--experimental-loader', '-C', '--conditions', '--title']);

/** Options of Node's that load a module before the program: their value may name tsx. */
const PRELOAD_FLAGS = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);

/**
 * Options listed in `process.allowedNodeEnvironmentFlags` that a worker refuses: the V8 options
 * NODE_OPTIONS may carry, and Node's options of the whole process.
 */
const REFUSED_BY_WORKERS = new Set([
  // V8's
  '--abort-on-uncaught-exception',
  '--debug-arraybuffer-allocations',
  '--disable-wasm-trap-handler',
  '--disallow-code-generation-from-strings',
  '--enable-etw-stack-walking',
  '--experimental-shadow-realm',
  '--expose-gc',
  '--huge-max-old-generation-size',
  '--interpreted-frames-native-stack',
  '--jitless',
  '--max-heap-size',
  '--max-old-space-size',
  '--max-semi-space-size',
  '--perf-basic-prof',
  '--perf-basic-prof-only-functions',
  '--perf-prof',
  '--perf-prof-unwinding-info',
  '--stack-trace-limit',
  // the process's
  '--disable-proto',
  '--enable-fips',
  '--enable-fips-indicator-events',
  '--force-fips',
  '--icu-data-dir',
  '--node-memory-debug',
  '--node-snapshot',
  '--openssl-config',
  '--openssl-legacy-provider',
  '--openssl-shared-config',
  '--report-compact',
  '--report-dir',
  '--report-directory',
  '--report-filename',
  '--report-on-fatalerror',
  '--secure-heap',
  '--secure-heap-min',
  '--snapshot-blob',
  '--title',
  '--tls-cipher-list',
  '--trace-event-categories',
  '--trace-event-file-pattern',
  '--trace-events-enabled',
  '--trace-sigint',
  '--use-bundled-ca',
  '--use-largepages',
  '--use-openssl-ca',
  '--v8-pool-size',
  '--zero-fill-buffers',
]);

/** Per-thread options Node keeps out of NODE_OPTIONS that a worker takes (by prefix). */
const PER_THREAD_NOT_IN_ENV: readonly string[] = [
  '--cpu-prof',
  '--env-file',
  '--expose-internals',
  '--experimental-inspector-',
  '--experimental-network-inspection',
  '--experimental-storage-inspection',
  '--experimental-test-',
  '--experimental-worker-inspection',
  '--test',
  '--tls-',
];

const NODE_MAJOR = Number.parseInt(process.versions.node, 10);

/** `--no-x` is `--x`; V8's `_` is `-`. */
function canonicalName(arg: string): string {
  const equals = arg.indexOf('=');
  let name = (equals === -1 ? arg : arg.slice(0, equals)).replace(/_/g, '-');
  if (name.startsWith('--no-')) name = `--${name.slice(5)}`;
  return name;
}

/**
 * Tell whether a worker takes `arg` (an option, with its value after `=` if any) in its `execArgv`.
 *
 * @internal
 * @example
 * ```ts
 * workerTakes('--enable-source-maps'); // true
 * workerTakes('--max-old-space-size=512'); // false: V8's, and in force in every thread anyway
 * ```
 */
export function workerTakes(arg: string, allowed: ReadonlySet<string> = process.allowedNodeEnvironmentFlags): boolean {
  const name = canonicalName(arg);
  // Node's own switch, not V8's flag: `--no-experimental-shadow-realm` sets nothing in V8.
  if (REFUSED_BY_WORKERS.has(name) && !(name === '--experimental-shadow-realm' && arg.startsWith('--no-'))) return false;
  // Process-wide on Node 22; a worker's own from 24 on.
  if (name === '--use-system-ca' && NODE_MAJOR < 24) return false;
  if (allowed.has(name) || allowed.has(arg.split('=', 1)[0] as string)) return true;
  return PER_THREAD_NOT_IN_ENV.some((prefix) => name.startsWith(prefix));
}

/** `execArgv` cut into options, each with its values: the elements after it up to the next option. */
function groups(execArgv: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i] as string;
    const group = [arg];
    if (TAKES_VALUE.has(arg) && i + 1 < execArgv.length) group.push(execArgv[++i] as string);
    // execArgv ends before the program: an element that is no option is the value of the one before.
    while (i + 1 < execArgv.length && !(execArgv[i + 1] as string).startsWith('-')) group.push(execArgv[++i] as string);
    out.push(group);
  }
  return out;
}

function namesTsx(specifier: string): boolean {
  return specifier === 'tsx' || specifier.startsWith('tsx/') || /[\\/]tsx[\\/]dist[\\/]/.test(specifier);
}

/** Whether the option `group` loads tsx (`--import tsx`, `--require=…/tsx/dist/preflight.cjs`, ...). */
function loadsTsx(group: readonly string[]): boolean {
  const arg = group[0] as string;
  const equals = arg.indexOf('=');
  if (equals !== -1) return PRELOAD_FLAGS.has(arg.slice(0, equals)) && namesTsx(arg.slice(equals + 1));
  return PRELOAD_FLAGS.has(arg) && group.length > 1 && namesTsx(group[1] as string);
}

/** What tells the worker what to run rather than how: the program is the thread's own. */
const PROGRAM_OPTIONS = new Set(['-e', '--eval', '-p', '--print', '-c', '--check', '-i', '--interactive', '--']);

/**
 * The default `execArgv` of the threads multiloop starts: `execArgv` without what a worker refuses
 * (V8's options and the process's: see the module comment), without tsx's flags (a thread's
 * TypeScript is compiled by its starter, or by Node: see ts-loader.ts; tsx in each thread would
 * cost more than the thread) and without the options that name the program (`-e`, `-p`, ...).
 *
 * @internal
 * @example
 * ```ts
 * new Worker(entry, { execArgv: threadExecArgv() });
 * ```
 */
export function threadExecArgv(execArgv: readonly string[] = process.execArgv, allowed?: ReadonlySet<string>): string[] {
  const kept: string[] = [];
  for (const group of groups(execArgv)) {
    const arg = group[0] as string;
    if (loadsTsx(group) || PROGRAM_OPTIONS.has(arg.split('=', 1)[0] as string)) continue;
    if (!workerTakes(arg, allowed)) continue;
    kept.push(...group);
  }
  return kept;
}
