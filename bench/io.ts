/**
 * The I/O workload, in the manner of uvloop's published echo benchmark: an echo server in its own
 * process, a client process with 10 connections, each sending a message and waiting for its whole
 * echo before sending again; message sizes 1 KiB, 10 KiB, 100 KiB; requests/s (and MiB/s in the
 * log). Servers: raw Node net, Node's floor (a socket read through `onread` and written back,
 * no loop), multiloop streams, protocols and BufferedProtocol, and, when Debian's python3-uvloop
 * is installed, uvloop's streams, protocols and BufferedProtocol (the peers an asyncio user would
 * pick). All servers take turns within each round, each of ours beside its uvloop peer, so that
 * they meet the same machine; on Linux the server runs on one core and the client on the other
 * (taskset), which steadies the figures.
 *
 * Beside them, the StreamReader alone: 9 MiB fed in 4 KiB pieces, one piece per loop iteration
 * (no socket, so that only the reader is measured), taken as one line by `readuntil` and, as
 * its baseline, by `read()` calls whose blocks are joined at the end.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { newEventLoop, StreamReader, type Coroutine } from '../src/index.js';
import { interleaved, median, now, type Row } from './harness.js';

const SERVER = fileURLToPath(new URL('./fixtures/echo-server.js', import.meta.url));
const PEER = fileURLToPath(new URL('../../bench/fixtures/echo_server.py', import.meta.url));
const CLIENT = fileURLToPath(new URL('./fixtures/echo-client.js', import.meta.url));
const SIZES = [1024, 10 * 1024, 100 * 1024];
const CONNECTIONS = 10;
const MEASURE_MS = 1000;
const ROUNDS = 4;
const LINE_BYTES = 9 << 20;
const PIECE_BYTES = 4 << 10;
const LINE_ROUNDS = 7;

type Kind = 'raw' | 'floor' | 'streams' | 'protocols' | 'buffered' | 'uvloop-streams' | 'uvloop-protocols' | 'uvloop-buffered';

/** What each server kind of ours is called in the table. */
const LABELS = { streams: 'streams', protocols: 'protocols', buffered: 'BufferedProtocol' } as const;

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

/** The CPU time (user and system, milliseconds) process `pid` has used, where Linux's /proc tells it; else null. */
function cpuMs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/** One measurement: requests per second, and the server's CPU time per request (µs) where known. */
interface Measured {
  rate: number;
  serverCpu: number | null;
}

/** Requests per second the client process measured against `server`, and what they cost the server. */
async function measure(server: { child: ChildProcess; port: number }, size: number): Promise<Measured> {
  const { port } = server;
  const cpuBefore = cpuMs(server.child.pid);
  const [program, ...args] = pinned(1, [process.execPath, CLIENT, String(port), String(size), String(MEASURE_MS), String(CONNECTIONS)]) as [string, ...string[]];
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  if (code !== 0) throw new Error(`the echo client exited with ${code}`);
  const cpuAfter = cpuMs(server.child.pid);
  const { requests, ms, all } = JSON.parse(out) as { requests: number; ms: number; all: number };
  // The server's CPU over the client's whole run, per request answered in it (warm-up included).
  const serverCpu = cpuBefore === null || cpuAfter === null ? null : ((cpuAfter - cpuBefore) * 1000) / all;
  return { rate: (requests / ms) * 1000, serverCpu };
}

/**
 * Milliseconds a StreamReader took to hand over 9 MiB fed in 4 KiB pieces, one per loop
 * iteration (the reader wakes for each): as one line through `readuntil` (the separator is the
 * last byte), or through `read()` with the blocks joined at the end.
 */
async function readPieces(how: 'readuntil' | 'read'): Promise<number> {
  const loop = newEventLoop();
  // Room for the whole line: the reader neither overruns its limit nor pauses.
  const reader = new StreamReader(2 * LINE_BYTES, loop);
  const piece = Buffer.alloc(PIECE_BYTES, 0x61);
  const last = Buffer.alloc(PIECE_BYTES, 0x61);
  last[PIECE_BYTES - 1] = 0x0a;
  const pieces = LINE_BYTES / PIECE_BYTES;
  let fed = 0;
  const feed = (): void => {
    reader._feedData(++fed === pieces ? last : piece);
    if (fed < pieces) loop.callSoon(feed);
  };
  function* consume(): Coroutine<number> {
    if (how === 'readuntil') return (yield* reader.readuntil('\n')).length;
    const blocks: Uint8Array[] = [];
    let got = 0;
    while (got < LINE_BYTES) {
      const block = yield* reader.read(LINE_BYTES);
      blocks.push(block);
      got += block.length;
    }
    return Buffer.concat(blocks).length;
  }
  const started = now();
  loop.callSoon(feed);
  const length = await loop.runUntilComplete(consume());
  const took = now() - started;
  loop.close();
  if (length !== LINE_BYTES) throw new Error(`${how} returned ${length} bytes of ${LINE_BYTES}`);
  return took;
}

/** The StreamReader rows: a long line in small pieces through readuntil, beside read(). */
export async function readerWorkloads(log: (line: string) => void): Promise<Row[]> {
  const [lines, reads] = await interleaved(LINE_ROUNDS, () => readPieces('readuntil'), () => readPieces('read'));
  const line = median(lines);
  const read = median(reads);
  log(`  9 MiB in 4 KiB pieces: readuntil ${line.toFixed(1)} ms, read() ${read.toFixed(1)} ms (${(line / read).toFixed(2)}×)`);
  return [
    {
      workload: '9 MiB in 4 KiB pieces through readuntil',
      unit: 'ms',
      value: line,
      baseline: read,
      baselineName: 'the same through read()',
      higherIsBetter: false,
      target: 'within 1.5x read()',
    },
  ];
}

/** Run the StreamReader's workloads, then the echo-server workloads. */
export async function ioWorkloads(log: (line: string) => void): Promise<Row[]> {
  const readerRows = await readerWorkloads(log);
  const py = python();
  // Each server of ours right beside its uvloop peer, so that a pair meets the same machine.
  const kinds: Kind[] =
    py === null
      ? ['raw', 'floor', 'streams', 'protocols', 'buffered']
      : ['raw', 'floor', 'streams', 'uvloop-streams', 'protocols', 'uvloop-protocols', 'buffered', 'uvloop-buffered'];
  if (py === null) log('  uvloop peers skipped: install python3-uvloop (apt-get install python3-uvloop) to measure them beside multiloop');
  const servers = new Map<Kind, { child: ChildProcess; port: number }>();
  for (const kind of kinds) servers.set(kind, await startServer(kind, py));
  const results = new Map<string, number[]>();
  const serverCpus = new Map<string, number[]>();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Every other round in reverse order: neither server of a pair always goes first.
      const order = round % 2 === 0 ? kinds : [...kinds].reverse();
      for (const size of SIZES) {
        for (const kind of order) {
          const key = `${kind}/${size}`;
          const { rate, serverCpu } = await measure(servers.get(kind)!, size);
          results.set(key, [...(results.get(key) ?? []), rate]);
          if (serverCpu !== null) serverCpus.set(key, [...(serverCpus.get(key) ?? []), serverCpu]);
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
  /** `, server CPU x µs/req` for `kind` at `size`, when /proc told it. */
  const cpu = (kind: Kind, size: number): string => {
    const values = serverCpus.get(`${kind}/${size}`);
    return values === undefined ? '' : ` (server CPU ${median(values).toFixed(1)} µs/req)`;
  };
  const rows: Row[] = [...readerRows];
  for (const size of SIZES) {
    const label = `${size / 1024} KiB`;
    const raw = rate('raw', size) as number;
    log(`  echo ${label}: raw Node net ${raw.toFixed(0)} req/s = ${((raw * size) / (1 << 20)).toFixed(1)} MiB/s${cpu('raw', size)}`);
    const floor = rate('floor', size) as number;
    log(`  echo ${label}: Node's floor (onread → write, no loop) ${floor.toFixed(0)} req/s${cpu('floor', size)}`);
    for (const kind of ['streams', 'protocols', 'buffered'] as const) {
      const name = LABELS[kind];
      const ours = rate(kind, size) as number;
      const peer = rate(`uvloop-${kind}`, size);
      log(
        `  echo ${label}: multiloop ${name} ${ours.toFixed(0)} req/s = ${((ours * size) / (1 << 20)).toFixed(1)} MiB/s${cpu(kind, size)}` +
          (peer === null ? '' : `, uvloop ${name} ${peer.toFixed(0)} req/s${cpu(`uvloop-${kind}`, size)}`),
      );
      // The targets are set for streams and protocols; BufferedProtocol is measured beside them.
      const targeted = kind !== 'buffered';
      if (peer !== null) {
        rows.push({
          workload: `echo ${label}, ${name}, 10 connections`,
          unit: 'req/s',
          value: ours,
          baseline: peer,
          baselineName: `uvloop ${name}`,
          higherIsBetter: true,
          ...(targeted && size < 100 * 1024 ? { target: `ahead of uvloop ${name}` } : {}),
        });
      }
      rows.push({
        workload: `echo ${label}, ${name}, 10 connections`,
        unit: 'req/s',
        value: ours,
        baseline: raw,
        baselineName: 'raw Node net',
        higherIsBetter: true,
        ...(targeted ? { target: '>= 0.9x raw Node net' } : {}),
      });
    }
  }
  return rows;
}
