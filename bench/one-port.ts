/**
 * One port served by several loops: a LoopThreadPool whose threads all listen on one port of
 * 127.0.0.1 with `reusePort` (the kernel spreading the connections over their loops), beside one
 * LoopThread serving alone and beside Node's cluster with as many processes (each running the same
 * multiloop echo server in its main loop; the primary accepts and hands connections round). Each
 * server runs in a process of its own; a client process (bench/fixtures/latency-client.ts) drives
 * 1 KiB echoes over 32 connections, each waiting for its echo before sending again, and measures
 * requests/s and the round trip's p50 and p99. The servers take turns within each round, the
 * order reversed every other round. Needs reusePort: Node 22.12+ on Linux.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { reusePortMissing } from '../src/internal/reuse-port.js';
import { median, type Row } from './harness.js';

const SERVER = fileURLToPath(new URL('./fixtures/one-port-server.js', import.meta.url));
const CLIENT = fileURLToPath(new URL('./fixtures/latency-client.js', import.meta.url));
const SIZE = 1024;
const CONNECTIONS = 32;
const MEASURE_MS = 1000;
const ROUNDS = 5;

type Kind = 'single' | 'pool' | 'cluster';

interface Measured {
  rate: number;
  p50: number;
  p99: number;
}

/** Start the server of `kind` (`threads` threads or processes) in a process of its own; it and its port. */
async function startServer(kind: Kind, threads: number): Promise<{ child: ChildProcess; port: number }> {
  const args = kind === 'cluster' ? ['cluster', String(threads)] : ['pool', String(kind === 'single' ? 1 : threads)];
  const child = spawn(process.execPath, [SERVER, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await Promise.race([once(child.stdout!, 'data'), once(child, 'exit').then(() => [null])])) as [Buffer | null];
  if (line === null) throw new Error(`bench/fixtures/one-port-server.js ${args.join(' ')} exited before it listened`);
  return { child, port: Number(line.toString().trim()) };
}

/** What the client process measured against `port`. */
async function measure(port: number): Promise<Measured> {
  const child = spawn(process.execPath, [CLIENT, String(port), String(SIZE), String(MEASURE_MS), String(CONNECTIONS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  if (code !== 0) throw new Error(`the latency client exited with ${code}`);
  const { requests, ms, p50, p99 } = JSON.parse(out) as { requests: number; ms: number; p50: number; p99: number };
  return { rate: (requests / ms) * 1000, p50, p99 };
}

/** The one-port rows: the pool beside one thread and beside cluster, requests/s and latency. */
export async function onePortWorkloads(log: (line: string) => void): Promise<Row[]> {
  const missing = reusePortMissing();
  if (missing !== null) {
    log(`  skipped: ${missing.message}`);
    return [];
  }
  const threads = Math.max(2, availableParallelism());
  const kinds: Kind[] = ['single', 'pool', 'cluster'];
  const servers = new Map<Kind, { child: ChildProcess; port: number }>();
  const results = new Map<Kind, Measured[]>(kinds.map((kind) => [kind, []]));
  try {
    for (const kind of kinds) servers.set(kind, await startServer(kind, threads));
    for (let round = -1; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? kinds : [...kinds].reverse();
      for (const kind of order) {
        const measured = await measure(servers.get(kind)!.port);
        // Round -1 warms every server up.
        if (round >= 0) results.get(kind)!.push(measured);
      }
    }
  } finally {
    for (const { child } of servers.values()) child.kill();
  }
  const of = (kind: Kind, what: keyof Measured): number => median(results.get(kind)!.map((measured) => measured[what]));
  const names = { single: 'one LoopThread', pool: `LoopThreadPool of ${threads} (reusePort)`, cluster: `Node cluster of ${threads} processes` };
  for (const kind of kinds) {
    log(`  ${names[kind]}: ${of(kind, 'rate').toFixed(0)} req/s, round trip p50 ${of(kind, 'p50').toFixed(0)} µs, p99 ${of(kind, 'p99').toFixed(0)} µs`);
  }
  const workload = `one port, echo 1 KiB, ${CONNECTIONS} connections: ${names.pool}`;
  const row = (label: string, unit: string, what: keyof Measured, against: Kind, higherIsBetter: boolean): Row => ({
    workload: `${workload}${label}`,
    unit,
    value: of('pool', what),
    baseline: of(against, what),
    baselineName: names[against],
    higherIsBetter,
  });
  return [
    row('', 'req/s', 'rate', 'single', true),
    row('', 'req/s', 'rate', 'cluster', true),
    row(', round trip p50', 'µs', 'p50', 'cluster', false),
    row(', round trip p99', 'µs', 'p99', 'cluster', false),
  ];
}
