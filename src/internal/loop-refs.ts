/**
 * Loops passed between threads. A LoopThread, a LoopThreadPool or `parentLoop()` given to another
 * thread (an argument or a result) crosses as a record holding one side of a new link; the other
 * side goes to the thread that runs the loop, which serves it as it serves its other links. So
 * the receiver reaches the same loop directly, never through the thread that introduced them, and
 * learns of that loop's death as any link does (the dying thread says so; a terminated one's
 * ports close). A LoopRef received is passed on the same way, its new link's other side going to
 * the loop's thread through the link it has.
 */
import { MessageChannel } from 'node:worker_threads';
import type { ConcurrentFuture } from '../concurrent.js';
import type { EventLoop } from '../base-events.js';
import { getEventLoop, newEventLoop } from '../events.js';
import { RuntimeError } from '../exceptions.js';
import type { Future } from '../futures.js';
import type { LoopRef, RemoteProxy } from '../loop-thread.js';
import { move } from '../transfer.js';
import { newId } from './introspect.js';
import { Link, type CallTarget, type LinkOptions } from './link.js';
import { READ_SLOTS, isLinkPorts, type LinkPorts } from './messages.js';
import { deathDescriber, isFate, silentDeath } from './thread-deaths.js';
import { CROSSES, WIRE, _setLoopDecoder } from './wire.js';

/**
 * Two channels make a link: each side listens on one and posts on the other, and says how far it read.
 *
 * @example
 * ```ts
 * const [here, there] = makeLinkPorts();
 * ```
 */
export function makeLinkPorts(): [LinkPorts, LinkPorts] {
  const toHere = new MessageChannel();
  const toThere = new MessageChannel();
  const readHere = new Int32Array(new SharedArrayBuffer(READ_SLOTS * Int32Array.BYTES_PER_ELEMENT));
  const readThere = new Int32Array(new SharedArrayBuffer(READ_SLOTS * Int32Array.BYTES_PER_ELEMENT));
  const here = newId();
  const there = newId();
  return [
    { id: here, peerId: there, inPort: toHere.port1, outPort: toThere.port2, inRead: readHere, outRead: readThere },
    { id: there, peerId: here, inPort: toThere.port1, outPort: toHere.port2, inRead: readThere, outRead: readHere },
  ];
}

/**
 * A proxy whose every property is a function calling the export of that name through `ref`.
 *
 * @example
 * ```ts
 * const typed = proxyOf<typeof import('./svc.js')>(ref);
 * ```
 */
export function proxyOf<M>(ref: LoopRef): RemoteProxy<M> {
  return new Proxy(Object.create(null) as object, {
    get(_target, property) {
      // Not a thenable: `await proxy` must not look for `then`.
      if (typeof property !== 'string' || property === 'then') return undefined;
      return (...args: unknown[]) => ref.call(property, ...args);
    },
  }) as RemoteProxy<M>;
}

/**
 * The record a loop crosses as: the receiver's side of a new link to it (its ports marked to be
 * moved with the value), named as the receiver will name it in messages. `attach` gives the
 * loop's thread the other side.
 */
export function loopRecord(peer: string, attach: (ports: LinkPorts) => void, thread: ThreadOfLoop | null = null): Record<string, unknown> {
  const [receiver, served] = makeLinkPorts();
  attach(served);
  move(receiver.inPort);
  move(receiver.outPort);
  return thread === null ? { [WIRE]: 'loop', peer, ports: receiver } : { [WIRE]: 'loop', peer, ports: receiver, thread };
}

/** The LoopThread whose loop a LoopRef reaches, to word its death as its own calls do (thread-deaths.ts). */
export interface ThreadOfLoop {
  readonly name: string;
  readonly threadId: number;
  readonly fate: Int32Array;
}

/** Calls from the receiver only: the loop at the far end calls nothing back through this link. */
const NOTHING: CallTarget = {
  lookup(name: string): never {
    throw new TypeError(`${JSON.stringify(name)} cannot be called: a loop reached through a LoopRef calls nothing back`);
  },
};

/** A loop of another thread that arrived here: calls go to it over a link of its own, made for the loop that uses it first. */
class RemoteLoop implements LoopRef {
  readonly #peer: string;
  readonly #ports: LinkPorts;
  readonly #thread: ThreadOfLoop | null;
  #link: Link | null = null;

  constructor(peer: string, ports: LinkPorts, thread: ThreadOfLoop | null) {
    this.#peer = peer;
    this.#ports = ports;
    this.#thread = thread;
  }

  call<T = unknown>(name: string, ...args: unknown[]): Future<T> {
    return this.#linkHere().call<T>(name, args);
  }

  callSoonThreadsafe(name: string, ...args: unknown[]): void {
    this.#linkHere().notify(name, args);
  }

  /** As LoopThread's; also from code outside any loop (a pool job): `result(timeout)` then takes the reply itself. */
  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T> {
    return this.#linkHere(true).submit<T>(name, args);
  }

  proxy<M>(): RemoteProxy<M> {
    return proxyOf<M>(this);
  }

  /** Calls in flight through it, for a pool of them. */
  _inFlight(): number {
    return this.#link === null ? 0 : this.#link._inFlight();
  }

  /** Whether the loop is known to be gone. */
  _isDead(): boolean {
    return this.#link !== null && this.#link.isDead();
  }

  toString(): string {
    return `<LoopRef ${this.#peer}>`;
  }

  /**
   * Cross to another thread as a LoopRef to the same loop over a link of its own: its far side
   * goes to the loop's thread through this ref's link, which the loop serves as it serves this one.
   */
  [CROSSES](what: string): Record<string, unknown> {
    const link = this.#link ?? this.#linkHere(true);
    const death = link._deathError();
    if (death !== null) throw new TypeError(`${what} holds ${this}, whose loop is gone: ${death.message}`, { cause: death });
    return loopRecord(this.#peer, (ports) => link._introduce(ports), this.#thread);
  }

  #linkHere(outsideLoops = false): Link {
    let loop: EventLoop | null = null;
    try {
      loop = getEventLoop();
    } catch (error) {
      if (!outsideLoops) throw error;
    }
    const link = this.#link;
    if (link === null) {
      // Outside any loop (a pool job, a plain worker): one that never runs; a blocking result reads the port itself.
      const thread = this.#thread;
      // A LoopThread's death is worded as its own calls word it.
      const options: LinkOptions =
        thread === null
          ? {}
          : { describeDeath: deathDescriber(thread.name, thread.threadId), describeGone: () => silentDeath(thread.name, thread.threadId, thread.fate) };
      const made = new Link(loop ?? newEventLoop(), this.#ports, NOTHING, this.#peer, options);
      this.#link = made;
      return made;
    }
    if (loop === null) return link;
    if (link.loop !== loop) throw new RuntimeError(`this LoopRef of ${this.#peer} serves the loop that used it first, not this one (pass it again for another loop)`);
    return link;
  }
}

/** A pool of loops that arrived here: each call goes to the loop with the fewest calls in flight through this ref. */
class RemotePool implements LoopRef {
  readonly #name: string;
  readonly #loops: RemoteLoop[];
  #next = 0;

  constructor(name: string, loops: RemoteLoop[]) {
    this.#name = name;
    this.#loops = loops;
  }

  call<T = unknown>(name: string, ...args: unknown[]): Future<T> {
    return this.#pick().call<T>(name, ...args);
  }

  callSoonThreadsafe(name: string, ...args: unknown[]): void {
    this.#pick().callSoonThreadsafe(name, ...args);
  }

  submit<T = unknown>(name: string, ...args: unknown[]): ConcurrentFuture<T> {
    return this.#pick().submit<T>(name, ...args);
  }

  proxy<M>(): RemoteProxy<M> {
    return proxyOf<M>(this);
  }

  toString(): string {
    return `<LoopRef of LoopThreadPool '${this.#name}', ${this.#loops.length} threads>`;
  }

  /** Cross to another thread as a LoopRef of the same pool: the loops of it alive now, each passed on. */
  [CROSSES](what: string): Record<string, unknown> {
    const loops = this.#loops.filter((loop) => !loop._isDead()).map((loop) => loop[CROSSES](what));
    if (loops.length === 0) throw new TypeError(`${what} holds ${this}, none of whose threads is alive`);
    return { [WIRE]: 'pool', name: this.#name, loops };
  }

  #pick(): RemoteLoop {
    const loops = this.#loops;
    let best: RemoteLoop | null = null;
    let bestLoad = Infinity;
    for (let k = 0, i = this.#next; k < loops.length; k++, i = (i + 1) % loops.length) {
      const loop = loops[i] as RemoteLoop;
      if (loop._isDead()) continue;
      const load = loop._inFlight();
      if (load < bestLoad) {
        best = loop;
        bestLoad = load;
        // The one used last goes first next time: among idle threads, the one whose loop is still awake.
        this.#next = i;
        if (load === 0) break;
      }
    }
    if (best === null) throw new RuntimeError(`every thread of LoopThreadPool '${this.#name}' this LoopRef reached is gone`);
    return best;
  }
}

function isThread(value: unknown): value is ThreadOfLoop {
  const thread = value as Partial<ThreadOfLoop> | null;
  return typeof thread === 'object' && thread !== null && typeof thread.name === 'string' && Number.isSafeInteger(thread.threadId) && isFate(thread.fate);
}

function decodeLoop(record: Record<string, unknown>): RemoteLoop {
  const { peer, ports, thread } = record;
  if (typeof peer !== 'string' || !isLinkPorts(ports)) throw new TypeError('a LoopRef arrived without its link');
  if (thread !== undefined && !isThread(thread)) throw new TypeError(`a LoopRef of ${peer} arrived with a malformed thread record`);
  return new RemoteLoop(peer, ports, thread ?? null);
}

_setLoopDecoder((record) => {
  if (record[WIRE] === 'loop') return decodeLoop(record);
  const { name, loops } = record;
  if (typeof name !== 'string' || !Array.isArray(loops) || loops.length === 0) throw new TypeError('a LoopRef of a pool arrived without its loops');
  return new RemotePool(
    name,
    loops.map((loop) => decodeLoop(loop as Record<string, unknown>)),
  );
});
