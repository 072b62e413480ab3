/**
 * Whether the process has a file descriptor left, for a server's accept.
 *
 * On Unix libuv (1.45 and later: Node 20 on) never tells Node that accept() failed. On EMFILE or
 * ENFILE it frees the descriptor it keeps in reserve, accepts every pending connection and closes
 * it at once, and takes its reserve back (uv__emfile_trick in src/unix/stream.c): each client sees
 * its connection accepted and then ended, and the server hears of none of it — no 'connection',
 * no 'error', no 'drop'. What a server can see is the accept that took the last descriptor: one
 * more open() right after it fails the way the next accept() will.
 */
import { closeSync, openSync } from 'node:fs';
import { devNull } from 'node:os';

/**
 * The codes under which asyncio's accept loop reports "out of system resource" (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) instead of raising.
 */
export const OUT_OF_RESOURCE_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM']);

/**
 * Whether a probe tells anything here: on Windows sockets are handles, not descriptors of the CRT
 * table an open() takes from, and libuv reports a failed accept to the server's 'error' event.
 */
export const CAN_PROBE_DESCRIPTORS = process.platform !== 'win32';

/**
 * Open the null device and close it again: null when that worked (a descriptor was free), else the
 * error open() failed with — EMFILE or ENFILE when the process or the system has none left.
 */
export function probeDescriptor(): NodeJS.ErrnoException | null {
  let fd: number;
  try {
    fd = openSync(devNull, 'r');
  } catch (error) {
    return error as NodeJS.ErrnoException;
  }
  closeSync(fd);
  return null;
}
