#!/usr/bin/env node
/**
 * Before the tests: the real programs some suites run — Debian's `redis-server` (the BullMQ
 * executor's tests), `postgresql` (the executor on PostgreSQL) and `chromium` (the monitor
 * page's test). Installed with apt-get when this runs as root and one is missing, saying so in
 * one line; otherwise each suite that needs a missing one prints its own "skipped: install X"
 * line (a failure under CI=true).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

/** Debian keeps PostgreSQL's server programs off the PATH, in /usr/lib/postgresql/<version>/bin. */
const hasPostgres = () =>
  (onPath('initdb') && onPath('postgres')) ||
  (existsSync('/usr/lib/postgresql') && readdirSync('/usr/lib/postgresql').some((version) => existsSync(`/usr/lib/postgresql/${version}/bin/postgres`)));

/** What the suites run, how to tell it is there, and its Debian package. */
const NEEDED = [
  ['redis-server', () => onPath('redis-server')],
  ['postgresql', hasPostgres],
  ['chromium', () => onPath('chromium')],
];

const missing = NEEDED.filter(([, present]) => !present());
if (missing.length > 0 && process.getuid?.() === 0 && onPath('apt-get') && process.env.MULTILOOP_NO_INSTALL === undefined) {
  const packages = missing.map(([pkg]) => pkg);
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
