/**
 * I/O at scale and across threads: 1,000 concurrent connections to one stream server with exact
 * byte counts, a server hosted by a LoopThread's loop serving clients of the main loop, and a
 * subprocess run from a worker thread's loop.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { gather, openConnection, run, startServer, type Coroutine, type StreamReader, type StreamWriter } from '../src/index.js';
import { useThreads } from './helpers/loop-threads.js';

const threads = useThreads();
const SERVICE = new URL('./fixtures/io-service.mjs', import.meta.url);

/** Echo every byte back until EOF, then close. */
function* echo(reader: StreamReader, writer: StreamWriter): Coroutine<void> {
  for (;;) {
    const data = yield* reader.read(65536);
    if (data.length === 0) break;
    writer.write(data);
    yield* writer.drain();
  }
  writer.close();
}

describe('1,000 concurrent connections', () => {
  it('echo every byte of every connection exactly, and the server ends with all of them closed', async () => {
    const seen = await run(
      (function* () {
        const server = yield* startServer(echo, '127.0.0.1', 0, { backlog: 1024 });
        const [, port] = server.address() as [string, number];
        const client = function* (i: number): Coroutine<number> {
          // Each connection sends its own bytes (a few KiB, varying), half-closes, and reads the echo to EOF.
          const payload = randomBytes(2048 + ((i * 37) % 4096));
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          writer.write(payload);
          yield* writer.drain();
          writer.writeEof();
          const back = yield* reader.read();
          writer.close();
          yield* writer.waitClosed();
          if (Buffer.compare(Buffer.from(back), payload) !== 0) throw new Error(`connection ${i}: the echo differs (${back.length} of ${payload.length} bytes)`);
          return back.length;
        };
        const sizes = yield* gather(Array.from({ length: 1000 }, (_, i) => client(i)));
        server.close();
        yield* server.waitClosed();
        return { connections: sizes.length, bytes: sizes.reduce((a, b) => a + b, 0) };
      })(),
    );
    let expected = 0;
    for (let i = 0; i < 1000; i++) expected += 2048 + ((i * 37) % 4096);
    expect(seen).toEqual({ connections: 1000, bytes: expected });
  }, 60_000);
});

describe('servers and subprocesses in LoopThreads', () => {
  it("a LoopThread's loop serves clients of the main loop, and closes cleanly while they are connected", async () => {
    const seen = await run(
      (function* () {
        const thread = yield* threads.start(SERVICE, { name: 'io' });
        const port = yield* thread.call<number>('serve');
        const talk = function* (name: string): Coroutine<string> {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          writer.write(new TextEncoder().encode(`hello from ${name}\n`));
          const line = new TextDecoder().decode(yield* reader.readline());
          writer.close();
          return line;
        };
        const lines = yield* gather([talk('a'), talk('b'), talk('c')]);
        const count = yield* thread.call<number>('count');
        const stopped = yield* thread.call<string>('stop');
        return { lines, count, stopped };
      })(),
    );
    expect(seen).toEqual({ lines: ['hello from a\n', 'hello from b\n', 'hello from c\n'], count: 3, stopped: 'stopped' });
  });

  it("runs a subprocess from a worker thread's loop", async () => {
    const out = await run(
      (function* () {
        const thread = yield* threads.start(SERVICE, { name: 'io' });
        return yield* thread.call<string>('runChild', 'through the child');
      })(),
    );
    expect(out).toBe('through the child (exit 0)');
  });
});
