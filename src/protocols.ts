/**
 * The protocol interfaces (asyncio.protocols): what a transport calls as a connection lives. A
 * protocol is subclassed and the methods it needs overridden; the loop calls them inside loop
 * iterations, in order, never re-entrantly.
 */
import { RuntimeError } from './exceptions.js';
import { typeName } from './internal/format.js';
import type { SubprocessTransport } from './internal/pipes/subprocess.js';
import type { DatagramTransport, SocketAddress, Transport } from './transports.js';

/**
 * The base class of every protocol (asyncio.BaseProtocol): what all transports call, the
 * connection's start and end and the write flow control. Every method here does nothing;
 * subclass Protocol, BufferedProtocol or DatagramProtocol rather than this one.
 *
 * @example
 * ```ts
 * function isProtocol(value: unknown): value is BaseProtocol { return value instanceof BaseProtocol; }
 * ```
 */
export class BaseProtocol {
  /** The connection is up; `transport` is its transport. */
  connectionMade(transport: unknown): void {
    void transport;
  }

  /** The connection is closed: `exc` is null on a regular close or EOF, else the error. */
  connectionLost(exc: Error | null): void {
    void exc;
  }

  /** The transport's write buffer went over its high-water mark. */
  pauseWriting(): void {
    // Nothing to do by default.
  }

  /** The transport's write buffer drained below its low-water mark. */
  resumeWriting(): void {
    // Nothing to do by default.
  }
}

/**
 * The base class of protocols of child processes (asyncio.SubprocessProtocol), as
 * `loop.subprocessExec` / `loop.subprocessShell` drive them: every method here does nothing.
 * `processExited()` comes when the child ends, `connectionLost(null)` once it ended and all its
 * pipes closed.
 *
 * @example
 * ```ts
 * class Collect extends SubprocessProtocol {
 *   readonly out: Uint8Array[] = [];
 *   override pipeDataReceived(fd: number, data: Uint8Array): void { if (fd === 1) this.out.push(data); }
 * }
 * const [transport, protocol] = yield* loop.subprocessExec(() => new Collect(), 'ls', '-1');
 * ```
 */
export class SubprocessProtocol extends BaseProtocol {
  /** The child started and its pipes are connected; `transport` is its transport. */
  override connectionMade(transport: SubprocessTransport): void {
    void transport;
  }

  /** The child wrote `data` to its stdout (`fd` 1) or stderr (`fd` 2) (pipe_data_received). */
  pipeDataReceived(fd: number, data: Uint8Array): void {
    void fd;
    void data;
  }

  /** The child's pipe `fd` closed: `exc` is null at EOF or on close, else the error (pipe_connection_lost). */
  pipeConnectionLost(fd: number, exc: Error | null): void {
    void fd;
    void exc;
  }

  /** The child ended (process_exited); its exit code is `transport.getReturncode()`. */
  processExited(): void {
    // Nothing to do by default.
  }

  /** The transport is done: the child ended and every pipe closed. */
  override connectionLost(exc: Error | null): void {
    void exc;
  }

  /** The child's stdin buffer went over its high-water mark. */
  override pauseWriting(): void {
    // Nothing to do by default.
  }

  /** The child's stdin buffer drained below its low-water mark. */
  override resumeWriting(): void {
    // Nothing to do by default.
  }
}

/**
 * The base class of stream protocols (asyncio.Protocol): every method here does nothing.
 *
 * @example
 * ```ts
 * class Echo extends Protocol {
 *   #transport: Transport | null = null;
 *   override connectionMade(transport: Transport): void { this.#transport = transport; }
 *   override dataReceived(data: Uint8Array): void { this.#transport!.write(data); }
 * }
 * const server = yield* loop.createServer(() => new Echo(), '127.0.0.1', 0);
 * ```
 */
export class Protocol extends BaseProtocol {
  /** The connection is up; `transport` is its transport. */
  override connectionMade(transport: Transport): void {
    void transport;
  }

  /** Bytes arrived. */
  dataReceived(data: Uint8Array): void {
    void data;
  }

  /** The peer sent EOF; return true to keep the transport open (half-close), else it closes. */
  eofReceived(): boolean | void {
    return undefined;
  }

}

/**
 * The base class of stream protocols that receive into memory of their own (asyncio.BufferedProtocol):
 * instead of `dataReceived(data)` with new bytes at every read, the transport asks `getBuffer()`
 * for memory, copies what arrived into it, and calls `bufferUpdated(nbytes)`. A protocol that
 * hands out the same buffer again and again receives without allocating, into memory that stays
 * in the CPU's cache. Everything else (`connectionMade`, `eofReceived`, `connectionLost`, the
 * write flow control) is a Protocol's.
 *
 * The buffer belongs to the protocol again once `bufferUpdated` returns: the transport keeps no
 * reference to it, and `getBuffer` is called anew for the next bytes.
 *
 * @example
 * ```ts
 * class Echo extends BufferedProtocol {
 *   #transport: Transport | null = null;
 *   readonly #buffer = new Uint8Array(64 * 1024);
 *   override connectionMade(transport: Transport): void { this.#transport = transport; }
 *   override getBuffer(sizeHint: number): Uint8Array { return this.#buffer; }
 *   override bufferUpdated(nbytes: number): void { this.#transport!.write(this.#buffer.slice(0, nbytes)); }
 * }
 * ```
 */
export class BufferedProtocol extends Protocol {
  /**
   * Memory for the next bytes to be copied into (get_buffer): any non-empty Uint8Array (or
   * another ArrayBufferView). `sizeHint` is how many bytes are waiting; a smaller buffer is
   * fine, the rest then goes into the buffer of the next call.
   */
  getBuffer(sizeHint: number): Uint8Array {
    void sizeHint;
    // asyncio's returns None, which the transport then refuses: the same here.
    return undefined as unknown as Uint8Array;
  }

  /** The first `nbytes` bytes of the buffer the last `getBuffer()` returned hold new data (buffer_updated). */
  bufferUpdated(nbytes: number): void {
    void nbytes;
  }

  /**
   * Receive `data` the buffered way: into the buffers `getBuffer()` hands out, as many as it
   * takes, each followed by `bufferUpdated()` (what asyncio does for transports that have bytes
   * rather than a socket to read, as TLS's). Transports call this themselves; not meant to be
   * overridden.
   */
  override dataReceived(data: Uint8Array): void {
    const failed = _feedBuffered(this, data);
    if (failed !== null) throw failed.error;
  }
}

/**
 * @internal What `_feedBuffered` reports when a call of the protocol failed: the error and
 * asyncio's message naming the call.
 */
export interface BufferedFeedFailure {
  error: unknown;
  message: string;
}

/**
 * @internal Copy `data` into the memory `protocol.getBuffer()` hands out, each part followed by
 * `bufferUpdated()`, until all of it is in (asyncio's _feed_data_to_buffered_proto); the call that
 * failed, if one did, and nothing of `data` after it is delivered.
 */
export function _feedBuffered(protocol: BufferedProtocol, data: Uint8Array): BufferedFeedFailure | null {
  let offset = 0;
  const total = data.length;
  while (offset < total) {
    const left = total - offset;
    let target: Uint8Array;
    try {
      target = receivingView(protocol.getBuffer(left));
    } catch (error) {
      return { error, message: 'Fatal error: protocol.getBuffer() call failed.' };
    }
    const taken = target.length < left ? target.length : left;
    target.set(offset === 0 && taken === total ? data : data.subarray(offset, offset + taken));
    offset += taken;
    try {
      protocol.bufferUpdated(taken);
    } catch (error) {
      return { error, message: 'Fatal error: protocol.bufferUpdated() call failed.' };
    }
  }
  return null;
}

/** The bytes of what `getBuffer()` returned, to copy into; a clear error for anything else, or for no room. */
function receivingView(buffer: unknown): Uint8Array {
  let view: Uint8Array;
  if (buffer instanceof Uint8Array) view = buffer;
  else if (ArrayBuffer.isView(buffer)) view = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  else throw new TypeError(`getBuffer() must return a Uint8Array or another ArrayBufferView, not '${typeName(buffer)}'`);
  if (view.length === 0) throw new RuntimeError('getBuffer() returned an empty buffer');
  return view;
}

/**
 * The base class of UDP protocols (asyncio.DatagramProtocol): every method here does nothing.
 *
 * @example
 * ```ts
 * class Pong extends DatagramProtocol {
 *   #transport: DatagramTransport | null = null;
 *   override connectionMade(transport: DatagramTransport): void { this.#transport = transport; }
 *   override datagramReceived(data: Uint8Array, addr: SocketAddress): void { this.#transport!.sendto(data, addr); }
 * }
 * ```
 */
export class DatagramProtocol extends BaseProtocol {
  /** The endpoint is open; `transport` is its transport. */
  override connectionMade(transport: DatagramTransport): void {
    void transport;
  }

  /** A datagram arrived from `addr`. */
  datagramReceived(data: Uint8Array, addr: SocketAddress): void {
    void data;
    void addr;
  }

  /** A send or receive failed (e.g. ICMP port unreachable); the endpoint stays open. */
  errorReceived(exc: Error): void {
    void exc;
  }

  /** The endpoint is closed: `exc` is null on a regular close. */
  override connectionLost(exc: Error | null): void {
    void exc;
  }
}
