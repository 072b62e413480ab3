/**
 * The `multiloop` command: `multiloop worker ...` serves a BullMQExecutor's jobs (cli-worker.ts);
 * `multiloop ps <pid>` and `multiloop pstree <pid>` print the tasks of
 * another Node process on this machine that imports multiloop (asyncio 3.14's `python -m asyncio
 * ps/pstree`), without restarting it. The process's inspector is opened on demand (as SIGUSR1
 * does, on 127.0.0.1), asked through its own copy of multiloop, and closed again; the process
 * runs on undisturbed (Node prints that a debugger attached to its stderr).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { formatTable, type ProcessSnapshot } from './ps.js';

const USAGE = `usage: multiloop ps <pid> [--port N]      the tasks of every loop in every thread of process <pid>
       multiloop pstree <pid> [--port N]  the same, as a tree of who awaits whom
       multiloop worker --allow SPEC ...  serve jobs of a BullMQExecutor (multiloop worker --help)
  --port N  the inspector port of that process (default: its --inspect-port, else 9229)`;

/** A failure the command reports in one line, with the exit code it ends with. */
class CommandError extends Error {
  constructor(
    message: string,
    readonly code = 1,
  ) {
    super(message);
  }
}

/** The inspector port `pid` uses: the CLI's `--port`, the process's `--inspect-port`/`--inspect=...:N`, else 9229. */
function inspectorPort(pid: number, given: number | null): number {
  if (given !== null) return given;
  let args: string[] = [];
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    // No /proc (not Linux) or not ours to read: the default port.
  }
  for (const arg of args) {
    const match = /^--inspect(?:-brk|-port)?=(?:.*:)?(\d+)$/.exec(arg);
    if (match !== null) return Number(match[1]);
  }
  return 9229;
}

interface Target {
  webSocketDebuggerUrl?: string;
}

async function listTargets(port: number): Promise<Target[] | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(1000) });
    return (await response.json()) as Target[];
  } catch {
    return null;
  }
}

/** A connection to an inspector: `Runtime.evaluate` and nothing else. */
class Inspector {
  readonly #socket: WebSocket;
  #nextId = 0;
  readonly #waiting = new Map<number, (message: Record<string, unknown>) => void>();

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as Record<string, unknown>;
      const id = message.id as number | undefined;
      if (id === undefined) return;
      this.#waiting.get(id)?.(message);
      this.#waiting.delete(id);
    });
    socket.addEventListener('close', () => {
      for (const reply of this.#waiting.values()) reply({ error: { message: 'the inspector closed the connection' } });
      this.#waiting.clear();
    });
  }

  static async connect(url: string): Promise<Inspector> {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve());
      socket.addEventListener('error', () => reject(new CommandError(`cannot connect to the inspector at ${url}`)));
    });
    return new Inspector(socket);
  }

  /** Evaluate `expression` there (awaiting a Promise), returning its value. */
  async evaluate(expression: string, options: { commandLineApi?: boolean } = {}): Promise<unknown> {
    const id = ++this.#nextId;
    const reply = new Promise<Record<string, unknown>>((resolve) => this.#waiting.set(id, resolve));
    this.#socket.send(
      JSON.stringify({
        id,
        method: 'Runtime.evaluate',
        params: { expression, awaitPromise: true, returnByValue: true, includeCommandLineAPI: options.commandLineApi === true },
      }),
    );
    const message = await reply;
    const error = message.error as { message?: string } | undefined;
    if (error !== undefined) throw new CommandError(`the inspector refused: ${error.message ?? 'unknown error'}`);
    const result = message.result as { result?: { value?: unknown }; exceptionDetails?: { exception?: { description?: string } } };
    if (result.exceptionDetails !== undefined) {
      throw new CommandError(`it failed there: ${result.exceptionDetails.exception?.description?.split('\n')[0] ?? 'an exception'}`);
    }
    return result.result?.value;
  }

  close(): void {
    this.#socket.close();
  }
}

const HOOK = "globalThis[Symbol.for('multiloop.introspection')]";

/** Ask process `pid` for its tasks through its inspector: its snapshot, or the `pstree()` text. */
async function ask(pid: number, what: 'snapshot' | 'pstree', givenPort: number | null): Promise<ProcessSnapshot | string> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'EPERM') throw new CommandError(`not allowed to inspect process ${pid}: run this as its user`);
    throw new CommandError(`no process with pid ${pid}`);
  }
  const port = inspectorPort(pid, givenPort);
  // An inspector already open (started with --inspect) stays open; one opened here is closed again.
  let targets = await listTargets(port);
  const openedHere = targets === null;
  if (openedHere) {
    try {
      (process as unknown as { _debugProcess(pid: number): void })._debugProcess(pid);
    } catch (error) {
      throw new CommandError(`cannot open the inspector of process ${pid}: ${(error as Error).message}`);
    }
    for (let i = 0; i < 60 && targets === null; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      targets = await listTargets(port);
    }
  }
  const url = targets?.[0]?.webSocketDebuggerUrl;
  if (url === undefined) {
    const own = openedHere && givenPort !== null ? await closeOpenedElsewhere(pid, port) : null;
    if (own !== null) throw new CommandError(`process ${pid} opened its inspector on 127.0.0.1:${own}, not ${port} (closed again): give --port ${own}`);
    throw new CommandError(`process ${pid} opened no inspector on 127.0.0.1:${port} (not a Node process, or the port is taken: give --port)`);
  }
  const inspector = await Inspector.connect(url);
  try {
    const found = await inspector.evaluate('process.pid');
    if (found !== pid) throw new CommandError(`the inspector on port ${port} belongs to process ${String(found)}, not ${pid}: give --port`);
    const version = await inspector.evaluate(`${HOOK}?.version ?? null`);
    if (version === null) throw new CommandError(`process ${pid} does not use multiloop (no multiloop loaded in its main thread)`);
    return (await inspector.evaluate(`${HOOK}.${what}()`)) as ProcessSnapshot | string;
  } finally {
    if (openedHere) await closeInspector(inspector);
    inspector.close();
  }
}

/** Have the process close its inspector, once this connection is gone (close() waits for that). */
async function closeInspector(inspector: Inspector): Promise<void> {
  await inspector
    .evaluate("(() => { const inspector = require('node:inspector'); setTimeout(() => inspector.close(), 20); })()", { commandLineApi: true })
    .catch(() => undefined);
}

/**
 * The signal opened `pid`'s inspector, but not on the port given with `--port`: find it on the
 * process's own port and close it again (nobody else would); that port, or null when it is not there.
 */
async function closeOpenedElsewhere(pid: number, givenPort: number): Promise<number | null> {
  const own = inspectorPort(pid, null);
  if (own === givenPort) return null;
  const url = (await listTargets(own))?.[0]?.webSocketDebuggerUrl;
  if (url === undefined) return null;
  const inspector = await Inspector.connect(url);
  try {
    if ((await inspector.evaluate('process.pid')) !== pid) return null;
    await closeInspector(inspector);
    return own;
  } finally {
    inspector.close();
  }
}

function parsePid(text: string | undefined): number {
  const pid = Number(text);
  if (text === undefined || !Number.isInteger(pid) || pid <= 0) throw new CommandError(`a pid is a positive integer, got ${text === undefined ? 'nothing' : JSON.stringify(text)}\n${USAGE}`, 2);
  return pid;
}

/**
 * Run the command in this process when it has a WebSocket client (Node 22+), else again in a
 * Node started with `--experimental-websocket` (Node 20, 21); resolves to the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await runCommand(process.argv.slice(2), fileURLToPath(import.meta.url));
 * ```
 */
export async function runCommand(argv: string[], script: string): Promise<number> {
  // Only ps and pstree speak to an inspector; a worker runs here (its signals are its own).
  if (typeof globalThis.WebSocket !== 'undefined' || (argv[0] !== 'ps' && argv[0] !== 'pstree')) return main(argv);
  const again = spawnSync(process.execPath, ['--experimental-websocket', '--no-warnings', script, ...argv], { stdio: 'inherit' });
  return again.status ?? 1;
}

/**
 * Run the command with `argv` (without node and the script); resolves to the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await main(['pstree', '4242']);
 * ```
 */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    }
    if (command === 'worker') {
      const { workerCommand } = await import('./cli-worker.js');
      return await workerCommand(rest);
    }
    if (command === 'ps' || command === 'pstree') {
      let port: number | null = null;
      const at = rest.indexOf('--port');
      if (at >= 0) {
        port = Number(rest[at + 1]);
        if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new CommandError(`--port takes a port number, got ${JSON.stringify(rest[at + 1] ?? '')}`, 2);
        rest.splice(at, 2);
      }
      const answer = await ask(parsePid(rest[0]), command === 'ps' ? 'snapshot' : 'pstree', port);
      console.log(typeof answer === 'string' ? answer : formatTable(answer));
      return 0;
    }
    throw new CommandError(`unknown command ${JSON.stringify(command)}\n${USAGE}`, 2);
  } catch (error) {
    if (error instanceof CommandError) {
      console.error(`multiloop: ${error.message}`);
      return error.code;
    }
    throw error;
  }
}
