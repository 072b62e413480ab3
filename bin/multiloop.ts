#!/usr/bin/env node
/** The `multiloop` command (`npx multiloop ps <pid>`); the work is in src/cli.ts. */
import { fileURLToPath } from 'node:url';
import { runCommand } from '../src/cli.js';

process.exitCode = await runCommand(process.argv.slice(2), fileURLToPath(import.meta.url));
