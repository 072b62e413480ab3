#!/usr/bin/env node
/** The `multiloop` command (`npx multiloop ps <pid>`); the work is in src/cli.ts. */
import { fileURLToPath } from 'node:url';
import { runCommand } from '../src/cli.js';

// Ended here: a worker's Redis connections, once closed, must not hold the process a moment longer.
process.exit(await runCommand(process.argv.slice(2), fileURLToPath(import.meta.url)));
