/**
 * How a spinning loop takes the changes of a ThreadQueue's word (queue-waiters.ts WordWatch):
 * a lone change once the word has been still for half a microsecond, a stream in runs (32
 * changes, or 8 µs after the first was seen), and at once when the loop stops spinning. The
 * clock is a fake one, moved by hand; puts are counted into the word as a producer's would be.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newEventLoop } from '../src/index.js';
import { PUTS, QueueMemory } from '../src/internal/threads/queue-memory.js';
import { WordWatch, _setGatherClock } from '../src/internal/threads/queue-waiters.js';
import type { EventLoop } from '../src/base-events.js';

let now = 1;
let restore: () => number;
let loop: EventLoop;
let memory: QueueMemory;
let watch: WordWatch;

/** A producer's put, as the word sees it, at `at` ms of the fake clock. */
function putAt(at: number, count = 1): void {
  now = at;
  Atomics.add(memory.ctl, PUTS, count);
}

/** A poll of the spinning loop at `at` ms: whether it took the change. */
function pollAt(at: number): boolean {
  now = at;
  return watch._poll();
}

beforeEach(() => {
  now = 1;
  restore = _setGatherClock(() => now);
  loop = newEventLoop();
  memory = new QueueMemory(0);
  watch = new WordWatch(memory.ctl, PUTS, () => 1);
  // A getter of the (not running) loop waits on the word as it is now.
  watch.add(loop.createFuture<void>(), watch.observe(), false);
});

afterEach(() => {
  _setGatherClock(restore);
  loop.close();
});

describe('a spinning loop gathering the changes of a ThreadQueue', () => {
  it('takes nothing while the word is unchanged', () => {
    expect(pollAt(1)).toBe(false);
    expect(pollAt(2)).toBe(false);
  });

  it('takes a lone change once the word has been still for half a microsecond', () => {
    putAt(1);
    // Still since the poll that first saw it (a poll cannot know when the put was).
    expect(pollAt(1.0001)).toBe(false);
    expect(pollAt(1.0004)).toBe(false);
    expect(pollAt(1.0007)).toBe(true);
    // Taken: the next poll has nothing new.
    expect(pollAt(1.002)).toBe(false);
  });

  it('lets a stream stand while it keeps coming, and takes it once 32 changes wait', () => {
    putAt(1);
    expect(pollAt(1)).toBe(false);
    for (let i = 1; i < 31; i++) {
      putAt(1 + i * 0.0002);
      expect(pollAt(1 + i * 0.0002)).toBe(false);
    }
    putAt(1.0063);
    expect(pollAt(1.0063)).toBe(true);
  });

  it('takes a stream that never pauses 8 µs after its first change was seen', () => {
    putAt(1);
    expect(pollAt(1)).toBe(false);
    // One change every 0.3 µs, a poll after each: never still for 0.5 µs, never 32 waiting.
    const took: number[] = [];
    for (let i = 1; i <= 27; i++) {
      const at = 1 + i * 0.0003;
      putAt(at);
      if (pollAt(at)) took.push(i);
    }
    expect(took).toEqual([27]); // at 1.0081 ms, the first poll past 8 µs (28 changes wait)
  });

  it('measures the stillness from the last change, the count from the change last taken', () => {
    putAt(1, 20);
    expect(pollAt(1)).toBe(false);
    putAt(1.0004, 11);
    expect(pollAt(1.0004)).toBe(false); // 31 wait, the word moved just now
    expect(pollAt(1.0008)).toBe(false); // still for 0.4 µs only
    expect(pollAt(1.001)).toBe(true); // still for 0.6 µs
    putAt(1.002, 32);
    expect(pollAt(1.002)).toBe(false); // first seen: it stands
    expect(pollAt(1.0021)).toBe(true); // 32 wait
  });

  it('takes a standing change at once when the loop stops spinning', () => {
    putAt(1);
    expect(pollAt(1)).toBe(false);
    now = 1.0001;
    expect(watch._beforeYield()).toBe(true);
    expect(pollAt(1.01)).toBe(false);
  });
});
