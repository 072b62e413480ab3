/**
 * The pool worker: it hands its results port to the executor, then piscina calls the default
 * export with each batch of jobs (see src/internal/pool-job.ts).
 */
import { openResultsPort, runBatch } from '../src/internal/pool-job.js';

openResultsPort();

export default runBatch;
