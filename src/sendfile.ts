/**
 * Sending a file through a transport (asyncio's loop.sendfile, its fallback): Node has no
 * sendfile(2) for sockets, so the file is read in blocks off the loop (libuv's thread pool) and
 * written through the transport, waiting whenever its write buffer is over the high-water mark.
 */
import { read as fsRead } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { EventLoop } from './base-events.js';
import type { Coroutine } from './coroutines.js';
import { RuntimeError } from './exceptions.js';
import type { Future } from './futures.js';
import { repr } from './internal/format.js';
import { Protocol } from './protocols.js';
import { Transport } from './transports.js';

/** The most read and written at a time (asyncio's fallback block). */
const BLOCK_SIZE = 16 * 1024;

/** Options of `loop.sendfile`. */
export interface SendfileOptions {
  /**
   * Read and write when no native sendfile can be used (default true). Node offers none for a
   * socket: false always raises, as asyncio does where sendfile(2) is missing.
   */
  fallback?: boolean;
}

/** A file to send: a file descriptor, or a FileHandle of `node:fs/promises`. */
export type SendfileSource = number | FileHandle;

/** asyncio's ConnectionError (the base of ConnectionResetError), with the message it gives. */
function connectionError(message: string): Error {
  const error = new Error(message);
  error.name = 'ConnectionError';
  return error;
}

/**
 * Stands in for the transport's protocol while the file goes out (asyncio's
 * _SendfileFallbackProtocol): it takes the flow control, and passes connectionLost on.
 */
class SendfileProtocol extends Protocol {
  readonly #transport: Transport;
  readonly #loop: EventLoop;
  readonly #proto: Protocol;
  readonly #resumeReading: boolean;
  readonly #resumeWriting: boolean;
  #writeReady: Future<void> | null = null;

  constructor(loop: EventLoop, transport: Transport) {
    super();
    this.#loop = loop;
    this.#transport = transport;
    this.#proto = transport.getProtocol();
    this.#resumeReading = transport.isReading();
    this.#resumeWriting = transport._isProtocolPaused();
    transport.pauseReading();
    transport.setProtocol(this);
    if (this.#resumeWriting) this.#writeReady = loop.createFuture<void>();
  }

  /** Wait until the transport takes more; raises when the connection closed meanwhile. */
  *drain(): Coroutine<void> {
    if (this.#transport.isClosing()) throw connectionError('Connection closed by peer');
    const ready = this.#writeReady;
    if (ready !== null) yield* ready;
  }

  override connectionMade(): void {
    throw new RuntimeError('Invalid state: connection should have been established already.');
  }

  override connectionLost(exc: Error | null): void {
    const ready = this.#writeReady;
    if (ready !== null && !ready.done()) {
      // The peer left before the whole file went out: an error from the sender's view, always.
      ready.setException(exc ?? connectionError('Connection is closed by peer'));
    }
    this.#proto.connectionLost(exc);
  }

  override pauseWriting(): void {
    this.#writeReady ??= this.#loop.createFuture<void>();
  }

  override resumeWriting(): void {
    const ready = this.#writeReady;
    if (ready === null) return;
    this.#writeReady = null;
    ready.setResult(undefined);
  }

  override dataReceived(): void {
    throw new RuntimeError('Invalid state: reading should be paused');
  }

  override eofReceived(): boolean {
    throw new RuntimeError('Invalid state: reading should be paused');
  }

  /** Give the transport back to its protocol, reading and writing as they were. */
  restore(): void {
    this.#transport.setProtocol(this.#proto);
    if (this.#resumeReading) this.#transport.resumeReading();
    const ready = this.#writeReady;
    this.#writeReady = null;
    if (ready !== null && !ready.done()) ready.cancel();
    if (this.#resumeWriting) this.#proto.resumeWriting();
  }
}

/** Read up to `length` bytes of `file` at `position` into `buffer`, off the loop; the number read. */
function readAt(loop: EventLoop, file: SendfileSource, buffer: Buffer, length: number, position: number): Future<number> {
  const done = loop.createFuture<number>();
  if (typeof file === 'number') {
    fsRead(file, buffer, 0, length, position, (error, bytesRead) => {
      if (done.done()) return;
      if (error !== null) done._setExceptionUnchecked(error);
      else done._setResultUnchecked(bytesRead);
    });
  } else {
    file.read(buffer, 0, length, position).then(
      ({ bytesRead }) => {
        if (!done.done()) done._setResultUnchecked(bytesRead);
      },
      (error: unknown) => {
        if (!done.done()) done._setExceptionUnchecked(error instanceof Error ? error : new RuntimeError(String(error)));
      },
    );
  }
  return done;
}

function checkParams(file: unknown, offset: unknown, count: unknown): void {
  const isHandle = file !== null && typeof file === 'object' && typeof (file as FileHandle).read === 'function' && typeof (file as FileHandle).fd === 'number';
  if (!(typeof file === 'number' && Number.isInteger(file) && file >= 0) && !isHandle) {
    throw new TypeError(`file must be a file descriptor or a FileHandle of node:fs/promises, got ${repr(file)}`);
  }
  if (count !== null) {
    if (typeof count !== 'number' || !Number.isInteger(count)) throw new TypeError(`count must be a positive integer (got ${repr(count)})`);
    if (count <= 0) throw new RangeError(`count must be a positive integer (got ${repr(count)})`);
  }
  if (typeof offset !== 'number' || !Number.isInteger(offset)) throw new TypeError(`offset must be a non-negative integer (got ${repr(offset)})`);
  if (offset < 0) throw new RangeError(`offset must be a non-negative integer (got ${repr(offset)})`);
}

/**
 * Send `count` bytes of `file` from `offset` (null: to its end) through `transport`; the number
 * of bytes sent.
 *
 * @internal
 */
export function* _sendfile(loop: EventLoop, transport: unknown, file: unknown, offset: unknown, count: unknown, options: SendfileOptions): Coroutine<number> {
  if (typeof (transport as { isClosing?: unknown } | null)?.isClosing === 'function' && (transport as Transport).isClosing()) {
    throw new RuntimeError('Transport is closing');
  }
  if (!(transport instanceof Transport) || !transport._canHandOver()) throw new RuntimeError(`sendfile is not supported for transport ${repr(transport)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`sendfile() options must be an object, got ${repr(options)}`);
  checkParams(file, offset, count);
  if (options.fallback === false) throw new RuntimeError(`fallback is disabled and native sendfile is not supported for transport ${repr(transport)}`);
  const source = file as SendfileSource;
  const start = offset as number;
  const limit = count as number | null;
  let blockSize = limit === null ? BLOCK_SIZE : Math.min(limit, BLOCK_SIZE);
  let total = 0;
  const stand = new SendfileProtocol(loop, transport);
  try {
    for (;;) {
      if (limit !== null) {
        blockSize = Math.min(limit - total, blockSize);
        if (blockSize <= 0) return total;
      }
      // A block of its own each time: the transport keeps what it has not sent yet, uncopied.
      const block = Buffer.allocUnsafe(blockSize);
      const read = yield* readAt(loop, source, block, blockSize, start + total);
      if (read === 0) return total;
      yield* stand.drain();
      transport.write(read === blockSize ? block : block.subarray(0, read));
      total += read;
    }
  } finally {
    stand.restore();
  }
}
