import { configDefaults, defineConfig } from 'vitest/config';

/**
 * MULTILOOP_TEST_SET=node-facing (scripts/test-nodes.mjs, on Node 22 and 24): the suite without
 * the distributed executor's suites and the LoopThread soak, which exercise Redis, PostgreSQL, BullMQ
 * rather than Node itself; they run in full on the machine's Node and on Node 26.
 */
const NOT_NODE_FACING = ['test/bullmq*.test.ts', 'test/loop-thread-soak.test.ts'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: process.env.MULTILOOP_TEST_SET === 'node-facing' ? [...configDefaults.exclude, ...NOT_NODE_FACING] : configDefaults.exclude,
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
