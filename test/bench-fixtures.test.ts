/**
 * The echo servers of the I/O bench (bench/fixtures/echo-server.ts, built into dist/) echo every
 * byte, whatever their kind: a bench row of a server that drops or mangles bytes would measure
 * nothing. Each runs in a process of its own, as the bench runs it. The programs of the simulate
 * bench (bench/simulate.ts, built) fire every timer and deliver every item, under simulate() and
 * under run(), at smaller sizes than the bench's.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SERVER = fileURLToPath(new URL('../dist/bench/fixtures/echo-server.js', import.meta.url));
const ONE_PORT = fileURLToPath(new URL('../dist/bench/fixtures/one-port-server.js', import.meta.url));
const SIMULATE_BENCH = new URL('../dist/bench/simulate.js', import.meta.url).href;
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
const hasReusePort = process.platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));

/** What the server `script` started with `args` sends back for `payload`, sent in one write. */
async function echoOf(kind: string, payload: Buffer, script = SERVER, args = [kind]): Promise<Buffer> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = (await once(child.stdout, 'data')) as [Buffer];
    const socket = connect(Number(line.toString().trim()), '127.0.0.1');
    const chunks: Buffer[] = [];
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        if (received >= payload.length) resolve();
      });
      socket.write(payload);
    });
    socket.destroy();
    return Buffer.concat(chunks);
  } finally {
    child.kill();
  }
}

describe('the echo servers of the I/O bench', () => {
  for (const kind of ['raw', 'floor', 'streams', 'protocols', 'buffered']) {
    it(`${kind}: echoes 300 KiB exactly`, async () => {
      const payload = randomBytes(300 * 1024);
      const echoed = await echoOf(kind, payload);
      expect(echoed.length).toBe(payload.length);
      expect(echoed.equals(payload)).toBe(true);
    });
  }

  it('refuses a kind it does not know, naming the kinds', async () => {
    const child = spawn(process.execPath, [SERVER, 'telepathy'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect({ code, stderr: stderr.trim() }).toEqual({ code: 2, stderr: 'usage: echo-server.js raw|streams|protocols|buffered|floor, got telepathy' });
  });
});

describe('the servers of the one-port bench', () => {
  // cluster on every Node; the pool's threads listen with reusePort (Node 22.12+ on Linux).
  for (const args of [['cluster', '2'], ...(hasReusePort ? [['pool', '1'], ['pool', '2']] : [])]) {
    it(`${args.join(' ')}: echoes 300 KiB exactly`, async () => {
      const payload = randomBytes(300 * 1024);
      const echoed = await echoOf(args[0]!, payload, ONE_PORT, args);
      expect(echoed.length).toBe(payload.length);
      expect(echoed.equals(payload)).toBe(true);
    });
  }

  it('refuses arguments it does not know, naming the ones it takes', async () => {
    const child = spawn(process.execPath, [ONE_PORT, 'pool', 'many'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect({ code, stderr: stderr.trim() }).toEqual({ code: 2, stderr: 'usage: one-port-server.js pool|cluster <n>, got pool many' });
  });
});

describe('the programs of the simulate bench', () => {
  /** The built bench module: its LoopThreads host the built service, as `npm run bench` runs them. */
  const bench = async (): Promise<typeof import('../bench/simulate.js')> => (await import(SIMULATE_BENCH)) as typeof import('../bench/simulate.js');

  it('fires every timer of the three threads on the virtual clock, and in real time', async () => {
    const { hour, realTime, simulated } = await bench();
    const virtual = await simulated((started) => hour(20, started), 5);
    expect(virtual.value).toEqual({ fired: 60, times: [20, 20, 20] });
    expect(virtual.virtualTime).toBe(20);
    const real = await realTime((started) => hour(1, started));
    expect(real.value.fired).toBe(3);
  }, 60_000);

  for (const maxsize of [0, 1]) {
    it(`delivers every item of the pipeline once (maxsize ${maxsize}), under simulate() and under run()`, async () => {
      const { pipeline, realTime, simulated } = await bench();
      const virtual = await simulated((started) => pipeline(300, maxsize, started), 7);
      expect(virtual.value).toBe((300 * 299) / 2);
      // No sleeps: nothing moves the clock.
      expect(virtual.virtualTime).toBe(0);
      const real = await realTime((started) => pipeline(300, maxsize, started));
      expect(real.value).toBe((300 * 299) / 2);
    }, 60_000);
  }
});

describe('the context bench (bench/context-child.ts, built)', () => {
  const CHILD = fileURLToPath(new URL('../dist/bench/context-child.js', import.meta.url));

  /** What a side of the context bench prints, and how it exited. */
  async function side(name: string): Promise<{ code: number | null; out: string }> {
    const child = spawn(process.execPath, [CHILD, name], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    return { code, out };
  }

  it('makes its round trips with nothing registered, and with the store arriving at every call', { timeout: 60_000 }, async () => {
    for (const name of ['plain', 'store']) {
      const { code, out } = await side(name);
      expect(code).toBe(0);
      // The store side's service throws at any call whose store did not arrive: a p50 means all did.
      expect((JSON.parse(out) as { p50: number }).p50).toBeGreaterThan(0);
    }
  });

  it('refuses a side it does not know', async () => {
    const { code, out } = await side('other');
    expect(code).not.toBe(0);
    expect(out).toMatch(/context-child: plain or store, got other/);
  });
});
