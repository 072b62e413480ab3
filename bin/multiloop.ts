#!/usr/bin/env node
/**
 * The `multiloop` command (`npx multiloop ps <pid>`); the work is in src/cli.ts. It runs the
 * bundle (dist/lib), the copy of multiloop that the modules of a worker's jobs import.
 */
const { main } = (await import(new URL('../lib/cli.js', import.meta.url).href)) as typeof import('../src/cli.js');

// Ended here: a worker's Redis connections, once closed, must not hold the process a moment longer.
process.exit(await main(process.argv.slice(2)));
