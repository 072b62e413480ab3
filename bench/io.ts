/**
 * The I/O workload, in the manner of uvloop's published echo benchmark: an echo server in its own
 * process, a client process with 10 connections, each sending a message and waiting for its whole
 * echo before sending again; message sizes 1 KiB, 10 KiB, 100 KiB; requests/s (and MiB/s in the
 * log). Servers: raw Node net, multiloop streams, multiloop protocols, and, when Debian's
 * python3-uvloop is installed, uvloop's streams and protocols (the peers an asyncio user would
 * pick). All servers take turns within each round, so that they meet the same machine; on Linux
 * the server runs on one core and the client on the other (taskset), which steadies the figures.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { median, type Row } from './harness.js';

const SERVER = fileURLToPath(new URL('./fixtures/echo-server.js', import.meta.url));
const PEER = fileURLToPath(new URL('../../bench/fixtures/echo_server.py', import.meta.url));
const CLIENT = fileURLToPath(new URL('./fixtures/echo-client.js', import.meta.url));
const SIZES = [1024, 10 * 1024, 100 * 1024];
const CONNECTIONS = 10;
const MEASURE_MS = 1000;
const ROUNDS = 4;

type Kind = 'raw' | 'streams' | 'protocols' | 'uvloop-streams' | 'uvloop-protocols';

/** Debian's python3 (where apt puts python3-uvloop), else the first python3 on PATH. */
function python(): string | null {
  for (const candidate of ['/usr/bin/python3', 'python3']) {
    const probe = spawnSync(candidate, ['-c', 'import uvloop'], { stdio: 'ignore' });
    if (probe.status === 0) return candidate;
  }
  return null;
}

/** `taskset -c <cpu>` before a command, where taskset exists and there are two cores or more. */
function pinned(cpu: number, command: string[]): string[] {
  return existsSync('/usr/bin/taskset') ? ['/usr/bin/taskset', '-c', String(cpu), ...command] : command;
}

/** Start an echo server process of `kind`; its process and port. */
async function startServer(kind: Kind, py: string | null): Promise<{ child: ChildProcess; port: number }> {
  const command = kind.startsWith('uvloop-') ? [py as string, PEER, kind.slice('uvloop-'.length)] : [process.execPath, SERVER, kind];
  const [program, ...args] = pinned(0, command) as [string, ...string[]];
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

/** Requests per second the client process measured against `port`. */
async function measure(port: number, size: number): Promise<number> {
  const [program, ...args] = pinned(1, [process.execPath, CLIENT, String(port), String(size), String(MEASURE_MS), String(CONNECTIONS)]) as [string, ...string[]];
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  if (code !== 0) throw new Error(`the echo client exited with ${code}`);
  const { requests, ms } = JSON.parse(out) as { requests: number; ms: number };
  return (requests / ms) * 1000;
}

/** Run the echo-server workloads. */
export async function ioWorkloads(log: (line: string) => void): Promise<Row[]> {
  const py = python();
  const kinds: Kind[] = ['raw', 'streams', 'protocols'];
  if (py !== null) kinds.push('uvloop-streams', 'uvloop-protocols');
  else log('  uvloop peers skipped: install python3-uvloop (apt-get install python3-uvloop) to measure them beside multiloop');
  const servers = new Map<Kind, { child: ChildProcess; port: number }>();
  for (const kind of kinds) servers.set(kind, await startServer(kind, py));
  const results = new Map<string, number[]>();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const size of SIZES) {
        for (const kind of kinds) {
          const key = `${kind}/${size}`;
          results.set(key, [...(results.get(key) ?? []), await measure(servers.get(kind)!.port, size)]);
        }
      }
    }
  } finally {
    for (const { child } of servers.values()) child.kill();
  }
  const rate = (kind: Kind, size: number): number | null => {
    const values = results.get(`${kind}/${size}`);
    return values === undefined ? null : median(values);
  };
  const rows: Row[] = [];
  for (const size of SIZES) {
    const label = `${size / 1024} KiB`;
    const raw = rate('raw', size) as number;
    log(`  echo ${label}: raw Node net ${raw.toFixed(0)} req/s = ${((raw * size) / (1 << 20)).toFixed(1)} MiB/s`);
    for (const kind of ['streams', 'protocols'] as const) {
      const ours = rate(kind, size) as number;
      const peer = rate(`uvloop-${kind}`, size);
      log(`  echo ${label}: multiloop ${kind} ${ours.toFixed(0)} req/s = ${((ours * size) / (1 << 20)).toFixed(1)} MiB/s` + (peer === null ? '' : `, uvloop ${kind} ${peer.toFixed(0)} req/s`));
      if (peer !== null) {
        rows.push({
          workload: `echo ${label}, ${kind}, 10 connections`,
          unit: 'req/s',
          value: ours,
          baseline: peer,
          baselineName: `uvloop ${kind}`,
          higherIsBetter: true,
          ...(size < 100 * 1024 ? { target: `ahead of uvloop ${kind}` } : {}),
        });
      }
      rows.push({
        workload: `echo ${label}, ${kind}, 10 connections`,
        unit: 'req/s',
        value: ours,
        baseline: raw,
        baselineName: 'raw Node net',
        higherIsBetter: true,
        target: '>= 0.9x raw Node net',
      });
    }
  }
  return rows;
}
