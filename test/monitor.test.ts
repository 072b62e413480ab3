/**
 * startMonitor(): the live page in a real headless Chromium (it loads, shows the threads and a
 * task by name, and updates after the app changes; a name rebound to this address gets nothing),
 * and its JSON: loop health of every thread, read-only answers, loopback by default. Who it
 * answers (the Host header, allowedHosts, requests from pages of other origins) and what it
 * costs (one snapshot shared by the requests made while it is taken, at most one per
 * minInterval), counted through its statistics().
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopThread, ensureFuture, getRunningLoop, run, sleep, startMonitor, type Coroutine, type Monitor } from '../src/index.js';
import { snapshotThisThreadInSlices } from '../src/internal/snapshot-slices.js';
import { formatTree, type ProcessSnapshot } from '../src/ps.js';
import { snapshotThisThread } from '../src/internal/snapshot.js';
import { Browser } from './helpers/browser.js';
import { needProgram } from './helpers/system.js';

const CHAIN = new URL('./fixtures/ps-chain.mjs', import.meta.url);

interface Snap {
  threads: Array<{
    threadName: string;
    responsive: boolean;
    health: { lag: { p50: number; p99: number; max: number }; utilization: number; window: number } | null;
    loops: Array<{ state: string; iterations: number; tasks: number; slowCallbacks: Array<{ callback: string; seconds: number }> }>;
  }>;
  tasks: Array<{ name: string; threadName: string }>;
}

function* parked(): Coroutine<void> {
  yield* sleep(3600);
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** GET `path` of the monitor on `port` with `headers` (a Host header among them replaces Node's), on a connection of its own unless `agent` is given. */
function ask(port: number, path: string, headers: OutgoingHttpHeaders = {}, agent: Agent | false = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path, headers, agent }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

/** `request` sent as it is over a new connection to `port`; everything the server answered until it closed. */
function askRaw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(request));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

describe('startMonitor', () => {
  it('serves a JSON snapshot with every thread’s loop health, and only reads', async () => {
    const seen = await run(
      (function* main(): Coroutine<{ url: string; snap: Snap; statuses: number[] }> {
        const loop = getRunningLoop();
        loop.setDebug(true);
        loop.slowCallbackDuration = 0.01;
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'watched-thread' }));
        const monitor = yield* ensureFuture(startMonitor({ port: 0 }));
        loop.createTask(parked(), { name: 'parked-one' });
        // A slow callback, which debug mode reports with its thread.
        loop.callSoon(function slowOne() {
          const until = performance.now() + 20;
          while (performance.now() < until);
        });
        yield* sleep(0.05);
        const snap = (yield* ensureFuture(fetch(`${monitor.url}snapshot.json`).then((response) => response.json()))) as Snap;
        const statuses: number[] = [];
        for (const [path, method] of [['', 'GET'], ['pstree.txt', 'GET'], ['snapshot.json', 'POST'], ['nothing-here', 'GET']] as const) {
          statuses.push(yield* ensureFuture(fetch(`${monitor.url}${path}`, { method }).then((response) => response.status)));
        }
        yield* ensureFuture(monitor.close());
        yield* ensureFuture(lt.close());
        return { url: monitor.url, snap, statuses };
      })(),
    );
    expect(seen.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(seen.statuses).toEqual([200, 200, 405, 404]);
    const names = seen.snap.threads.map((thread) => thread.threadName);
    expect(names).toEqual(['MainThread', 'watched-thread']);
    for (const thread of seen.snap.threads) {
      expect(thread.responsive).toBe(true);
      expect(thread.health).not.toBeNull();
      const health = thread.health!;
      expect(health.lag.p50).toBeGreaterThanOrEqual(0);
      expect(health.lag.max).toBeGreaterThanOrEqual(health.lag.p99);
      expect(health.utilization).toBeGreaterThanOrEqual(0);
      expect(health.utilization).toBeLessThanOrEqual(1);
      expect(thread.loops.some((loop) => loop.iterations > 0)).toBe(true);
    }
    const main = seen.snap.threads[0]!;
    const slow = main.loops.flatMap((loop) => loop.slowCallbacks);
    expect(slow.map((entry) => entry.callback)).toContain('slowOne()');
    expect(seen.snap.tasks.map((task) => task.name)).toContain('parked-one');
  });

  it('refuses bad options with errors that name them', async () => {
    await expect(startMonitor({ port: -1 })).rejects.toThrow(new RangeError('startMonitor() port must be an integer from 0 to 65535, got -1'));
    await expect(startMonitor({ port: 0, host: '' })).rejects.toThrow(new TypeError("startMonitor() host must be a non-empty string, got ''"));
    await expect(startMonitor(null as never)).rejects.toThrow(TypeError);
    await expect(startMonitor({ port: 0, allowedHosts: 'monitor.internal' as never })).rejects.toThrow(
      new TypeError("startMonitor() allowedHosts must be an array of host names ('name' or 'name:port'), got 'monitor.internal'"),
    );
    await expect(startMonitor({ port: 0, allowedHosts: ['monitor.internal', 'http://monitor.internal/'] })).rejects.toThrow(
      new TypeError("startMonitor() allowedHosts[1] must be a host name, or a host name and port ('name' or 'name:port'), got 'http://monitor.internal/'"),
    );
    await expect(startMonitor({ port: 0, allowedHosts: [42 as never] })).rejects.toThrow(
      new TypeError("startMonitor() allowedHosts[0] must be a host name, or a host name and port ('name' or 'name:port'), got 42"),
    );
    await expect(startMonitor({ port: 0, allowedHosts: ['monitor.internal:99999'] })).rejects.toThrow(TypeError);
    await expect(startMonitor({ port: 0, minInterval: -1 })).rejects.toThrow(new RangeError('startMonitor() minInterval must be a number of seconds, 0 or more, got -1'));
    await expect(startMonitor({ port: 0, timeout: 0 })).rejects.toThrow(new RangeError('startMonitor() timeout must be a positive number of seconds, got 0'));
    await expect(startMonitor({ port: 0, idleTimeout: 0 })).rejects.toThrow(new RangeError('startMonitor() idleTimeout must be a positive number of seconds, got 0'));
    await expect(startMonitor({ port: 0, maxConnections: 1.5 })).rejects.toThrow(new RangeError('startMonitor() maxConnections must be a positive integer, got 1.5'));
  });
});

describe('startMonitor: who it answers', () => {
  it('refuses a request whose Host names another site (a DNS-rebinding page) or nothing, with one line and no snapshot taken', async () => {
    const monitor = await startMonitor({ port: 0, minInterval: 3600 });
    try {
      const port = monitor.port;
      const refused = await Promise.all(
        [`evil.example:${port}`, `localhost.evil.example:${port}`, `127.0.0.1:${port + 1}`, '127.0.0.1', 'evil.example'].map((host) =>
          ask(port, '/snapshot.json', { host }),
        ),
      );
      const noHost = await askRaw(port, 'GET /snapshot.json HTTP/1.0\r\n\r\n');
      const afterRefusals = monitor.statistics();
      const accepted = await Promise.all([`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`].map((host) => ask(port, '/snapshot.json', { host })));
      expect(refused.map((answer) => answer.status)).toEqual([421, 421, 421, 421, 421]);
      expect(refused[0]!.body).toBe(`refused: this monitor does not answer to Host 'evil.example:${port}' (see startMonitor's allowedHosts)\n`);
      expect(refused[0]!.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(noHost).toMatch(/^HTTP\/1\.1 421 /);
      expect(noHost.endsWith('\r\n\r\nrefused: no Host header\n')).toBe(true);
      expect(afterRefusals).toEqual({ requests: 6, refused: 6, snapshots: 0 });
      expect(accepted.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      for (const answer of accepted) expect(Object.keys(JSON.parse(answer.body) as object)).toEqual(['at', 'threads', 'tasks']);
      expect(monitor.statistics()).toEqual({ requests: 10, refused: 6, snapshots: 1 });
    } finally {
      await monitor.close();
    }
  });

  it('answers the names in allowedHosts, on any port or the one given, and no other', async () => {
    const monitor = await startMonitor({ port: 0, allowedHosts: ['monitor.internal', 'proxy.example:8080', '[fd00::1]'], minInterval: 3600 });
    try {
      const port = monitor.port;
      const hosts = [`monitor.internal:${port}`, 'MONITOR.internal', 'proxy.example:8080', `[fd00::1]:${port}`, 'proxy.example:8081', 'proxy.example', `other.internal:${port}`];
      const statuses = await Promise.all(hosts.map((host) => ask(port, '/', { host }).then((answer) => answer.status)));
      expect(Object.fromEntries(hosts.map((host, i) => [host, statuses[i]]))).toEqual({
        [`monitor.internal:${port}`]: 200,
        'MONITOR.internal': 200,
        'proxy.example:8080': 200,
        [`[fd00::1]:${port}`]: 200,
        'proxy.example:8081': 421,
        'proxy.example': 421,
        [`other.internal:${port}`]: 421,
      });
    } finally {
      await monitor.close();
    }
  });

  it('refuses a fetch that a page of another origin makes, before any snapshot; a user following a link and the page itself are answered', async () => {
    const monitor = await startMonitor({ port: 0, minInterval: 3600 });
    try {
      const port = monitor.port;
      const refused = await Promise.all(
        [
          { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors' },
          { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors' },
          { origin: 'http://evil.example' },
          { origin: `http://evil.example:${port}` },
          { origin: 'null' },
        ].map((headers) => ask(port, '/snapshot.json', headers)),
      );
      expect(refused.map((answer) => [answer.status, answer.body])).toEqual([
        [403, 'refused: a request made by a page of another site\n'],
        [403, 'refused: a request made by a page of another site\n'],
        [403, 'refused: a request made by a page of another origin\n'],
        [403, 'refused: a request made by a page of another origin\n'],
        [403, 'refused: a request made by a page of another origin\n'],
      ]);
      expect(monitor.statistics().snapshots).toBe(0);
      const answered = await Promise.all(
        [
          { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' },
          { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', origin: `http://127.0.0.1:${port}` },
          { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate' },
        ].map((headers) => ask(port, '/snapshot.json', headers)),
      );
      expect(answered.map((answer) => answer.status)).toEqual([200, 200, 200]);
      const page = await ask(port, '/');
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers['x-frame-options']).toBe('DENY');
    } finally {
      await monitor.close();
    }
  });
  it('answers a request whose path is no URL with 400 and one line', async () => {
    const monitor = await startMonitor({ port: 0 });
    try {
      const answer = await askRaw(monitor.port, `GET http://[::1 HTTP/1.1\r\nHost: 127.0.0.1:${monitor.port}\r\nConnection: close\r\n\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain('\r\nbad request: the path is no URL\n');
      expect(monitor.statistics().snapshots).toBe(0);
    } finally {
      await monitor.close();
    }
  });
});

/** Wait until `condition()` holds, checking every 20 ms; fails naming `what` after `limitMs`. */
async function waitUntil(condition: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A raw connection to the monitor on `port`: what it received, and whether (and how) the server ended it. */
interface RawClient {
  readonly socket: Socket;
  received(): string;
  /** Resolves once the server ended the connection (end or reset), with what it had sent; rejects after `limitMs`. */
  closedByServer(limitMs?: number): Promise<string>;
}

function rawClient(port: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let ended = false;
    const endWaiters: Array<() => void> = [];
    const markEnded = (): void => {
      ended = true;
      for (const wake of endWaiters.splice(0)) wake();
    };
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', markEnded);
    socket.on('close', markEnded);
    socket.on('error', markEnded);
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => Buffer.concat(chunks).toString('latin1'),
        closedByServer: (limitMs = 15_000) =>
          new Promise<string>((done, fail) => {
            const timer = setTimeout(() => fail(new Error(`the server kept the connection open for ${limitMs} ms; it sent ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 200))}`)), limitMs);
            const finish = (): void => {
              clearTimeout(timer);
              done(Buffer.concat(chunks).toString('latin1'));
            };
            if (ended) finish();
            else endWaiters.push(finish);
          }),
      }),
    );
    socket.once('error', reject);
  });
}

describe('startMonitor: what a client can hold', () => {
  it('closes a connection idle before its first request, between two, or sending its headers too slowly (idleTimeout)', async () => {
    const monitor = await startMonitor({ port: 0, idleTimeout: 0.3 });
    const host = `127.0.0.1:${monitor.port}`;
    const clients: RawClient[] = [];
    try {
      // Connected, never a byte.
      const silent = await rawClient(monitor.port);
      clients.push(silent);
      // One request answered, then idle on the kept-alive connection.
      const kept = await rawClient(monitor.port);
      clients.push(kept);
      kept.socket.write(`GET /nothing-here HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      // Headers a byte at a time, each well within idleTimeout: never idle, never done.
      const slow = await rawClient(monitor.port);
      clients.push(slow);
      slow.socket.write('GET / HTTP/1.1\r\n');
      const drip = setInterval(() => {
        if (!slow.socket.destroyed) slow.socket.write('X');
      }, 50);
      try {
        expect(await silent.closedByServer()).toBe('');
        expect(await kept.closedByServer()).toMatch(/^HTTP\/1\.1 404 Not Found\r\n[^]*not found/);
        expect(await slow.closedByServer()).toMatch(/^(HTTP\/1\.1 408 Request Timeout\r\n|$)/);
      } finally {
        clearInterval(drip);
      }
      // The monitor still answers.
      expect((await ask(monitor.port, '/nothing-here')).status).toBe(404);
    } finally {
      for (const client of clients) client.socket.destroy();
      await monitor.close();
    }
  });

  it('does not count waiting for a snapshot as idle', async () => {
    const flag = new Int32Array(new SharedArrayBuffer(8));
    const seen = await run(
      (function* main(): Coroutine<{ waiterOpen: boolean; answer: string }> {
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'slow-to-answer' }));
        // The blocked thread holds the snapshot in flight until released (its timeout is far off).
        const monitor = yield* ensureFuture(startMonitor({ port: 0, timeout: 60, idleTimeout: 0.3 }));
        const clients: RawClient[] = [];
        try {
          lt.callSoonThreadsafe('block', flag);
          while (Atomics.load(flag, 1) === 0) yield* sleep(0.005);
          const waiter = yield* ensureFuture(rawClient(monitor.port));
          clients.push(waiter);
          waiter.socket.write(`GET /snapshot.json HTTP/1.1\r\nHost: 127.0.0.1:${monitor.port}\r\nConnection: close\r\n\r\n`);
          while (monitor.statistics().requests < 1) yield* sleep(0.005);
          // A connection made after the request went in flight, and idle: once the server has
          // closed it, the waiting one has been without a byte for longer than idleTimeout too.
          const idle = yield* ensureFuture(rawClient(monitor.port));
          clients.push(idle);
          yield* ensureFuture(idle.closedByServer());
          const waiterOpen = !waiter.socket.destroyed && waiter.received() === '';
          Atomics.store(flag, 0, 1);
          Atomics.notify(flag, 0);
          const answer = yield* ensureFuture(waiter.closedByServer());
          return { waiterOpen, answer };
        } finally {
          Atomics.store(flag, 0, 1);
          Atomics.notify(flag, 0);
          for (const client of clients) client.socket.destroy();
          yield* ensureFuture(monitor.close());
          yield* ensureFuture(lt.close());
        }
      })(),
    );
    expect(seen.waiterOpen).toBe(true);
    expect(seen.answer).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*"slow-to-answer"/);
  });

  it('serves at most maxConnections at once; the next is closed unanswered until one of them ends', async () => {
    const monitor = await startMonitor({ port: 0, maxConnections: 2 });
    const host = `127.0.0.1:${monitor.port}`;
    const clients: RawClient[] = [];
    try {
      // Two connections the server has taken: each had an answer, and stays open (keep-alive).
      for (let i = 0; i < 2; i++) {
        const client = await rawClient(monitor.port);
        clients.push(client);
        client.socket.write(`GET /nothing-here HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        await waitUntil(() => client.received().includes('not found'), 'an answer');
      }
      const third = await rawClient(monitor.port);
      clients.push(third);
      third.socket.write(`GET /nothing-here HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      expect(await third.closedByServer()).toBe('');
      // One ends: once the server has seen it go, a new connection is answered.
      clients[0]!.socket.end();
      await waitUntil(async () => {
        const next = await rawClient(monitor.port);
        clients.push(next);
        next.socket.write(`GET /nothing-here HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        return (await next.closedByServer()).includes('not found');
      }, 'a connection is served again');
    } finally {
      for (const client of clients) client.socket.destroy();
      await monitor.close();
    }
  });
});

describe('startMonitor: what it costs', () => {
  it('takes one snapshot for all the requests made while it is being taken', async () => {
    const flag = new Int32Array(new SharedArrayBuffer(8));
    const seen = await run(
      (function* main(): Coroutine<{ statuses: number[]; bodies: number; stats: unknown; stuck: boolean }> {
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'slow-to-answer' }));
        // minInterval 0: only being in flight can share a snapshot; the blocked thread holds it there until released.
        const monitor = yield* ensureFuture(startMonitor({ port: 0, minInterval: 0, timeout: 60 }));
        try {
          lt.callSoonThreadsafe('block', flag);
          while (Atomics.load(flag, 1) === 0) yield* sleep(0.005);
          const answers = Array.from({ length: 16 }, () => ask(monitor.port, '/snapshot.json'));
          while (monitor.statistics().requests < 16) yield* sleep(0.005);
          Atomics.store(flag, 0, 1);
          Atomics.notify(flag, 0);
          const got = yield* ensureFuture(Promise.all(answers));
          const stuck = (JSON.parse(got[0]!.body) as Snap).threads.find((thread) => thread.threadName === 'slow-to-answer')?.responsive === false;
          return { statuses: got.map((answer) => answer.status), bodies: new Set(got.map((answer) => answer.body)).size, stats: monitor.statistics(), stuck };
        } finally {
          yield* ensureFuture(monitor.close());
          yield* ensureFuture(lt.close());
        }
      })(),
    );
    expect(seen.statuses).toEqual(Array.from({ length: 16 }, () => 200));
    expect(seen.bodies).toBe(1);
    expect(seen.stats).toEqual({ requests: 16, refused: 0, snapshots: 1 });
    // The thread answered once released: the snapshot waited for it, as its timeout says.
    expect(seen.stuck).toBe(false);
  });

  it("reads its own thread's tasks a slice at a time: the app's loop runs between slices, and the rows are those read in one go", async () => {
    const seen = await run(
      (function* main(): Coroutine<{ whole: unknown[]; sliced: unknown[]; markersWhole: string[]; markersSliced: string[] }> {
        const loop = getRunningLoop();
        // Two markers at either end of the loop's tasks, renamed at every turn of a spinning task.
        const markers = [loop.createTask(parked(), { name: 'marker' })];
        const tasks = Array.from({ length: 50 }, (_, i) => loop.createTask(parked(), { name: `parked-${i}` }));
        markers.push(loop.createTask(parked(), { name: 'marker' }));
        let spinning = true;
        const spinner = loop.createTask(
          (function* renaming(): Coroutine<void> {
            for (let spins = 0; spinning; spins++) {
              for (const marker of markers) marker.setName(`marker-${spins}`);
              yield;
            }
          })(),
        );
        yield* sleep(0.01);
        // Rows without how long each waited (read at two moments).
        const comparable = (rows: ReadonlyArray<{ name: string; waitingFor: number }>): unknown[] =>
          rows.filter((row) => row.name.startsWith('parked-')).map(({ waitingFor: _waited, ...rest }) => rest);
        const markersOf = (rows: ReadonlyArray<{ name: string }>): string[] => rows.filter((row) => row.name.startsWith('marker-')).map((row) => row.name);
        const whole = snapshotThisThread();
        const sliced = yield* ensureFuture(snapshotThisThreadInSlices(1));
        spinning = false;
        yield* spinner;
        for (const task of [...tasks, ...markers]) task.cancel();
        return { whole: comparable(whole.tasks), sliced: comparable(sliced.tasks), markersWhole: markersOf(whole.tasks), markersSliced: markersOf(sliced.tasks) };
      })(),
    );
    expect(seen.sliced).toHaveLength(50);
    expect(seen.sliced).toEqual(seen.whole);
    // Read in one go, both markers bear one name; a row per turn, the spinner renamed them between the first row and the last.
    expect(seen.markersWhole).toHaveLength(2);
    expect(new Set(seen.markersWhole).size).toBe(1);
    expect(seen.markersSliced).toHaveLength(2);
    expect(new Set(seen.markersSliced).size).toBe(2);
  });

  it('takes at most one snapshot per minInterval: other connections get the last one, a connection that has it waits for the next', async () => {
    const monitor = await startMonitor({ port: 0, minInterval: 3600 });
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await ask(monitor.port, '/snapshot.json', {}, keepAlive);
      const others = await Promise.all([ask(monitor.port, '/snapshot.json'), ask(monitor.port, '/snapshot.json'), ask(monitor.port, '/pstree.txt')]);
      let againAnswered = false;
      const again = ask(monitor.port, '/snapshot.json', {}, keepAlive).then(
        () => (againAnswered = true),
        () => 'closed',
      );
      while (monitor.statistics().requests < 5) await new Promise((resolve) => setTimeout(resolve, 5));
      // Another connection is answered at once while the first waits for the next snapshot (an hour away).
      const meanwhile = await ask(monitor.port, '/snapshot.json');
      expect(first.status).toBe(200);
      expect(others.map((answer) => answer.status)).toEqual([200, 200, 200]);
      expect(others[0]!.body).toBe(first.body);
      expect(others[1]!.body).toBe(first.body);
      expect(meanwhile.body).toBe(first.body);
      // The tree, drawn a turn at a time, of the same snapshot: pstree()'s text.
      expect(others[2]!.body).toBe(`${formatTree(JSON.parse(first.body) as ProcessSnapshot)}\n`);
      expect(againAnswered).toBe(false);
      expect(monitor.statistics()).toEqual({ requests: 6, refused: 0, snapshots: 1 });
      await monitor.close();
      expect(await again).toBe('closed');
    } finally {
      keepAlive.destroy();
      await monitor.close();
    }
    const eager = await startMonitor({ port: 0, minInterval: 0 });
    try {
      for (let i = 0; i < 3; i++) expect((await ask(eager.port, '/snapshot.json')).status).toBe(200);
      expect(eager.statistics()).toEqual({ requests: 3, refused: 0, snapshots: 3 });
    } finally {
      await eager.close();
    }
  });
});

const hasChromium = needProgram('chromium', 'apt-get install chromium', 'the monitor page tests in a headless browser');

describe.runIf(hasChromium)('the monitor page in headless Chromium', () => {
  let browser: Browser;
  beforeAll(() => {
    // rebound.example resolves to loopback, as a DNS-rebinding attacker's name would.
    browser = Browser.launch(['--host-resolver-rules=MAP rebound.example 127.0.0.1']);
  });
  afterAll(async () => {
    await browser.close();
  });

  it('loads, shows the threads and a task by name, and updates after the app changes', async () => {
    const seen = await run(
      (function* main(): Coroutine<Record<string, boolean>> {
        const loop = getRunningLoop();
        const lt = yield* ensureFuture(LoopThread.start(CHAIN, { name: 'page-thread' }));
        const relaying = loop.createTask(
          (function* relaying(): Coroutine<unknown> {
            return yield* lt.call('relay', 'page-thread-2');
          })(),
          { name: 'watched-task' },
        );
        let monitor: Monitor | null = null;
        try {
          monitor = yield* ensureFuture(startMonitor({ port: 0 }));
          const page = yield* ensureFuture(browser.open(monitor.url));
          const shown: Record<string, boolean> = {};
          shown.title = yield* ensureFuture(page.waitFor(`document.title === 'multiloop monitor'`));
          shown.threads = yield* ensureFuture(
            page.waitFor(`['MainThread', 'page-thread', 'page-thread-2'].every((name) => document.querySelector('[data-thread="' + name + '"]'))`),
          );
          shown.task = yield* ensureFuture(page.waitFor(`!!document.querySelector('[data-task="watched-task"] [data-task]')`));
          shown.notYet = (yield* ensureFuture(page.evaluate(`!!document.querySelector('[data-task="arrived-later"]')`))) === true;
          // The app changes: a new task; the page shows it on its own.
          const later = loop.createTask(parked(), { name: 'arrived-later' });
          shown.later = yield* ensureFuture(page.waitFor(`!!document.querySelector('[data-task="arrived-later"]')`));
          later.cancel();
          relaying.cancel();
          shown.gone = yield* ensureFuture(page.waitFor(`!document.querySelector('[data-task="arrived-later"]')`));
          return shown;
        } finally {
          relaying.cancel();
          if (monitor !== null) yield* ensureFuture(monitor.close());
          yield* lt.call('closeNext');
          yield* ensureFuture(lt.close());
        }
      })(),
    );
    expect(seen).toEqual({ title: true, threads: true, task: true, notYet: false, later: true, gone: true });
  });

  it('a name rebound to this address (DNS rebinding) gets a refusal and no data; the same name in allowedHosts gets the page', async () => {
    const guarded = await startMonitor({ port: 0 });
    const allowing = await startMonitor({ port: 0, allowedHosts: ['rebound.example'] });
    try {
      const refused = await browser.open(`http://rebound.example:${guarded.port}/snapshot.json`);
      expect(await refused.waitFor(`document.body !== null && document.body.innerText.startsWith('refused')`)).toBe(true);
      expect(await refused.evaluate('document.body.innerText.trimEnd()')).toBe(`refused: this monitor does not answer to Host 'rebound.example:${guarded.port}' (see startMonitor's allowedHosts)`);
      expect(guarded.statistics().snapshots).toBe(0);
      const page = await browser.open(`http://rebound.example:${allowing.port}/`);
      expect(await page.waitFor(`!!document.querySelector('[data-thread="MainThread"]')`)).toBe(true);
      expect(allowing.statistics().refused).toBe(0);
    } finally {
      await guarded.close();
      await allowing.close();
    }
  });
});
