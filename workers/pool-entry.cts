/**
 * The file piscina loads in a pool thread. CommonJS, so that piscina's require() of it loads
 * nothing else: the pool worker and multiloop come in once, as ES modules, through import()
 * (see poolWorkerPath() in src/executor.ts).
 */
const worker = import('./pool-worker.js');

export = async function runBatch(batch: unknown): Promise<unknown> {
  return (await worker).default(batch as Parameters<Awaited<typeof worker>['default']>[0]);
};
