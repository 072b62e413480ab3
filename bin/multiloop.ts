#!/usr/bin/env node
/** The `multiloop` command (`npx multiloop ps <pid>`); the work is in src/cli.ts. */
import { main } from '../src/cli.js';

// Ended here: a worker's Redis connections, once closed, must not hold the process a moment longer.
process.exit(await main(process.argv.slice(2)));
