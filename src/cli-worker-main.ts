/** A temporary entry for `multiloop worker` until the package's CLI dispatches to it: `node dist/src/cli-worker-main.js --allow ...`. */
import { workerCommand } from './cli-worker.js';

process.exit(await workerCommand(process.argv.slice(2)));
