/**
 * Subprocesses (asyncio.subprocess) on Node's child_process: `createSubprocessExec` and
 * `createSubprocessShell` start a child whose pipes are StreamReaders and a StreamWriter of the
 * running loop, and a Process to wait for, signal and `communicate` with.
 *
 * Node reaps every child it started, so no zombie is left; a child still running when its loop
 * closes is killed and its pipes closed, as asyncio's subprocess transport does when it is
 * closed, so that nothing outlives the loop. `stderr: STDOUT` merges stderr into the stdout
 * reader in the order the chunks arrive: Node gives a child two pipes, not one for both.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable } from 'node:stream';
import type { EventLoop } from './base-events.js';
import type { Coroutine } from './coroutines.js';
import { RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { INSPECT, repr } from './internal/format.js';
import { WaitNote } from './internal/introspect.js';
import { eventFuture } from './internal/node-events.js';
import { DEVNULL, PIPE, STDOUT } from './internal/pipes/stdio.js';
import { Protocol } from './protocols.js';
import { StreamReader, StreamWriter, _StreamReaderProtocol, _checkLimit, _runningLoop, type ReadingControl } from './streams.js';
import { gather } from './tasks.js';
import { Transport, _trackOpen, _untrackOpen, type LoopResource } from './transports.js';

export { DEVNULL, PIPE, STDOUT };

/** Options of `createSubprocessExec` / `createSubprocessShell`; a stream left out or null is inherited. */
export interface SubprocessOptions {
  /** The child's stdin: PIPE (then `process.stdin` is a StreamWriter), DEVNULL or null (inherit). */
  stdin?: typeof PIPE | typeof DEVNULL | null;
  /** The child's stdout: PIPE (then `process.stdout` is a StreamReader), DEVNULL or null (inherit). */
  stdout?: typeof PIPE | typeof DEVNULL | null;
  /** The child's stderr: PIPE, STDOUT (merged into stdout), DEVNULL or null (inherit). */
  stderr?: typeof PIPE | typeof STDOUT | typeof DEVNULL | null;
  /** The child's working directory. */
  cwd?: string;
  /** The child's whole environment (default: this process's). */
  env?: Record<string, string | undefined>;
  /** The buffer limit of the stdout/stderr StreamReaders (default 64 KiB). */
  limit?: number;
}

/**
 * Feeds a StreamReader from one or two read pipes of a child (two when stderr is merged into
 * stdout): EOF once every pipe ended.
 */
class PipeReaderProtocol extends Protocol {
  readonly #reader: StreamReader;
  readonly #closed: () => void;
  #open: number;

  constructor(reader: StreamReader, pipes: number, closed: () => void) {
    super();
    this.#reader = reader;
    this.#open = pipes;
    this.#closed = closed;
  }

  override dataReceived(data: Uint8Array): void {
    this.#reader._feedData(data);
  }

  override eofReceived(): boolean {
    return false;
  }

  override connectionLost(exc: Error | null): void {
    this.#closed();
    if (exc !== null) {
      this.#reader._setException(exc);
      return;
    }
    if (--this.#open === 0) this.#reader._feedEof();
  }
}

/** The protocol of a child's stdin: a StreamWriter's, telling the Process when the pipe closed. */
class StdinProtocol extends _StreamReaderProtocol {
  readonly #closed: () => void;

  constructor(loop: EventLoop, closed: () => void) {
    super(null, null, loop);
    this.#closed = closed;
  }

  override connectionLost(exc: Error | null): void {
    super.connectionLost(exc);
    this.#closed();
  }
}

/** Pauses and resumes every pipe a reader is fed from. */
class PipesControl implements ReadingControl {
  readonly #transports: Transport[];

  constructor(transports: Transport[]) {
    this.#transports = transports;
  }

  pauseReading(): void {
    for (const transport of this.#transports) transport.pauseReading();
  }

  resumeReading(): void {
    for (const transport of this.#transports) transport.resumeReading();
  }
}

/** asyncio's ProcessLookupError: the process has ended, no signal can reach it. */
function processLookupError(pid: number): Error {
  const error = new Error(`process ${pid} has ended: no signal can reach it`) as Error & { code: string };
  error.name = 'ProcessLookupError';
  error.code = 'ESRCH';
  return error;
}

/**
 * A child process (asyncio.subprocess.Process).
 *
 * @example
 * ```ts
 * const child = yield* createSubprocessExec('sort', [], { stdin: PIPE, stdout: PIPE });
 * const [out] = yield* child.communicate(new TextEncoder().encode('b\na\n'));
 * // out: 'a\nb\n', child.returncode: 0
 * ```
 */
export class Process implements LoopResource {
  /** The writer of its stdin when it is PIPE, else null. */
  readonly stdin: StreamWriter | null;
  /** The reader of its stdout when it is PIPE, else null. */
  readonly stdout: StreamReader | null;
  /** The reader of its stderr when it is PIPE, else null. */
  readonly stderr: StreamReader | null;
  readonly #loop: EventLoop;
  readonly #child: ChildProcess;
  readonly #transports: Transport[];
  #returncode: number | null = null;
  /** Pipes not closed yet: `wait()` returns once the child ended and they all closed, as asyncio's. */
  #openPipes = 0;
  #waiters: Array<Future<number>> = [];
  /** What a task in wait() waits for, as ps() says it. */
  #exitNote: WaitNote | null = null;

  /** @internal Made by `createSubprocessExec` / `createSubprocessShell` once the child started. */
  constructor(loop: EventLoop, child: ChildProcess, options: SubprocessOptions, limit: number) {
    this.#loop = loop;
    this.#child = child;
    const transports: Transport[] = [];
    this.#transports = transports;
    const pipeClosed = (): void => {
      this.#openPipes--;
      this.#wakeWaiters();
    };
    const pipeReader = (pipes: Readable[]): StreamReader => {
      this.#openPipes += pipes.length;
      const reader = new StreamReader(limit, loop);
      const protocol = new PipeReaderProtocol(reader, pipes.length, pipeClosed);
      const made = pipes.map((pipe) => new Transport(loop, protocol, { readable: pipe, writable: null, extra: { pipe } }));
      transports.push(...made);
      reader._setTransport(new PipesControl(made));
      return reader;
    };
    let stdout: StreamReader | null = null;
    if (child.stdout !== null) stdout = pipeReader(options.stderr === STDOUT && child.stderr !== null ? [child.stdout, child.stderr] : [child.stdout]);
    this.stdout = stdout;
    this.stderr = child.stderr !== null && options.stderr !== STDOUT ? pipeReader([child.stderr]) : null;
    stdout?._setSource(`the stdout of process ${child.pid}`);
    this.stderr?._setSource(`the stderr of process ${child.pid}`);
    if (child.stdin !== null) {
      this.#openPipes++;
      const protocol = new StdinProtocol(loop, pipeClosed);
      protocol._target = `the stdin of process ${child.pid}`;
      const transport = new Transport(loop, protocol, { readable: null, writable: child.stdin, extra: { pipe: child.stdin } });
      transports.push(transport);
      this.stdin = new StreamWriter(transport, protocol, null, loop);
    } else {
      this.stdin = null;
    }
    const exited = (code: number | null, signal: NodeJS.Signals | null): void => {
      this.#returncode = code ?? -(signal === null ? 0 : (constants.signals[signal] ?? 0));
      _untrackOpen(loop, this);
      this.#wakeWaiters();
    };
    _trackOpen(loop, this);
    // The child may have ended already, between its start and now.
    if (child.exitCode !== null || child.signalCode !== null) exited(child.exitCode, child.signalCode);
    else child.once('exit', exited);
  }

  /** The child ended and every pipe closed: `wait()` returns. */
  #wakeWaiters(): void {
    if (this.#returncode === null || this.#openPipes > 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) if (!waiter.done()) waiter.setResult(this.#returncode);
  }

  /** The process id. */
  get pid(): number {
    return this.#child.pid as number;
  }

  /** The exit code; `-N` when ended by signal N; null while running. */
  get returncode(): number | null {
    return this.#returncode;
  }

  /** @internal The loop closed with the child still running (or it could not start): kill it and close its pipes. */
  _closeAtLoopClose(): void {
    _untrackOpen(this.#loop, this);
    if (this.#returncode === null && this.#child.pid !== undefined) this.#child.kill('SIGKILL');
    for (const transport of this.#transports) transport._closeAtLoopClose();
  }

  /**
   * Wait for the process to end and its pipes to close, as asyncio's; returns `returncode`.
   * Cancelling the wait leaves the process running.
   */
  *wait(): Coroutine<number> {
    if (this.#returncode !== null && this.#openPipes === 0) return this.#returncode;
    const waiter = this.#loop.createFuture<number>();
    waiter._result = this.#exitNote ??= new WaitNote(`process ${this.pid} (${this.#child.spawnfile}) to exit`, false);
    this.#waiters.push(waiter);
    return yield* waiter;
  }

  /**
   * Send `input` (then close stdin), read stdout and stderr to EOF, wait for the exit; returns
   * what was read (null for a stream that is not PIPE). A broken stdin pipe is ignored.
   * Cancelling it leaves the process running.
   */
  *communicate(input: Uint8Array | null = null): Coroutine<[stdout: Uint8Array | null, stderr: Uint8Array | null]> {
    if (input !== null && !(input instanceof Uint8Array)) throw new TypeError(`communicate() input must be a Uint8Array or null, got ${repr(input)}`);
    if (input !== null && this.stdin === null) throw new RuntimeError('communicate() got input, but the process was started without stdin: PIPE');
    const stdin = this.stdin;
    const stdout = this.stdout;
    const stderr = this.stderr;
    const results = yield* gather([feedStdin(stdin, input), readAll(stdout), readAll(stderr)]);
    yield* this.wait();
    return [results[1], results[2]];
  }

  /** Send signal `signal` (a name or a number) to the process; a process that ended raises ProcessLookupError. */
  sendSignal(signal: NodeJS.Signals | number): void {
    if (this.#returncode !== null) throw processLookupError(this.pid);
    if (typeof signal !== 'string' && typeof signal !== 'number') throw new TypeError(`sendSignal() needs a signal name or number, got ${repr(signal)}`);
    this.#child.kill(signal);
  }

  /** Send SIGTERM. */
  terminate(): void {
    this.sendSignal('SIGTERM');
  }

  /** Send SIGKILL. */
  kill(): void {
    this.sendSignal('SIGKILL');
  }

  toString(): string {
    return `<Process ${this.pid}${this.#returncode === null ? ' running' : ` returncode=${this.#returncode}`}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

/** Write `input` to stdin and close it; a child that stopped reading (EPIPE, ECONNRESET) is not an error here. */
function* feedStdin(stdin: StreamWriter | null, input: Uint8Array | null): Coroutine<null> {
  if (stdin === null) return null;
  try {
    if (input !== null && input.length > 0) {
      stdin.write(input);
      yield* stdin.drain();
    }
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'EPIPE' && code !== 'ECONNRESET') throw error;
  }
  stdin.close();
  return null;
}

function* readAll(reader: StreamReader | null): Coroutine<Uint8Array | null> {
  return reader === null ? null : yield* reader.read();
}

function stdioOf(value: unknown, name: string, allowStdout: boolean): 'pipe' | 'ignore' | 'inherit' {
  if (value === undefined || value === null) return 'inherit';
  if (value === PIPE) return 'pipe';
  if (value === DEVNULL) return 'ignore';
  if (value === STDOUT && allowStdout) return 'pipe';
  throw new RangeError(`${name} must be PIPE, ${allowStdout ? 'STDOUT, ' : ''}DEVNULL or null, got ${repr(value)}`);
}

function* start(program: string, args: string[], options: SubprocessOptions, what: string): Coroutine<Process> {
  const loop = _runningLoop(what);
  if (options === null || typeof options !== 'object') throw new TypeError(`${what} options must be an object, got ${repr(options)}`);
  const stdin = stdioOf(options.stdin, 'stdin', false);
  const stdout = stdioOf(options.stdout, 'stdout', false);
  let stderr: 'pipe' | 'ignore' | 'inherit' | 1 = stdioOf(options.stderr, 'stderr', true);
  if (options.stderr === STDOUT) {
    // Where stdout goes: the same pipe (merged here), the null device, or this process's stdout.
    stderr = stdout === 'pipe' ? 'pipe' : stdout === 'ignore' ? 'ignore' : 1;
  }
  const limit = _checkLimit(options.limit);
  const stdio: StdioOptions = [stdin, stdout, stderr];
  const child = spawn(program, args, {
    stdio,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.env !== undefined ? { env: options.env } : {}),
  });
  // At once: a child that exits before anyone listens to its pipes has its output discarded by Node.
  const made = new Process(loop, child, options, limit);
  try {
    yield* eventFuture(loop, child, 'spawn');
  } catch (error) {
    made._closeAtLoopClose();
    throw error;
  }
  // Later errors (a failed kill) are the transports' and the caller's to see; the child must not crash us.
  child.on('error', () => undefined);
  return made;
}

/**
 * Run `program` with `args` (no shell); the OS error (with its `code`, e.g. ENOENT) when it cannot
 * start (create_subprocess_exec).
 *
 * @example
 * ```ts
 * const child = yield* createSubprocessExec('ls', ['-1', '/'], { stdout: PIPE });
 * const first = yield* child.stdout!.readline();
 * yield* child.wait();
 * ```
 */
export function* createSubprocessExec(program: string, args: readonly string[] = [], options: SubprocessOptions = {}): Coroutine<Process> {
  if (typeof program !== 'string' || program === '') throw new TypeError(`createSubprocessExec() program must be a non-empty string, got ${repr(program)}`);
  if (!Array.isArray(args)) throw new TypeError(`createSubprocessExec() args must be an array of strings, got ${repr(args)}`);
  args.forEach((arg, i) => {
    if (typeof arg !== 'string') throw new TypeError(`createSubprocessExec() args[${i}] must be a string, got ${repr(arg)}`);
  });
  return yield* start(program, [...args], options, 'createSubprocessExec()');
}

/**
 * Run `cmd` through the shell (`/bin/sh -c`) (create_subprocess_shell).
 *
 * @example
 * ```ts
 * const child = yield* createSubprocessShell('echo $HOME', { stdout: PIPE });
 * const [out] = yield* child.communicate();
 * ```
 */
export function* createSubprocessShell(cmd: string, options: SubprocessOptions = {}): Coroutine<Process> {
  if (typeof cmd !== 'string') throw new RangeError(`cmd must be a string, got ${repr(cmd)}`);
  return yield* start('/bin/sh', ['-c', cmd], options, 'createSubprocessShell()');
}
