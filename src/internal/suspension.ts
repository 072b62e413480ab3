/**
 * Where a task's coroutines are suspended, in debug mode: when a coroutine parks on a future,
 * the JavaScript stack at that moment holds a frame for every generator of its `yield*` chain,
 * innermost first, each at the line of its `yield*`. It is read then (the only moment it exists)
 * and kept for call graphs; outside debug mode nothing is read.
 */
import type { FrameCallGraphEntry } from '../graph.js';
import { sourceLocation } from './positions.js';

/**
 * The function of the task module that resumes the coroutines, and its file: the stack below it
 * is not the task's. Told by name and file, not by file alone: in the bundle, multiloop's own
 * generators (sleep, waitFor...) share the task's file and are frames of the chain.
 */
let stepper: { name: string; url: string; path: string } | null = null;

/** @internal The task module names its stepper (task.ts, once loaded). */
export function _setStepper(name: string, url: string): void {
  stepper = { name, url, path: url.replace(/^file:\/\//, '') };
}

/** Frames captured by the future being awaited now, taken by the task that parks on it. */
export const suspension: { frames: FrameCallGraphEntry[] | null } = { frames: null };

/** The suspended frames of each task whose coroutine parked in debug mode. */
export const suspendedAt = new WeakMap<object, FrameCallGraphEntry[]>();

const asCallSites = (_error: Error, sites: NodeJS.CallSite[]): NodeJS.CallSite[] => sites;

/** Read the generator frames of the coroutine chain now parking (called from a future's `next()`). */
export function captureSuspension(below: (...args: never[]) => unknown): void {
  const savedPrepare = Error.prepareStackTrace;
  const savedLimit = Error.stackTraceLimit;
  const holder: { stack?: unknown } = {};
  let sites: NodeJS.CallSite[];
  try {
    Error.prepareStackTrace = asCallSites;
    Error.stackTraceLimit = 64;
    Error.captureStackTrace(holder, below);
    // Formatted when first read: read while our formatter is in place.
    sites = holder.stack as NodeJS.CallSite[];
  } finally {
    Error.prepareStackTrace = savedPrepare;
    Error.stackTraceLimit = savedLimit;
  }
  const frames: FrameCallGraphEntry[] = [];
  for (const site of sites) {
    const file = site.getFileName();
    // The native `next` of each delegation has no file.
    if (file === null || file === undefined) continue;
    if (stepper !== null && (file === stepper.url || file === stepper.path) && site.getFunctionName() === stepper.name) break;
    frames.push({ name: site.getFunctionName() ?? 'anonymous', location: sourceLocation(file, site.getLineNumber() ?? 0, site.getColumnNumber() ?? 0) });
  }
  suspension.frames = frames;
}
