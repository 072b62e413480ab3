/**
 * The messages that travel between threads. Operations between two loops travel in batches:
 * a flat array of 4-slot records `[op, id, a, b, op, id, a, b, ...]`, cheap to clone: function
 * names travel once per link (NAME) and then as small integers; a call's arguments travel
 * without an array when there are none or one (the record's form says which).
 * Control messages between a LoopThread and its worker are plain objects.
 */
import type { MessagePort } from 'node:worker_threads';
import type { EncodedError } from './errors.js';
import type { TypeScriptPortMessage } from './ts-loader.js';

/** `[CALL | form, id, nameId, payload]`: run an export there; a reply with the same id follows. */
export const OP_CALL = 1;
/** `[NOTIFY | form, 0, nameId, payload]`: run an export there; no reply. */
export const OP_NOTIFY = 2;
/** `[CANCEL, id, message, 0]`: cancel the call `id` made earlier. */
export const OP_CANCEL = 3;
/** `[RESULT, id, value, nameId]`: the call `id` (of the function `nameId` here) returned `value`. */
export const OP_RESULT = 4;
/** `[ERROR, id, encodedError, nameId]`: the call `id` (of the function `nameId` here) failed. */
export const OP_ERROR = 5;
/** `[CANCELLED, id, message, 0]`: the call `id` ended cancelled there. */
export const OP_CANCELLED = 6;
/** `[NAME, nameId, name, 0]`: from now on `nameId` stands for the function name `name`. */
export const OP_NAME = 7;
/**
 * `[BELL, 0, Int32Array on a SharedArrayBuffer, 0]`: after each batch posted to the sender of
 * this record, ring the bell (add 1 to its slot 0, notify): the sender may be blocked waiting
 * for a reply.
 */
export const OP_BELL = 8;
/** `[UNREADABLE, seq, encodedError, 0]`: your message number `seq` could not be read here. */
export const OP_UNREADABLE = 9;
/** `[REPLAY, seq, 0, 0, ...records]`: records of the unreadable message `seq`, sent again. */
export const OP_REPLAY = 10;
/** `[REPLAY_END, seq, 0, 0]`: every record of the unreadable message `seq` was sent again (or given up). */
export const OP_REPLAY_END = 11;
/** `[DIED, exitCode, encodedError | null, 0]`: this thread is ending, with the uncaught error that ends it. */
export const OP_DIED = 12;
/**
 * `[ORIGIN, taskId, taskName, threadName]`: the calls that follow were made by that task of the
 * sender's thread (taskId 0: outside any task), until the next ORIGIN. Sent only when the calling
 * task changes, so a burst from one task pays once; call graphs and ps() name the caller with it.
 */
export const OP_ORIGIN = 13;
/**
 * `[CONTEXT, 0, carried, 0]`: the calls that follow carry these values of registered context
 * variables (`[names, values]`, or null: none), until the next CONTEXT. Sent only when the
 * caller's context changes, and only while some variable is registered (internal/travel.ts).
 */
export const OP_CONTEXT = 14;
/**
 * `[LINK, 0, 0, ports]`: serve `ports` (LinkPorts, moved with the message) as a new link of the
 * receiver's loop, offering what this link offers: a LoopRef the sender holds was passed on to
 * another thread, which reaches the loop directly over it.
 */
export const OP_LINK = 15;
/** The message of the CancelledError of calls still in flight when their loop closes. */
export const CLOSING = 'the loop that made the call is closing';
/** The slots of one operation record. */
export const OP_SIZE = 4;
/** The low bits of a record's first slot hold the operation... */
export const OP_MASK = 15;
/** ...the high bits the form of a call's payload: no argument (payload 0)... */
export const ARGS_NONE = 0;
/** ...one argument (the payload is the argument)... */
export const ARGS_ONE = 16;
/** ...or an array of arguments. */
export const ARGS_ARRAY = 32;

/** What one side of a link needs: where it listens, where it posts, and how far each side read. */
export interface LinkPorts {
  /** The id of the calls this side makes, unique in the process: with a call's id, it names the call (ps() joins calls by it). */
  id: number;
  /** The id of the calls the other side makes (its `id`). */
  peerId: number;
  /** The read end of this side's inbox. */
  inPort: MessagePort;
  /** The write end of the other side's inbox. */
  outPort: MessagePort;
  /**
   * Slot 0: how many messages of its inbox this side has read, with none missing before them;
   * slot 1: how many operations arrived in them (back-pressure counts them); slot 2: non-zero
   * while the other side waits for slot 1 to grow; slot 3: the id of the last call of the other
   * side this side started, modulo 2^32 (calls start in the order they were made, so those after
   * it never ran: when this side dies, a pool sends them to another thread) (READ_SLOTS in all).
   */
  inRead: Int32Array;
  /** The same counts, published by the other side for what this side sent it. */
  outRead: Int32Array;
}

/** The slots of a LinkPorts' read counters. */
export const READ_SLOTS = 4;

/** Whether `value` is a LinkPorts as it arrives from another thread (a hostile or broken peer may send anything). */
export function isLinkPorts(value: unknown): value is LinkPorts {
  const ports = value as Partial<LinkPorts> | null;
  return (
    typeof ports === 'object' &&
    ports !== null &&
    typeof ports.id === 'number' &&
    typeof ports.peerId === 'number' &&
    ports.inRead instanceof Int32Array &&
    ports.inRead.length === READ_SLOTS &&
    ports.outRead instanceof Int32Array &&
    ports.outRead.length === READ_SLOTS &&
    typeof ports.inPort?.postMessage === 'function' &&
    typeof ports.outPort?.postMessage === 'function'
  );
}

import type { SimulatedChild } from './testing/active.js';

/** What a LoopThread's worker receives as `workerData`. */
export interface LoopThreadData {
  moduleUrl: string;
  name: string;
  /** The link of the loop that started the thread, when one was running. */
  parent: LinkPorts | null;
  /** The names of the functions the parent exposed to the thread. */
  exposed: string[];
  /** The starting thread: its id, name and heartbeat, which the thread names when asked for a snapshot from outside. */
  starter: { threadId: number; name: string; heartbeat: Float64Array };
  /** The thread's guard of ThreadQueue operations: the parent stops them before it terminates the thread (threads/guard.ts). */
  guard: SharedArrayBuffer;
  /** The back-pressure bound of the thread's links (LoopThreadOptions.maxCallsInFlight). */
  maxCallsInFlight: number;
  /** An export to call before the thread says it is ready (a pool's initializer), its arguments as `toWire` made them; null for none. */
  initializer: { name: string; args: unknown[] } | null;
  /** The simulation the thread's loop joins (multiloop/testing), or null. */
  simulation: SimulatedChild | null;
}

/** Worker to parent: the module is loaded and the loop runs; `exports` are its callable names. */
export interface ReadyMessage {
  type: 'ready';
  exports: string[];
  /** Exported names that are not functions (for precise errors). */
  others: string[];
  /** The thread's heartbeat (see introspect.ts): how long its loop has been busy, readable while it cannot answer. */
  heartbeat: Float64Array;
}

/** Worker to parent: the module could not be loaded. */
export interface FailedMessage {
  type: 'failed';
  error: EncodedError;
}

/** Parent to worker: attach a link for another loop of the parent's thread. */
export interface LinkMessage {
  type: 'link';
  ports: LinkPorts;
}

/** Parent to worker: stop the loop gracefully and end the thread. */
export interface CloseMessage {
  type: 'close';
}

/** Parent to worker: serve the hosted module with comlink on `port`. */
export interface ComlinkMessage {
  type: 'comlink';
  port: MessagePort;
}

/** Parent to worker: answer on `port` with this thread's snapshot and its own LoopThreads', within `timeout` ms. */
export interface SnapshotMessage {
  type: 'snapshot';
  port: MessagePort;
  timeout: number;
}

/** Worker to parent: take a snapshot of the whole process (from its main thread) and answer on `port`. */
export interface ProcessSnapshotMessage {
  type: 'ps';
  port: MessagePort;
  timeout: number;
}

/** Worker to parent: serve a link for the loop that started the thread (its `parentLoop()` was passed to another thread). */
export interface ParentLinkMessage {
  type: 'link';
  ports: LinkPorts;
}

export type ToWorker = LinkMessage | CloseMessage | ComlinkMessage | SnapshotMessage;
export type FromWorker = ReadyMessage | FailedMessage | ProcessSnapshotMessage | ParentLinkMessage | TypeScriptPortMessage;
