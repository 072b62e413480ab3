/**
 * Reading a socket through Node's `onread` instead of its stream: the kernel fills one buffer of
 * the thread, and each read is copied out at once, into bytes of its own for the transport or
 * (a BufferedProtocol's) into the memory its protocol gives.
 *
 * Node's stream path allocates (and zero-fills) 64 KiB for every read, however little arrived,
 * makes a Buffer and pushes it through a Readable ('data', nextTicks); it also splits a larger
 * message into 64 KiB reads. Here one 256 KiB buffer per thread takes every read (as asyncio's
 * selector transports read 256 KiB), and each read is copied out into memory shared with reads
 * of similar sizes.
 */
import * as net from 'node:net';
import { markAsUntransferable } from 'node:worker_threads';

/** The most bytes one socket read takes (asyncio's selector transports read up to 256 KiB). */
const READ_SIZE = 256 * 1024;
/** Reads below this size are copied into Node's own Buffer pool (`Buffer.allocUnsafe` pools below `poolSize / 2`). */
const NODE_POOLED = 4 * 1024;
/** Reads up to this size share the small slabs. */
const SMALL_SLABBED = 16 * 1024;
/** Reads up to this size are copied into slabs; larger ones (rare: 128 KiB queued at once) into their own ArrayBuffer. */
const SLABBED = 128 * 1024;

/** What the kernel reads every socket of this thread into; each read is copied out before the next. */
let readBuffer: Buffer | null = null;
/**
 * The first bytes of `readBuffer` the last read filled: what its bytes are copied from, kept for
 * the next read of the same length (a protocol's reads often are), which then makes no view of
 * its own: `TypedArray.set` from it costs less than `Buffer.copy`, which makes one at every call.
 */
let readView: Uint8Array = new Uint8Array(0);

/**
 * Memory that reads are copied into one after the other; a fresh slab once the last one is full.
 * A slab is marked untransferable, as Node marks its Buffer pool: `move()` of one read must not
 * take the other reads of its slab to another thread (Node copies it instead, or from Node 21 on
 * refuses it).
 */
class Slab {
  readonly #size: number;
  #slab: Buffer | null = null;
  #used = 0;

  constructor(size: number) {
    this.#size = size;
  }

  /** `n` bytes of the slab, for one read. */
  take(n: number): Buffer {
    let slab = this.#slab;
    if (slab === null || this.#used + n > this.#size) {
      slab = this.#slab = Buffer.allocUnsafeSlow(this.#size);
      markAsUntransferable(slab.buffer);
      this.#used = 0;
    }
    const chunk = slab.subarray(this.#used, this.#used + n);
    // Aligned as Node aligns its pool.
    this.#used = (this.#used + n + 7) & ~7;
    return chunk;
  }
}

/** Reads of 4-16 KiB share 64 KiB slabs, larger ones up to 128 KiB share 256 KiB slabs: a kept read holds at most 16 times its size. */
const SMALL_SLABS = new Slab(64 * 1024);
const LARGE_SLABS = new Slab(256 * 1024);

/** The first `nread` bytes of the thread's read buffer, where the last read put them: valid until the next read of any socket of this thread. */
export function readBytes(nread: number): Uint8Array {
  if (readView.length !== nread) {
    const buffer = readBuffer as Buffer;
    readView = new Uint8Array(buffer.buffer, buffer.byteOffset, nread);
  }
  return readView;
}

/**
 * The first `nread` bytes of `readBuffer` in memory of their own: Node's pool for a small read, a
 * slab for a larger one. Not an ArrayBuffer per read: that costs more than the copy (about 1 us
 * against 0.3 us to copy 10 KiB), and V8 frees them by the thousand at each GC (some 60 MB
 * between "external memory pressure" scavenges at 100 KiB a read), after which glibc often gives
 * the memory back to the kernel and the next reads fault it in again: 6 to 17 page faults per
 * 100 KiB read in some processes (Node's own stream path and raw net servers suffer it too), none
 * to 1 with slabs. The price: another thread receiving a read gets a copy of its whole slab.
 */
export function copyOut(nread: number): Buffer {
  const chunk =
    nread < NODE_POOLED
      ? Buffer.allocUnsafe(nread)
      : nread <= SMALL_SLABBED
        ? SMALL_SLABS.take(nread)
        : nread <= SLABBED
          ? LARGE_SLABS.take(nread)
          : Buffer.allocUnsafeSlow(nread);
  chunk.set(readBytes(nread));
  return chunk;
}

/** Who takes a socket's bytes: its Transport. */
export interface ReadTarget {
  /** Bytes that arrived before the target was attached (a copy of their own). */
  _received(chunk: Buffer): void;
  /**
   * `nread` bytes arrived in the thread's read buffer (`readBytes(nread)`), which the next read
   * of any socket overwrites: take them before returning (`copyOut` makes them a copy of their
   * own); whether to go on reading.
   */
  _read(nread: number): boolean;
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
    callback: (nread: number): boolean => {
      // The read went into `readBuffer` (the buffer above), which the next read of any socket
      // overwrites: whoever takes the bytes copies them out now.
      const target = this.#target;
      if (target !== null) return target._read(nread);
      const chunk = copyOut(nread);
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
 *
 * Null when `accepted` lacks the private fields this relies on (as Node 20 to 24 have them): a
 * Node that changed them gets its socket back unmoved, to be read as a stream.
 */
export function adoptWithOnread(accepted: net.Socket, reads: SocketReads): net.Socket | null {
  const old = accepted as unknown as SocketInternals;
  const handle = old._handle;
  if (typeof handle !== 'object' || handle === null || !('server' in old) || !('_server' in old)) return null;
  old._handle = null;
  const socket = new net.Socket({ handle, allowHalfOpen: accepted.allowHalfOpen, readable: true, writable: true, onread: reads.options } as net.SocketConstructorOpts);
  const moved = socket as unknown as SocketInternals;
  moved.server = old.server;
  moved._server = old._server;
  old.server = null;
  old._server = null;
  return socket;
}
