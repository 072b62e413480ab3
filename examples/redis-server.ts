/**
 * A throwaway redis-server for the examples that need one (distributed, otel): a free port on
 * 127.0.0.1, persistence off.
 */
import { createServer } from 'node:net';
import { DEVNULL, createSubprocessExec, ensureFuture, openConnection, sleep, type Coroutine, type Process } from 'multiloop';

/** A TCP port free on 127.0.0.1 now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Start redis-server on a free port, persistence off, and wait until it accepts connections. */
export function* startRedis(): Coroutine<{ redis: Process; port: number }> {
  const port = yield* ensureFuture(freePort());
  const redis = yield* createSubprocessExec('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdout: DEVNULL,
  });
  for (;;) {
    try {
      const [, writer] = yield* openConnection('127.0.0.1', port);
      writer.close();
      return { redis, port };
    } catch {
      yield* sleep(0.02);
    }
  }
}
