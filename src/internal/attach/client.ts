/**
 * The client side of `multiloop ps <pid>`: find the attach sockets of every thread of `pid`,
 * ask each for its part of a snapshot (each within the deadline), and check what comes back.
 * Nothing is sent to the process but the one request line on its own sockets: no signal, no
 * port. On Linux the sockets are found through /proc — the listening Unix sockets that `pid`
 * itself holds — so a stale file, or one of another process, is never taken for `pid`'s.
 */
import { lstatSync, readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { basename, dirname, join } from 'node:path';
import type { ThreadSnapshot } from '../snapshot.js';
import { unresponsiveThread } from '../snapshot.js';
import type { KnownThread } from '../introspect.js';
import { REQUEST, attachDir, parseSocketName, untrustedDir } from './paths.js';
import { MalformedAnswer, checkAnswer } from './validate.js';

/** A failure of the command, said in one line. */
export class AttachError extends Error {}

/** The largest answer read from one thread, in bytes. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** A thread's attach socket. */
interface Endpoint {
  readonly threadId: number;
  readonly path: string;
}

/** The uid of the user running process `pid`; AttachError when there is no such process. */
function ownerOf(pid: number): number {
  try {
    return statSync(`/proc/${pid}`).uid;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || existsProc()) throw new AttachError(`no process with pid ${pid}`);
  }
  // No /proc (not Linux): signal 0 delivers nothing, and says whether the process is someone else's.
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPERM') throw new AttachError(`process ${pid} belongs to another user: only its owner or root can read its tasks`);
    throw new AttachError(`no process with pid ${pid}`);
  }
  return process.getuid?.() ?? 0;
}

function existsProc(): boolean {
  try {
    return statSync('/proc/self').isDirectory();
  } catch {
    return false;
  }
}

/**
 * What `pid` runs (its command name: the last part of its argv[0], as `ps` shows it), for
 * messages; null when unknown. Not /proc/<pid>/comm: that is the name of the main thread, which
 * Node 24+ sets to `node-MainThread`.
 */
function commandOf(pid: number): string | null {
  try {
    const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0', 1)[0] ?? '';
    const name = argv0.slice(argv0.lastIndexOf('/') + 1);
    if (name !== '') return name;
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}

/** The inodes of the sockets process `pid` holds open. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch (error) {
    throw new AttachError(`cannot read the open files of process ${pid}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match !== null) inodes.add(match[1] as string);
    } catch {
      // Closed meanwhile.
    }
  }
  return inodes;
}

/** The attach sockets `pid` listens on, read from /proc: only sockets bound by `pid` itself count. */
function endpointsFromProc(pid: number): Endpoint[] {
  const inodes = socketInodes(pid);
  const found: Endpoint[] = [];
  // Num RefCount Protocol Flags Type St Inode Path; listening sockets carry __SO_ACCEPTCON (0x10000).
  for (const line of readFileSync(`/proc/${pid}/net/unix`, 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 8) continue;
    const [, , , flags, , , inode] = fields as [string, string, string, string, string, string, string];
    const path = fields.slice(7).join(' ');
    if (!inodes.has(inode) || (parseInt(flags, 16) & 0x10000) === 0) continue;
    if (!/^multiloop-\d+$/.test(basename(dirname(path)))) continue;
    const name = parseSocketName(basename(path));
    if (name !== null && name.pid === pid) found.push({ threadId: name.threadId, path });
  }
  return found;
}

/** The attach sockets of `pid` by their names in the owner's directory (where /proc cannot say). */
function endpointsByName(pid: number, owner: number): Endpoint[] {
  const dir = attachDir(owner);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const found: Endpoint[] = [];
  for (const name of names) {
    const parsed = parseSocketName(name);
    if (parsed !== null && parsed.pid === pid) found.push({ threadId: parsed.threadId, path: join(dir, name) });
  }
  return found;
}

/** Refuse a socket whose directory or file could have been put there by someone else than `owner`. */
function checkPlace(endpoint: Endpoint, pid: number, owner: number): void {
  const dir = dirname(endpoint.path);
  let why: string | null;
  try {
    why = untrustedDir(lstatSync(dir), owner);
    const socket = lstatSync(endpoint.path);
    if (why === null && !socket.isSocket()) why = `holds ${basename(endpoint.path)}, which is not a socket`;
    else if (why === null && socket.uid !== owner) why = `holds ${basename(endpoint.path)}, which belongs to uid ${socket.uid}`;
  } catch (error) {
    why = `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  if (why !== null) throw new AttachError(`refusing the attach socket of process ${pid}: ${dir} ${why}`);
}

/** Ask one thread; its checked answer, `'silent'` when it did not answer in time, `'gone'` when nothing listens. */
function ask(endpoint: Endpoint, pid: number, deadline: number): Promise<ReturnType<typeof checkAnswer> | 'silent' | 'gone'> {
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint.path);
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      outcome();
    };
    const timer = setTimeout(() => settle(() => resolve('silent')), Math.max(0, deadline - Date.now()));
    socket.on('connect', () => socket.write(REQUEST));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A thread that ended between the look and the ask; anything else it cannot answer through.
      if (size === 0 && (error.code === 'ECONNREFUSED' || error.code === 'ENOENT')) settle(() => resolve('gone'));
      else settle(() => reject(new AttachError(`thread ${endpoint.threadId} of process ${pid}: ${error.code ?? error.message}`)));
    });
    socket.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        settle(() => reject(new AttachError(`thread ${endpoint.threadId} of process ${pid} answered more than ${MAX_ANSWER_BYTES >> 20} MiB`)));
        return;
      }
      chunks.push(chunk);
    });
    socket.on('end', () => {
      settle(() => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (!body.endsWith('\n')) {
          reject(new AttachError(`thread ${endpoint.threadId} of process ${pid} closed the connection ${size === 0 ? 'without an answer' : 'in the middle of its answer'}`));
          return;
        }
        try {
          resolve(checkAnswer(JSON.parse(body) as unknown, pid, endpoint.threadId));
        } catch (error) {
          const why = error instanceof MalformedAnswer ? error.message : 'is not JSON';
          reject(new AttachError(`thread ${endpoint.threadId} of process ${pid} gave a malformed answer: ${why}`));
        }
      });
    });
  });
}

/**
 * Every thread's part of a snapshot of process `pid`, each asked with `timeout` ms to answer; a
 * thread that does not answer in time is listed as unresponsive, named and timed by what the
 * threads that know it say of its heartbeat. AttachError, in one line, for anything else.
 */
export async function snapshotOf(pid: number, timeout: number): Promise<ThreadSnapshot[]> {
  const owner = ownerOf(pid);
  const me = process.getuid?.() ?? 0;
  if (me !== 0 && me !== owner) throw new AttachError(`process ${pid} belongs to another user (uid ${owner}): only its owner or root can read its tasks`);
  const endpoints = existsProc() ? endpointsFromProc(pid) : endpointsByName(pid, owner);
  if (endpoints.length === 0) {
    const command = commandOf(pid);
    throw new AttachError(
      `process ${pid}${command === null ? '' : ` (${command})`} runs no multiloop loop to attach to (not a multiloop app, none started yet, or MULTILOOP_ATTACH=0)`,
    );
  }
  for (const endpoint of endpoints) checkPlace(endpoint, pid, owner);
  const deadline = Date.now() + timeout;
  const answers = await Promise.all(endpoints.map((endpoint) => ask(endpoint, pid, deadline)));
  const known = new Map<number, KnownThread>();
  for (const answer of answers) if (typeof answer === 'object') for (const thread of answer.known) known.set(thread.threadId, thread);
  const parts: ThreadSnapshot[] = [];
  endpoints.forEach((endpoint, i) => {
    const answer = answers[i];
    if (answer === 'gone') return;
    if (answer === 'silent') {
      const them = known.get(endpoint.threadId);
      parts.push(unresponsiveThread(endpoint.threadId, them?.threadName ?? (endpoint.threadId === 0 ? 'MainThread' : `Thread-${endpoint.threadId}`), them?.since ?? 0));
    } else if (answer !== undefined) parts.push(answer.part);
  });
  if (parts.length === 0) throw new AttachError(`process ${pid} ended its multiloop threads while being asked`);
  return parts.sort((a, b) => a.threadId - b.threadId);
}
