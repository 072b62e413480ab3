/**
 * httpHandler: node:http requests served by tasks, with a real server and a real client.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { ExceptionContext } from '../src/base-events.js';
import { ContextVar } from '../src/contextvars.js';
import type { Coroutine } from '../src/coroutines.js';
import { CancelledError } from '../src/exceptions.js';
import { getRunningLoop, newEventLoop } from '../src/events.js';
import { httpHandler } from '../src/http-handler.js';
import { run } from '../src/runners.js';
import { Event, sleep } from '../src/index.js';
import { ensureFuture } from '../src/task.js';

interface Reply {
  status: number;
  body: string;
}

/** A GET of `path`; its status and body, or the error the connection ended with. */
function get(port: number, path: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('response aborted')));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Listen on a free port of 127.0.0.1 (from inside the loop: a Promise the task waits for). */
function* listen(server: Server): Coroutine<number> {
  yield* ensureFuture(new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)));
  return (server.address() as { port: number }).port;
}

function* closeServer(server: Server): Coroutine<void> {
  server.closeAllConnections();
  yield* ensureFuture(new Promise<void>((resolve) => server.close(() => resolve())));
}

/** The exception handler's calls on the running loop, collected. */
function collectErrors(): ExceptionContext[] {
  const seen: ExceptionContext[] = [];
  getRunningLoop().setExceptionHandler((_loop, context) => seen.push(context));
  return seen;
}

describe('httpHandler', () => {
  it('serves each request as a task of the running loop, in a context of its own: three at once never see each other', async () => {
    const requestId = new ContextVar<string>('requestId', { default: 'none' });
    const replies = await run(
      (function* () {
        const loop = getRunningLoop();
        const server = createServer(
          httpHandler(function* (req: IncomingMessage, res: ServerResponse) {
            const id = new URL(req.url ?? '/', 'http://x').searchParams.get('id') ?? '?';
            requestId.set(id);
            // Each waits a different time, so their steps interleave.
            yield* sleep(0.01 * (4 - Number(id)));
            const taskLoop = getRunningLoop() === loop ? 'same loop' : 'other loop';
            res.end(`${id}:${requestId.get()}:${taskLoop}`);
          }),
        );
        const port = yield* listen(server);
        try {
          return yield* ensureFuture(Promise.all(['1', '2', '3'].map((id) => get(port, `/?id=${id}`))));
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(replies).toEqual([
      { status: 200, body: '1:1:same loop' },
      { status: 200, body: '2:2:same loop' },
      { status: 200, body: '3:3:same loop' },
    ]);
    expect(requestId.get()).toBe('none');
  });

  it('runs each task in the AsyncLocalStorage store its request was given: three at once never see each other', async () => {
    const als = new AsyncLocalStorage<{ rid: string }>();
    const replies = await run(
      (function* () {
        const handle = httpHandler(function* (_req: IncomingMessage, res: ServerResponse) {
          const first = als.getStore()?.rid;
          yield* sleep(0.01 * (4 - Number(first)));
          yield;
          res.end(`${first}:${als.getStore()?.rid}`);
        });
        // As a tracing or logging middleware does: the request's store around the listener.
        const server = createServer((req, res) => als.run({ rid: req.headers['x-rid'] as string }, () => handle(req, res)));
        const port = yield* listen(server);
        try {
          const one = (rid: string): Promise<Reply> =>
            new Promise((resolve, reject) => {
              const req = request({ host: '127.0.0.1', port, path: '/', agent: false, headers: { 'x-rid': rid } }, (res) => {
                let body = '';
                res.on('data', (chunk: Buffer) => (body += chunk.toString()));
                res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
              });
              req.on('error', reject);
              req.end();
            });
          return yield* ensureFuture(Promise.all(['1', '2', '3'].map(one)));
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(replies.map((reply) => reply.body)).toEqual(['1:1', '2:2', '3:3']);
  });

  it('cancels the task when the client goes away first; nothing is reported', async () => {
    const outcome = await run(
      (function* () {
        const errors = collectErrors();
        const started = new Event();
        const ended = new Event();
        let seen = 'nothing';
        const server = createServer(
          httpHandler(function* (_req, res) {
            started.set();
            try {
              yield* sleep(3600);
              res.end('too late');
            } catch (error) {
              seen = error instanceof CancelledError ? `cancelled: ${error.message}` : String(error);
              throw error;
            } finally {
              ended.set();
            }
          }),
        );
        const port = yield* listen(server);
        try {
          const req = request({ host: '127.0.0.1', port, path: '/slow', agent: false });
          req.on('error', () => undefined);
          req.end();
          yield* started.wait();
          req.destroy();
          yield* ended.wait();
          yield* sleep(0);
          return { seen, errors: errors.length };
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(outcome).toEqual({ seen: 'cancelled: the client went away before the response ended', errors: 0 });
  });

  it('answers 500 for an error raised before anything was sent, and reports it once', async () => {
    const outcome = await run(
      (function* () {
        const errors = collectErrors();
        const server = createServer(
          httpHandler(function* () {
            yield* sleep(0);
            throw new RangeError('no such order');
          }),
        );
        const port = yield* listen(server);
        try {
          const reply = yield* ensureFuture(get(port, '/orders/7'));
          yield* sleep(0);
          return { reply, errors: errors.map((context) => [context.message, (context.exception as Error).message, context.task !== undefined]) };
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(outcome).toEqual({
      reply: { status: 500, body: 'Internal Server Error\n' },
      errors: [['Exception in httpHandler (http GET /orders/7)', 'no such order', true]],
    });
  });

  it('destroys the connection for an error raised after the headers went out, and reports it once', async () => {
    const outcome = await run(
      (function* () {
        const errors = collectErrors();
        const server = createServer(
          httpHandler(function* (_req, res) {
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.write('half of ');
            yield* sleep(0.01);
            throw new RangeError('lost the rest');
          }),
        );
        const port = yield* listen(server);
        try {
          let failure = 'none';
          try {
            yield* ensureFuture(get(port, '/stream'));
          } catch (error) {
            failure = (error as Error).message;
          }
          yield* sleep(0);
          return { failed: failure !== 'none', errors: errors.map((context) => (context.exception as Error).message) };
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(outcome).toEqual({ failed: true, errors: ['lost the rest'] });
  });

  it('answers 500 when the handler does not return a coroutine, naming what it returned', async () => {
    const outcome = await run(
      (function* () {
        const errors = collectErrors();
        const server = createServer(httpHandler((() => 'not a coroutine') as never));
        const port = yield* listen(server);
        try {
          const reply = yield* ensureFuture(get(port, '/'));
          return { reply, errors: errors.map((context) => `${(context.exception as Error).name}: ${(context.exception as Error).message}`) };
        } finally {
          yield* closeServer(server);
        }
      })(),
    );
    expect(outcome).toEqual({
      reply: { status: 500, body: 'Internal Server Error\n' },
      errors: ["TypeError: the httpHandler handler must return a coroutine, got 'not a coroutine'"],
    });
  });

  it('serves on the loop it is given, and answers 503 once that loop is closed', async () => {
    const loop = newEventLoop();
    const errors: string[] = [];
    loop.setExceptionHandler((_loop, context) => errors.push(context.message));
    const server = createServer(
      httpHandler(
        function* (_req, res) {
          yield* sleep(0);
          res.end('from the given loop');
        },
        { loop },
      ),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const served = loop.runUntilComplete(
        (function* () {
          return yield* ensureFuture(get(port, '/'));
        })(),
      );
      expect(await served).toEqual({ status: 200, body: 'from the given loop' });
      loop.close();
      expect(await get(port, '/')).toEqual({ status: 503, body: '' });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('refuses what is not a coroutine function or a loop, naming it', () => {
    expect(() => httpHandler('serve' as never)).toThrow(new TypeError("httpHandler() needs a coroutine function (req, res) => Coroutine, got 'serve'"));
    expect(() => httpHandler(function* () {}, { loop: {} as never })).toThrow(new TypeError('options.loop must be an EventLoop, got {}'));
    expect(() => httpHandler(function* () {}, null as never)).toThrow(new TypeError('httpHandler() options must be an object, got null'));
  });
});
