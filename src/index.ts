/**
 * multiloop: Python's asyncio rebuilt in TypeScript for Node.js worker threads.
 *
 * The one entry point. Each module's public names are listed explicitly, module by module:
 * this is the package's `__all__`, and a test pins it.
 */
export {
  BrokenBarrierError,
  CancelledError,
  ExceptionGroup,
  IncompleteReadError,
  InvalidStateError,
  KeyboardInterrupt,
  LimitOverrunError,
  LookupError,
  QueueEmpty,
  QueueFull,
  QueueShutDown,
  RuntimeError,
  SystemExit,
  TimeoutError,
} from './exceptions.js';
export { Context, ContextVar, Token, copyContext, registerContextVar } from './contextvars.js';
export { registerAsyncLocalStorage } from './async-local-storage.js';
export { Handle, TimerHandle } from './handles.js';
export {
  EventLoop,
  type ExceptionContext,
  type ExceptionHandler,
  type TaskFactory,
  type TaskOptions,
} from './base-events.js';
export {
  EventLoopPolicy,
  getEventLoop,
  getEventLoopPolicy,
  getRunningLoop,
  newEventLoop,
  setEventLoop,
  setEventLoopPolicy,
} from './events.js';
export { Future, isFuture, type LoopOption } from './futures.js';
export { isCoroutine, type Awaitable, type AwaitedResult, type Coroutine, type YieldablePromise } from './coroutines.js';
export {
  Task,
  allTasks,
  createEagerTaskFactory,
  createTask,
  currentTask,
  eagerTaskFactory,
  ensureFuture,
  type TaskConstructor,
} from './task.js';
export {
  ALL_COMPLETED,
  FIRST_COMPLETED,
  FIRST_EXCEPTION,
  asCompleted,
  gather,
  shield,
  sleep,
  wait,
  waitFor,
  type AsCompletedIterator,
  type CompletedInput,
  type GatherOptions,
  type GatherResults,
  type GatherResultsOrErrors,
  type ReturnWhen,
  type WaitOptions,
} from './tasks.js';
export { Barrier, BoundedSemaphore, Condition, Event, Lock, Semaphore } from './locks.js';
export { LifoQueue, PriorityQueue, Queue, type PriorityQueueOptions } from './queues.js';
export { ThreadQueue, type SharedThreadQueue, type ThreadQueueOptions } from './thread-queue.js';
export { Timeout, timeout, timeoutAt } from './timeouts.js';
export { TaskGroup } from './taskgroups.js';
export { staggeredRace } from './staggered.js';
export { Runner, run, type RunOptions } from './runners.js';
export { fromAbortable, type SignalOption } from './interop.js';
export { wrapComlink, type ComlinkResult, type FutureProxy } from './comlink.js';
export {
  PiscinaExecutor,
  createDefaultExecutor,
  type Executor,
  type ExecutorStatistics,
  type PiscinaExecutorOptions,
  type TimeSummary,
} from './executor.js';
export { jobSignal } from './job-signal.js';
export { httpHandler, type HttpHandlerOptions } from './http-handler.js';
export {
  BullMQExecutor,
  serveBullMQ,
  type BullMQExecutorOptions,
  type BullMQExecutorStatistics,
  type BullMQWorker,
  type PostgresConnection,
  type RedisConnection,
  type ServeBullMQOptions,
} from './bullmq.js';
export { toThread } from './threads.js';
export { ConcurrentFuture, runCoroutineThreadsafe, wrapFuture } from './concurrent.js';
export { move, registerClass, type RegisterClassOptions } from './transfer.js';
export { workerFn, type WorkerFn } from './worker-fn.js';
export {
  LoopThread,
  parentLoop,
  type LoopRef,
  type LoopThreadOptions,
  type RemoteProxy,
  type RemoteResult,
} from './loop-thread.js';
export { LoopThreadPool, type LoopThreadPoolOptions, type LoopThreadPoolStatistics } from './loop-thread-pool.js';
export { logger, type Logger } from './log.js';
export { BaseProtocol, BufferedProtocol, DatagramProtocol, Protocol, SubprocessProtocol } from './protocols.js';
export {
  ReadPipeTransport,
  SubprocessTransport,
  WritePipeTransport,
  type ReadPipe,
  type ReadPipeProtocol,
  type StdioTarget,
  type SubprocessArgs,
  type SubprocessTransportOptions,
  type WritePipe,
  type WritePipeProtocol,
} from './pipes.js';
export { DatagramTransport, Transport, type SocketAddress } from './transports.js';
export {
  NI_DGRAM,
  NI_NAMEREQD,
  NI_NOFQDN,
  NI_NUMERICHOST,
  NI_NUMERICSERV,
  Server,
  type AddrInfo,
  type CreateConnectionOptions,
  type CreateServerOptions,
  type DatagramEndpointOptions,
  type GetaddrinfoOptions,
} from './connections.js';
export type { ConnectAcceptedSocketOptions, SslContext, StartTlsOptions } from './start-tls.js';
export type { SendfileOptions, SendfileSource } from './sendfile.js';
export {
  StreamReader,
  StreamWriter,
  openConnection,
  openUnixConnection,
  startServer,
  startUnixServer,
  type ClientConnectedCallback,
  type OpenConnectionOptions,
  type StartServerOptions,
} from './streams.js';
export {
  DEVNULL,
  PIPE,
  Process,
  STDOUT,
  createSubprocessExec,
  createSubprocessShell,
  type SubprocessOptions,
} from './subprocess.js';
export {
  captureCallGraph,
  formatCallGraph,
  printCallGraph,
  type CallGraphOptions,
  type FrameCallGraphEntry,
  type FutureCallGraph,
  type RemoteTaskRef,
} from './graph.js';
export { ps, pstree, type SnapshotOptions, type TaskInfo } from './ps.js';
export { startMonitor, type Monitor, type MonitorOptions, type MonitorStatistics } from './monitor.js';
