/**
 * Child node processes running a script of test/fixtures/: their exit, their output, and
 * waiting until they printed a marker.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** How a child process ended, and everything it printed. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A child process still running, to signal and to wait on. */
export interface Started {
  child: ChildProcess;
  exited: Promise<Exit>;
  /** Resolves once the child printed `text`; rejects if it exits first. */
  printed(text: string): Promise<void>;
}

/**
 * Start `node test/fixtures/<fixture> ...args`; a child still alive after 15 s is killed, so a
 * child that something holds open fails its test clearly instead of hanging the suite.
 *
 * @example
 * ```ts
 * const started = startFixture('runners-sigint.mjs', 'cancel');
 * await started.printed('ready\n');
 * started.child.kill('SIGINT');
 * ```
 */
export function startFixture(fixture: string, ...args: string[]): Started {
  const script = fileURLToPath(new URL(`../fixtures/${fixture}`, import.meta.url));
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiting: Array<{ text: string; resolve: () => void }> = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const waiter of waiting.filter((w) => stdout.includes(w.text))) {
      waiting.splice(waiting.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const guard = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const exited = new Promise<Exit>((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stdout, stderr });
    });
  });
  const printed = (text: string): Promise<void> =>
    stdout.includes(text)
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          waiting.push({ text, resolve });
          void exited.then((exit) => reject(new Error(`child exited before printing ${JSON.stringify(text)}: ${JSON.stringify(exit)}`)));
        });
  return { child, exited, printed };
}

/**
 * Run `node test/fixtures/<fixture> ...args` to its end (killed after 15 s).
 *
 * @example
 * ```ts
 * expect(await runFixture('runners-lifetime.mjs', 'closed')).toEqual({ code: 0, signal: null, stdout: 'closed\n', stderr: '' });
 * ```
 */
export function runFixture(fixture: string, ...args: string[]): Promise<Exit> {
  return startFixture(fixture, ...args).exited;
}
