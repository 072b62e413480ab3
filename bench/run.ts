/**
 * `npm run bench`: every workload, each beside its Node baseline measured in the same run.
 * Prints a Markdown table; `--json` also writes bench-results.json. `--only=core` picks workloads;
 * `--peers` adds the same workloads in CPython's asyncio and uvloop (bench/peers).
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { coreWorkloads } from './core.js';
import { bullmqWorkloads } from './bullmq.js';
import { busyWorkloads } from './busy.js';
import { contextWorkloads } from './context.js';
import { executorWorkloads } from './executor.js';
import { healthWorkloads } from './health.js';
import { ioWorkloads } from './io.js';
import { pipeWorkloads } from './pipes.js';
import { poolWorkloads } from './pool.js';
import { monitorWorkloads } from './monitor.js';
import { onePortWorkloads } from './one-port.js';
import { simulateWorkloads } from './simulate.js';
import { startupWorkloads } from './startup.js';
import { threadWorkloads } from './threads.js';
import { threadQueueWorkloads } from './thread-queue.js';
import { toolkitWorkloads } from './toolkit.js';
import { weightWorkloads } from './weight.js';
import { renderTable, type Row } from './harness.js';
import { runPeers } from './peers.js';

const args = process.argv.slice(2);
const json = args.includes('--json');
const only = args.find((arg) => arg.startsWith('--only='))?.slice('--only='.length).split(',');

const suites: Array<[string, (log: (line: string) => void) => Promise<Row[]>]> = [
  ['core', coreWorkloads],
  ['toolkit', toolkitWorkloads],
  ['threads', threadWorkloads],
  ['busy', busyWorkloads],
  ['context', contextWorkloads],
  ['pool', poolWorkloads],
  ['queue', threadQueueWorkloads],
  ['startup', startupWorkloads],
  ['executor', executorWorkloads],
  ['io', ioWorkloads],
  ['reuseport', onePortWorkloads],
  ['pipes', pipeWorkloads],
  ['bullmq', bullmqWorkloads],
  ['health', healthWorkloads],
  ['monitor', monitorWorkloads],
  ['weight', weightWorkloads],
  ['simulate', simulateWorkloads],
];

const header = `multiloop bench — Node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? 'unknown CPU'}), medians of several runs`;
console.log(header);
const rows: Row[] = [];
for (const [name, suite] of suites) {
  if (only !== undefined && !only.includes(name)) continue;
  console.log(`\n${name}:`);
  rows.push(...(await suite((line) => console.log(line))));
}
if (args.includes('--peers')) {
  console.log('\npeers:');
  for (const [name, peer] of Object.entries(runPeers((line) => console.log(line)))) {
    for (const row of rows) {
      const value = peer[row.workload];
      if (value !== undefined) (row.peers ??= {})[name] = value;
    }
  }
}
console.log(`\n${renderTable(rows)}`);
if (json) {
  writeFileSync('bench-results.json', JSON.stringify({ header, node: process.version, cores: availableParallelism(), rows }, null, 2));
  console.log('\nwrote bench-results.json');
}
