/**
 * Where a process's attach points live, and whether a directory there can be trusted. Each
 * thread of a process that runs a multiloop loop listens on a Unix socket
 * `<tmpdir>/multiloop-<uid>/<pid>-<threadId>.sock`: a directory only its user can enter (mode
 * 0700, owned by that user, not a link), so that nobody else can connect, nor plant a socket
 * where the owner's `multiloop ps` would look.
 */
import { lstatSync, mkdirSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The longest path a Unix socket can be bound to on Linux (sun_path is 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;

/** The request a client sends: one line, nothing else is answered. */
export const REQUEST = 'multiloop-attach 1 snapshot\n';

/** The attach directory of user `uid` under `base` (default: this process's temporary directory). */
export function attachDir(uid: number, base = tmpdir()): string {
  return join(base, `multiloop-${uid}`);
}

/** The socket of thread `threadId` of process `pid`, in `dir`. */
export function socketPath(dir: string, pid: number, threadId: number): string {
  return join(dir, `${pid}-${threadId}.sock`);
}

/** The pid and thread id a socket's file name stands for, or null when it is not one of ours. */
export function parseSocketName(name: string): { pid: number; threadId: number } | null {
  const match = /^(\d{1,10})-(\d{1,10})\.sock$/.exec(name);
  if (match === null) return null;
  return { pid: Number(match[1]), threadId: Number(match[2]) };
}

/** Why `stats` of a directory cannot be trusted as `uid`'s attach directory, or null when it can. */
export function untrustedDir(stats: Stats, uid: number): string | null {
  if (stats.isSymbolicLink()) return 'is a symbolic link';
  if (!stats.isDirectory()) return 'is not a directory';
  if (stats.uid !== uid) return `belongs to uid ${stats.uid}, not ${uid}`;
  if ((stats.mode & 0o077) !== 0) return `is open to other users (mode ${(stats.mode & 0o777).toString(8)})`;
  return null;
}

/**
 * This user's attach directory, made if missing; throws an Error saying why when it cannot be
 * trusted (someone else made it, or opened it) or a socket path in it would be too long.
 */
export function ownAttachDir(): string {
  const uid = process.getuid?.() ?? -1;
  if (uid < 0) throw new Error('this platform has no user ids');
  const dir = attachDir(uid);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const why = untrustedDir(lstatSync(dir), uid);
  if (why !== null) throw new Error(`${dir} ${why}`);
  if (Buffer.byteLength(socketPath(dir, 4_194_304, 4_294_967_295)) > MAX_SOCKET_PATH) {
    throw new Error(`${dir} is too long a path for Unix sockets (set TMPDIR to a shorter one)`);
  }
  return dir;
}
