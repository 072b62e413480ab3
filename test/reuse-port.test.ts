/**
 * `reusePort` (SO_REUSEPORT): a pool of LoopThreads serving one port of 127.0.0.1, the kernel
 * spreading real connections over their loops (Node 22.12+ on Linux); and, where the Node or the
 * platform lacks it, or the server cannot take it (a Unix socket, a `sock` listening already),
 * an error naming what is missing, never the option dropped.
 */
import { createServer as netServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  LoopThreadPool,
  Protocol,
  ensureFuture,
  gather,
  getRunningLoop,
  openConnection,
  run,
  startServer,
  startUnixServer,
  type Coroutine,
  type StreamReader,
  type StreamWriter,
} from '../src/index.js';
import { nodeHasReusePort, reusePortMissing, reusePortRefused } from '../src/internal/reuse-port.js';
import { raisedBy } from './helpers/coroutines.js';

const SERVICE = new URL('./fixtures/reuse-port-service.mjs', import.meta.url);
const CONNECTIONS = 64;
const THREADS = 3;
const here = reusePortMissing();

/** Close at once. */
function* hangUp(_reader: StreamReader, writer: StreamWriter): Coroutine<void> {
  writer.close();
}

class Nothing extends Protocol {}

/** `name: message` of an error. */
function told(error: unknown): string {
  return `${(error as Error).name}: ${(error as Error).message}`;
}

describe('reusePort: what is missing, by Node version and platform', () => {
  it('has it from Node 22.12, 23.1 and 24', () => {
    const versions = ['20.19.5', '22.11.0', '22.12.0', 'v22.23.5', '23.0.0', '23.1.0', '24.0.0', 'v26.12.1', '30.0.0'];
    expect(versions.filter((version) => nodeHasReusePort(version))).toEqual(['22.12.0', 'v22.23.5', '23.1.0', '24.0.0', 'v26.12.1', '30.0.0']);
  });

  it('names the Node version needed, and the one running', () => {
    expect(told(reusePortMissing('v20.19.5', 'linux'))).toBe(
      'RangeError: reusePort needs Node 22.12 or later (23.1 or later on Node 23): net.Server.listen sets SO_REUSEPORT from there; this is Node v20.19.5',
    );
    expect(told(reusePortMissing('23.0.0', 'linux'))).toMatch(/this is Node v23\.0\.0$/);
    expect(reusePortMissing('v22.12.0', 'linux')).toBeNull();
    expect(reusePortMissing('v26.12.1', 'freebsd')).toBeNull();
  });

  it('names the platform where Node refuses it, whatever the version', () => {
    for (const platform of ['darwin', 'win32', 'openbsd']) {
      for (const version of ['v20.19.5', 'v26.12.1']) {
        expect(told(reusePortMissing(version, platform))).toBe(
          'RangeError: reusePort needs a platform whose SO_REUSEPORT spreads connections over the sockets sharing a port ' +
            `(Linux, FreeBSD 12+, Solaris 11.4, AIX 7.2.5+); this is ${platform}, where Node refuses it`,
        );
      }
    }
  });

  it('tells a listen the kernel refused SO_REUSEPORT as reusePort missing, the OS error its cause; other errors as they are', () => {
    const refused = Object.assign(new Error('listen ENOTSUP: operation not supported on socket 127.0.0.1:8000'), { code: 'ENOTSUP' });
    const told = reusePortRefused(refused, 'aix') as Error;
    expect(told).toBeInstanceOf(RangeError);
    expect(told.message).toBe('reusePort is not supported by this aix system: listen refused SO_REUSEPORT (listen ENOTSUP: operation not supported on socket 127.0.0.1:8000)');
    expect(told.cause).toBe(refused);
    const inUse = Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' });
    expect(reusePortRefused(inUse, 'linux')).toBe(inUse);
  });
});

describe('reusePort: servers that cannot take it', () => {
  let dir: string | null = null;
  afterEach(() => {
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  it('a Unix server refuses it as an unexpected argument, as asyncio has no reuse_port there', async () => {
    dir = mkdtempSync(join(tmpdir(), 'multiloop-reuse-'));
    const path = join(dir, 's.sock');
    const errors = await run(
      (function* () {
        const loop = getRunningLoop();
        return [
          yield* raisedBy(() => startUnixServer(hangUp, path, { reusePort: true })),
          yield* raisedBy(() => loop.createUnixServer(() => new Nothing(), path, { reusePort: false })),
        ].map(told);
      })(),
    );
    expect(errors).toEqual([
      "TypeError: startUnixServer() got an unexpected keyword argument 'reusePort'",
      "TypeError: createUnixServer() got an unexpected keyword argument 'reusePort'",
    ]);
  });

  it('a sock listening already refuses it: it is set as a socket binds', async () => {
    const sock = netServer();
    await new Promise<void>((resolve) => sock.listen(0, '127.0.0.1', resolve));
    try {
      const error = await run(raisedBy(() => startServer(hangUp, null, null, { sock, reusePort: true })));
      expect(told(error)).toBe('RangeError: reusePort and sock can not be specified at the same time: sock is listening already (give reusePort to its listen())');
      expect(sock.listening).toBe(true);
    } finally {
      sock.close();
    }
  });

  it('refuses a reusePort that is not a boolean', async () => {
    const error = await run(raisedBy(() => startServer(hangUp, '127.0.0.1', 0, { reusePort: 'yes' as never })));
    expect(told(error)).toBe("TypeError: startServer() reusePort must be a boolean, got 'yes'");
  });
});

describe.runIf(here !== null)(`reusePort on this Node (${process.version}, ${process.platform}), which lacks it`, () => {
  it('startServer and createServer refuse it, naming what is missing', async () => {
    const errors = await run(
      (function* () {
        const loop = getRunningLoop();
        return [
          yield* raisedBy(() => startServer(hangUp, '127.0.0.1', 0, { reusePort: true })),
          yield* raisedBy(() => loop.createServer(() => new Nothing(), '127.0.0.1', 0, { reusePort: true })),
        ].map(told);
      })(),
    );
    expect(errors).toEqual([told(here), told(here)]);
    expect(errors[0]).toContain(`this is Node ${process.version}`);
  });
});

if (here !== null) console.log(`skipped: reusePort across threads needs Node 22.12+ on Linux: ${here.message}`);

describe.runIf(here === null)(`reusePort on this Node (${process.version}, ${process.platform})`, () => {
  it('two servers of one loop listen on one port; a third without reusePort gets EADDRINUSE', async () => {
    const outcome = await run(
      (function* () {
        const loop = getRunningLoop();
        const first = yield* startServer(hangUp, '127.0.0.1', 0, { reusePort: true });
        const port = (first.address() as [string, number])[1];
        const second = yield* loop.createServer(() => new Nothing(), '127.0.0.1', port, { reusePort: true });
        const third = (yield* raisedBy(() => startServer(hangUp, '127.0.0.1', port))) as Error & { code?: string };
        const ports = [first.address(), second.address()];
        first.close();
        second.close();
        yield* gather(first.waitClosed(), second.waitClosed());
        return { ports, third: third.code };
      })(),
    );
    expect(outcome.ports).toEqual([
      ['127.0.0.1', outcome.ports[0]![1]],
      ['127.0.0.1', outcome.ports[0]![1]],
    ]);
    expect(outcome.third).toBe('EADDRINUSE');
  });

  it(`a LoopThreadPool of ${THREADS} serves one port: ${CONNECTIONS} connections are answered by more than one thread, each once`, async () => {
    const pool = await LoopThreadPool.start(SERVICE, { size: THREADS, name: 'reuse' });
    try {
      const outcome = await run(
        (function* () {
          const [first] = pool.threads();
          const port = yield* first!.call<number>('serve', 0);
          const ports = yield* pool.broadcast<number>('serve', port);
          const alone = yield* first!.call<string>('serveAlone', port);
          // One connection: the thread that accepted it answers with its id, then closes.
          const ask = function* (): Coroutine<number> {
            const [reader, writer] = yield* openConnection('127.0.0.1', port);
            const line = new TextDecoder().decode(yield* reader.read());
            writer.close();
            yield* writer.waitClosed();
            return Number(line.trim());
          };
          const answeredBy = yield* gather(Array.from({ length: CONNECTIONS }, () => ask()));
          const counts = yield* pool.broadcast<{ threadId: number; answered: number }>('answers');
          yield* ensureFuture(pool.broadcast('stop'));
          return { port, ports, alone, answeredBy, counts };
        })(),
      );
      const threadIds = pool.threads().map((thread) => thread.threadId);
      expect(outcome.ports).toEqual(Array(THREADS).fill(outcome.port));
      expect(outcome.alone).toMatch(/^EADDRINUSE: /);
      expect(outcome.answeredBy).toHaveLength(CONNECTIONS);
      for (const id of outcome.answeredBy) expect(threadIds).toContain(id);
      // The kernel picks a socket by a hash of each connection's addresses: with 64 source
      // ports, all of them landing on one of 3 sockets has odds of 3^-63.
      expect(new Set(outcome.answeredBy).size).toBeGreaterThan(1);
      // What each thread says it answered is what the clients heard from it: none lost, none twice.
      expect(outcome.counts.map(({ threadId }) => threadId)).toEqual(threadIds);
      for (const { threadId, answered } of outcome.counts) {
        expect(answered).toBe(outcome.answeredBy.filter((id) => id === threadId).length);
      }
    } finally {
      await pool.close();
    }
  }, 60_000);
});
