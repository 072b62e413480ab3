/**
 * Reading sockets through Node's `onread` (src/internal/socket-reads.ts), below the Transport:
 * what arrives before a transport is attached, and reads of every size copied out of the one
 * buffer of the thread.
 */
import { connect, createServer, type Socket } from 'node:net';
import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { SocketReads, adoptWithOnread, copyOut, type ReadTarget } from '../src/internal/socket-reads.js';
import { nodeServer } from './helpers/io.js';

const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Wait (up to two seconds) until `done()`. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await settle(5);
}

/** A target that keeps every chunk in `chunks`: what came before it as given, each later read copied out of the thread's buffer. */
function collect(chunks: Buffer[]): ReadTarget {
  return {
    _received: (chunk) => void chunks.push(chunk),
    _read: (nread) => chunks.push(copyOut(nread)) > 0,
  };
}

describe('SocketReads', () => {
  it('keeps what arrives before a transport is attached, reads no further until then, and hands it over first', async () => {
    const tail = Buffer.alloc(1 << 20, 0x61);
    // 'hello' first; the rest once the client says it has read it (so the first read holds 'hello' only).
    const peer = await nodeServer((socket) => {
      socket.write('hello');
      socket.once('data', () => socket.end(Buffer.concat([Buffer.from('world'), tail])));
    });
    try {
      const reads = new SocketReads();
      const socket: Socket = connect({ port: peer.port, host: '127.0.0.1', onread: reads.options });
      let ended = false;
      socket.on('end', () => (ended = true));
      await until(() => socket.bytesRead > 0);
      socket.write('go');
      await settle(100);
      // One read came ('hello'), then reading stopped: the rest waits in the kernel.
      const readBeforeAttach = socket.bytesRead;
      const chunks: Buffer[] = [];
      reads.attach(collect(chunks), socket);
      await until(() => ended);
      socket.destroy();
      const all = Buffer.concat(chunks);
      expect(readBeforeAttach).toBe(5);
      expect(chunks[0]?.toString()).toBe('hello');
      expect(Buffer.compare(all, Buffer.concat([Buffer.from('helloworld'), tail]))).toBe(0);
    } finally {
      peer.server.close();
    }
  });

  it('gives every read memory of its own, whatever its size, that no transfer to another thread can take away', async () => {
    // Sizes repeat (a read of the same length as the last reuses its view of the thread's buffer).
    const sizes = [1, 100, 100, 4095, 4096, 4096, 6000, 16384, 16385, 16385, 70000, 200000, 100];
    const messages = sizes.map((size, i) => Buffer.alloc(size, i + 1));
    const peer = await nodeServer((socket) => {
      let i = 0;
      const next = (): void => {
        if (i < messages.length) socket.write(messages[i++] as Buffer, () => setTimeout(next, 10));
        else socket.end();
      };
      next();
    });
    try {
      const reads = new SocketReads();
      const chunks: Buffer[] = [];
      const socket: Socket = connect({ port: peer.port, host: '127.0.0.1', onread: reads.options });
      reads.attach(collect(chunks), socket);
      let ended = false;
      socket.on('end', () => (ended = true));
      await until(() => ended);
      socket.destroy();
      // Read after all the others came: a chunk that shared memory with a later read would differ.
      expect(Buffer.compare(Buffer.concat(chunks), Buffer.concat(messages))).toBe(0);
      // Transferring one chunk's memory (what move() asks) never takes the other chunks along:
      // Node copies it instead, or (from Node 21 on) refuses.
      const { port1, port2 } = new MessageChannel();
      for (const chunk of chunks.filter((each) => each.buffer.byteLength > each.length)) {
        try {
          port1.postMessage(chunk, [chunk.buffer as ArrayBuffer]);
        } catch (error) {
          expect((error as Error).name).toBe('DataCloneError');
        }
      }
      port1.close();
      port2.close();
      expect(Buffer.compare(Buffer.concat(chunks), Buffer.concat(messages))).toBe(0);
    } finally {
      peer.server.close();
    }
  });

  it('adoptWithOnread: a socket without the private fields it moves is given back unmoved, and still reads as a stream', async () => {
    const accepted: Socket[] = [];
    const server = createServer({ pauseOnConnect: true }, (socket) => accepted.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const client = connect(port, '127.0.0.1');
    try {
      await until(() => accepted.length === 1);
      const socket = accepted[0] as Socket;
      // As a Node that renamed its fields would have it.
      delete (socket as unknown as { _server?: unknown })._server;
      expect(adoptWithOnread(socket, new SocketReads())).toBeNull();
      const got: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => got.push(chunk));
      socket.resume();
      client.write('still read');
      await until(() => Buffer.concat(got).length === 10);
      expect(Buffer.concat(got).toString()).toBe('still read');
      socket.destroy();
    } finally {
      client.destroy();
      server.close();
    }
  });
});
