/**
 * `npm run bench -- --peers`: the bench's workloads in CPython's asyncio and, when importable, in
 * uvloop (bench/peers/asyncio_peers.py, Debian's python3 and python3-uvloop), each run after the
 * multiloop suites so that they do not share the machine with them.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../bench/peers/asyncio_peers.py', import.meta.url));

/** The first python3 that runs, Debian's first (where apt installs python3-uvloop). */
function python(): string | null {
  for (const candidate of ['/usr/bin/python3', 'python3']) {
    if (spawnSync(candidate, ['-c', 'import asyncio'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  return null;
}

/** Run the peers; their figures by peer name and workload. */
export function runPeers(log: (line: string) => void): Record<string, Record<string, number>> {
  const py = python();
  if (py === null) {
    log('  peers skipped: install python3 (apt-get install python3 python3-uvloop) to compare with asyncio and uvloop');
    return {};
  }
  const peers: Record<string, Record<string, number>> = {};
  const hasUvloop = spawnSync(py, ['-c', 'import uvloop'], { stdio: 'ignore' }).status === 0;
  const runs: Array<[string, string[]]> = [['asyncio', []]];
  if (hasUvloop) runs.push(['uvloop', ['--uvloop']]);
  else log('  uvloop skipped: install python3-uvloop (apt-get install python3-uvloop) to compare with it');
  for (const [name, flags] of runs) {
    const run = spawnSync(py, [SCRIPT, ...flags], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (run.status !== 0) {
      log(`  ${name} failed (exit ${run.status}): ${run.stderr.trim().split('\n').pop() ?? ''}`);
      continue;
    }
    peers[name] = JSON.parse(run.stdout) as Record<string, number>;
    log(`  ${name}: ${Object.keys(peers[name]).length} workloads`);
  }
  return peers;
}
