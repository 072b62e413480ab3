/**
 * Pipes and child processes as transports (asyncio's unix_events and base_subprocess): what
 * `loop.connectReadPipe`, `loop.connectWritePipe`, `loop.subprocessExec` and
 * `loop.subprocessShell` make. The engines are in internal/pipes/; this module is their public
 * face and the loop methods' bodies.
 *
 * A pipe is given as a file descriptor (of a pipe, a FIFO, a socket or a terminal; the transport
 * then owns it and closes it when it closes, as asyncio closes the pipe object it is given), or
 * as a Node stream already open (`child.stdout`, `process.stdin`, a `net.Socket`, any Readable
 * or Writable; destroyed when the transport closes).
 */
import type { EventLoop } from './base-events.js';
import type { Coroutine } from './coroutines.js';
import { repr } from './internal/format.js';
import { openReadPipe, openWritePipe } from './internal/pipes/open.js';
import { ReadPipeTransport, type ReadPipeProtocol } from './internal/pipes/read-pipe.js';
import { SubprocessTransport, type SubprocessTransportOptions } from './internal/pipes/subprocess.js';
import { WritePipeTransport, type WritePipeProtocol } from './internal/pipes/write-pipe.js';
import type { SubprocessProtocol } from './protocols.js';

export { ReadPipeTransport, type ReadPipeProtocol } from './internal/pipes/read-pipe.js';
export { WritePipeTransport, type WritePipeProtocol } from './internal/pipes/write-pipe.js';
export { SubprocessTransport, type StdioTarget, type SubprocessTransportOptions } from './internal/pipes/subprocess.js';
export type { ReadPipe, WritePipe } from './internal/pipes/open.js';

function checkFactory(factory: unknown, what: string): void {
  if (typeof factory !== 'function') throw new TypeError(`${what} needs a protocol factory (a function returning a protocol), got ${repr(factory)}`);
}

/** @internal The body of `loop.connectReadPipe`. */
export function* _connectReadPipe<P extends ReadPipeProtocol>(loop: EventLoop, protocolFactory: () => P, pipe: unknown): Coroutine<[ReadPipeTransport, P]> {
  checkFactory(protocolFactory, 'connectReadPipe()');
  const opened = openReadPipe(pipe);
  const protocol = protocolFactory();
  const made = loop.createFuture<void>();
  const transport = new ReadPipeTransport(loop, protocol, opened.stream, pipe, () => {
    if (!made.done()) made.setResult(undefined);
  });
  try {
    yield* made;
  } catch (error) {
    transport.close();
    throw error;
  }
  return [transport, protocol];
}

/** @internal The body of `loop.connectWritePipe`. */
export function* _connectWritePipe<P extends WritePipeProtocol>(loop: EventLoop, protocolFactory: () => P, pipe: unknown): Coroutine<[WritePipeTransport, P]> {
  checkFactory(protocolFactory, 'connectWritePipe()');
  const opened = openWritePipe(pipe);
  const protocol = protocolFactory();
  const made = loop.createFuture<void>();
  const transport = new WritePipeTransport(
    loop,
    protocol,
    opened.stream,
    pipe,
    () => {
      if (!made.done()) made.setResult(undefined);
    },
    opened.socketFd,
  );
  try {
    yield* made;
  } catch (error) {
    transport.abort();
    throw error;
  }
  return [transport, protocol];
}

/** The arguments after `program`: strings, then optionally the options. */
export type SubprocessArgs = string[] | [...string[], SubprocessTransportOptions];

/** @internal The body of `loop.subprocessExec`. */
export function* _subprocessExec<P extends SubprocessProtocol>(loop: EventLoop, protocolFactory: () => P, program: string, rest: SubprocessArgs): Coroutine<[SubprocessTransport, P]> {
  const what = 'subprocessExec()';
  checkFactory(protocolFactory, what);
  if (typeof program !== 'string' || program === '') throw new TypeError(`${what} program must be a non-empty string, got ${repr(program)}`);
  const last = rest.length > 0 ? rest[rest.length - 1] : undefined;
  // Only a plain object is the options: an array there (the arguments as one list) is an argument.
  const hasOptions = isPlainObject(last);
  const args = (hasOptions ? rest.slice(0, -1) : rest) as unknown[];
  args.forEach((arg, i) => {
    if (Array.isArray(arg)) {
      throw new TypeError(`${what} args[${i}] must be a string, got an array ${repr(arg)}: give the arguments one by one after the program, subprocessExec(factory, program, ...args)`);
    }
    if (typeof arg !== 'string') throw new TypeError(`${what} args[${i}] must be a string, got ${repr(arg)}`);
  });
  const options = (hasOptions ? last : {}) as SubprocessTransportOptions;
  return yield* start(loop, protocolFactory, program, args as string[], options, what);
}

/** Whether `value` is an object literal (or made with a null prototype), as options are. */
function isPlainObject(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/** @internal The body of `loop.subprocessShell`. */
export function* _subprocessShell<P extends SubprocessProtocol>(loop: EventLoop, protocolFactory: () => P, cmd: string, options: SubprocessTransportOptions): Coroutine<[SubprocessTransport, P]> {
  const what = 'subprocessShell()';
  checkFactory(protocolFactory, what);
  if (typeof cmd !== 'string') throw new RangeError('cmd must be a string');
  return yield* start(loop, protocolFactory, '/bin/sh', ['-c', cmd], options, what);
}

function* start<P extends SubprocessProtocol>(
  loop: EventLoop,
  protocolFactory: () => P,
  program: string,
  args: string[],
  options: SubprocessTransportOptions,
  what: string,
): Coroutine<[SubprocessTransport, P]> {
  const protocol = protocolFactory();
  const transport = new SubprocessTransport(loop, protocol, program, args, options, what);
  yield* transport._started();
  return [transport, protocol];
}
