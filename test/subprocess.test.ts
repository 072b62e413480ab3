/**
 * Subprocesses with real child processes (node itself, sh, cat, sleep): pipes as streams,
 * communicate, exit codes and signals, cancellation that leaves the child running, bad input,
 * and nothing left behind when the loop closes.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CancelledError,
  DEVNULL,
  PIPE,
  STDOUT,
  TimeoutError,
  createSubprocessExec,
  createSubprocessShell,
  getRunningLoop,
  run,
  sleep,
  waitFor,
} from '../src/index.js';
import { raisedBy } from './helpers/coroutines.js';
import { runFixture } from './helpers/child-process.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const NODE = process.execPath;
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'multiloop-subprocess-')));
afterAll(() => rmSync(dir, { recursive: true, force: true }));


/** Whether process `pid` is alive. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('createSubprocessExec and Process', () => {
  it('wait() returns once the child ended and its pipes closed, as asyncio\'s: drain() on stdin then raises ConnectionResetError(\'Connection lost\')', async () => {
    const seen = await run(
      (function* () {
        const child = yield* createSubprocessExec('true', [], { stdin: PIPE });
        yield* child.wait();
        child.stdin!.write(new Uint8Array(10));
        try {
          yield* child.stdin!.drain();
          return 'no error';
        } catch (error) {
          return `${(error as Error).name}: ${(error as Error).message}`;
        }
      })(),
    );
    expect(seen).toBe('ConnectionResetError: Connection lost');
  });

  it('communicate() sends the input, reads stdout and stderr to EOF, and waits for the exit code', async () => {
    const seen = await run(
      (function* () {
        const script = 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{process.stdout.write(s.toUpperCase());process.stderr.write("done");process.exit(3)})';
        const child = yield* createSubprocessExec(NODE, ['-e', script], { stdin: PIPE, stdout: PIPE, stderr: PIPE });
        const running = child.returncode;
        const [out, err] = yield* child.communicate(enc.encode('hello child'));
        return { running, out: dec.decode(out!), err: dec.decode(err!), code: child.returncode, pid: child.pid > 0 };
      })(),
    );
    expect(seen).toEqual({ running: null, out: 'HELLO CHILD', err: 'done', code: 3, pid: true });
  });

  it('reads a child line by line as it prints, then EOF', async () => {
    const lines = await run(
      (function* () {
        const script = 'let i=0;const t=setInterval(()=>{console.log("line "+i);if(++i===3)clearInterval(t)},5)';
        const child = yield* createSubprocessExec(NODE, ['-e', script], { stdout: PIPE });
        const lines: string[] = [];
        for (;;) {
          const line = yield* child.stdout!.readline();
          if (line.length === 0) break;
          lines.push(dec.decode(line));
        }
        lines.push(`exit ${yield* child.wait()}`);
        return lines;
      })(),
    );
    expect(lines).toEqual(['line 0\n', 'line 1\n', 'line 2\n', 'exit 0']);
  });

  it('stderr: STDOUT merges it into the stdout reader; DEVNULL gives no reader', async () => {
    const seen = await run(
      (function* () {
        const merged = yield* createSubprocessShell('echo to-out; echo to-err 1>&2', { stdout: PIPE, stderr: STDOUT });
        const [out, err] = yield* merged.communicate();
        const silent = yield* createSubprocessShell('echo nobody hears', { stdout: DEVNULL, stderr: DEVNULL });
        const quiet = yield* silent.communicate();
        return { out: dec.decode(out!).split('\n').sort().join(','), err, stderrReader: merged.stderr, quiet, silentOut: silent.stdout };
      })(),
    );
    expect(seen).toEqual({ out: ',to-err,to-out', err: null, stderrReader: null, quiet: [null, null], silentOut: null });
  });

  it('passes cwd and env to the child', async () => {
    const out = await run(
      (function* () {
        const child = yield* createSubprocessExec(NODE, ['-e', 'process.stdout.write(process.cwd()+"|"+process.env.MULTILOOP_TEST)'], {
          stdout: PIPE,
          cwd: dir,
          env: { MULTILOOP_TEST: 'from the parent' },
        });
        const [stdout] = yield* child.communicate();
        return dec.decode(stdout!);
      })(),
    );
    expect(out).toBe(`${dir}|from the parent`);
  });

  it('moves a large output through a small reader limit, every byte, with back-pressure', async () => {
    const seen = await run(
      (function* () {
        const child = yield* createSubprocessExec(NODE, ['-e', 'process.stdout.write(Buffer.alloc(3<<20, 120))'], { stdout: PIPE, limit: 1024 });
        let total = 0;
        let onlyX = true;
        for (;;) {
          const chunk = yield* child.stdout!.read(4096);
          if (chunk.length === 0) break;
          total += chunk.length;
          if (chunk.some((b) => b !== 120)) onlyX = false;
          yield* sleep(0);
        }
        return { total, onlyX, code: yield* child.wait() };
      })(),
    );
    expect(seen).toEqual({ total: 3 << 20, onlyX: true, code: 0 });
  });

  it('communicate() ignores a child that exits without reading its stdin (a broken pipe)', async () => {
    const code = await run(
      (function* () {
        const child = yield* createSubprocessExec(NODE, ['-e', 'process.exit(4)'], { stdin: PIPE });
        yield* child.communicate(new Uint8Array(8 << 20));
        return child.returncode;
      })(),
    );
    expect(code).toBe(4);
  });

  it('cancelling wait() or communicate() leaves the child running; terminate() ends it with -SIGTERM', async () => {
    const seen = await run(
      (function* () {
        const child = yield* createSubprocessExec('sleep', ['30'], { stdout: PIPE });
        const timedOut = (yield* raisedBy(() => waitFor(child.wait(), 0.05))) as Error;
        const loop = getRunningLoop();
        const talking = loop.createTask(child.communicate());
        yield* sleep(0.02);
        talking.cancel();
        const cancelled = (yield* raisedBy(() => talking)) as Error;
        const stillRunning = child.returncode === null && alive(child.pid);
        child.terminate();
        const code = yield* child.wait();
        const late = (yield* raisedBy(function* () {
          child.kill();
        })) as Error;
        return {
          timedOut: timedOut instanceof TimeoutError,
          cancelled: cancelled instanceof CancelledError,
          stillRunning,
          code,
          late: `${late.name}: ${late.message}`,
          pid: child.pid,
        };
      })(),
    );
    expect(seen.timedOut).toBe(true);
    expect(seen.cancelled).toBe(true);
    expect(seen.stillRunning).toBe(true);
    expect(seen.code).toBe(-15);
    expect(seen.late).toBe(`ProcessLookupError: process ${seen.pid} has ended: no signal can reach it`);
  });

  it('sendSignal(name or number) reaches the child', async () => {
    const code = await run(
      (function* () {
        const child = yield* createSubprocessExec('sleep', ['30']);
        child.sendSignal(9);
        return yield* child.wait();
      })(),
    );
    expect(code).toBe(-9);
  });

  it('a program that does not exist raises the OS error with its code', async () => {
    const error = (await run(
      (function* () {
        return (yield* raisedBy(() => createSubprocessExec('no-such-program-multiloop', ['x']))) as Error;
      })(),
    )) as Error & { code?: string };
    expect(error.code).toBe('ENOENT');
    expect(error.message).toBe('spawn no-such-program-multiloop ENOENT');
  });

  it('refuses bad arguments with errors that name them', async () => {
    const messages = await run(
      (function* () {
        return [
          (yield* raisedBy(() => createSubprocessExec('ls', [1 as unknown as string]))) as Error,
          (yield* raisedBy(() => createSubprocessExec('', []))) as Error,
          (yield* raisedBy(() => createSubprocessShell(['ls'] as unknown as string))) as Error,
          (yield* raisedBy(() => createSubprocessExec('ls', [], { stdin: STDOUT as never }))) as Error,
          (yield* raisedBy(() => createSubprocessExec('ls', [], { limit: -1 }))) as Error,
        ].map((error) => `${error.name}: ${error.message}`);
      })(),
    );
    expect(messages).toEqual([
      'TypeError: createSubprocessExec() args[0] must be a string, got 1',
      "TypeError: createSubprocessExec() program must be a non-empty string, got ''",
      "RangeError: cmd must be a string, got [ 'ls' ]",
      'RangeError: stdin must be PIPE, DEVNULL or null, got -2',
      'RangeError: Limit cannot be <= 0: got -1',
    ]);
  });

  it('a child still running when the loop closes is killed and its pipes closed: the process exits, no child is left', async () => {
    const exit = await runFixture('subprocess-child.mjs');
    expect(exit.code).toBe(0);
    const pid = Number(exit.stdout.trim());
    expect(pid).toBeGreaterThan(0);
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(alive(pid)).toBe(false);
  });
});
