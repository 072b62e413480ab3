/**
 * startMonitor(): the live page in a real headless Chromium (it loads, shows the threads and a
 * task by name, and updates after the app changes), and its JSON: loop health of every thread,
 * read-only answers, loopback by default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopThread, ensureFuture, getRunningLoop, run, sleep, startMonitor, type Coroutine, type Monitor } from '../src/index.js';
import { Browser } from './helpers/browser.js';
import { needProgram } from './helpers/system.js';

const CHAIN = new URL('./fixtures/ps-chain.mjs', import.meta.url);

interface Snap {
  threads: Array<{
    threadName: string;
    responsive: boolean;
    health: { lag: { p50: number; p99: number; max: number }; utilization: number; window: number } | null;
    loops: Array<{ state: string; iterations: number; tasks: number; slowCallbacks: Array<{ callback: string; seconds: number }> }>;
  }>;
  tasks: Array<{ name: string; threadName: string }>;
}

function* parked(): Coroutine<void> {
  yield* sleep(3600);
}

describe('startMonitor', () => {
  it('serves a JSON snapshot with every thread’s loop health, and only reads', async () => {
    const seen = await run(
      (function* main(): Coroutine<{ url: string; snap: Snap; statuses: number[] }> {
        const loop = getRunningLoop();
        loop.setDebug(true);
        loop.slowCallbackDuration = 0.01;
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'watched-thread' }));
        const monitor = yield* ensureFuture(startMonitor({ port: 0 }));
        loop.createTask(parked(), { name: 'parked-one' });
        // A slow callback, which debug mode reports with its thread.
        loop.callSoon(function slowOne() {
          const until = performance.now() + 20;
          while (performance.now() < until);
        });
        yield* sleep(0.05);
        const snap = (yield* ensureFuture(fetch(`${monitor.url}snapshot.json`).then((response) => response.json()))) as Snap;
        const statuses: number[] = [];
        for (const [path, method] of [['', 'GET'], ['pstree.txt', 'GET'], ['snapshot.json', 'POST'], ['nothing-here', 'GET']] as const) {
          statuses.push(yield* ensureFuture(fetch(`${monitor.url}${path}`, { method }).then((response) => response.status)));
        }
        yield* ensureFuture(monitor.close());
        yield* ensureFuture(lt.close());
        return { url: monitor.url, snap, statuses };
      })(),
    );
    expect(seen.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(seen.statuses).toEqual([200, 200, 405, 404]);
    const names = seen.snap.threads.map((thread) => thread.threadName);
    expect(names).toEqual(['MainThread', 'watched-thread']);
    for (const thread of seen.snap.threads) {
      expect(thread.responsive).toBe(true);
      expect(thread.health).not.toBeNull();
      const health = thread.health!;
      expect(health.lag.p50).toBeGreaterThanOrEqual(0);
      expect(health.lag.max).toBeGreaterThanOrEqual(health.lag.p99);
      expect(health.utilization).toBeGreaterThanOrEqual(0);
      expect(health.utilization).toBeLessThanOrEqual(1);
      expect(thread.loops.some((loop) => loop.iterations > 0)).toBe(true);
    }
    const main = seen.snap.threads[0]!;
    const slow = main.loops.flatMap((loop) => loop.slowCallbacks);
    expect(slow.map((entry) => entry.callback)).toContain('slowOne()');
    expect(seen.snap.tasks.map((task) => task.name)).toContain('parked-one');
  });

  it('refuses bad options with errors that name them', async () => {
    await expect(startMonitor({ port: -1 })).rejects.toThrow(new RangeError('startMonitor() port must be an integer from 0 to 65535, got -1'));
    await expect(startMonitor({ port: 0, host: '' })).rejects.toThrow(new TypeError("startMonitor() host must be a non-empty string, got ''"));
    await expect(startMonitor(null as never)).rejects.toThrow(TypeError);
  });
});

const hasChromium = needProgram('chromium', 'apt-get install chromium', 'the monitor page tests in a headless browser');

describe.runIf(hasChromium)('the monitor page in headless Chromium', () => {
  let browser: Browser;
  beforeAll(() => {
    browser = Browser.launch();
  });
  afterAll(async () => {
    await browser.close();
  });

  it('loads, shows the threads and a task by name, and updates after the app changes', async () => {
    const seen = await run(
      (function* main(): Coroutine<Record<string, boolean>> {
        const loop = getRunningLoop();
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'page-thread' }));
        const relaying = loop.createTask(
          (function* relaying(): Coroutine<unknown> {
            return yield* lt.call('relay', 'page-thread-2');
          })(),
          { name: 'watched-task' },
        );
        let monitor: Monitor | null = null;
        try {
          monitor = yield* ensureFuture(startMonitor({ port: 0 }));
          const page = yield* ensureFuture(browser.open(monitor.url));
          const shown: Record<string, boolean> = {};
          shown.title = yield* ensureFuture(page.waitFor(`document.title === 'multiloop monitor'`));
          shown.threads = yield* ensureFuture(
            page.waitFor(`['MainThread', 'page-thread', 'page-thread-2'].every((name) => document.querySelector('[data-thread="' + name + '"]'))`),
          );
          shown.task = yield* ensureFuture(page.waitFor(`!!document.querySelector('[data-task="watched-task"] [data-task]')`));
          shown.notYet = (yield* ensureFuture(page.evaluate(`!!document.querySelector('[data-task="arrived-later"]')`))) === true;
          // The app changes: a new task; the page shows it on its own.
          const later = loop.createTask(parked(), { name: 'arrived-later' });
          shown.later = yield* ensureFuture(page.waitFor(`!!document.querySelector('[data-task="arrived-later"]')`));
          later.cancel();
          relaying.cancel();
          shown.gone = yield* ensureFuture(page.waitFor(`!document.querySelector('[data-task="arrived-later"]')`));
          return shown;
        } finally {
          relaying.cancel();
          if (monitor !== null) yield* ensureFuture(monitor.close());
          yield* lt.call('closeNext');
          yield* ensureFuture(lt.close());
        }
      })(),
    );
    expect(seen).toEqual({ title: true, threads: true, task: true, notYet: false, later: true, gone: true });
  });
});
