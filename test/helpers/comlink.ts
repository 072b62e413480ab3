/**
 * Helpers for the comlink suites: a request posted by hand, as a hostile or bare peer posts it.
 */
import type { MessagePort } from 'node:worker_threads';

let asked = 0;

/**
 * Post a comlink request by hand on `port` (an id is added) and wait for the answer with its id.
 *
 * @example
 * ```ts
 * const reply = await ask(lt.comlinkPort(), { type: 'APPLY', path: ['add'], argumentList: [] });
 * ```
 */
export function ask(port: MessagePort, message: Record<string, unknown>): Promise<Record<string, unknown>> {
  const id = `by-hand-${++asked}`;
  return new Promise((resolve) => {
    const onMessage = (reply: Record<string, unknown>): void => {
      if (reply.id !== id) return;
      port.off('message', onMessage);
      resolve(reply);
    };
    port.on('message', onMessage);
    port.postMessage({ ...message, id });
  });
}
