import { AsyncLocalStorage } from 'node:async_hooks';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Context, ContextVar, TaskGroup, createTask, ensureFuture, gather, run, sleep, type Coroutine, type Task } from '../src/index.js';

interface Request {
  rid: string;
}

/** What a task saw of the store at each point: `<where>:<rid or ->`. */
function seen(als: AsyncLocalStorage<Request>): string {
  return als.getStore()?.rid ?? '-';
}

/** A handler that reads the store at its first step, after a sleep, after a bare yield and after another sleep. */
function* handler(als: AsyncLocalStorage<Request>, log: string[], name: string): Coroutine<string> {
  log.push(`${name} first ${seen(als)}`);
  yield* sleep(0);
  log.push(`${name} sleep ${seen(als)}`);
  yield;
  log.push(`${name} yield ${seen(als)}`);
  yield* sleep(0.001);
  log.push(`${name} end ${seen(als)}`);
  return seen(als);
}

/** The log entries of one task, in order. */
function of(log: string[], name: string): string[] {
  return log.filter((entry) => entry.startsWith(`${name} `));
}

describe('AsyncLocalStorage in tasks', () => {
  it('keeps the store in force where each of three concurrent tasks was created, in every step', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    const results = await run(
      (function* main(): Coroutine<string[]> {
        const tasks = ['A', 'B', 'C'].map((rid) => als.run({ rid }, () => createTask(handler(als, log, rid))));
        return yield* gather(...tasks);
      })(),
    );
    expect(results).toEqual(['A', 'B', 'C']);
    for (const rid of ['A', 'B', 'C']) {
      expect(of(log, rid)).toEqual([`${rid} first ${rid}`, `${rid} sleep ${rid}`, `${rid} yield ${rid}`, `${rid} end ${rid}`]);
    }
  });

  it('gives tasks made in a loop started inside als.run() the store of where they were made, not the starter\'s', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    const results = await als.run({ rid: 'starter' }, () =>
      run(
        (function* main(): Coroutine<string[]> {
          const own = createTask(handler(als, log, 'own'));
          const others = ['A', 'B'].map((rid) => als.run({ rid }, () => createTask(handler(als, log, rid))));
          const none = als.exit(() => createTask(handler(als, log, 'none')));
          return yield* gather(own, ...others, none);
        })(),
      ),
    );
    expect(results).toEqual(['starter', 'A', 'B', '-']);
    expect(of(log, 'none')).toEqual(['none first -', 'none sleep -', 'none yield -', 'none end -']);
  });

  it('carries the store into tasks of ensureFuture, gather and TaskGroup of coroutines', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    const results = await run(
      (function* main(): Coroutine<string[]> {
        const viaEnsure = als.run({ rid: 'E' }, () => ensureFuture(handler(als, log, 'E')));
        const viaGather = als.run({ rid: 'G' }, () => gather(handler(als, log, 'G1'), handler(als, log, 'G2')));
        const viaGroup = yield* new TaskGroup().run(function* (group): Coroutine<Task<string>> {
          yield* sleep(0);
          return als.run({ rid: 'T' }, () => group.createTask(handler(als, log, 'T')));
        });
        const [fromGather1, fromGather2] = yield* viaGather;
        return [yield* viaEnsure, fromGather1, fromGather2, viaGroup.result()];
      })(),
    );
    expect(results).toEqual(['E', 'G', 'G', 'T']);
    expect(of(log, 'G2')).toEqual(['G2 first G', 'G2 sleep G', 'G2 yield G', 'G2 end G']);
  });

  it('keeps enterWith() inside the task that called it, for its later steps', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    function* entering(): Coroutine<void> {
      log.push(`X before ${seen(als)}`);
      als.enterWith({ rid: 'X' });
      log.push(`X entered ${seen(als)}`);
      yield* sleep(0);
      log.push(`X sleep ${seen(als)}`);
      yield;
      log.push(`X yield ${seen(als)}`);
    }
    function* watching(name: string): Coroutine<void> {
      for (let i = 0; i < 3; i++) {
        log.push(`${name} ${i} ${seen(als)}`);
        yield;
      }
    }
    await run(
      (function* main(): Coroutine<void> {
        const x = als.run({ rid: 'A' }, () => createTask(entering()));
        const y = createTask(watching('Y'));
        const z = als.run({ rid: 'B' }, () => createTask(watching('Z')));
        yield* gather(x, y, z);
        log.push(`main ${seen(als)}`);
      })(),
    );
    expect(of(log, 'X')).toEqual(['X before A', 'X entered X', 'X sleep X', 'X yield X']);
    expect(of(log, 'Y')).toEqual(['Y 0 -', 'Y 1 -', 'Y 2 -']);
    expect(of(log, 'Z')).toEqual(['Z 0 B', 'Z 1 B', 'Z 2 B']);
    expect(of(log, 'main')).toEqual(['main -']);
  });

  it('keeps als.run() inside a step to that call, the task\'s own store before and after', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    function* nesting(): Coroutine<void> {
      als.run({ rid: 'inner' }, () => log.push(`N inner ${seen(als)}`));
      log.push(`N after ${seen(als)}`);
      yield;
      log.push(`N next ${seen(als)}`);
    }
    await run(
      (function* main(): Coroutine<void> {
        yield* als.run({ rid: 'N' }, () => createTask(nesting()));
      })(),
    );
    expect(log).toEqual(['N inner inner', 'N after N', 'N next N']);
  });

  it('lets async code a task awaits see the task\'s store before and after its own awaits', async () => {
    const als = new AsyncLocalStorage<Request>();
    const log: string[] = [];
    async function fetchLike(name: string): Promise<string> {
      log.push(`${name} async start ${seen(als)}`);
      await new Promise((resolve) => setTimeout(resolve, 1));
      log.push(`${name} async after timer ${seen(als)}`);
      await Promise.resolve();
      return seen(als);
    }
    function* awaiting(name: string): Coroutine<string> {
      yield* sleep(0);
      const got = yield* ensureFuture(fetchLike(name));
      log.push(`${name} back ${seen(als)}`);
      return got;
    }
    const results = await run(
      (function* main(): Coroutine<string[]> {
        return yield* gather(...['A', 'B', 'C'].map((rid) => als.run({ rid }, () => createTask(awaiting(rid)))));
      })(),
    );
    expect(results).toEqual(['A', 'B', 'C']);
    for (const rid of ['A', 'B', 'C']) {
      expect(of(log, rid)).toEqual([`${rid} async start ${rid}`, `${rid} async after timer ${rid}`, `${rid} back ${rid}`]);
    }
  });
});

/** Run `fixture` (in test/fixtures) with this Node in a process of its own and parse what it prints. */
async function runFixture(fixture: string): Promise<unknown> {
  const path = fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url));
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [path], { encoding: 'utf8', timeout: 60_000 }, (error, out, stderr) => {
      if (error !== null) reject(new Error(`${error.message}\n${stderr}`));
      else resolve(out);
    });
  });
  return JSON.parse(stdout);
}

describe('ContextVars in async code a task awaits', () => {
  it("lets it read the task's values before and after its own awaits, three concurrent tasks apart", async () => {
    const requestId = new ContextVar<string>('requestId', { default: '-' });
    const log: string[] = [];
    async function fetchLike(name: string): Promise<string> {
      log.push(`${name} async start ${requestId.get()}`);
      await new Promise((resolve) => setTimeout(resolve, 1));
      log.push(`${name} async after timer ${requestId.get()}`);
      await Promise.resolve();
      return requestId.get();
    }
    function* handle(rid: string): Coroutine<string> {
      requestId.set(rid);
      yield* sleep(0);
      const got = yield* ensureFuture(fetchLike(rid));
      log.push(`${rid} back ${requestId.get()}`);
      return got;
    }
    const results = await new Context().run(() =>
      run(
        (function* main(): Coroutine<string[]> {
          return yield* gather(...['A', 'B', 'C'].map((rid) => createTask(handle(rid))));
        })(),
      ),
    );
    expect(results).toEqual(['A', 'B', 'C']);
    for (const rid of ['A', 'B', 'C']) {
      expect(of(log, rid)).toEqual([`${rid} async start ${rid}`, `${rid} async after timer ${rid}`, `${rid} back ${rid}`]);
    }
    expect(requestId.get()).toBe('-');
  });

  it("lets it change the task's values (as a coroutine the task awaits would), never the outside's", async () => {
    const level = new ContextVar<number>('level', { default: 0 });
    async function raise(): Promise<number> {
      await Promise.resolve();
      const token = level.set(level.get() + 1);
      await new Promise((resolve) => setTimeout(resolve, 1));
      const raised = level.get();
      level.reset(token);
      level.set(raised * 10);
      return raised;
    }
    const seen = await new Context().run(() =>
      run(
        (function* main(): Coroutine<number[]> {
          level.set(1);
          const raised = yield* ensureFuture(raise());
          return [raised, level.get()];
        })(),
      ),
    );
    expect(seen).toEqual([2, 20]);
    expect(level.get()).toBe(0);
  });

  it('works from the first ContextVar.set() of a process, made inside a step', async () => {
    const out = (await runFixture('contextvar-awaited.mjs')) as { results: string[]; log: string[]; outside: string };
    expect(out.results).toEqual(['main', 'A', 'B']);
    // Each task's own lines in order; how the two tasks' lines interleave is up to the timers.
    expect(of(out.log, 'main')).toEqual(['main start main', 'main after timer main']);
    expect(of(out.log, 'A')).toEqual(['A start A', 'A after timer A', 'A back A']);
    expect(of(out.log, 'B')).toEqual(['B start B', 'B after timer B', 'B back B']);
    expect(out.outside).toBe('-');
  });
});

describe('AsyncLocalStorage first used after multiloop was loaded', () => {
  it('keeps the first store of the process inside the task whose step set it; tasks made before see none', async () => {
    // Its own process: in this one some storage may be in use already (the fixture runs dist/).
    expect(await runFixture('als-first-use.mjs')).toEqual({
      log: ['x entered X', 'y same iteration undefined', 'x yield X', 'y yield undefined', 'x sleep X', 'y same iteration Z', 'y yield Z', 'main undefined'],
      // Watched until the first use, then Node's own methods again.
      wrappedBefore: true,
      wrappedAfter: false,
    });
  });
});
