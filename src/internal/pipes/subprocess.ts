/**
 * A child process as a transport (asyncio's BaseSubprocessTransport), on Node's child_process:
 * its stdio pipes are pipe transports driving small per-pipe protocols that report to the
 * SubprocessProtocol as `pipeDataReceived(fd, data)` / `pipeConnectionLost(fd, exc)`.
 *
 * asyncio's order: each pipe is connected, then the protocol's `connectionMade`; whatever the
 * pipes reported before that waits for it. `processExited()` when the child ends;
 * `connectionLost(null)` once it ended AND every pipe closed, after both.
 *
 * Node gives a child one pipe per stream: with `stderr: STDOUT` the child's stderr is a second
 * pipe whose bytes are reported as fd 1's, and fd 1's `pipeConnectionLost` waits for both.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import type { EventLoop } from '../../base-events.js';
import type { Coroutine } from '../../coroutines.js';
import type { SubprocessProtocol } from '../../protocols.js';
import { DEVNULL, PIPE, STDOUT } from './stdio.js';
import { _trackOpen, _untrackOpen, type LoopResource } from '../../transports.js';
import { INSPECT, repr } from '../format.js';
import { eventFuture } from '../node-events.js';
import { ReadPipeTransport } from './read-pipe.js';
import { WritePipeTransport } from './write-pipe.js';

/** Where one of a child's streams goes: PIPE, DEVNULL, STDOUT (stderr only), a file descriptor of this process, or null (inherited). */
export type StdioTarget = typeof PIPE | typeof STDOUT | typeof DEVNULL | number | null;

/** Options of `loop.subprocessExec` / `loop.subprocessShell`. */
export interface SubprocessTransportOptions {
  /** The child's stdin: PIPE (default), DEVNULL, a file descriptor, or null (inherit). */
  stdin?: StdioTarget;
  /** The child's stdout: PIPE (default), DEVNULL, a file descriptor, or null (inherit). */
  stdout?: StdioTarget;
  /** The child's stderr: PIPE (default), STDOUT (with stdout), DEVNULL, a file descriptor, or null (inherit). */
  stderr?: StdioTarget;
  /** The child's working directory. */
  cwd?: string;
  /** The child's whole environment (default: this process's). */
  env?: Record<string, string | undefined>;
}

/** asyncio's ProcessLookupError: the transport is done with its process, no signal can reach it. */
function processLookupError(pid: number | null): Error {
  const error = new Error(`process ${pid ?? '(not started)'} is gone: no signal can reach it`) as Error & { code: string };
  error.name = 'ProcessLookupError';
  error.code = 'ESRCH';
  return error;
}

/** One pipe's protocol: reports to the subprocess transport under the pipe's fd (asyncio's Read/WriteSubprocessPipeProto). */
class PipeProto {
  readonly #owner: SubprocessTransport;
  readonly fd: number;
  /** How many Node pipes feed this fd (2 for stdout with stderr merged into it); lost when all are. */
  #open: number;
  disconnected = false;

  constructor(owner: SubprocessTransport, fd: number, pipes: number) {
    this.#owner = owner;
    this.fd = fd;
    this.#open = pipes;
  }

  connectionMade(): void {
    // The transport is known from the start.
  }

  dataReceived(data: Uint8Array): void {
    this.#owner._pipeDataReceived(this.fd, data);
  }

  eofReceived(): void {
    // connectionLost follows.
  }

  connectionLost(exc: Error | null): void {
    if (--this.#open > 0 && exc === null) return;
    if (this.disconnected) return;
    this.disconnected = true;
    this.#owner._pipeConnectionLost(this.fd, exc);
  }

  pauseWriting(): void {
    this.#owner.getProtocol().pauseWriting();
  }

  resumeWriting(): void {
    this.#owner.getProtocol().resumeWriting();
  }
}

function stdioOf(value: unknown, name: string, allowStdout: boolean): 'pipe' | 'ignore' | 'inherit' | number {
  if (value === undefined || value === PIPE) return 'pipe';
  if (value === null) return 'inherit';
  if (value === DEVNULL) return 'ignore';
  if (value === STDOUT && allowStdout) return 'pipe';
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  throw new RangeError(`${name} must be PIPE, ${allowStdout ? 'STDOUT, ' : ''}DEVNULL, a file descriptor or null, got ${repr(value)}`);
}

/**
 * A child process seen from a SubprocessProtocol (asyncio.SubprocessTransport), as
 * `loop.subprocessExec` / `loop.subprocessShell` make it.
 *
 * @example
 * ```ts
 * const [transport, protocol] = yield* loop.subprocessExec(() => new Collect(), 'ls', '-1');
 * const stdin = transport.getPipeTransport(0);
 * transport.getPid(); // the child's pid
 * ```
 */
export class SubprocessTransport implements LoopResource {
  readonly #loop: EventLoop;
  #protocol: SubprocessProtocol;
  #child: ChildProcess | null;
  readonly #subprocess: ChildProcess;
  readonly #pid: number | null;
  #returncode: number | null = null;
  #closed = false;
  #finished = false;
  /** The pipe transports by fd; a merged stderr is not one of them (it reports as fd 1). */
  readonly #pipes = new Map<number, ReadPipeTransport | WritePipeTransport>();
  readonly #protos = new Map<number, PipeProto>();
  /** Every pipe transport, a merged stderr's included. */
  readonly #all: Array<ReadPipeTransport | WritePipeTransport> = [];
  /** Protocol calls made before `connectionMade`, waiting for it; null once it ran. */
  #pending: Array<() => void> | null = [];

  /** @internal Made by `loop.subprocessExec` / `subprocessShell`: starts `program` at once. */
  constructor(loop: EventLoop, protocol: SubprocessProtocol, program: string, args: string[], options: SubprocessTransportOptions, what: string) {
    if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new TypeError(`${what} options must be an object, got ${repr(options)}`);
    const stdin = stdioOf(options.stdin, 'stdin', false);
    const stdout = stdioOf(options.stdout, 'stdout', false);
    let stderr = stdioOf(options.stderr, 'stderr', true);
    const merged = options.stderr === STDOUT;
    // Where stdout goes: the same pipe (merged here), the null device, a descriptor, or ours.
    if (merged) stderr = stdout === 'inherit' ? 1 : stdout;
    this.#loop = loop;
    this.#protocol = protocol;
    const stdio: StdioOptions = [stdin, stdout, stderr];
    const child = spawn(program, args, {
      stdio,
      ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      ...(options.env !== undefined ? { env: options.env } : {}),
    });
    this.#child = child;
    this.#subprocess = child;
    this.#pid = child.pid ?? null;
    _trackOpen(loop, this);
    // At once: a child that exits before anyone listens to its pipes has its output discarded by Node.
    if (child.stdin !== null) this.#addWrite(0, child.stdin);
    const mergedErr = merged && child.stdout !== null && child.stderr !== null;
    if (child.stdout !== null) this.#addRead(1, mergedErr ? [child.stdout, child.stderr as Readable] : [child.stdout]);
    if (child.stderr !== null && !mergedErr) this.#addRead(2, [child.stderr]);
    if (child.exitCode !== null || child.signalCode !== null) this.#exited(child.exitCode, child.signalCode);
    else child.once('exit', this.#exited);
  }

  #addWrite(fd: number, stream: Writable): void {
    const proto = new PipeProto(this, fd, 1);
    const transport = new WritePipeTransport(this.#loop, proto, stream, stream, null, false);
    this.#protos.set(fd, proto);
    this.#pipes.set(fd, transport);
    this.#all.push(transport);
  }

  #addRead(fd: number, streams: Readable[]): void {
    const proto = new PipeProto(this, fd, streams.length);
    this.#protos.set(fd, proto);
    streams.forEach((stream, i) => {
      const transport = new ReadPipeTransport(this.#loop, proto, stream, stream, null);
      if (i === 0) this.#pipes.set(fd, transport);
      this.#all.push(transport);
    });
  }

  /** @internal Wait until the child started (its pipes are connected by then), then call `connectionMade`; the OS error when it cannot start. */
  *_started(): Coroutine<void> {
    const child = this.#child as ChildProcess;
    try {
      yield* eventFuture(this.#loop, child, 'spawn');
      // Later errors (a failed kill) are the caller's to see; the child must not crash us.
      child.on('error', ignore);
      const made = this.#loop.createFuture<void>();
      this.#loop.callSoon(() => {
        this.#protocol.connectionMade(this);
      });
      this.#loop.callSoon(() => {
        const pending = this.#pending ?? [];
        this.#pending = null;
        for (const call of pending) this.#loop.callSoon(call);
        if (!made.done()) made.setResult(undefined);
      });
      yield* made;
    } catch (error) {
      // It could not start, or the caller gave up: nothing stays open, no child runs on.
      this.#closed = true;
      this.#killIfRunning();
      for (const transport of this.#all) if (transport instanceof WritePipeTransport) transport.abort();
      else transport.close();
      this.#child = null;
      _untrackOpen(this.#loop, this);
      throw error;
    }
  }

  #call(call: () => void): void {
    if (this.#pending !== null) this.#pending.push(call);
    else this.#loop.callSoon(call);
  }

  /** @internal */
  _pipeDataReceived(fd: number, data: Uint8Array): void {
    this.#call(() => this.#protocol.pipeDataReceived(fd, data));
  }

  /** @internal */
  _pipeConnectionLost(fd: number, exc: Error | null): void {
    this.#call(() => this.#protocol.pipeConnectionLost(fd, exc));
    this.#tryFinish();
  }

  readonly #exited = (code: number | null, signal: NodeJS.Signals | null): void => {
    this.#returncode = code ?? -(signal === null ? 0 : (constants.signals[signal] ?? 0));
    if (this.#loop.isClosed()) return;
    this.#call(() => this.#protocol.processExited());
    this.#tryFinish();
  };

  #tryFinish(): void {
    if (this.#returncode === null || this.#finished) return;
    for (const proto of this.#protos.values()) if (!proto.disconnected) return;
    this.#finished = true;
    this.#call(this.#callConnectionLost);
  }

  readonly #callConnectionLost = (): void => {
    try {
      this.#protocol.connectionLost(null);
    } finally {
      // Done with the child: signals raise ProcessLookupError from now on, as asyncio's.
      this.#child = null;
      _untrackOpen(this.#loop, this);
    }
  };

  /** @internal The loop closed: kill a child still running and let its pipes go. */
  _closeAtLoopClose(): void {
    this.#closed = true;
    this.#killIfRunning();
    for (const transport of this.#all) transport._closeAtLoopClose();
    this.#child = null;
  }

  #killIfRunning(): void {
    const child = this.#child;
    if (child !== null && this.#returncode === null && child.exitCode === null && child.signalCode === null && child.pid !== undefined) child.kill('SIGKILL');
  }

  /** The child's process id (get_pid); null when it could not start. */
  getPid(): number | null {
    return this.#pid;
  }

  /** The exit code; `-N` when ended by signal N; null while running (get_returncode). */
  getReturncode(): number | null {
    return this.#returncode;
  }

  /** The transport of the child's pipe `fd` (0 stdin, 1 stdout, 2 stderr), null when it is not a pipe (get_pipe_transport). */
  getPipeTransport(fd: 0): WritePipeTransport | null;
  getPipeTransport(fd: 1 | 2): ReadPipeTransport | null;
  getPipeTransport(fd: number): ReadPipeTransport | WritePipeTransport | null;
  getPipeTransport(fd: number): ReadPipeTransport | WritePipeTransport | null {
    return this.#pipes.get(fd) ?? null;
  }

  /**
   * Send `signal` (a name or a number) to the child (send_signal); ProcessLookupError once the
   * transport is done with it (its `connectionLost` ran). A child that ended but whose pipes
   * are still open is not signalled, and that is no error, as in asyncio.
   */
  sendSignal(signal: NodeJS.Signals | number): void {
    const child = this.#child;
    if (child === null) throw processLookupError(this.#pid);
    if (typeof signal !== 'string' && typeof signal !== 'number') throw new TypeError(`sendSignal() needs a signal name or number, got ${repr(signal)}`);
    if (this.#returncode === null) child.kill(signal);
  }

  /** Send SIGTERM (terminate). */
  terminate(): void {
    this.sendSignal('SIGTERM');
  }

  /** Send SIGKILL (kill). */
  kill(): void {
    this.sendSignal('SIGKILL');
  }

  /** Close the pipes, and kill the child if it still runs (close); `connectionLost(null)` follows once it ended. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const transport of this.#all) transport.close();
    this.#killIfRunning();
  }

  /** Whether `close()` was called (is_closing). */
  isClosing(): boolean {
    return this.#closed;
  }

  /** The protocol the transport drives. */
  getProtocol(): SubprocessProtocol {
    return this.#protocol;
  }

  /** Drive `protocol` from now on (set_protocol). */
  setProtocol(protocol: SubprocessProtocol): void {
    this.#protocol = protocol;
  }

  /** `'subprocess'`: the Node ChildProcess; another key: `defaultValue` (default null) (get_extra_info). */
  getExtraInfo(name: string, defaultValue: unknown = null): unknown {
    return name === 'subprocess' ? this.#subprocess : defaultValue;
  }

  toString(): string {
    const info = ['SubprocessTransport'];
    if (this.#closed) info.push('closed');
    if (this.#pid !== null) info.push(`pid=${this.#pid}`);
    if (this.#returncode !== null) info.push(`returncode=${this.#returncode}`);
    else if (this.#pid !== null) info.push('running');
    else info.push('not started');
    return `<${info.join(' ')}>`;
  }

  [INSPECT](): string {
    return this.toString();
  }
}

function ignore(): void {
  // An error after the start (a failed kill) is reported by the call that caused it.
}
