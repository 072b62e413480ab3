/**
 * Hooks of multiloop's internals that its own tests reach from inside threads. The bundle makes
 * this an entry of its own (dist/lib/internals.js, scripts/bundle.mjs) sharing the bundle's
 * chunks, so a test's thread-side module acts on the copy that runs there. Not part of the API:
 * nothing in the package's exports names it.
 */
export { _setCallbackDecoder, fromWire, toWire } from './wire.js';
export { _holdPutLock, _releasePutLock, _setStuckLockMs } from './threads/queue-memory.js';
export { decodeError, encodeError } from './errors.js';
export { ensureTypeScriptSupport, importUserModule } from './ts-loader.js';
export { collectTransfers } from '../transfer.js';
export * as exceptions from '../exceptions.js';
