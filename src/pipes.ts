/**
 * Pipes as transports (asyncio's unix_events): what `loop.connectReadPipe` and
 * `loop.connectWritePipe` make. The engines are in internal/pipes/; this module is their public
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
import { WritePipeTransport, type WritePipeProtocol } from './internal/pipes/write-pipe.js';

export { ReadPipeTransport, type ReadPipeProtocol } from './internal/pipes/read-pipe.js';
export { WritePipeTransport, type WritePipeProtocol } from './internal/pipes/write-pipe.js';
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
