/**
 * What `multiloop ps` accepts from a thread's answer. The answer comes from a socket that the
 * target's user controls, and the command may run as root: it is checked field by field before
 * anything of it is used, and a malformed one is refused with the path of the first bad field.
 */
import type { KnownThread } from '../introspect.js';
import type { CallIn, CallOut, LoopRow, TaskRow, ThreadSnapshot } from '../snapshot.js';
import type { AttachAnswer } from './endpoint.js';

/** A field of an answer that is not what it must be. */
export class MalformedAnswer extends Error {}

/** The most items of any one list in an answer (tasks, loops, calls...). */
const MAX_ITEMS = 5_000_000;
/** The longest string in an answer. */
const MAX_TEXT = 100_000;

type Check<T> = (value: unknown, path: string) => T;

function fail(path: string, what: string): never {
  throw new MalformedAnswer(`${path} ${what}`);
}

const text: Check<string> = (value, path) => {
  if (typeof value !== 'string') fail(path, 'is not a string');
  if (value.length > MAX_TEXT) fail(path, `is longer than ${MAX_TEXT} characters`);
  return value;
};

const number: Check<number> = (value, path) => {
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(path, 'is not a finite number');
  return value;
};

const count: Check<number> = (value, path) => {
  if (!Number.isSafeInteger(value) || (value as number) < 0) fail(path, 'is not a whole number');
  return value as number;
};

const flag: Check<boolean> = (value, path) => {
  if (typeof value !== 'boolean') fail(path, 'is not true or false');
  return value;
};

function nullable<T>(check: Check<T>): Check<T | null> {
  return (value, path) => (value === null ? null : check(value, path));
}

function oneOf<T extends string>(...choices: T[]): Check<T> {
  return (value, path) => {
    if (!choices.includes(value as T)) fail(path, `is not one of ${choices.join(', ')}`);
    return value as T;
  };
}

function list<T>(check: Check<T>): Check<T[]> {
  return (value, path) => {
    if (!Array.isArray(value)) fail(path, 'is not a list');
    if (value.length > MAX_ITEMS) fail(path, `has more than ${MAX_ITEMS} items`);
    return value.map((item, i) => check(item, `${path}[${i}]`));
  };
}

/** An object with exactly the fields of `shape` checked, copied onto a fresh object (nothing else of the input is kept). */
function record<T>(shape: { [K in keyof T]: Check<T[K]> }): Check<T> {
  return (value, path) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(path, 'is not an object');
    const out = {} as T;
    for (const key of Object.keys(shape) as Array<keyof T & string>) {
      if (!Object.hasOwn(value, key)) fail(`${path}.${key}`, 'is missing');
      out[key] = shape[key]((value as Record<string, unknown>)[key], `${path}.${key}`);
    }
    return out;
  };
}

const task = record<TaskRow>({
  threadId: count,
  threadName: nullable(text),
  loopId: count,
  taskId: count,
  name: text,
  coroutine: text,
  state: oneOf('running', 'pending', 'cancelling'),
  awaiting: nullable(text),
  waitingFor: number,
  stack: list(text),
  awaitedBy: list(count),
  leaves: list(text),
});

const loop = record<LoopRow>({
  threadId: count,
  loopId: count,
  state: oneOf('running', 'idle', 'stopped', 'closed'),
  debug: flag,
  iterations: count,
  ready: count,
  timers: count,
  tasks: count,
  slowCallbacks: list(record({ callback: text, seconds: number, at: number })),
});

const part = record<ThreadSnapshot>({
  threadId: count,
  threadName: text,
  responsive: flag,
  blockedFor: nullable(number),
  health: nullable(
    record({
      lag: record({ p50: number, p99: number, max: number }),
      utilization: number,
      window: number,
    }),
  ),
  loops: list(loop),
  tasks: list(task),
  callsOut: list(record<CallOut>({ linkId: count, callId: count, description: text, awaitedBy: list(count) })),
  callsIn: list(record<CallIn>({ linkId: count, callId: count, taskId: nullable(count), callerTaskId: nullable(count) })),
});

const known = record<KnownThread>({ threadId: count, threadName: text, since: number });

const answerShape = record<AttachAnswer>({
  v: (value, path) => (value === 1 ? 1 : fail(path, 'is not 1 (another version of multiloop?)')),
  pid: count,
  threadId: count,
  part,
  known: list(known),
});

/**
 * The answer of thread `threadId` of process `pid`, checked: every field of the right type and
 * size, and the answer about the thread and process that were asked. Throws MalformedAnswer.
 */
export function checkAnswer(value: unknown, pid: number, threadId: number): AttachAnswer {
  const answer = answerShape(value, 'answer');
  if (answer.pid !== pid) fail('answer.pid', `is ${answer.pid}, not ${pid}`);
  if (answer.threadId !== threadId || answer.part.threadId !== threadId) fail('answer.threadId', `is not ${threadId}, the thread whose socket it came from`);
  if (!answer.part.responsive) fail('answer.part.responsive', 'is false in an answer');
  return answer;
}
