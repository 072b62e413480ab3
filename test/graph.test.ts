/**
 * Call graphs (asyncio 3.14's capture_call_graph, format_call_graph, print_call_graph) against
 * known shapes: a task awaiting a task, a gather of two tasks, a TaskGroup, a shield; the text
 * layout; debug mode's locations; no current task; bad input.
 */
import { describe, expect, it } from 'vitest';
import {
  type Future,
  RuntimeError,
  Task,
  TaskGroup,
  captureCallGraph,
  formatCallGraph,
  gather,
  getRunningLoop,
  printCallGraph,
  run,
  shield,
  sleep,
  type Coroutine,
  type FrameCallGraphEntry,
  type FutureCallGraph,
} from '../src/index.js';

/** A graph as names: what each node is, its stack, and what awaits it. */
type Shape = { node: string; stack: string[]; awaitedBy: Shape[] };

function shape(graph: FutureCallGraph): Shape {
  const future = graph.future as Future<unknown>;
  return {
    // Default names count every task of the process: Task-N here.
    node: future instanceof Task ? `Task ${future.getName().replace(/^Task-\d+$/, 'Task-N')}` : 'Future',
    stack: graph.callStack.map((entry) => entry.name),
    awaitedBy: graph.awaitedBy.map(shape),
  };
}

describe('captureCallGraph', () => {
  it('a task awaited by a task', async () => {
    const seen = await run(
      (function* main(): Coroutine<Shape> {
        function* child(): Coroutine<Shape> {
          yield* sleep(0);
          return shape(captureCallGraph()!);
        }
        return yield* getRunningLoop().createTask(child(), { name: 'child' });
      })(),
    );
    expect(seen).toEqual({
      node: 'Task child',
      stack: ['child'],
      awaitedBy: [{ node: 'Task Task-N', stack: ['main'], awaitedBy: [] }],
    });
  });

  it('a gather of two tasks: each task is awaited by the gather, which the main task awaits', async () => {
    const shapes = await run(
      (function* main(): Coroutine<Shape[]> {
        function* worker(): Coroutine<Shape> {
          yield* sleep(0);
          return shape(captureCallGraph()!);
        }
        const loop = getRunningLoop();
        return yield* gather(loop.createTask(worker(), { name: 'a' }), loop.createTask(worker(), { name: 'b' }));
      })(),
    );
    const awaitedBy = [{ node: 'Future', stack: [], awaitedBy: [{ node: 'Task Task-N', stack: ['main'], awaitedBy: [] }] }];
    expect(shapes).toEqual([
      { node: 'Task a', stack: ['worker'], awaitedBy },
      { node: 'Task b', stack: ['worker'], awaitedBy },
    ]);
  });

  it("a TaskGroup's child is awaited by the group's parent task; a shielded task by the shield", async () => {
    const seen = await run(
      (function* main(): Coroutine<Shape[]> {
        function* worker(): Coroutine<Shape> {
          yield* sleep(0);
          return shape(captureCallGraph()!);
        }
        const inGroup = yield* new TaskGroup().run(function* (tg) {
          return tg.createTask(worker(), { name: 'grouped' });
        });
        const shielded = yield* shield(getRunningLoop().createTask(worker(), { name: 'shielded' }));
        return [inGroup.result(), shielded];
      })(),
    );
    expect(seen).toEqual([
      { node: 'Task grouped', stack: ['worker'], awaitedBy: [{ node: 'Task Task-N', stack: ['main'], awaitedBy: [] }] },
      {
        node: 'Task shielded',
        stack: ['worker'],
        awaitedBy: [{ node: 'Future', stack: [], awaitedBy: [{ node: 'Task Task-N', stack: ['main'], awaitedBy: [] }] }],
      },
    ]);
  });

  it('of a plain future: no call stack, the tasks awaiting it; limit 0 keeps no stack', async () => {
    const seen = await run(
      (function* main(): Coroutine<Shape[]> {
        const loop = getRunningLoop();
        const future = loop.createFuture<void>();
        const waiter = loop.createTask(
          (function* waiting(): Coroutine<void> {
            yield* future;
          })(),
          { name: 'waiting' },
        );
        yield* sleep(0);
        const graphs = [shape(captureCallGraph(future)!), shape(captureCallGraph(future, { limit: 0 })!)];
        future.setResult(undefined);
        yield* waiter;
        return graphs;
      })(),
    );
    expect(seen).toEqual([
      { node: 'Future', stack: [], awaitedBy: [{ node: 'Task waiting', stack: ['waiting'], awaitedBy: [] }] },
      { node: 'Future', stack: [], awaitedBy: [{ node: 'Task waiting', stack: [], awaitedBy: [] }] },
    ]);
  });

  it('in debug mode a parked task shows its whole yield* chain, innermost first, each where it is suspended', async () => {
    const stack = await run(
      (function* main(): Coroutine<FrameCallGraphEntry[]> {
        const loop = getRunningLoop();
        function* inner(): Coroutine<void> {
          yield* sleep(3600);
        }
        function* outer(): Coroutine<void> {
          yield* inner();
        }
        const task = loop.createTask(outer());
        yield* sleep(0);
        const found = captureCallGraph(task)!.callStack;
        task.cancel();
        return [...found];
      })(),
      { debug: true },
    );
    expect(stack.map((entry) => entry.name)).toEqual(['sleep', 'inner', 'outer']);
    expect(stack[0]!.location).toMatch(/tasks\.ts:\d+:\d+$/);
    expect(stack[1]!.location).toMatch(/graph\.test\.ts:\d+:\d+$/);
    expect(stack[2]!.location).toMatch(/graph\.test\.ts:\d+:\d+$/);
  });

  it('outside debug mode a parked task shows its coroutine alone, without a location', async () => {
    const stack = await run(
      (function* main(): Coroutine<FrameCallGraphEntry[]> {
        const loop = getRunningLoop();
        function* inner(): Coroutine<void> {
          yield* sleep(3600);
        }
        function* outer(): Coroutine<void> {
          yield* inner();
        }
        const task = loop.createTask(outer());
        yield* sleep(0);
        const found = captureCallGraph(task)!.callStack;
        task.cancel();
        return [...found];
      })(),
    );
    expect(stack).toEqual([{ name: 'outer', location: null }]);
  });

  it("the current task's stack is read live: every frame from the caller down to the task's step", async () => {
    const stack = await run(
      (function* main(): Coroutine<FrameCallGraphEntry[]> {
        function* inner(): Coroutine<FrameCallGraphEntry[]> {
          yield* sleep(0);
          return [...captureCallGraph()!.callStack];
        }
        return yield* inner();
      })(),
    );
    expect(stack.map((entry) => entry.name)).toEqual(['inner', 'main']);
    expect(stack[0]!.location).toMatch(/graph\.test\.ts:\d+:\d+$/);
  });

  it('is null with no current task, a RuntimeError outside a running loop, a TypeError for what is not a future', async () => {
    expect(() => captureCallGraph()).toThrow(
      new RuntimeError('captureCallGraph() is called outside of a running event loop and no future to introspect was provided'),
    );
    const outside = await run(
      (function* (): Coroutine<unknown> {
        const loop = getRunningLoop();
        const graph = loop.createFuture<unknown>();
        loop.callSoon(() => graph.setResult(captureCallGraph()));
        return yield* graph;
      })(),
    );
    expect(outside).toBeNull();
    expect(() => captureCallGraph({} as never)).toThrow("captureCallGraph() needs a Future or a Task, got {}");
  });
});

describe('formatCallGraph and printCallGraph', () => {
  it("lay the graph out as asyncio 3.14's format_call_graph does", async () => {
    const text = await run(
      (function* main(): Coroutine<string> {
        function* worker(): Coroutine<string> {
          yield* sleep(0);
          return formatCallGraph();
        }
        const [first] = yield* gather(getRunningLoop().createTask(worker(), { name: 'worker' }));
        return first;
      })(),
    );
    expect(text).toMatch(
      new RegExp(
        [
          "^\\* Task\\(name='worker', id=0x[0-9a-f]+\\)",
          '  \\+ Call stack:',
          "  \\|   File '[^']*graph\\.test\\.ts', line \\d+, in async worker\\(\\)",
          '  \\+ Awaited by:',
          '    \\* Future\\(id=0x[0-9a-f]+\\)',
          '      \\+ Awaited by:',
          "        \\* Task\\(name='Task-\\d+', id=0x[0-9a-f]+\\)",
          '          \\+ Call stack:',
          '          \\|   in async main\\(\\)$',
        ].join('\\n'),
      ),
    );
  });

  it('printCallGraph writes the same text and a newline to the file given', async () => {
    const written = await run(
      (function* main(): Coroutine<[string, string]> {
        let out = '';
        printCallGraph(null, { file: { write: (text: string) => (out += text) } });
        return [out, formatCallGraph()];
      })(),
    );
    // The same but for the line each was called on.
    expect(written[0].replace(/line \d+/, 'line N')).toBe(`${written[1].replace(/line \d+/, 'line N')}\n`);
    expect(written[1]).toMatch(/^\* Task\(name='Task-\d+', id=0x[0-9a-f]+\)\n {2}\+ Call stack:\n {2}\| {3}File '[^']*graph\.test\.ts', line \d+, in async main\(\)$/);
  });
});
