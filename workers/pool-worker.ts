/**
 * The pool worker: piscina calls the default export with each batch of jobs
 * (see src/internal/pool-job.ts).
 */
import { runBatch } from '../src/internal/pool-job.js';

export default runBatch;
