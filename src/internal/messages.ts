/**
 * The messages that travel between threads. Operations between two loops travel in batches:
 * a flat array of 4-slot records `[op, id, a, b, op, id, a, b, ...]`, cheap to clone: function
 * names travel once per link (NAME) and then as small integers; a call's arguments travel
 * without an array when there are none or one (the record's form says which).
 * Control messages between a LoopThread and its worker are plain objects.
 */
import type { MessagePort } from 'node:worker_threads';
import type { EncodedError } from './errors.js';

/** `[CALL | form, id, nameId, payload]`: run an export there; a reply with the same id follows. */
export const OP_CALL = 1;
/** `[NOTIFY | form, 0, nameId, payload]`: run an export there; no reply. */
export const OP_NOTIFY = 2;
/** `[CANCEL, id, message, 0]`: cancel the call `id` made earlier. */
export const OP_CANCEL = 3;
/** `[RESULT, id, value, nameId]`: the call `id` (of the function `nameId` here) returned `value`. */
export const OP_RESULT = 4;
/** `[ERROR, id, encodedError, 0]`: the call `id` failed. */
export const OP_ERROR = 5;
/** `[CANCELLED, id, message, 0]`: the call `id` ended cancelled there. */
export const OP_CANCELLED = 6;
/** `[NAME, nameId, name, 0]`: from now on `nameId` stands for the function name `name`. */
export const OP_NAME = 7;
/**
 * `[BELL, 0, Int32Array on a SharedArrayBuffer, 0]`: after each batch posted to the sender of
 * this record, ring the bell (add 1 to BELL_RINGS, notify): the sender may be blocked waiting
 * for a reply. A thread that exits sets BELL_DEAD and BELL_EXIT_CODE and rings once more.
 */
export const OP_BELL = 8;
/** The bell's slots: how often it rang... */
export const BELL_RINGS = 0;
/** ...whether the ringing thread exited... */
export const BELL_DEAD = 1;
/** ...and its exit code. */
export const BELL_EXIT_CODE = 2;
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

/** The two ports one side of a link needs: where it listens and where it posts. */
export interface LinkPorts {
  /** The read end of this side's inbox. */
  inPort: MessagePort;
  /** The write end of the other side's inbox. */
  outPort: MessagePort;
}

/** What a LoopThread's worker receives as `workerData`. */
export interface LoopThreadData {
  moduleUrl: string;
  name: string;
  /** The link of the loop that started the thread, when one was running. */
  parent: LinkPorts | null;
  /** The names of the functions the parent exposed to the thread. */
  exposed: string[];
}

/** Worker to parent: the module is loaded and the loop runs; `exports` are its callable names. */
export interface ReadyMessage {
  type: 'ready';
  exports: string[];
  /** Exported names that are not functions (for precise errors). */
  others: string[];
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

export type ToWorker = LinkMessage | CloseMessage;
export type FromWorker = ReadyMessage | FailedMessage;
