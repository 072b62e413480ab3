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

/**
 * Start redis-server on a free port, persistence off, and wait until it accepts connections;
 * fails if it exits first (the port was taken meanwhile, say) or is not up within 10 s.
 */
export function* startRedis(): Coroutine<{ redis: Process; port: number }> {
  const port = yield* ensureFuture(freePort());
  const redis = yield* createSubprocessExec('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdout: DEVNULL,
  });
  for (let attempt = 1; ; attempt++) {
    try {
      const [, writer] = yield* openConnection('127.0.0.1', port);
      writer.close();
      return { redis, port };
    } catch {
      if (redis.returncode !== null) throw new Error(`redis-server exited with ${redis.returncode} before accepting connections on port ${port}`);
      if (attempt === 500) {
        redis.kill();
        throw new Error(`redis-server did not accept connections on port ${port} within 10 s`);
      }
      yield* sleep(0.02);
    }
  }
}
