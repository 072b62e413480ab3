/**
 * The attach door of `multiloop ps <pid>` against another local user, for real: a second user
 * racing the command finds nothing to connect to and runs no code in the target; it cannot read
 * a process that is not its own; root can read anyone's; a directory that another user made
 * where the owner's attach sockets go is never trusted. Runs as root (it makes the second user).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { otherUser, readableCopy, type OtherUser, type ReadableCopy } from './helpers/users.js';

const other = otherUser('the attach security tests');

// The second user runs the command and the fixtures from a copy it can read: the clone may live
// where it cannot (a home directory of mode 700).
const copy = other === null ? null : readableCopy(['ps-target.mjs', 'ps-chain.mjs', 'attach-attacker.mjs']);
afterAll(() => copy?.remove());
const CLI = copy?.cli ?? '';
/** The node every user can run (the clone's may sit where the second user cannot reach it). */
const NODE = copy?.node ?? process.execPath;
const fixture = (name: string): string => (copy as ReadableCopy).fixture(name);

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A scratch directory every user can write to (as /tmp is): for markers and a TMPDIR of its own. */
const scratch = mkdtempSync('/tmp/multiloop-security-');
chmodSync(scratch, 0o1777);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Start node with `args` (as `user` when given); resolves once it printed a line matching `ready`. */
async function start(args: string[], ready: RegExp, options: { user?: OtherUser; env?: NodeJS.ProcessEnv } = {}): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(NODE, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    uid: options.user?.uid,
    gid: options.user?.gid,
    env: { ...process.env, ...options.env },
    cwd: '/',
  });
  started.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let i = 0; i < 600 && !ready.test(output) && child.exitCode === null; i++) await new Promise((resolve) => setTimeout(resolve, 25));
  if (!ready.test(output)) throw new Error(`${args.join(' ')} did not start: ${output}`);
  return { child, output: () => output };
}

function cli(args: string[], user?: OtherUser): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(NODE, [CLI, ...args], { encoding: 'utf8', timeout: 30_000, uid: user?.uid, gid: user?.gid, cwd: '/' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.runIf(other !== null)('multiloop ps against another local user', () => {
  const user = other as OtherUser;

  it('a second user racing `multiloop ps` finds no port and no socket it can connect to, and runs no code in the target', async () => {
    const target = await start([fixture('ps-target.mjs')], /ready \d+/);
    const attacker = await start(
      [fixture('attach-attacker.mjs'), String(target.child.pid), '4000', String(process.getuid!())],
      /watching/,
      { user },
    );
    for (let i = 0; i < 5; i++) expect(cli(['ps', String(target.child.pid)]).status).toBe(0);
    await once(attacker.child, 'exit');
    const report = JSON.parse(attacker.output().trim().split('\n').at(-1) as string) as Record<string, unknown>;
    // It saw the target's attach sockets (their names are public in /proc/net/unix) and could open none.
    expect(report).toMatchObject({ unixConnected: 0, dirListed: false });
    expect(report.unixRefused).toBeGreaterThan(0);
    target.child.stdin!.write('done\n');
    await once(target.child, 'exit');
    // No TCP door opened at any moment: no inspector, no listening socket in the target.
    expect(target.output()).toContain('inspector closed, ticking true, inspector seen false, tcp listeners seen 0');
  });

  it("refuses, in one line, to read another user's process", async () => {
    const target = await start([fixture('ps-target.mjs')], /ready \d+/);
    const result = cli(['pstree', String(target.child.pid)], user);
    expect(result).toEqual({
      status: 1,
      stdout: '',
      stderr: `multiloop: process ${target.child.pid} belongs to another user (uid ${process.getuid!()}): only its owner or root can read its tasks\n`,
    });
  });

  it("lets root read another user's process", async () => {
    const target = await start([fixture('ps-target.mjs')], /ready \d+/, { user, env: { TMPDIR: scratch } });
    const result = cli(['pstree', String(target.child.pid)]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^MainThread \(thread 0\): loop 0x1 idle/);
    expect(result.stdout).toContain('(T) target-relaying relaying() — MainThread');
  });

  it('never trusts an attach directory another user made first: the target opens nothing there, the command looks nowhere else', async () => {
    const squatted = mkdtempSync(join(scratch, 'tmp-'));
    chmodSync(squatted, 0o1777);
    const trap = join(squatted, `multiloop-${process.getuid!()}`);
    // The other user gets there first and leaves it open to all.
    const made = spawnSync(NODE, ['-e', `require('fs').mkdirSync(${JSON.stringify(trap)}, { mode: 0o777 }); require('fs').chmodSync(${JSON.stringify(trap)}, 0o777)`], { uid: user.uid, gid: user.gid });
    expect(made.status).toBe(0);
    const target = await start([fixture('ps-target.mjs')], /ready \d+/, { env: { TMPDIR: squatted } });
    expect(target.output()).toContain(`MultiloopWarning: multiloop ps cannot attach to this process: ${trap} belongs to uid ${user.uid}, not ${process.getuid!()}`);
    const result = cli(['ps', String(target.child.pid)]);
    expect(result.stderr).toBe(`multiloop: process ${target.child.pid} (node) runs no multiloop loop to attach to (not a multiloop app, none started yet, or MULTILOOP_ATTACH=0)\n`);
  });
});
