/**
 * A second local user for the tests that play an attacker (or a target) of another user: made
 * when the suite runs as root; otherwise the suite is skipped with one clear line — and under CI
 * (CI=true) that skip is a failure.
 */
import { spawnSync } from 'node:child_process';
import { it } from 'vitest';

/** The user the tests make: a system account without a home or a login shell. */
export const PROBE_USER = 'multiloop-probe';

/** A local user other than the one running the tests. */
export interface OtherUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

function lookUp(name: string): OtherUser | null {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * The second user (made now if missing), or null when this is not root: then prints one
 * "skipped: needs root" line, and under CI registers a failing test saying so.
 *
 * @example
 * ```ts
 * const other = otherUser('the attach security tests');
 * describe.runIf(other !== null)('attach', () => { ... });
 * ```
 */
export function otherUser(what: string): OtherUser | null {
  let found: OtherUser | null = null;
  let why = 'needs root, to make a second local user';
  if (process.getuid?.() === 0) {
    found = lookUp(PROBE_USER);
    if (found === null) {
      const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', PROBE_USER], { encoding: 'utf8' });
      found = lookUp(PROBE_USER);
      if (found === null) why = `useradd could not make ${PROBE_USER}: ${(made.stderr || made.error?.message || '').trim()}`;
    }
  }
  if (found !== null) return found;
  const line = `skipped: ${why} — ${what} did not run`;
  console.log(line);
  if (process.env.CI === 'true') {
    it(`${what} need a second local user (CI=true: a skip is a failure)`, () => {
      throw new Error(line);
    });
  }
  return null;
}
