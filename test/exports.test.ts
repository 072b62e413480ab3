import { describe, expect, it } from 'vitest';
import * as multiloop from '../src/index.js';

/**
 * The runtime names of the package's one entry point: its `__all__`. Adding or removing an
 * export is a change of the public contract, so it has to show up here.
 */
const EXPECTED_EXPORTS = [
  'ALL_COMPLETED',
  'Barrier',
  'BaseProtocol',
  'BoundedSemaphore',
  'BrokenBarrierError',
  'BufferedProtocol',
  'BullMQExecutor',
  'CancelledError',
  'ConcurrentFuture',
  'Condition',
  'Context',
  'ContextVar',
  'DEVNULL',
  'DatagramProtocol',
  'DatagramTransport',
  'Event',
  'EventLoop',
  'EventLoopPolicy',
  'ExceptionGroup',
  'FIRST_COMPLETED',
  'FIRST_EXCEPTION',
  'Future',
  'Handle',
  'IncompleteReadError',
  'InvalidStateError',
  'KeyboardInterrupt',
  'LifoQueue',
  'LimitOverrunError',
  'Lock',
  'LookupError',
  'LoopThread',
  'LoopThreadPool',
  'NI_DGRAM',
  'NI_NAMEREQD',
  'NI_NOFQDN',
  'NI_NUMERICHOST',
  'NI_NUMERICSERV',
  'PIPE',
  'PiscinaExecutor',
  'PriorityQueue',
  'Process',
  'Protocol',
  'Queue',
  'QueueEmpty',
  'QueueFull',
  'QueueShutDown',
  'ReadPipeTransport',
  'Runner',
  'RuntimeError',
  'STDOUT',
  'Semaphore',
  'Server',
  'StreamReader',
  'StreamWriter',
  'SubprocessProtocol',
  'SubprocessTransport',
  'SystemExit',
  'Task',
  'TaskGroup',
  'ThreadQueue',
  'Timeout',
  'TimeoutError',
  'TimerHandle',
  'Token',
  'Transport',
  'WritePipeTransport',
  'allTasks',
  'asCompleted',
  'captureCallGraph',
  'copyContext',
  'createDefaultExecutor',
  'createEagerTaskFactory',
  'createSubprocessExec',
  'createSubprocessShell',
  'createTask',
  'currentTask',
  'eagerTaskFactory',
  'ensureFuture',
  'formatCallGraph',
  'fromAbortable',
  'gather',
  'getEventLoop',
  'getEventLoopPolicy',
  'getRunningLoop',
  'httpHandler',
  'isCoroutine',
  'isFuture',
  'jobSignal',
  'logger',
  'move',
  'newEventLoop',
  'openConnection',
  'openUnixConnection',
  'parentLoop',
  'printCallGraph',
  'ps',
  'pstree',
  'registerAsyncLocalStorage',
  'registerClass',
  'registerContextVar',
  'run',
  'runCoroutineThreadsafe',
  'serveBullMQ',
  'setEventLoop',
  'setEventLoopPolicy',
  'shield',
  'sleep',
  'staggeredRace',
  'startMonitor',
  'startServer',
  'startUnixServer',
  'timeout',
  'timeoutAt',
  'toThread',
  'wait',
  'waitFor',
  'workerFn',
  'wrapComlink',
  'wrapFuture',
];

describe('src/index.ts', () => {
  it('exports exactly the public names, nothing internal', () => {
    expect(Object.keys(multiloop).sort()).toEqual(EXPECTED_EXPORTS);
  });
});

describe('multiloop/testing', () => {
  it('exports the virtual clock loop and the simulation, through the package name too', async () => {
    const testing = await import('../src/testing/index.js');
    expect(Object.keys(testing).sort()).toEqual(['SimulatedFault', 'SimulationError', 'VirtualClockLoop', 'explore', 'simulate']);
    const viaPackage = (await import('multiloop/testing')) as Record<string, unknown>;
    for (const name of ['VirtualClockLoop', 'simulate', 'explore', 'SimulationError', 'SimulatedFault']) expect(typeof viaPackage[name]).toBe('function');
  });
});

describe('multiloop/otel', () => {
  it('exports propagateTraceContext, through the package name too', async () => {
    const otel = await import('../src/otel/index.js');
    expect(Object.keys(otel).sort()).toEqual(['propagateTraceContext']);
    const viaPackage = (await import('multiloop/otel')) as Record<string, unknown>;
    expect(typeof viaPackage.propagateTraceContext).toBe('function');
  });
});
