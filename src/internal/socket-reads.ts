/**
 * Reading a socket through Node's `onread` instead of its stream: the kernel fills one buffer of
 * the thread, and each read is copied out at once into bytes of its own for the transport.
 *
 * Node's stream path allocates (and zero-fills) 64 KiB for every read, however little arrived,
 * makes a Buffer and pushes it through a Readable ('data', nextTicks); it also splits a larger
 * message into 64 KiB reads. Here one 256 KiB buffer per thread takes every read (as asyncio's
 * selector transports read 256 KiB), and the copy goes where a small allocation is cheap.
 */
import * as net from 'node:net';

/** The most bytes one socket read takes (asyncio's selector transports read up to 256 KiB). */
const READ_SIZE = 256 * 1024;
/** Reads below this size are copied into Node's own Buffer pool (`Buffer.allocUnsafe` pools below `poolSize / 2`). */
const NODE_POOLED = 4 * 1024;
/** Reads up to this size share a slab: a kept chunk holds at most 16 times its size. */
const SLAB_CHUNK_MAX = 16 * 1024;
const SLAB_SIZE = 64 * 1024;

/** What the kernel reads every socket of this thread into; each read is copied out before the next. */
let readBuffer: Buffer | null = null;
/** Where mid-sized reads are copied to, one after the other, until it is full. */
let slab: Buffer | null = null;
let slabUsed = 0;

/**
 * The first `nread` bytes of `buffer` in memory of their own: Node's pool for a small read, a
 * shared slab for a mid-sized one (a fresh ArrayBuffer per read costs more than the copy, and
 * freeing thousands of them in a GC makes the heap shrink and fault its pages back in), their own
 * allocation for a large one.
 */
function copyOut(buffer: Buffer, nread: number): Buffer {
  let chunk: Buffer;
  if (nread < NODE_POOLED) chunk = Buffer.allocUnsafe(nread);
  else if (nread > SLAB_CHUNK_MAX) chunk = Buffer.allocUnsafeSlow(nread);
  else {
    if (slab === null || slabUsed + nread > SLAB_SIZE) {
      slab = Buffer.allocUnsafeSlow(SLAB_SIZE);
      slabUsed = 0;
    }
    chunk = slab.subarray(slabUsed, slabUsed + nread);
    // Aligned as Node aligns its pool.
    slabUsed = (slabUsed + nread + 7) & ~7;
  }
  buffer.copy(chunk, 0, 0, nread);
  return chunk;
}

/** Who takes a socket's bytes: its Transport. */
export interface ReadTarget {
  /** Bytes that arrived (its own copy); whether to go on reading. */
  _received(chunk: Buffer): boolean;
}

/**
 * The bytes of one socket read through `onread`, on their way to its transport: give `options`
 * to the socket, then attach the transport. Until it is attached, what arrives is kept and
 * reading stops (as a new socket's stream buffer holds it), so nothing is lost or read ahead.
 */
export class SocketReads {
  #target: ReadTarget | null = null;
  #early: Buffer | null = null;
  #stopped = false;
  /** The `onread` option: the thread's read buffer and the callback that copies each read out. */
  readonly options: net.OnReadOpts = {
    buffer: (readBuffer ??= Buffer.allocUnsafeSlow(READ_SIZE)),
    callback: (nread: number, buffer: Uint8Array): boolean => {
      // The kernel overwrites `buffer` at the next read, of any socket: copy the bytes out now.
      const chunk = copyOut(buffer as Buffer, nread);
      const target = this.#target;
      if (target !== null) return target._received(chunk);
      this.#early = this.#early === null ? chunk : Buffer.concat([this.#early, chunk]);
      this.#stopped = true;
      return false;
    },
  };

  /** `target` takes the reads of `socket` from now on; what arrived before is its first data. */
  attach(target: ReadTarget, socket: net.Socket): void {
    this.#target = target;
    const early = this.#early;
    this.#early = null;
    if (early !== null) target._received(early);
    if (this.#stopped) {
      this.#stopped = false;
      socket.resume();
    }
  }

  /** The transport is gone: reads that still come are dropped. */
  detach(): void {
    this.#target = null;
    this.#early = null;
  }
}

/** The private fields of a Node socket that moving its handle to another socket touches. */
interface SocketInternals {
  _handle: unknown;
  server: net.Server | null;
  _server: net.Server | null;
}

/**
 * The connection `accepted` by a net.Server (with `pauseOnConnect`: nothing was read yet) as a
 * socket read through `onread` with `reads`' options. net.Server cannot give that option to the
 * sockets it makes, so the connection's handle moves to a new socket made with it; the server
 * keeps counting the connection, and the old socket, left without a handle, is dropped.
 */
export function adoptWithOnread(accepted: net.Socket, reads: SocketReads): net.Socket {
  const old = accepted as unknown as SocketInternals;
  const handle = old._handle;
  old._handle = null;
  const socket = new net.Socket({ handle, allowHalfOpen: accepted.allowHalfOpen, readable: true, writable: true, onread: reads.options } as net.SocketConstructorOpts);
  const moved = socket as unknown as SocketInternals;
  moved.server = old.server;
  moved._server = old._server;
  old.server = null;
  old._server = null;
  return socket;
}
