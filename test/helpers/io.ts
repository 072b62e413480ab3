/**
 * Helpers for the I/O suites: a plain Node server to talk to, and waiting inside a coroutine
 * until something happened.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { getRunningLoop, sleep, type Coroutine } from '../../src/index.js';

/**
 * A plain Node server on 127.0.0.1 (half-open allowed) that runs `serve` for each connection;
 * a connection the peer resets just goes. Its port.
 *
 * @example
 * ```ts
 * const { server, port } = await nodeServer((socket) => socket.end('hello'));
 * ```
 */
export async function nodeServer(serve: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    // The peer may reset the connection (that is what some tests do): the Node side just goes.
    socket.on('error', () => socket.destroy());
    serve(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/**
 * A plain Node server (as `nodeServer`) that the test drives: `send` writes to the connection it
 * accepted and `end` ends it, both kept until the connection is there (a client's connect can
 * complete before the server has accepted).
 *
 * @example
 * ```ts
 * const peer = await drivenPeer();
 * peer.send('hello');
 * ```
 */
export async function drivenPeer(): Promise<{ server: Server; port: number; send(text: string): void; end(): void }> {
  let connection: Socket | null = null;
  const waiting: Array<(socket: Socket) => void> = [];
  const peer = await nodeServer((socket) => {
    connection = socket;
    for (const act of waiting.splice(0)) act(socket);
  });
  const act = (what: (socket: Socket) => void): void => {
    if (connection === null) waiting.push(what);
    else what(connection);
  };
  return { ...peer, send: (text) => act((socket) => socket.write(text)), end: () => act((socket) => socket.end()) };
}

/**
 * Wait until `done()` or about two seconds passed, in steps of 5 ms.
 *
 * @example
 * ```ts
 * yield* until(() => protocol.calls.includes('eof'));
 * ```
 */
export function* until(done: () => boolean): Coroutine<void> {
  for (let i = 0; i < 400 && !done(); i++) yield* sleep(0.005);
}

/** A TCP port of 127.0.0.1 free right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Record a protocol's `call` in `calls`, after an 'OUTSIDE AN ITERATION' mark when its loop is not
 * running callbacks right now (a protocol is only ever called inside a loop iteration).
 *
 * @example
 * ```ts
 * override eofReceived(): boolean { noteCall(this.calls, 'eof'); return false; }
 * ```
 */
export function noteCall(calls: string[], call: string): void {
  if (!getRunningLoop()._inDrive()) calls.push('OUTSIDE AN ITERATION');
  calls.push(call);
}

/** How many libuv pipe, process and terminal handles are open in this process. */
function openHandles(): number {
  return process.getActiveResourcesInfo().filter((name) => name === 'PipeWrap' || name === 'ProcessWrap' || name === 'TTYWrap').length;
}

/** The number of open pipe, process and terminal handles once it stopped changing (the last test's children and pipes gone). */
export async function settledHandles(): Promise<number> {
  let last = openHandles();
  for (let stable = 0, i = 0; stable < 5 && i < 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    const now = openHandles();
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

/** An error's `code` (its message when it has none), or 'null'. */
export function codeOf(exc: Error | null): string {
  return exc === null ? 'null' : ((exc as Error & { code?: string }).code ?? exc.message);
}
