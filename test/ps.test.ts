/**
 * ps() and pstree(): every task of every loop in every thread, joined into one tree of who awaits
 * whom — through gather and TaskGroup in a thread, and across three real threads through calls;
 * a blocked worker loop listed as unresponsive; a pool job as a leaf; call graphs naming the
 * caller in another thread.
 */
import { Session } from 'node:inspector';
import { describe, expect, it, vi } from 'vitest';
import {
  LoopThread,
  PIPE,
  TaskGroup,
  createSubprocessExec,
  ensureFuture,
  openConnection,
  startServer,
  wait,
  gather,
  getRunningLoop,
  ps,
  pstree,
  run,
  sleep,
  toThread,
  workerFn,
  type Coroutine,
  type TaskInfo,
} from '../src/index.js';
import { _treeInTurns, formatTree, snapshot, type ProcessSnapshot } from '../src/ps.js';

const CHAIN = new URL('./fixtures/ps-chain.mjs', import.meta.url);
const POOL = new URL('./fixtures/pool-control.mjs', import.meta.url);

/** The tree's task lines, reduced to indentation, name, coroutine and thread. */
function shape(tree: string): string[] {
  return tree
    .split('\n')
    .filter((line) => line.includes('(T) ') || line.includes('(J) '))
    .map((line) => {
      const depth = line.indexOf('──') / 4;
      const task = /\(T\) (\S+) (\S+) — ([^,]+),/.exec(line);
      const label = task !== null ? `${task[1]} ${task[2]} @${task[3]}` : line.slice(line.indexOf('(J)'));
      return `${'  '.repeat(depth)}${label}`;
    });
}

function* parked(): Coroutine<void> {
  yield* sleep(3600);
}

describe('ps() and pstree() in one thread', () => {
  it('a gather of two tasks: both under the task awaiting the gather', async () => {
    const seen = await run(
      (function* main(): Coroutine<{ rows: TaskInfo[]; tree: string }> {
        const loop = getRunningLoop();
        const waiter = loop.createTask(
          (function* gathering(): Coroutine<void> {
            yield* gather(loop.createTask(parked(), { name: 'left' }), loop.createTask(parked(), { name: 'right' }));
          })(),
          { name: 'gathering' },
        );
        yield* sleep(0.01);
        const rows = yield* ensureFuture(ps());
        const tree = yield* ensureFuture(pstree());
        waiter.cancel();
        return { rows, tree };
      })(),
    );
    const byName = new Map(seen.rows.map((row) => [row.name, row]));
    expect(seen.rows.map((row) => row.coroutine).sort()).toEqual(['gathering()', 'main()', 'parked()', 'parked()']);
    expect(byName.get('gathering')).toMatchObject({ threadId: 0, threadName: 'MainThread', coroutine: 'gathering()', state: 'pending', awaiting: 'gather of 2' });
    expect(byName.get('left')).toMatchObject({ coroutine: 'parked()', state: 'pending' });
    expect(byName.get('left')!.awaiting).toMatch(/^sleep, \d+ s left$/);
    const mainRow = seen.rows.find((row) => row.coroutine === 'main()');
    expect(mainRow).toMatchObject({ state: 'running', awaiting: null, waitingFor: 0 });
    expect(new Set(seen.rows.map((row) => row.loopId)).size).toBe(1);
    expect(new Set(seen.rows.map((row) => row.taskId)).size).toBe(4);
    for (const row of seen.rows) expect(row.waitingFor).toBeGreaterThanOrEqual(0);
    const tree = shape(seen.tree);
    expect(tree).toContain('gathering gathering() @MainThread');
    const at = tree.indexOf('gathering gathering() @MainThread');
    expect(tree.slice(at + 1, at + 3).sort()).toEqual(['  left parked() @MainThread', '  right parked() @MainThread']);
    expect(seen.tree.split('\n')[0]).toMatch(/^MainThread \(thread 0\): loop 0x[0-9a-f]+ running, 4 tasks, \d+ ready, \d+ timers?/);
  });

  it("a TaskGroup's children are under the group's parent task; a cancelling task says so", async () => {
    const tree = await run(
      (function* main(): Coroutine<string[]> {
        const loop = getRunningLoop();
        const parent = loop.createTask(
          (function* grouping(): Coroutine<void> {
            yield* new TaskGroup().run(function* (tg) {
              tg.createTask(parked(), { name: 'child-1' });
              tg.createTask(parked(), { name: 'child-2' });
            });
          })(),
          { name: 'grouping' },
        );
        yield* sleep(0.01);
        const lines = shape(yield* ensureFuture(pstree()));
        parent.cancel();
        return lines;
      })(),
    );
    const at = tree.indexOf('grouping grouping() @MainThread');
    expect(at).toBeGreaterThanOrEqual(0);
    expect(tree.slice(at + 1, at + 3).sort()).toEqual(['  child-1 parked() @MainThread', '  child-2 parked() @MainThread']);
  });

  it('a task awaiting a pool job has the job as a leaf, named by its function', async () => {
    const flags = new Int32Array(new SharedArrayBuffer(8));
    const lines = await run(
      (function* main(): Coroutine<string[]> {
        const loop = getRunningLoop();
        const job = loop.createTask(
          (function* offloading(): Coroutine<unknown> {
            return yield* toThread(workerFn(POOL, 'visit'), flags, 0, 1);
          })(),
          { name: 'offloading' },
        );
        while (Atomics.load(flags, 0) === 0) yield* sleep(0.005);
        const tree = shape(yield* ensureFuture(pstree()));
        Atomics.store(flags, 1, 1);
        Atomics.notify(flags, 1);
        yield* job;
        return tree;
      })(),
    );
    const at = lines.indexOf('offloading offloading() @MainThread');
    expect(lines[at + 1]).toMatch(/^ {2}\(J\) job visit of file:.*pool-control\.mjs in the pool, running$/);
  });

  it('says what a task waits for through wait(), a stream read, drain(), a child process and its stdout', async () => {
    const rows = await run(
      (function* main(): Coroutine<Record<string, string | null>> {
        const loop = getRunningLoop();
        const server = yield* startServer(() => undefined, '127.0.0.1', 0);
        const port = (server.sockets[0]!.address() as { port: number }).port;
        const [reader, writer] = yield* openConnection('127.0.0.1', port);
        const child = yield* createSubprocessExec('sleep', ['30'], { stdout: PIPE });
        writer.transport.setWriteBufferLimits(1, 0);
        const tasks = [
          loop.createTask((function* reading(): Coroutine<unknown> { return yield* reader.read(100); })(), { name: 'reading' }),
          loop.createTask((function* waiting(): Coroutine<unknown> { return yield* wait([loop.createTask(parked()), loop.createTask(parked())], { returnWhen: 'FIRST_COMPLETED' }); })(), { name: 'waiting' }),
          loop.createTask((function* exiting(): Coroutine<unknown> { return yield* child.wait(); })(), { name: 'exiting' }),
          loop.createTask((function* piped(): Coroutine<unknown> { return yield* child.stdout!.read(10); })(), { name: 'piped' }),
          loop.createTask(
            (function* draining(): Coroutine<void> {
              writer.write(Buffer.alloc(16 << 20));
              yield* writer.drain();
            })(),
            { name: 'draining' },
          ),
        ];
        yield* sleep(0.1);
        const found = yield* ps();
        child.kill();
        yield* child.wait();
        for (const task of tasks) task.cancel();
        writer.transport.abort();
        server.close();
        server.abortClients();
        yield* server.waitClosed();
        yield* wait(tasks);
        return Object.fromEntries(found.filter((row) => tasks.some((task) => task.getName() === row.name)).map((row) => [row.name, row.awaiting]));
      })(),
    );
    expect(rows).toEqual({
      reading: expect.stringMatching(/^read from 127\.0\.0\.1:\d+$/),
      waiting: 'wait for 2 (FIRST_COMPLETED)',
      exiting: expect.stringMatching(/^process \d+ \(sleep\) to exit$/),
      piped: expect.stringMatching(/^read from the stdout of process \d+$/),
      draining: expect.stringMatching(/^drain of 127\.0\.0\.1:\d+$/),
    });
  });

  it('a gather awaited by many tasks: each of its children is awaited by every one of them, once, in the order they began', async () => {
    const awaiters = await run(
      (function* main(): Coroutine<Record<string, string[]>> {
        const loop = getRunningLoop();
        const kids = ['kid-0', 'kid-1'].map((name) => loop.createTask(parked(), { name }));
        const shared = gather(...kids);
        const sharers = Array.from({ length: 10 }, (_, i) =>
          loop.createTask(
            (function* sharing(): Coroutine<unknown> {
              return yield* shared;
            })(),
            { name: `sharer-${i}` },
          ),
        );
        // Awaits kid-0 directly and through the gather: listed once.
        const both = loop.createTask(
          (function* both(): Coroutine<unknown> {
            return yield* gather(kids[0]!, shared);
          })(),
          { name: 'both' },
        );
        yield* sleep(0.01);
        const { tasks } = yield* ensureFuture(snapshot());
        for (const task of [...sharers, both, ...kids]) task.cancel();
        const names = new Map(tasks.map((task) => [task.taskId, task.name]));
        return Object.fromEntries(tasks.map((task) => [task.name, task.awaitedBy.map((id) => names.get(id) ?? String(id))]));
      })(),
    );
    const sharers = Array.from({ length: 10 }, (_, i) => `sharer-${i}`);
    expect(awaiters['kid-0']).toEqual([...sharers, 'both']);
    expect(awaiters['kid-1']).toEqual([...sharers, 'both']);
    expect(awaiters.both).toEqual([]);
    expect(awaiters['sharer-3']).toEqual([]);
  });

  it('asks the inspector for the name of a coroutine that is no generator once, not at every snapshot', async () => {
    /** A coroutine that is no generator: a class wrapping one (all its instances share one prototype). */
    class Wrapped {
      constructor(readonly inner: Coroutine<void>) {}
      next(value?: unknown): IteratorResult<unknown, void> {
        return this.inner.next(value as never);
      }
      throw(error: unknown): IteratorResult<unknown, void> {
        return this.inner.throw(error);
      }
      return(value?: void): IteratorResult<unknown, void> {
        return this.inner.return(value);
      }
    }
    const seen = await run(
      (function* main(): Coroutine<{ coroutines: string[]; lookups: number }> {
        const loop = getRunningLoop();
        const tasks = [0, 1, 2].map((i) => loop.createTask(new Wrapped(parked()) as unknown as Coroutine<void>, { name: `wrapped-${i}` }));
        yield* sleep(0.01);
        yield* ensureFuture(ps());
        const post = vi.spyOn(Session.prototype, 'post');
        try {
          const rows = yield* ensureFuture(ps());
          const lookups = post.mock.calls.filter(([method]) => (method as string) === 'Runtime.getProperties').length;
          return { coroutines: rows.filter((row) => row.name.startsWith('wrapped-')).map((row) => row.coroutine), lookups };
        } finally {
          post.mockRestore();
          for (const task of tasks) task.cancel();
        }
      })(),
    );
    expect(seen.coroutines).toEqual(['anonymous()', 'anonymous()', 'anonymous()']);
    expect(seen.lookups).toBe(0);
  });

  it('draws the tree in turns, pausing between top-level tasks every 2000 lines, into the same text', () => {
    const tasks = Array.from({ length: 5000 }, (_, i) => ({
      threadId: 0,
      threadName: 'MainThread',
      loopId: 1,
      taskId: i + 1,
      name: `Task-${i + 1}`,
      coroutine: 'parked()',
      state: 'pending' as const,
      awaiting: 'a Future',
      waitingFor: 1,
      stack: ['parked()'],
      awaitedBy: i % 2 === 1 ? [i] : [],
      leaves: [],
    }));
    const snap: ProcessSnapshot = { at: 0, threads: [], tasks };
    const drawing = _treeInTurns(snap);
    let pauses = 0;
    let step = drawing.next();
    for (; step.done !== true; step = drawing.next()) pauses++;
    expect(step.value).toBe(formatTree(snap));
    // 2,500 top-level tasks of two lines each, and the empty line under the (no) threads.
    expect(step.value.split('\n')).toHaveLength(5001);
    expect(pauses).toBe(2);
  });

  it('refuses a timeout that is not a positive number of seconds', async () => {
    await expect(ps({ timeout: 0 })).rejects.toThrow(new RangeError('ps() timeout must be a positive number of seconds, got 0'));
    await expect(pstree({ timeout: Number.NaN })).rejects.toThrow(RangeError);
  });
});

describe('ps() and pstree() across threads', () => {
  it('a three-thread call chain is one branch: the caller, the task serving it, and the task serving that', async () => {
    const seen = await run(
      (function* main(): Coroutine<{ rows: TaskInfo[]; tree: string[]; graphs: string[]; fromWorker: string[] }> {
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'hop-1' }));
        const loop = getRunningLoop();
        let fromWorker: string[] = [];
        const caller = loop.createTask(
          (function* calling(): Coroutine<unknown> {
            return yield* lt.call('relay', 'hop-2');
          })(),
          { name: 'calling' },
        );
        let rows: TaskInfo[] = [];
        // Until the far end of the chain is waiting.
        for (let i = 0; i < 400 && !rows.some((row) => row.threadName === 'hop-2'); i++) {
          yield* sleep(0.01);
          rows = yield* ensureFuture(ps());
        }
        const tree = shape(yield* ensureFuture(pstree()));
        const graphs = [yield* lt.call<string>('graph'), yield* lt.call<string>('graphThere')];
        fromWorker = yield* lt.call<string[]>('psFromHere');
        caller.cancel();
        yield* lt.call('closeNext');
        yield* ensureFuture(lt.close());
        return { rows, tree, graphs, fromWorker };
      })(),
    );
    // Asked from a worker thread, ps() sees the whole process too (the main thread takes it).
    expect(seen.fromWorker).toEqual(['MainThread:calling()', 'MainThread:main()', 'hop-1:psFromHere()', 'hop-1:relay()', 'hop-2:hold()']);
    const caller = seen.rows.find((row) => row.name === 'calling')!;
    const relay = seen.rows.find((row) => row.coroutine === 'relay()')!;
    const hold = seen.rows.find((row) => row.coroutine === 'hold()')!;
    expect(caller).toMatchObject({ threadName: 'MainThread', coroutine: 'calling()', awaiting: "call 'relay' in LoopThread 'hop-1'" });
    expect(relay).toMatchObject({ threadName: 'hop-1', state: 'pending', awaiting: "call 'hold' in LoopThread 'hop-2'" });
    expect(hold).toMatchObject({ threadName: 'hop-2', state: 'pending' });
    expect(new Set([caller.threadId, relay.threadId, hold.threadId]).size).toBe(3);
    expect(new Set([caller.loopId, relay.loopId, hold.loopId]).size).toBe(3);
    const at = seen.tree.indexOf('calling calling() @MainThread');
    expect(seen.tree.slice(at, at + 3)).toEqual(['calling calling() @MainThread', `  ${relay.name} relay() @hop-1`, `    ${hold.name} hold() @hop-2`]);
    // Call graphs in the serving threads name their caller in the thread before.
    expect(seen.graphs[0]).toMatch(new RegExp(`^\\* Task\\(name='${relay.name}', id=0x[0-9a-f]+\\)[\\s\\S]*\\+ Awaited by:\\n {4}\\* Task\\(name='calling', id=0x${caller.taskId.toString(16)}, thread=MainThread\\)`));
    expect(seen.graphs[1]).toContain(`* Task(name='${relay.name}', id=0x${relay.taskId.toString(16)}, thread=hop-1)`);
  });

  it('calls both ways on one link join to their own tasks: the task served there calling back is under its caller', async () => {
    const tree = await run(
      (function* main(): Coroutine<string[]> {
        const loop = getRunningLoop();
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'asker', expose: { hang: () => loop.createFuture() } }));
        const askingTask = loop.createTask(
          (function* asking(): Coroutine<unknown> {
            return yield* lt.call('ask');
          })(),
          { name: 'asking' },
        );
        let lines: string[] = [];
        for (let i = 0; i < 400 && !lines.some((line) => line.includes('(R)')); i++) {
          yield* sleep(0.01);
          lines = shape(yield* ensureFuture(pstree())).concat((yield* ensureFuture(pstree())).split('\n').filter((line) => line.includes('(R)')));
        }
        askingTask.cancel();
        yield* ensureFuture(lt.close());
        return lines;
      })(),
    );
    const at = tree.indexOf('asking asking() @MainThread');
    expect(tree[at + 1]).toMatch(/^ {2}Task-\d+ ask\(\) @asker$/);
    expect(tree.find((line) => line.includes('(R)'))).toMatch(/^ {8}└── \(R\) call 'hang' in the parent loop$/);
  });

  it('a worker whose loop is blocked is listed as unresponsive, with how long it has been busy; the answer still comes', async () => {
    const flag = new Int32Array(new SharedArrayBuffer(8));
    const seen = await run(
      (function* main(): Coroutine<{ tree: string; rows: TaskInfo[] }> {
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'stuck' }));
        lt.callSoonThreadsafe('block', flag);
        while (Atomics.load(flag, 1) === 0) yield* sleep(0.005);
        const tree = yield* ensureFuture(pstree({ timeout: 0.2 }));
        const rows = yield* ensureFuture(ps({ timeout: 0.2 }));
        Atomics.store(flag, 0, 1);
        Atomics.notify(flag, 0);
        yield* ensureFuture(lt.close());
        return { tree, rows };
      })(),
    );
    expect(seen.tree).toMatch(/^stuck \(thread \d+\): unresponsive, its loop running callbacks for [\d.]+ (µs|ms|s) without a break$/m);
    expect(seen.tree.split('\n')[0]).toMatch(/^MainThread \(thread 0\): loop 0x[0-9a-f]+ running/);
    expect(seen.rows.every((row) => row.threadName === 'MainThread')).toBe(true);
  });
});
