/**
 * The snapshots a live monitor serves, and what they cost the app: at most one taken at a time
 * (requests meanwhile wait for it), at most one per `minInterval` (requests within it of the last
 * get that one), this thread's tasks read a thousand per turn of the event loop
 * (snapshot-slices.ts), each snapshot serialised once for every client — a thousand tasks per
 * turn, gzipped once in libuv's thread pool for the clients that take gzip — and sent a piece at
 * a time. A connection that asks again for the snapshot it already has waits for the
 * next: a client polling as fast as it can costs the app one answer per interval, not thousands.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { _snapshotInSlices, _treeInTurns, type ProcessSnapshot } from '../ps.js';

/** Tasks serialised per turn of the event loop: a millisecond or two of JSON.stringify, so that a big snapshot never holds the app's loop for long. */
const TASKS_PER_TURN = 1000;

/** Bytes of an answer handed to the socket at a time: a 5 MB snapshot is not copied into the kernel in one go. */
const PIECE = 64 * 1024;

const gzipped = promisify(gzip);

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One snapshot as the monitor serves it: its JSON, made once; gzipped, and its pstree text, when first asked. */
export interface Served {
  readonly snap: ProcessSnapshot;
  readonly json: Buffer;
  gzip: Promise<Buffer> | null;
  tree: Promise<Buffer> | null;
}

/** The snapshot as JSON (the same text as JSON.stringify), its tasks a few thousand per turn of the event loop. */
export async function serialise(snap: ProcessSnapshot): Promise<Buffer> {
  const { tasks, ...rest } = snap;
  const head = JSON.stringify(rest);
  const parts = [Buffer.from(`${head.slice(0, -1)}${head === '{}' ? '' : ','}"tasks":[`)];
  for (let at = 0; at < tasks.length; at += TASKS_PER_TURN) {
    // The first turn too: the snapshot itself has just held the loop for as long as it took.
    await nextTurn();
    const text = JSON.stringify(tasks.slice(at, at + TASKS_PER_TURN));
    parts.push(Buffer.from(`${at > 0 ? ',' : ''}${text.slice(1, -1)}`));
  }
  parts.push(Buffer.from(']}'));
  return Buffer.concat(parts);
}

/** Whether the client takes gzip (every browser does): a snapshot's JSON shrinks ten times or more, and so does what the app's thread writes. */
export function takesGzip(request: IncomingMessage): boolean {
  const accepted = request.headers['accept-encoding'];
  if (accepted === undefined) return false;
  return accepted.split(',').some((coding) => {
    const [name = '', ...params] = coding.split(';').map((part) => part.trim().toLowerCase());
    return (name === 'gzip' || name === '*') && !params.some((param) => /^q\s*=\s*0(?:\.0*)?$/.test(param));
  });
}

/** Answer `response` with `body`, a piece at a time, the next once the socket has taken the last: no one write holds the thread for long. */
export function send(response: ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  if (response.destroyed) return;
  response.writeHead(status, { ...headers, 'Content-Length': String(body.length) });
  let at = 0;
  const more = (): void => {
    while (at < body.length) {
      const piece = body.subarray(at, at + PIECE);
      at += piece.length;
      if (!response.write(piece)) {
        response.once('drain', more);
        return;
      }
    }
    response.end();
  };
  more();
}

/** The two things served from a snapshot, each sent once per connection per snapshot. */
export type Form = 'json' | 'tree';

/** The snapshots one monitor serves (see the module's comment for what they cost). */
export class Snapshots {
  /** Snapshots taken so far. */
  taken = 0;
  readonly #minInterval: number;
  readonly #timeout: number;
  #last: Served | null = null;
  /** When the last snapshot was ready (performance.now(), ms). */
  #lastAt = 0;
  #inFlight: Promise<Served> | null = null;
  /** The wait, shared, until the next snapshot may be taken; its timer. */
  #due: Promise<void> | null = null;
  #dueTimer: NodeJS.Timeout | null = null;
  #wakeDue: (() => void) | null = null;
  #closed = false;
  /** What each connection was last sent, per form. */
  readonly #sent: Record<Form, WeakMap<Socket, Served>> = { json: new WeakMap(), tree: new WeakMap() };

  /** `minInterval` and `timeout` in seconds. */
  constructor(minInterval: number, timeout: number) {
    this.#minInterval = minInterval * 1000;
    this.#timeout = timeout;
  }

  /** The snapshot to serve now: the one being taken, the last one if it is younger than minInterval, or a new one. */
  current(): Promise<Served> {
    if (this.#inFlight !== null) return this.#inFlight;
    if (this.#last !== null && performance.now() - this.#lastAt < this.#minInterval) return Promise.resolve(this.#last);
    if (this.#closed) return Promise.reject(new Error('the monitor is closed'));
    this.taken++;
    this.#inFlight = this.#take().finally(() => {
      this.#inFlight = null;
    });
    return this.#inFlight;
  }

  /** The snapshot to send in `form` on `socket`: the current one, or when this connection has it already, the next one once it is due. */
  async forConnection(socket: Socket, form: Form): Promise<Served> {
    let served = await this.current();
    if (this.#sent[form].get(socket) === served) {
      await this.#nextDue();
      served = await this.current();
    }
    this.#sent[form].set(socket, served);
    return served;
  }

  /** The pstree text of `served`, made when first asked, a couple of thousand lines per turn of the event loop. */
  tree(served: Served): Promise<Buffer> {
    served.tree ??= (async (): Promise<Buffer> => {
      const drawing = _treeInTurns(served.snap);
      for (;;) {
        const step = drawing.next();
        if (step.done === true) return Buffer.from(`${step.value}\n`);
        await nextTurn();
      }
    })();
    return served.tree;
  }

  /** `served`'s JSON gzipped, once, in libuv's thread pool. */
  gzip(served: Served): Promise<Buffer> {
    served.gzip ??= gzipped(served.json, { level: 1 });
    return served.gzip;
  }

  /** Take no more snapshots; connections waiting for the next are let go (the server closes them). */
  close(): void {
    this.#closed = true;
    if (this.#dueTimer !== null) clearTimeout(this.#dueTimer);
    this.#wakeDue?.();
  }

  async #take(): Promise<Served> {
    const snap = await _snapshotInSlices(this.#timeout);
    const served: Served = { snap, json: await serialise(snap), gzip: null, tree: null };
    this.#last = served;
    this.#lastAt = performance.now();
    return served;
  }

  /** Resolves when minInterval has passed since the last snapshot (at once after close). */
  #nextDue(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#due ??= new Promise<void>((resolve) => {
      this.#wakeDue = resolve;
      // Unref'd: a client waiting here does not keep the process alive, as the server does not.
      // A millisecond more: Node's timers count whole milliseconds, and may fire a fraction early.
      this.#dueTimer = setTimeout(resolve, Math.max(0, Math.ceil(this.#lastAt + this.#minInterval - performance.now())) + 1).unref();
    }).then(() => {
      this.#due = null;
      this.#dueTimer = null;
      this.#wakeDue = null;
    });
    return this.#due;
  }
}
