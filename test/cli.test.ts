/**
 * `multiloop ps <pid>` and `multiloop pstree <pid>` against real processes: one that uses
 * multiloop (found, its tasks across threads listed, its inspector closed again, still running),
 * one that does not exist, one that does not use multiloop; bad arguments.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from './helpers/io.js';

const CLI = fileURLToPath(new URL('../dist/bin/multiloop.js', import.meta.url));
const TARGET = fileURLToPath(new URL('./fixtures/ps-target.mjs', import.meta.url));

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Start `args` with node; resolve once it printed `ready <pid>` (or at once when `ready` is false). */
async function startNode(args: string[], ready = true): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  started.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', () => undefined);
  if (ready) {
    for (let i = 0; i < 400 && !/ready \d+/.test(output); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    if (!/ready \d+/.test(output)) throw new Error(`the target did not start: ${output}`);
  }
  return { child, output: () => output };
}

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('multiloop ps / pstree <pid>', () => {
  it('prints the tree of a running multiloop process, across its threads, and leaves it running with its inspector closed', async () => {
    const port = await freePort();
    const { child, output } = await startNode([`--inspect-port=${port}`, TARGET]);
    const tree = cli('pstree', String(child.pid));
    expect(tree.stderr).toBe('');
    expect(tree.status).toBe(0);
    const lines = tree.stdout.split('\n');
    expect(lines[0]).toMatch(/^MainThread \(thread 0\): loop 0x1 (idle|running), \d+ tasks/);
    expect(lines.some((line) => /^target-hop \(thread \d+\): loop 0x[0-9a-f]+ idle, 1 task/.test(line))).toBe(true);
    const relaying = lines.findIndex((line) => line.includes('(T) target-relaying relaying()'));
    expect(relaying).toBeGreaterThan(0);
    expect(lines[relaying + 1]).toMatch(/^ {4}└── \(T\) Task-\d+ relay\(\) — target-hop, waiting .* for call 'hold' in LoopThread 'target-hop-2'$/);
    expect(lines[relaying + 2]).toMatch(/^ {8}└── \(T\) Task-\d+ hold\(\) — target-hop-2, waiting .* for sleep, \d+ s left$/);

    const table = cli('ps', String(child.pid));
    expect(table.status).toBe(0);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^tid\s+thread\s+loop id\s+loop state\s+task id\s+task name\s+coroutine\s+state\s+waiting\s+awaiting\s+awaiter name\s+awaiter id$/);
    expect(rows.some((row) => /^0\s+MainThread\s+0x1\s+(idle|running)\s+0x[0-9a-f]+\s+target-ticking\s+ticking\(\)\s+pending/.test(row))).toBe(true);
    // The task at the far end: awaited by the task serving the relay, in the thread before.
    expect(rows.some((row) => /^\d+\s+target-hop-2\s+0x[0-9a-f]+\s+idle\s+0x[0-9a-f]+\s+Task-\d+\s+hold\(\)\s+pending\s+[\d.]+ m?s\s+sleep, \d+ s left\s+Task-\d+\s+0x1[0-9a-f]{8}$/.test(row))).toBe(true);

    // Still running, inspector closed again.
    child.stdin!.write('done\n');
    const [code] = (await once(child, 'exit')) as [number];
    expect(output()).toContain('inspector closed, ticking true');
    expect(code).toBe(0);
  });

  it('--port names the inspector port; a wrong one gets one line naming the right one, and the inspector opened there is closed again', async () => {
    const port = await freePort();
    const { child, output } = await startNode([`--inspect-port=${port}`, TARGET]);
    const right = cli('ps', String(child.pid), '--port', String(port));
    expect(right.status).toBe(0);
    expect(right.stdout).toContain('target-ticking');
    child.stdin!.write('done\n');
    await once(child, 'exit');
    expect(output()).toContain('inspector closed, ticking true');

    const otherPort = await freePort();
    const other = await startNode([`--inspect-port=${otherPort}`, TARGET]);
    const wrongPort = await freePort();
    const wrong = cli('ps', String(other.child.pid), '--port', String(wrongPort));
    expect(wrong).toEqual({
      status: 1,
      stdout: '',
      stderr: `multiloop: process ${other.child.pid} opened its inspector on 127.0.0.1:${otherPort}, not ${wrongPort} (closed again): give --port ${otherPort}\n`,
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    other.child.stdin!.write('done\n');
    await once(other.child, 'exit');
    expect(other.output()).toContain('inspector closed, ticking true');
  });

  it('says in one line that a process does not exist', () => {
    // A pid that was just freed: its process has ended.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const result = cli('pstree', String(gone));
    expect(result).toEqual({ status: 1, stdout: '', stderr: `multiloop: no process with pid ${gone}\n` });
  });

  it('says in one line that a Node process does not use multiloop, and closes the inspector it opened there', async () => {
    const port = await freePort();
    const script = "const inspector = require('node:inspector'); console.log('ready ' + process.pid); process.stdin.once('data', () => { console.log('inspector ' + (inspector.url() === undefined ? 'closed' : 'open')); process.exit(0); });";
    const { child, output } = await startNode([`--inspect-port=${port}`, '-e', script]);
    const result = cli('ps', String(child.pid));
    expect(result).toEqual({ status: 1, stdout: '', stderr: `multiloop: process ${child.pid} does not use multiloop (no multiloop loaded in its main thread)\n` });
    await new Promise((resolve) => setTimeout(resolve, 100));
    child.stdin!.write('done\n');
    await once(child, 'exit');
    expect(output()).toContain('inspector closed');
  });

  it('refuses bad arguments, with the usage', () => {
    const noPid = cli('ps');
    expect(noPid.status).toBe(2);
    expect(noPid.stderr).toMatch(/^multiloop: a pid is a positive integer, got nothing\nusage: multiloop ps <pid>/);
    expect(cli('pstree', 'abc').stderr).toMatch(/^multiloop: a pid is a positive integer, got "abc"/);
    expect(cli('top').stderr).toMatch(/^multiloop: unknown command "top"\nusage:/);
    expect(cli('ps', '1', '--port', 'x').stderr).toBe('multiloop: --port takes a port number, got "x"\n');
    const help = cli('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: multiloop ps <pid>/);
  });
});
