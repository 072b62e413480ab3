/**
 * `node dist/bench/solo.js <pair> <side> <runs>`: one side of a pair of workloads (0: multiloop's,
 * 1: its baseline; the `tasks` group has three: lazy tasks, eager tasks, their baseline) in a
 * process of its own, run once to warm up and then `runs` times; what each measured run
 * returned, printed as JSON. The bench runs the pairs whose time goes mostly to garbage
 * collection this way (harness.ts, freshPairs), so that neither side meets the garbage of the
 * other or of other workloads.
 */
import { spawnPair, tasksGatherSides, timerPair } from './core.js';
import { gatherPair } from './toolkit.js';

const pairs: Record<string, ReadonlyArray<() => Promise<unknown>>> = {
  gather: gatherPair,
  spawn: spawnPair,
  tasks: tasksGatherSides,
  timers: timerPair,
};

const [name = '', side = '', runs = ''] = process.argv.slice(2);
const pair = pairs[name];
const count = Number(runs);
const index = Number(side);
if (pair === undefined || !(Number.isInteger(index) && index >= 0 && index < pair.length) || !(Number.isInteger(count) && count > 0)) {
  console.error(`usage: solo.js ${Object.keys(pairs).join('|')} <side> <runs>, got ${JSON.stringify(process.argv.slice(2))}`);
  process.exit(2);
}
const workload = pair[index] as () => Promise<unknown>;
await workload();
const results: unknown[] = [];
for (let i = 0; i < count; i++) results.push(await workload());
console.log(JSON.stringify(results));
