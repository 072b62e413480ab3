/**
 * What `loop.connectReadPipe` / `connectWritePipe` accept as a pipe, made a Node stream: a file
 * descriptor (a pipe's or FIFO's end, a socket, a terminal), which the transport then owns and
 * closes as asyncio closes the pipe object it was given; or a Node stream already open on one
 * (`net.Socket`, a child's stdio, `process.stdin`, any Readable or Writable).
 *
 * Node has no way to read a descriptor without blocking except through a libuv handle: pipes,
 * FIFOs and sockets get a `net.Socket` (a libuv pipe handle), terminals a `tty` stream. Other
 * character devices (`/dev/null`, `/dev/zero`) are read and written through fs streams, in the
 * thread pool, as they never block for long. A regular file is refused, as asyncio refuses it.
 */
import { createReadStream, createWriteStream, fstatSync } from 'node:fs';
import { Socket } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { isatty, ReadStream as TtyReadStream, WriteStream as TtyWriteStream } from 'node:tty';
import { repr } from '../format.js';

/** A pipe as `connectReadPipe` takes it: a file descriptor the transport then owns, or a Node stream. */
export type ReadPipe = number | Readable;
/** A pipe as `connectWritePipe` takes it: a file descriptor the transport then owns, or a Node stream. */
export type WritePipe = number | Writable;

/** The Node stream a pipe is read or written through, and whether it is a socket (whose peer's close can be heard). */
export interface OpenedPipe<S> {
  stream: S;
  /** A descriptor of a socket: the write transport reads it to hear the reader go (asyncio's reader trick). */
  socketFd: boolean;
}

function kindOf(fd: number, what: string): 'fifo' | 'socket' | 'tty' | 'char' | 'other' {
  let stat;
  try {
    stat = fstatSync(fd);
  } catch (error) {
    throw new RangeError(`${what}: ${repr(fd)} is not an open file descriptor (${(error as { code?: string }).code ?? String(error)})`, { cause: error });
  }
  if (stat.isFIFO()) return 'fifo';
  if (stat.isSocket()) return 'socket';
  if (stat.isCharacterDevice()) return isatty(fd) ? 'tty' : 'char';
  return 'other';
}

function checkFd(pipe: number, what: string): void {
  if (!Number.isInteger(pipe) || pipe < 0) throw new RangeError(`${what}: a file descriptor must be a non-negative integer, got ${repr(pipe)}`);
}

/** The Node stream to read `pipe` through; RangeError for a regular file or a descriptor that is not open. */
export function openReadPipe(pipe: unknown): OpenedPipe<Readable> {
  if (pipe instanceof Readable) return { stream: pipe, socketFd: false };
  if (typeof pipe !== 'number') throw new TypeError(`connectReadPipe() pipe must be a file descriptor or a Readable stream, got ${repr(pipe)}`);
  checkFd(pipe, 'connectReadPipe()');
  const kind = kindOf(pipe, 'connectReadPipe()');
  switch (kind) {
    case 'fifo':
    case 'socket':
      return { stream: new Socket({ fd: pipe, readable: true, writable: false }), socketFd: false };
    case 'tty':
      return { stream: new TtyReadStream(pipe), socketFd: false };
    case 'char':
      return { stream: createReadStream('', { fd: pipe, autoClose: true }), socketFd: false };
    default:
      throw new RangeError('Pipe transport is for pipes/sockets only.');
  }
}

/** The Node stream to write `pipe` through; RangeError for a regular file or a descriptor that is not open. */
export function openWritePipe(pipe: unknown): OpenedPipe<Writable> {
  // A Duplex (net.Socket) is a Writable to instanceof too.
  if (pipe instanceof Writable) return { stream: pipe, socketFd: false };
  if (typeof pipe !== 'number') throw new TypeError(`connectWritePipe() pipe must be a file descriptor or a Writable stream, got ${repr(pipe)}`);
  checkFd(pipe, 'connectWritePipe()');
  const kind = kindOf(pipe, 'connectWritePipe()');
  switch (kind) {
    case 'fifo':
      return { stream: new Socket({ fd: pipe, readable: false, writable: true }), socketFd: false };
    case 'socket':
      // Readable too: the peer closing its end shows as EOF on our read side.
      return { stream: new Socket({ fd: pipe, readable: true, writable: true, allowHalfOpen: true }), socketFd: true };
    case 'tty':
      return { stream: new TtyWriteStream(pipe), socketFd: false };
    case 'char':
      return { stream: createWriteStream('', { fd: pipe, autoClose: true }), socketFd: false };
    default:
      throw new RangeError('Pipe transport is only for pipes, sockets and character devices');
  }
}
