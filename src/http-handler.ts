/**
 * node:http request listeners whose handlers are coroutines: a task per request, cancelled when
 * the client goes away, its errors answered with a 500 and reported to the loop.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventLoop } from './base-events.js';
import { isCoroutine, type Coroutine } from './coroutines.js';
import { getEventLoop } from './events.js';
import { repr } from './internal/format.js';
import { _getRunningLoop } from './internal/running.js';
import type { Task } from './task.js';

/** The options of `httpHandler`. */
export interface HttpHandlerOptions {
  /** The loop whose tasks serve the requests (default: the running loop, else this thread's). */
  loop?: EventLoop;
}

/** How much of a request's URL names its task (the URL comes from the client). */
const URL_IN_NAME = 120;

/**
 * Make a node:http request listener that runs `handler(req, res)` as a task of `loop` (default:
 * the loop running where httpHandler is called, else this thread's event loop), one task per
 * request in a context of its own. When the client goes away before the response ended, the
 * task is cancelled. An error the task raises answers 500 when nothing was sent yet (else the
 * connection is destroyed) and goes to the loop's exception handler, once. A task cancelled
 * otherwise (its loop shutting down) answers 503 when nothing was sent yet. The task ending does
 * not end the response: the handler ends it, as a Node listener does.
 *
 * @example
 * ```ts
 * const server = http.createServer(httpHandler(function* (req, res) {
 *   const user = yield* lookUp(req.url);      // cancelled if the client hangs up meanwhile
 *   res.end(JSON.stringify(user));
 * }));
 * ```
 */
export function httpHandler(
  handler: (req: IncomingMessage, res: ServerResponse) => Coroutine<void>,
  options: HttpHandlerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  if (typeof handler !== 'function') {
    throw new TypeError(`httpHandler() needs a coroutine function (req, res) => Coroutine, got ${repr(handler)}`);
  }
  if (options === null || typeof options !== 'object') throw new TypeError(`httpHandler() options must be an object, got ${repr(options)}`);
  if (options.loop !== undefined && !(options.loop instanceof EventLoop)) {
    throw new TypeError(`options.loop must be an EventLoop, got ${repr(options.loop)}`);
  }
  const loop = options.loop ?? _getRunningLoop() ?? getEventLoop();
  return (req, res) => serve(loop, handler, req, res);
}

function serve(
  loop: EventLoop,
  handler: (req: IncomingMessage, res: ServerResponse) => Coroutine<void>,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const name = `http ${req.method ?? '?'} ${(req.url ?? '').slice(0, URL_IN_NAME)}`;
  let coro: Coroutine<void>;
  try {
    coro = handler(req, res);
    if (!isCoroutine(coro)) throw new TypeError(`the httpHandler handler must return a coroutine, got ${repr(coro)}`);
  } catch (error) {
    answer(res, 500);
    report(loop, name, error, undefined);
    return;
  }
  let task: Task<void>;
  try {
    task = loop.createTask(coro, { name });
  } catch (error) {
    // The loop is closed: no task will ever answer.
    coro.return(undefined);
    answer(res, 503);
    report(loop, name, error, undefined);
    return;
  }
  let clientGone = false;
  const onClose = (): void => {
    if (res.writableFinished || task.done()) return;
    clientGone = true;
    task.cancel('the client went away before the response ended');
  };
  res.once('close', onClose);
  task.addDoneCallback(() => {
    res.off('close', onClose);
    if (task.cancelled()) {
      if (!clientGone) answer(res, 503);
      return;
    }
    const error = task.exception();
    if (error === null) return;
    answer(res, 500);
    report(loop, name, error, task);
  });
}

/**
 * Answer `status` (500: with a body saying so) when nothing was sent yet; else end the
 * connection, so that the client does not take a half response for a whole one.
 */
function answer(res: ServerResponse, status: 500 | 503): void {
  if (!res.headersSent) {
    res.statusCode = status;
    if (status === 500) {
      res.setHeader('content-type', 'text/plain; charset=utf-8');
      res.end('Internal Server Error\n');
    } else res.end();
  } else if (!res.writableEnded) res.destroy();
}

function report(loop: EventLoop, name: string, error: unknown, task: Task<void> | undefined): void {
  const exception = error instanceof Error ? error : new TypeError(`a non-Error was thrown: ${repr(error)}`);
  const context = task === undefined ? { message: `Exception in httpHandler (${name})`, exception } : { message: `Exception in httpHandler (${name})`, exception, task };
  if (loop.isClosed()) loop.defaultExceptionHandler(context);
  else loop.callExceptionHandler(context);
}
