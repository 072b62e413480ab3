/**
 * A server whose process runs out of file descriptors, in a child process held to 64 of them
 * (prlimit, once its modules are loaded: loading them opens many files at once): libuv then closes every connection that comes without telling Node (its
 * "emfile trick"), so the shortage must be reported by the server itself — once per shortage,
 * through the loop's exception handler, with asyncio's message — and once descriptors are free
 * again new clients are served.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

/** The child's descriptor limit (soft and hard), set once it listens. */
const LIMIT = 64;
/** Clients that come while the server is out of descriptors, beside the first one refused. */
const REFUSED_MORE = 3;

type Line =
  | { port: number }
  | { made: number }
  | { lost: number }
  | { report: { message: string; code: unknown; server: boolean; socket: boolean; keys: string[] } };

/** The child's JSON lines as they come, and waiting until they satisfy a condition. */
class Limited {
  readonly child: ChildProcess;
  readonly lines: Line[] = [];
  stderr = '';
  #exited = false;
  #waiting: Array<{ ready: () => boolean; resolve: () => void; reject: (error: Error) => void }> = [];

  constructor(kind: string) {
    const script = fileURLToPath(new URL('./fixtures/server-fd-limit.mjs', import.meta.url));
    this.child = spawn(process.execPath, [script, kind], { stdio: ['ignore', 'pipe', 'pipe'] });
    let partial = '';
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop()!;
      for (const part of parts) this.lines.push(JSON.parse(part) as Line);
      this.#check();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.child.on('close', (code, signal) => {
      this.#exited = true;
      for (const waiter of this.#waiting.splice(0)) waiter.reject(new Error(`the server's process ended (${code ?? signal}): ${this.stderr}`));
    });
  }

  /** Resolves once `ready()` holds for the lines seen; rejects if the child ends first. */
  until(ready: () => boolean): Promise<void> {
    if (ready()) return Promise.resolve();
    if (this.#exited) return Promise.reject(new Error(`the server's process ended: ${this.stderr}`));
    return new Promise((resolve, reject) => this.#waiting.push({ ready, resolve, reject }));
  }

  count(key: 'made' | 'lost' | 'report'): number {
    return this.lines.filter((line) => key in line).length;
  }

  reports(): Array<Extract<Line, { report: unknown }>['report']> {
    return this.lines.flatMap((line) => ('report' in line ? [line.report] : []));
  }

  #check(): void {
    for (const waiter of this.#waiting.filter((w) => w.ready())) {
      this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
}

/** Connect once: served when the greeting arrives, refused when the connection ends or fails before it. */
function connectOnce(kind: string, port: number): Promise<{ socket: net.Socket; served: boolean }> {
  return new Promise((resolve) => {
    const socket = kind === 'tls' ? tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }) : net.connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      got += chunk;
      if (got === 'hi') resolve({ socket, served: true });
    });
    socket.on('error', () => resolve({ socket, served: false }));
    socket.on('close', () => resolve({ socket, served: false }));
  });
}

let running: Limited | null = null;
afterEach(() => {
  running?.child.kill('SIGKILL');
  running = null;
});

describe.runIf(process.platform !== 'win32')('Server when the process runs out of file descriptors', () => {
  it.each(['tcp', 'tls'])(
    'reports each shortage once to the exception handler with EMFILE, and serves new clients once descriptors are free (%s)',
    async (kind) => {
      const limited = (running = new Limited(kind));
      await limited.until(() => limited.lines.length > 0);
      const first = limited.lines[0]!;
      if (!('port' in first)) throw new Error(`expected the port first, got ${JSON.stringify(first)}`);
      const { port } = first;
      // From now on (its modules loaded, listening) the child has 64 descriptors at most.
      execFileSync('prlimit', ['--pid', String(limited.child.pid), `--nofile=${LIMIT}:${LIMIT}`]);

      let held: net.Socket[] = [];
      let served = 0;
      for (const shortage of [1, 2]) {
        // Fill the child's descriptor table: clients are served until one is refused.
        let refused: net.Socket | null = null;
        while (refused === null) {
          if (held.length >= LIMIT) throw new Error(`${LIMIT} clients were served and none refused: the limit did not apply`);
          const { socket, served: ok } = await connectOnce(kind, port);
          if (ok) held.push(socket);
          else refused = socket;
        }
        refused.destroy();
        for (let i = 0; i < REFUSED_MORE; i++) {
          const { socket, served: ok } = await connectOnce(kind, port);
          socket.destroy();
          expect(ok).toBe(false);
        }
        // Free the descriptors: every connection the server made ends.
        served += held.length;
        for (const socket of held) socket.destroy();
        held = [];
        await limited.until(() => limited.count('lost') === served);
        // A report comes before the connection made by the accept that found no descriptor left.
        expect(limited.reports()).toEqual(
          Array.from({ length: shortage }, () => ({
            message: 'socket.accept() out of system resource',
            code: 'EMFILE',
            server: true,
            socket: true,
            keys: ['exception', 'message', 'server', 'socket'],
          })),
        );
        // Accepting goes on: a new client is served.
        const { socket, served: ok } = await connectOnce(kind, port);
        expect(ok).toBe(true);
        held.push(socket);
      }
      for (const socket of held) socket.destroy();
      expect(limited.stderr).toBe('');
    },
  );
});
