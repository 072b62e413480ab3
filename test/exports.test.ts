import { describe, expect, it } from 'vitest';
import * as multiloop from '../src/index.js';

/**
 * The runtime names of the package's one entry point: its `__all__`. Adding or removing an
 * export is a change of the public contract, so it has to show up here.
 */
const EXPECTED_EXPORTS = [
  'ALL_COMPLETED',
  'Barrier',
  'BoundedSemaphore',
  'BrokenBarrierError',
  'CancelledError',
  'Condition',
  'Context',
  'ContextVar',
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
  'PriorityQueue',
  'Queue',
  'QueueEmpty',
  'QueueFull',
  'QueueShutDown',
  'Runner',
  'RuntimeError',
  'Semaphore',
  'SystemExit',
  'Task',
  'TaskGroup',
  'Timeout',
  'TimeoutError',
  'TimerHandle',
  'Token',
  'allTasks',
  'asCompleted',
  'copyContext',
  'createTask',
  'currentTask',
  'ensureFuture',
  'gather',
  'getEventLoop',
  'getEventLoopPolicy',
  'getRunningLoop',
  'isCoroutine',
  'isFuture',
  'logger',
  'newEventLoop',
  'run',
  'setEventLoop',
  'setEventLoopPolicy',
  'shield',
  'sleep',
  'staggeredRace',
  'timeout',
  'timeoutAt',
  'wait',
  'waitFor',
];

describe('src/index.ts', () => {
  it('exports exactly the public names, nothing internal', () => {
    expect(Object.keys(multiloop).sort()).toEqual(EXPECTED_EXPORTS);
  });
});
