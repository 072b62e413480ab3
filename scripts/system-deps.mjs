#!/usr/bin/env node
/**
 * Before the tests: the real programs some suites run — Debian's `redis-server` (the BullMQ
 * executor's tests) and `chromium` (the monitor page's test). Installed with apt-get when this
 * runs as root and one is missing, saying so in one line; otherwise each suite that needs a missing
 * one prints its own "skipped: install X" line (a failure under CI=true).
 */
import { spawnSync } from 'node:child_process';

/** The commands the suites run, and the Debian package of each. */
const NEEDED = [
  ['redis-server', 'redis-server'],
  ['chromium', 'chromium'],
];

const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
const missing = NEEDED.filter(([command]) => !onPath(command));
if (missing.length > 0 && process.getuid?.() === 0 && onPath('apt-get') && process.env.MULTILOOP_NO_INSTALL === undefined) {
  const packages = missing.map(([, pkg]) => pkg);
  console.log(`installing ${packages.join(' and ')} with apt-get (running as root) for the tests that use the real thing`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const run = (args) => spawnSync('apt-get', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 });
  let result = run(['install', '-y', '-qq', '--no-install-recommends', ...packages]);
  if (result.status !== 0) {
    // The package lists may be missing or stale on a fresh machine.
    run(['update', '-qq']);
    result = run(['install', '-y', '-qq', '--no-install-recommends', ...packages]);
  }
  if (result.status !== 0) {
    const tail = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n').slice(-5).join('\n');
    console.log(`apt-get could not install ${packages.join(' and ')}:\n${tail}`);
  }
}
