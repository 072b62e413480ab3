/**
 * Real programs some suites run (Debian's redis-server, chromium): found on the PATH, or the
 * suite is skipped with one clear line — and under CI (CI=true) that skip is a failure.
 */
import { spawnSync } from 'node:child_process';
import { it } from 'vitest';

/** Whether `command` is on the PATH. */
export function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/**
 * Whether the suite needing `command` can run. When it cannot, prints one
 * "skipped: install X" line, and under CI registers a failing test saying so.
 *
 * @example
 * ```ts
 * const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the distributed (BullMQ) tests');
 * describe.runIf(hasRedis)('BullMQExecutor', () => { ... });
 * ```
 */
export function needProgram(command: string, install: string, what: string): boolean {
  if (onPath(command)) return true;
  const line = `skipped: install ${command} (${install}) — ${what} did not run`;
  console.log(line);
  if (process.env.CI === 'true') {
    it(`${what} need ${command} (CI=true: a skip is a failure)`, () => {
      throw new Error(line);
    });
  }
  return false;
}
