/**
 * What this thread knows about itself for seeing inside (call graphs, ps, the monitor): its
 * name, its loops, process-unique ids of tasks and loops, a heartbeat other threads read, and
 * its event-loop delay. Loops write only counters here while they run; everything else is read
 * when someone asks.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

/** What monitorEventLoopDelay returns (named IntervalHistogram up to @types/node 24, RecordableHistogram-like after). */
type IntervalHistogram = ReturnType<typeof monitorEventLoopDelay>;
import { isMainThread, threadId } from 'node:worker_threads';

/** Ids are `threadId * SPAN + n`: unique in the process, and the thread reads off the high part. */
const SPAN = 2 ** 32;

let threadName = isMainThread ? 'MainThread' : `Thread-${threadId}`;

/** This thread's name (a LoopThread's `name`; `MainThread` in the main thread). */
export function currentThreadName(): string {
  return threadName;
}

/** Name this thread. */
export function setCurrentThreadName(name: string): void {
  threadName = name;
}

let lastTaskId = 0;
let lastLoopId = 0;
const ids = new WeakMap<object, number>();

/** The process-unique id of a task (or any future), given on first use and kept for its life. */
export function idOf(future: object): number {
  let id = ids.get(future);
  if (id === undefined) {
    id = threadId * SPAN + ++lastTaskId;
    ids.set(future, id);
  }
  return id;
}

/** A new process-unique id (of a loop, of a link). */
export function newId(): number {
  return threadId * SPAN + ++lastLoopId;
}

/** The thread an id of `idOf` or `newId` was given in. */
export function threadOfId(id: number): number {
  return Math.floor(id / SPAN);
}

/**
 * The heartbeat other threads read without this thread's help: slot 0 holds when (epoch ms)
 * the loop iterations running now began, 0 while this thread's loops wait for events (kept
 * while loop health is on). A thread that does not answer a snapshot has been blocked since
 * then. Slot BUSY_SINCE holds the same moment on the process's monotonic clock (`monotonicNow`),
 * always kept: pools send no new calls to a thread whose loop has not taken in messages for a while.
 */
export const heartbeat = new Float64Array(new SharedArrayBuffer(2 * Float64Array.BYTES_PER_ELEMENT));

/** The heartbeat's slot that says since when (`monotonicNow()` ms) this thread's loop runs without taking in messages; 0: it waits for them. */
export const BUSY_SINCE = 1;

/**
 * Where this thread's `performance.now()` starts on the process's monotonic clock (ms):
 * `performance.now()` counts from the thread's start, the monotonic clock is the same in every
 * thread (and, unlike the epoch, never jumps).
 */
export const MONOTONIC_ORIGIN = monotonicOrigin();

/** Read the monotonic clock between two reads of `performance.now()`, the closest of a few tries (a first read of either clock can be slow). */
function monotonicOrigin(): number {
  let origin = 0;
  let spread = Infinity;
  for (let i = 0; i < 5; i++) {
    const before = performance.now();
    const [seconds, nanoseconds] = process.hrtime();
    const after = performance.now();
    if (after - before < spread) {
      spread = after - before;
      origin = seconds * 1000 + nanoseconds / 1e6 - (before + after) / 2;
    }
  }
  return origin;
}

/** Now on the process's monotonic clock, in ms: comparable with other threads' BUSY_SINCE. */
export function monotonicNow(): number {
  return MONOTONIC_ORIGIN + performance.now();
}

/** The heartbeats of the threads this one knows (the thread that started it, those it started), by thread id. */
const neighbours = new Map<number, { readonly name: string; readonly beat: Float64Array }>();

/** Remember thread `id`'s name and heartbeat (a LoopThread started here, or the thread that started this one). */
export function rememberThread(id: number, name: string, beat: Float64Array): void {
  neighbours.set(id, { name, beat });
}

/** Forget thread `id` (it ended). */
export function forgetThread(id: number): void {
  neighbours.delete(id);
}

/** A thread known here, as a snapshot names it: `since` is its heartbeat (epoch ms its busy stretch began; 0: idle or unknown). */
export interface KnownThread {
  readonly threadId: number;
  readonly threadName: string;
  readonly since: number;
}

/** The threads this one knows, with what their heartbeats say now. */
export function knownThreads(): KnownThread[] {
  const known: KnownThread[] = [];
  for (const [id, { name, beat }] of neighbours) known.push({ threadId: id, threadName: name, since: beat[0] as number });
  return known;
}

/** `performance.timeOrigin`, read once (a getter): heartbeats add it to `performance.now()` to make epoch ms. */
export const TIME_ORIGIN = performance.timeOrigin;

/** Whether loops keep their health figures (lag histogram, heartbeat); counters are always kept. */
let healthOn = process.env.MULTILOOP_HEALTH !== '0';

/** Whether loop health is being kept in this thread. */
export function healthEnabled(): boolean {
  return healthOn;
}

/**
 * Turn loop health on or off in this thread (the bench compares both); off, loops write no
 * heartbeat and the event-loop delay histogram stops.
 */
export function setHealthEnabled(enabled: boolean): void {
  healthOn = enabled;
  if (!enabled && delay !== null) {
    delay.disable();
    delay = null;
  } else if (enabled) startDelayMonitor();
}

/** Loops of this thread, held weakly; registered as they are made. */
const loops = new Set<WeakRef<object>>();

/** Remember `loop` as one of this thread's loops. */
export function registerLoop(loop: object): void {
  loops.add(new WeakRef(loop));
  if (healthOn) startDelayMonitor();
}

/** This thread's loops still alive, oldest first. */
export function threadLoops<L extends object>(): L[] {
  const alive: L[] = [];
  for (const ref of loops) {
    const loop = ref.deref();
    if (loop === undefined) loops.delete(ref);
    else alive.push(loop as L);
  }
  return alive;
}

/** The delay histogram samples every this many ms; each sample is the interval, so lag is what exceeds it. */
const RESOLUTION_MS = 20;
/** How long a health window lasts before its figures start again, in ms. */
const WINDOW_MS = 10_000;
let delay: IntervalHistogram | null = null;
let windowStarted = 0;
let eluAtWindowStart = performance.eventLoopUtilization();
/** The figures of the last full window, reported while the new one is still short. */
let lastWindow: ThreadHealth | null = null;

function startDelayMonitor(): void {
  if (delay !== null) return;
  // Native sampling every 20 ms on libuv's own timer: our loops run on libuv's turns, so a
  // callback that blocks them delays it as much.
  delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  windowStarted = performance.now();
  eluAtWindowStart = performance.eventLoopUtilization();
}

/** The health of this thread's event loop (libuv's, which multiloop's loops run on). */
export interface ThreadHealth {
  /** Event-loop delay over the window, in seconds: how late a timer of 20 ms fired. */
  lag: { p50: number; p99: number; max: number };
  /** The share of time the thread was busy running JavaScript over the window (eventLoopUtilization). */
  utilization: number;
  /** The window's length, in seconds. */
  window: number;
}

/** This thread's health over the current window (or the last full one while the current is short); null when health is off. */
export function threadHealth(): ThreadHealth | null {
  if (delay === null) return null;
  const now = performance.now();
  const elapsed = now - windowStarted;
  const current: ThreadHealth = {
    lag: {
      p50: lagOf(delay, delay.percentile(50)),
      p99: lagOf(delay, delay.percentile(99)),
      max: lagOf(delay, delay.max),
    },
    utilization: performance.eventLoopUtilization(eluAtWindowStart).utilization,
    window: elapsed / 1000,
  };
  if (elapsed >= WINDOW_MS) {
    lastWindow = current;
    delay.reset();
    windowStarted = now;
    eluAtWindowStart = performance.eventLoopUtilization();
    return current;
  }
  return lastWindow !== null && elapsed < WINDOW_MS / 4 ? lastWindow : current;
}

/** A sample of the histogram (nanoseconds between two ticks) as lag in seconds. */
function lagOf(histogram: IntervalHistogram, nanoseconds: number): number {
  if (histogram.count === 0) return 0;
  return Math.max(0, nanoseconds / 1e6 - RESOLUTION_MS) / 1000;
}

/** A slow callback seen in debug mode: what it was, how long it took, when. */
export interface SlowCallback {
  /** The callback, described as the debug-mode report names it. */
  readonly callback: string;
  /** How long it ran, in seconds. */
  readonly seconds: number;
  /** When it ended (epoch ms). */
  readonly at: number;
}

/**
 * What a pending future stands for, kept in its result slot (unused until it is done) for
 * snapshots: a Promise it follows, a comlink call. A leaf note names something of its own in a
 * task tree (a comlink call); other notes only describe what a task awaits.
 */
export class WaitNote {
  constructor(
    readonly text: string,
    readonly leaf: boolean,
  ) {}
}

/** The note of a Future that follows a Promise (ensureFuture of a thenable). */
export const PROMISE_NOTE = new WaitNote('a Promise', false);
