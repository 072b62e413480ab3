import { describe, expect, it } from 'vitest';
import { ContextVar, Handle, TimerHandle } from '../src/index.js';
import { useFreshLoop } from './helpers/loops.js';
import { VirtualLoop, runOnce } from './helpers/virtual-loop.js';

let loop: VirtualLoop;
useFreshLoop(() => (loop = new VirtualLoop()));

describe('Handle', () => {
  it('is what callSoon returns: a Handle, not a TimerHandle, bound to its loop', () => {
    const handle = loop.callSoon(() => undefined);
    expect(handle).toBeInstanceOf(Handle);
    expect(handle).not.toBeInstanceOf(TimerHandle);
    expect(handle.getLoop()).toBe(loop);
    expect(handle.cancelled()).toBe(false);
  });

  it('passes 0, 1, 2, 3 and 5 positional arguments through unchanged', async () => {
    const calls: unknown[][] = [];
    function record(...args: unknown[]): void {
      calls.push(args);
    }
    const shared = { id: 1 };
    loop.callSoon(record);
    loop.callSoon(record, 'a');
    loop.callSoon(record, 'a', shared);
    loop.callSoon(record, 1, 2, 3);
    loop.callSoon(record, 1, undefined, null, 'x', shared);
    await runOnce(loop);
    expect(calls).toEqual([[], ['a'], ['a', shared], [1, 2, 3], [1, undefined, null, 'x', shared]]);
    expect(calls[2]?.[1]).toBe(shared);
    expect(calls[4]).toHaveLength(5);
  });

  it('never runs once cancelled, and cancel() is idempotent', async () => {
    const log: string[] = [];
    const handle = loop.callSoon((x: string) => log.push(x), 'cancelled');
    loop.callSoon((x: string) => log.push(x), 'kept');
    handle.cancel();
    handle.cancel();
    expect(handle.cancelled()).toBe(true);
    await runOnce(loop);
    await runOnce(loop);
    expect(log).toEqual(['kept']);
  });

  it('drops its callback and arguments when cancelled', () => {
    const handle = loop.callSoon((a: object, b: object, c: object) => [a, b, c], {}, {}, {});
    expect(handle._callback).not.toBeNull();
    expect(handle._a0).toHaveLength(3);
    handle.cancel();
    expect(handle._callback).toBeNull();
    expect(handle._a0).toBeUndefined();
    expect(handle._a1).toBeUndefined();
  });

  it('is skipped when an earlier callback of the same iteration cancels it', async () => {
    const log: string[] = [];
    let second: Handle | null = null;
    loop.callSoon(() => {
      log.push('first');
      second?.cancel();
    });
    second = loop.callSoon(() => log.push('second'));
    loop.callSoon(() => log.push('third'));
    await runOnce(loop);
    expect(log).toEqual(['first', 'third']);
    expect(second.cancelled()).toBe(true);
  });

  it('runs its callback in a copy of the context that was current when it was scheduled', async () => {
    const cvar = new ContextVar<string>('cvar', { default: 'default' });
    const seen: string[] = [];
    const token = cvar.set('at-schedule');
    loop.callSoon(() => {
      seen.push(cvar.get());
      cvar.set('inside-first');
    });
    loop.callSoon(() => seen.push(cvar.get()));
    cvar.set('after-schedule');
    await runOnce(loop);
    // The second callback does not see what the first one set: each runs in its own copy.
    expect(seen).toEqual(['at-schedule', 'at-schedule']);
    expect(cvar.get()).toBe('after-schedule');
    cvar.reset(token);
    expect(cvar.get()).toBe('default');
  });

  it("describes its callback and arguments in toString()", () => {
    function greet(_who: string, _times: number): void {}
    const handle = loop.callSoon(greet, 'world', 2);
    expect(String(handle)).toBe("<Handle greet('world', 2)>");
    handle.cancel();
    expect(String(handle)).toBe('<Handle cancelled>');
  });
});

describe('TimerHandle', () => {
  it('is what callLater and callAt return, with when() in loop seconds', () => {
    loop.advance(10);
    const later = loop.callLater(2.5, () => undefined);
    const at = loop.callAt(123, () => undefined);
    expect(later).toBeInstanceOf(TimerHandle);
    expect(later).toBeInstanceOf(Handle);
    expect(later.when()).toBe(12.5);
    expect(at.when()).toBe(123);
    expect(at.getLoop()).toBe(loop);
  });

  it('passes arguments to timer callbacks', async () => {
    const calls: unknown[][] = [];
    function record(...args: unknown[]): void {
      calls.push(args);
    }
    loop.callLater(0, record);
    loop.callLater(0, record, 'one');
    loop.callAt(0, record, 'one', 'two');
    loop.callAt(0, record, 1, 2, 3, 4);
    await runOnce(loop);
    expect(calls).toEqual([[], ['one'], ['one', 'two'], [1, 2, 3, 4]]);
  });

  it('never runs once cancelled, and cancel() is idempotent', async () => {
    const log: string[] = [];
    const cancelled = loop.callLater(1, () => log.push('cancelled'));
    loop.callLater(2, () => {
      log.push('kept');
      loop.stop();
    });
    cancelled.cancel();
    cancelled.cancel();
    expect(cancelled.cancelled()).toBe(true);
    await loop.runForever();
    expect(log).toEqual(['kept']);
    expect(loop.time()).toBe(2);
  });

  it('is skipped when cancelled after it became due but before it ran', async () => {
    const log: string[] = [];
    let victim: TimerHandle | null = null;
    loop.callAt(5, () => {
      log.push('first');
      victim?.cancel();
    });
    victim = loop.callAt(5, () => log.push('victim'));
    loop.callAt(6, () => {
      log.push('last');
      loop.stop();
    });
    await loop.runForever();
    expect(log).toEqual(['first', 'last']);
    expect(victim.cancelled()).toBe(true);
  });

  it('records whether it sits in the timer heap', async () => {
    const timer = loop.callLater(1, () => undefined);
    expect(timer._scheduled).toBe(true);
    loop.callLater(1, () => loop.stop());
    await loop.runForever();
    expect(timer._scheduled).toBe(false);
  });

  it('shows its deadline in toString(), also once cancelled', () => {
    function tick(): void {}
    const timer = loop.callAt(123, tick);
    expect(String(timer)).toBe('<TimerHandle when=123 tick()>');
    timer.cancel();
    expect(String(timer)).toBe('<TimerHandle cancelled when=123>');
  });
});
