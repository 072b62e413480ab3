/**
 * loop.sendfile over real sockets on 127.0.0.1: a file (a descriptor or a FileHandle) sent whole
 * or in part, byte for byte; the transport's flow control respected while a slow peer reads; the
 * protocol given back afterwards; asyncio's argument checks and messages.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DatagramProtocol, Protocol, ensureFuture, getRunningLoop, run, sleep, type Transport } from '../src/index.js';
import { raisedBy } from './helpers/coroutines.js';
import { until } from './helpers/io.js';

const dir = mkdtempSync(join(tmpdir(), 'multiloop-sendfile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sha = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** A Node server that keeps every byte each connection sends; `paused` connections read nothing until `resume()`. */
async function collector(paused = false): Promise<{ port: number; received: Buffer[]; ended: number; resume(): void; close(): void }> {
  const sockets: Socket[] = [];
  const state = {
    port: 0,
    received: [] as Buffer[],
    ended: 0,
    resume: (): void => {
      for (const socket of sockets) socket.resume();
    },
    close: (): void => {
      server.close();
    },
  };
  const server = createServer((socket) => {
    sockets.push(socket);
    const chunks: Buffer[] = [];
    const index = state.received.length;
    state.received.push(Buffer.alloc(0));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => {
      state.received[index] = Buffer.concat(chunks);
      state.ended++;
    });
    if (paused) socket.pause();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as { port: number }).port;
  return state;
}

class Quiet extends Protocol {
  readonly calls: string[] = [];
  override pauseWriting(): void {
    this.calls.push('pauseWriting');
  }

  override resumeWriting(): void {
    this.calls.push('resumeWriting');
  }
}

describe('EventLoop.sendfile', () => {
  it('sends a whole file, or count bytes from offset, from a descriptor or a FileHandle; the protocol is given back', async () => {
    const content = randomBytes(300 * 1024 + 123);
    const path = join(dir, 'whole.bin');
    writeFileSync(path, content);
    const peer = await collector();
    const fd = openSync(path, 'r');
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const sent: number[] = [];
          const protocols: boolean[] = [];
          const reading: boolean[] = [];
          const handle = yield* ensureFuture(open(path, 'r'));
          for (const [file, offset, count] of [
            [fd, 0, null],
            [fd, 1000, 5000],
            [handle, 70_000, null],
            [handle, content.length - 10, 1000],
          ] as const) {
            const protocol = new Quiet();
            const [transport] = yield* loop.createConnection(() => protocol, '127.0.0.1', peer.port);
            sent.push(yield* loop.sendfile(transport, file, offset, count));
            protocols.push(transport.getProtocol() === protocol);
            reading.push(transport.isReading());
            transport.close();
          }
          yield* ensureFuture(handle.close());
          yield* until(() => peer.ended === 4);
          return { sent, protocols, reading };
        })(),
      );
      expect(seen).toEqual({ sent: [content.length, 5000, content.length - 70_000, 10], protocols: [true, true, true, true], reading: [true, true, true, true] });
      expect(peer.received.map(sha)).toEqual([content, content.subarray(1000, 6000), content.subarray(70_000), content.subarray(content.length - 10)].map(sha));
    } finally {
      closeSync(fd);
      peer.close();
    }
  });

  it('respects the flow control while a slow peer reads: the write buffer stays within the high-water mark and a block', async () => {
    const content = randomBytes(12 * 1024 * 1024);
    const path = join(dir, 'large.bin');
    writeFileSync(path, content);
    const peer = await collector(true);
    const fd = openSync(path, 'r');
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const protocol = new Quiet();
          const [transport] = yield* loop.createConnection(() => protocol, '127.0.0.1', peer.port);
          const [, high] = transport.getWriteBufferLimits();
          const sending = loop.createTask(loop.sendfile(transport, fd));
          let most = 0;
          let polls = 0;
          let waitedForPeer = false;
          while (!sending.done()) {
            most = Math.max(most, transport.getWriteBufferSize());
            // The peer starts reading once the sender has had many turns to over-buffer.
            if (++polls === 200) {
              waitedForPeer = true;
              peer.resume();
            }
            yield* sleep(0.001);
          }
          const sent = sending.result();
          transport.close();
          yield* until(() => peer.ended === 1);
          return { sent, waitedForPeer, withinLimit: most <= high + 16 * 1024, ownCalls: protocol.calls };
        })(),
      );
      expect(seen).toEqual({ sent: content.length, waitedForPeer: true, withinLimit: true, ownCalls: [] });
      expect(sha(peer.received[0] as Buffer)).toBe(sha(content));
    } finally {
      closeSync(fd);
      peer.close();
    }
  });

  it('checks its arguments as asyncio does', async () => {
    const peer = await collector();
    const path = join(dir, 'small.bin');
    writeFileSync(path, 'small');
    const fd = openSync(path, 'r');
    try {
      const errors = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport] = yield* loop.createConnection(() => new Quiet(), '127.0.0.1', peer.port);
          const [datagrams] = yield* loop.createDatagramEndpoint(() => new DatagramProtocol(), { localAddr: ['127.0.0.1', 0] });
          const attempts: Array<() => ReturnType<typeof loop.sendfile>> = [
            () => loop.sendfile(datagrams as unknown as Transport, fd),
            () => loop.sendfile(transport, fd, 0, null, { fallback: false }),
            () => loop.sendfile(transport, fd, 0, 0),
            () => loop.sendfile(transport, fd, 0, 1.5),
            () => loop.sendfile(transport, fd, -1),
            () => loop.sendfile(transport, fd, 0.5),
            () => loop.sendfile(transport, 'small.bin' as never),
          ];
          const messages: string[] = [];
          for (const attempt of attempts) {
            const error = (yield* raisedBy(attempt)) as Error;
            messages.push(`${error.name}: ${error.message}`);
          }
          transport.close();
          const closing = (yield* raisedBy(() => loop.sendfile(transport, fd))) as Error;
          messages.push(`${closing.name}: ${closing.message}`);
          datagrams.close();
          return messages;
        })(),
      );
      expect(errors).toEqual([
        'RuntimeError: sendfile is not supported for transport <DatagramTransport open>',
        'RuntimeError: fallback is disabled and native sendfile is not supported for transport <Transport open peername=127.0.0.1:' + peer.port + ' write_buffer=0>',
        'RangeError: count must be a positive integer (got 0)',
        'TypeError: count must be a positive integer (got 1.5)',
        'RangeError: offset must be a non-negative integer (got -1)',
        'TypeError: offset must be a non-negative integer (got 0.5)',
        "TypeError: file must be a file descriptor or a FileHandle of node:fs/promises, got 'small.bin'",
        'RuntimeError: Transport is closing',
      ]);
    } finally {
      closeSync(fd);
      peer.close();
    }
  });
});
