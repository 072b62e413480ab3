/**
 * The target side of `multiloop ps <pid>`: each thread that runs a multiloop loop listens on a
 * Unix socket of its own in its user's attach directory (paths.ts), and answers one request
 * there — its part of a snapshot — read from the state its loops keep anyway. No port, no
 * signal, nothing that runs code: a client can ask for a snapshot and nothing else, and only
 * the process's own user (or root) can reach the socket. Every thread answers for itself, so a
 * thread whose loop is blocked does not hide the others; those it knows (the thread that started
 * it, the LoopThreads it started) are named in its answer with their heartbeats, so that a
 * client can say how long a silent one has been busy. `MULTILOOP_ATTACH=0` turns it off.
 */
import { chmodSync, readdirSync, unlinkSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { threadId } from 'node:worker_threads';
import { knownThreads } from '../introspect.js';
import { snapshotThisThread } from '../snapshot.js';
import { REQUEST, ownAttachDir, parseSocketName, socketPath } from './paths.js';

/** What a thread answers: its part of the snapshot, and the threads it knows with their heartbeats. */
export interface AttachAnswer {
  readonly v: 1;
  readonly pid: number;
  readonly threadId: number;
  readonly part: ReturnType<typeof snapshotThisThread>;
  readonly known: ReturnType<typeof knownThreads>;
}

/** How many clients one thread serves at once; more wait in the kernel's backlog. */
const MAX_CLIENTS = 4;
/** How long a client has to send its request, in ms. */
const REQUEST_TIMEOUT_MS = 5000;
/** How many stale sockets of ended processes the main thread removes at its start, at most. */
const SWEEP_LIMIT = 256;

let server: Server | null | undefined;

/**
 * Listen for `multiloop ps` in this thread, once (the first loop of a thread calls it). Failing
 * to (an attach directory someone else owns, a path too long) is a warning, never an error of the
 * app.
 */
export function openAttachPoint(): void {
  if (server !== undefined) return;
  server = null;
  if (process.env.MULTILOOP_ATTACH === '0' || process.platform === 'win32') return;
  let dir: string;
  try {
    dir = ownAttachDir();
  } catch (error) {
    process.emitWarning(`multiloop ps cannot attach to this process: ${(error as Error).message}`, 'MultiloopWarning');
    return;
  }
  if (threadId === 0) sweepStale(dir);
  const path = socketPath(dir, process.pid, threadId);
  // Only a socket of an ended process that had this pid can be there.
  removeQuietly(path);
  const listening = createServer(serve);
  listening.maxConnections = MAX_CLIENTS;
  listening.on('error', () => listening.close());
  listening.listen({ path, readableAll: false, writableAll: false }, () => {
    // The directory already keeps others out; the socket says so too.
    try {
      chmodSync(path, 0o600);
    } catch {
      // Removed meanwhile: nothing to protect.
    }
  });
  listening.unref();
  server = listening;
  // Handles closed with the thread remove their socket; process.exit() closes none.
  process.once('exit', () => removeQuietly(path));
}

/** Answer one request on `socket`, then close it; anything else than the request closes it at once. */
function serve(socket: Socket): void {
  socket.unref();
  socket.on('error', () => socket.destroy());
  socket.setTimeout(REQUEST_TIMEOUT_MS, () => socket.destroy());
  let got = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    got += chunk;
    if (got === REQUEST) {
      socket.removeAllListeners('data');
      socket.end(`${JSON.stringify(answer())}\n`);
    } else if (!REQUEST.startsWith(got)) socket.destroy();
  });
}

function answer(): AttachAnswer {
  return { v: 1, pid: process.pid, threadId, part: snapshotThisThread(), known: knownThreads() };
}

/** Remove the sockets of processes that ended without removing theirs (killed, crashed). */
function sweepStale(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names.slice(0, SWEEP_LIMIT)) {
    const owner = parseSocketName(name);
    if (owner === null || owner.pid === process.pid || alive(owner.pid)) continue;
    removeQuietly(`${dir}/${name}`);
  }
}

/** Whether a process `pid` exists (signal 0 delivers nothing; EPERM: it exists, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone.
  }
}
