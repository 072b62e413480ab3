/**
 * ThreadQueue in threads multiloop did not start: a bare `new Worker()` (plain JS, no loop) that
 * gets `queue.share()` through workerData or a message, attaches it with `ThreadQueue.attach()`
 * and uses the queue both ways with the blocking API, joinSync included. Orders and outcomes are
 * asserted, never durations.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ThreadQueue, TimeoutError, run, sleep, type Coroutine } from '../src/index.js';
import { DONES, _waitingOn } from '../src/internal/threads/queue-memory.js';
import { awaitPromise } from './helpers/loop-threads.js';

const BARE_WORKER = new URL('./fixtures/thread-queue-bare-worker.mjs', import.meta.url);

interface Message {
  kind: string;
  [key: string]: unknown;
}

/** A bare worker's messages, in order, each awaited by kind. */
class Inbox {
  readonly #messages: Message[] = [];
  readonly #waiting = new Map<string, (message: Message) => void>();
  readonly exited: Promise<number>;

  constructor(readonly worker: Worker) {
    worker.on('message', (message: Message) => {
      const resolve = this.#waiting.get(message.kind);
      this.#waiting.delete(message.kind);
      if (resolve === undefined) this.#messages.push(message);
      else resolve(message);
    });
    this.exited = new Promise((resolve, reject) => {
      worker.once('error', reject);
      worker.once('exit', resolve);
    });
  }

  /** Whether a message of `kind` came and was not taken yet. */
  has(kind: string): boolean {
    return this.#messages.some((message) => message.kind === kind);
  }

  /** The next message of `kind`; fails when the worker fails or ends first. */
  *next(kind: string): Coroutine<Message> {
    const at = this.#messages.findIndex((message) => message.kind === kind);
    if (at !== -1) return this.#messages.splice(at, 1)[0] as Message;
    const arrived = new Promise<Message>((resolve) => this.#waiting.set(kind, resolve));
    const ended = this.exited.then((code) => {
      throw new Error(`the worker ended (exit code ${code}) before it sent '${kind}'`);
    });
    return yield* awaitPromise(Promise.race([arrived, ended]));
  }
}

interface Exchange {
  attached: Message;
  results: number[];
  back: string[];
  early: Message;
  joinedBeforeDone: boolean;
  joined: Message;
  exitCode: number;
}

/** Serve 5 jobs to a bare worker and do its 3 items, the queues given to it `via` workerData or a message. */
function exchange(via: 'workerData' | 'message'): Promise<Exchange> {
  return run(
    (function* (): Coroutine<Exchange> {
      const jobs = new ThreadQueue<number>({ maxsize: 2, name: 'jobs' });
      const results = new ThreadQueue<number>({ name: 'results' });
      const back = new ThreadQueue<string>({ name: 'back' });
      const given = { via, shared: { jobs: jobs.share(), results: results.share(), back: back.share() }, raw: jobs, count: 3 };
      const worker = new Worker(BARE_WORKER, { workerData: via === 'workerData' ? given : { via } });
      const inbox = new Inbox(worker);
      try {
        if (via === 'message') worker.postMessage(given);
        const attached = yield* inbox.next('attached');
        // The worker blocks in getSync and putSync (jobs holds at most 2): each side waits for the other.
        const got: number[] = [];
        for (let i = 1; i <= 5; i++) yield* jobs.put(i);
        for (let i = 1; i <= 5; i++) got.push(yield* results.get());
        yield* jobs.join();
        jobs.shutdown();
        const items: string[] = [];
        for (let i = 0; i < 3; i++) items.push(yield* back.get());
        const early = yield* inbox.next('early');
        // The worker sleeps in joinSync once it counts itself among the waits on DONES.
        const control = new Int32Array(back._toWire().buffers.control);
        while (_waitingOn(control, DONES) === 0) yield* sleep(0.005);
        const joinedBeforeDone = inbox.has('joined');
        for (let i = 0; i < 3; i++) back.taskDone();
        const joined = yield* inbox.next('joined');
        const exitCode = yield* awaitPromise(inbox.exited);
        return { attached, results: got, back: items, early, joinedBeforeDone, joined, exitCode };
      } finally {
        // A failed exchange leaves no worker behind (one that ended already: nothing to do).
        void worker.terminate();
      }
    })(),
  );
}

describe('ThreadQueue.attach in a bare Worker', () => {
  for (const via of ['workerData', 'message'] as const) {
    it(`makes the queues given through ${via} the same queues there: items both ways, joinSync in the worker`, async () => {
      const out = await exchange(via);
      expect(out.attached).toEqual({
        kind: 'attached',
        names: ['jobs', 'results', 'back'],
        same: true,
        raw: [
          'TypeError',
          'ThreadQueue.attach() takes what queue.share() returned, got {} (a ThreadQueue given as it is to a thread multiloop did not start arrives as {}: give it queue.share())',
        ],
      });
      expect(out.results).toEqual([2, 4, 6, 8, 10]);
      expect(out.back).toEqual(['item-0', 'item-1', 'item-2']);
      expect(out.early).toEqual({ kind: 'early', error: [TimeoutError.name, "3 item(s) of ThreadQueue 'back' not done within 0.01 seconds"] });
      expect(out.joinedBeforeDone).toBe(false);
      expect(out.joined).toEqual({ kind: 'joined', got: [1, 2, 3, 4, 5], unfinished: "<ThreadQueue 'back' maxsize=0 qsize=0>" });
      expect(out.exitCode).toBe(0);
    });
  }
});
