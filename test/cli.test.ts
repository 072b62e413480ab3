/**
 * `multiloop ps <pid>` and `multiloop pstree <pid>` against real processes: one that uses
 * multiloop (its tasks across threads listed, nothing opened in it, still running), one whose
 * main thread is blocked, processes that do not use multiloop (never signalled), hostile or
 * broken attach endpoints (refused in one line, never a hang or a stack trace), bad arguments.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../dist/bin/multiloop.js', import.meta.url));
const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Start `command args`; resolves once it printed a line matching `ready` (a `<word> <pid>` line). */
async function start(command: string, args: string[], ready: RegExp): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  started.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let i = 0; i < 600 && !ready.test(output); i++) {
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  if (!ready.test(output)) throw new Error(`${args.join(' ')} did not start: ${output}`);
  return { child, output: () => output };
}

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The TCP ports process `pid` listens on (from /proc: its own sockets only). */
function listeningTcpPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match !== null) inodes.add(match[1] as string);
    } catch {
      // Closed meanwhile.
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // st 0A: LISTEN.
      if (fields.length > 9 && fields[3] === '0A' && inodes.has(fields[9] as string)) ports.push(parseInt((fields[1] as string).split(':')[1] as string, 16));
    }
  }
  return ports;
}

/** Whether `text` went to a terminal as control sequences (ESC, BEL, C1, bidi overrides) instead of escaped text. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('multiloop ps / pstree <pid>', () => {
  it('prints the tree and the table of a running multiloop process across its threads, opening nothing in it', async () => {
    const { child, output } = await start(process.execPath, [fixture('ps-target.mjs')], /ready \d+/);
    const pid = child.pid as number;
    const tree = cli('pstree', String(pid));
    expect(tree.stderr).toBe('');
    expect(tree.status).toBe(0);
    const lines = tree.stdout.split('\n');
    expect(lines[0]).toMatch(/^MainThread \(thread 0\): loop 0x1 idle, \d+ tasks/);
    expect(lines.some((line) => /^target-hop \(thread \d+\): loop 0x[0-9a-f]+ idle, 1 task/.test(line))).toBe(true);
    const relaying = lines.findIndex((line) => line.includes('(T) target-relaying relaying()'));
    expect(relaying).toBeGreaterThan(0);
    expect(lines[relaying + 1]).toMatch(/^ {4}└── \(T\) Task-\d+ relay\(\) — target-hop, waiting .* for call 'hold' in LoopThread 'target-hop-2'$/);
    expect(lines[relaying + 2]).toMatch(/^ {8}└── \(T\) Task-\d+ hold\(\) — target-hop-2, waiting .* for sleep, \d+ s left$/);

    const table = cli('ps', String(pid));
    expect(table.status).toBe(0);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^tid\s+thread\s+loop id\s+loop state\s+task id\s+task name\s+coroutine\s+state\s+waiting\s+awaiting\s+awaiter name\s+awaiter id$/);
    expect(rows.some((row) => /^0\s+MainThread\s+0x1\s+idle\s+0x[0-9a-f]+\s+target-ticking\s+ticking\(\)\s+pending/.test(row))).toBe(true);
    // The task at the far end: awaited by the task serving the relay, in the thread before.
    expect(rows.some((row) => /^\d+\s+target-hop-2\s+0x[0-9a-f]+\s+idle\s+0x[0-9a-f]+\s+Task-\d+\s+hold\(\)\s+pending\s+[\d.]+ m?s\s+sleep, \d+ s left\s+Task-\d+\s+0x1[0-9a-f]{8}$/.test(row))).toBe(true);

    // Nothing listens on TCP in the target, before, while or after it is asked: no inspector, no port.
    expect(listeningTcpPorts(pid)).toEqual([]);
    child.stdin!.write('done\n');
    const [code] = (await once(child, 'exit')) as [number];
    expect(output()).toContain('inspector closed, ticking true');
    expect(output()).not.toContain('Debugger');
    expect(code).toBe(0);
  });

  it('lists a blocked main thread as unresponsive, with how long, beside the tasks of the threads that go on', async () => {
    const { child, output } = await start(process.execPath, [fixture('ps-blocked.mjs')], /blocking \d+/);
    const tree = cli('pstree', String(child.pid), '--timeout', '0.5');
    expect(tree.stderr).toBe('');
    expect(tree.status).toBe(0);
    const lines = tree.stdout.split('\n');
    expect(lines[0]).toMatch(/^MainThread \(thread 0\): unresponsive, its loop running callbacks for [\d.]+ m?s without a break$/);
    expect(lines.some((line) => /^blocked-hop \(thread \d+\): loop 0x[0-9a-f]+ idle, 1 task/.test(line))).toBe(true);
    const relay = lines.findIndex((line) => /^└── \(T\) Task-\d+ relay\(\) — blocked-hop, waiting .* for call 'hold' in LoopThread 'blocked-hop-2'$/.test(line));
    expect(relay).toBeGreaterThan(0);
    expect(lines[relay + 1]).toMatch(/^ {4}└── \(T\) Task-\d+ hold\(\) — blocked-hop-2, waiting .* for sleep, \d+ s left$/);

    // Interrupted while it waits for the blocked thread: the target goes on as it was.
    const interrupted = spawn(process.execPath, [CLI, 'ps', String(child.pid), '--timeout', '30'], { stdio: 'ignore' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    interrupted.kill('SIGINT');
    await once(interrupted, 'exit');
    child.stdin!.write('\n');
    const [code] = (await once(child, 'exit')) as [number];
    expect(output()).toContain('unblocked');
    expect(code).toBe(0);
  });

  it('reads the showcase held with its main thread blocked (npm start -- --hold): every thread, the blocked one as unresponsive', async () => {
    const showcase = fileURLToPath(new URL('../dist/examples/showcase.js', import.meta.url));
    const { child, output } = await start(process.execPath, [showcase, '--hold'], /run: npx multiloop pstree \d+/);
    const tree = cli('pstree', String(child.pid), '--timeout', '1');
    expect(tree.stderr).toBe('');
    const lines = tree.stdout.split('\n');
    expect(lines[0]).toMatch(/^MainThread \(thread 0\): unresponsive, its loop running callbacks for [\d.]+ m?s without a break$/);
    expect(lines[1]).toMatch(/^inventory \(thread \d+\): loop 0x[0-9a-f]+ idle, 1 task, /);
    expect(lines[2]).toMatch(/^pricing \(thread \d+\): loop 0x[0-9a-f]+ idle, 0 tasks, /);
    expect(lines).toContainEqual(expect.stringMatching(/^└── \(T\) Task-\d+ audit\(\) — inventory, waiting .* for sleep, \d+ s left$/));
    child.stdin!.write('\n');
    const [code] = (await once(child, 'exit')) as [number];
    expect(output()).toContain('inventory: audit cancelled');
    expect(output()).toContain('summary');
    expect(code).toBe(0);
  });

  it('never signals a process that does not run multiloop: a Node process with handlers for every catchable signal, and sleep', async () => {
    const witness = await start(process.execPath, [fixture('signal-witness.mjs')], /ready \d+/);
    const result = cli('ps', String(witness.child.pid));
    expect(result).toEqual({
      status: 1,
      stdout: '',
      stderr: `multiloop: process ${witness.child.pid} (node) runs no multiloop loop to attach to (not a multiloop app, none started yet, or MULTILOOP_ATTACH=0)\n`,
    });
    witness.child.stdin!.write('done\n');
    await once(witness.child, 'exit');
    expect(witness.output()).toBe(`ready ${witness.child.pid}\ndone\n`);

    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
    started.push(sleeper);
    await once(sleeper, 'spawn');
    const onSleep = cli('pstree', String(sleeper.pid));
    expect(onSleep.stderr).toBe(`multiloop: process ${sleeper.pid} (sleep) runs no multiloop loop to attach to (not a multiloop app, none started yet, or MULTILOOP_ATTACH=0)\n`);
    expect(sleeper.exitCode).toBe(null);
    expect(sleeper.signalCode).toBe(null);
    process.kill(sleeper.pid as number, 0);
  });

  it('says in one line that a process does not exist', () => {
    // A pid that was just freed: its process has ended.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const result = cli('pstree', String(gone));
    expect(result).toEqual({ status: 1, stdout: '', stderr: `multiloop: no process with pid ${gone}\n` });
  });

  it.each([
    ['garbage', /^multiloop: thread 0 of process \d+ gave a malformed answer: is not JSON$/],
    ['spoof', /^multiloop: thread 0 of process \d+ gave a malformed answer: answer\.pid is 1, not \d+$/],
    ['wrong-type', /^multiloop: thread 0 of process \d+ gave a malformed answer: answer\.part\.loops\[0\]\.tasks is not a whole number$/],
    ['deep', /^multiloop: thread 0 of process \d+ gave a malformed answer: (is not JSON|answer is not an object)$/],
    ['truncated', /^multiloop: thread 0 of process \d+ closed the connection in the middle of its answer$/],
    ['endless', /^multiloop: thread 0 of process \d+ answered more than 64 MiB$/],
  ])('refuses a %s answer in one line, without a stack trace', async (mode, message) => {
    const { child } = await start(process.execPath, [fixture('attach-fake.mjs'), mode], /ready \d+/);
    // Time enough for 64 MiB on a busy machine: the endless answer must meet the size limit, not the deadline.
    const result = cli('ps', String(child.pid), '--timeout', '20');
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.split('\n')).toHaveLength(2);
    expect(result.stderr.trimEnd()).toMatch(message);
    expect(result.stderr).not.toMatch(RAW_CONTROL);
  });

  it('gives a silent endpoint only its timeout: the thread is listed as unresponsive', async () => {
    const { child } = await start(process.execPath, [fixture('attach-fake.mjs'), 'silent'], /ready \d+/);
    const result = cli('pstree', String(child.pid), '--timeout', '0.3');
    expect(result).toEqual({ status: 0, stdout: 'MainThread (thread 0): unresponsive\n\n(no tasks)\n', stderr: '' });
  });

  it('prints names as escaped text, never as terminal control sequences', async () => {
    const { child } = await start(process.execPath, [fixture('attach-fake.mjs'), 'escapes'], /ready \d+/);
    const tree = cli('pstree', String(child.pid));
    expect(tree.status).toBe(0);
    expect(tree.stdout).not.toMatch(RAW_CONTROL);
    expect(tree.stdout).toContain('└── (T) evil\\x1b]0;retitled\\x07\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07\\u202egnp.exe\\nforged line main() — MainThread, pending, ready to run\n');
    const table = cli('ps', String(child.pid));
    expect(table.stdout).not.toMatch(RAW_CONTROL);
    expect(table.stdout.trim().split('\n')).toHaveLength(3);
  });

  it('refuses bad arguments, with the usage', () => {
    const noPid = cli('ps');
    expect(noPid.status).toBe(2);
    expect(noPid.stderr).toMatch(/^multiloop: a pid is a positive integer, got nothing\nusage: multiloop ps <pid>/);
    expect(cli('pstree', 'abc').stderr).toMatch(/^multiloop: a pid is a positive integer, got "abc"/);
    expect(cli('top').stderr).toMatch(/^multiloop: unknown command "top"\nusage:/);
    expect(cli('ps', '1', '--port', '9229').stderr).toMatch(/^multiloop: unknown option "--port"\nusage:/);
    expect(cli('ps', '1', '--timeout', 'x').stderr).toBe('multiloop: --timeout takes a number of seconds (more than 0, at most 3600), got "x"\n');
    expect(cli('ps', '1', '--timeout', '0').status).toBe(2);
    expect(cli('ps', '1', '2').stderr).toMatch(/^multiloop: one pid at a time, got 2\n/);
    const help = cli('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: multiloop ps <pid>/);
  });
});
