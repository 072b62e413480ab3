/**
 * Finding a race between threads with multiloop/testing: two LoopThreads book the last seat at a
 * box office in the main loop, for two customers 30 ms apart. `explore` runs the app under many seeds (each an order real threads
 * could take, with message latencies drawn from the seed); the seeds where the seat was sold twice
 * fail, and `simulate` with one of them replays that run exactly. The fixed app passes every seed.
 *
 * Run: npm run example:testing
 */
import { LoopThread, gather, sleep, type Coroutine } from 'multiloop';
import { SimulationError, explore, simulate } from 'multiloop/testing';

const AGENT = new URL('./services/booking-agent.js', import.meta.url);
/** Seeds 1 to 12 (`seeds: 12` would start from a random one: a new exploration each run). */
const SEEDS = Array.from({ length: 12 }, (_, i) => i + 1);
/** Each message between threads takes 0 to 20 ms of virtual time. */
const faults = { latency: [0, 0.02] as const };

/** The box office has one seat left; two agents in two threads each book it for a customer. */
function boxOffice(booking: 'bookRacy' | 'bookSafe'): () => Coroutine<string[]> {
  return function* () {
    let seatsLeft = 1;
    const tickets: string[] = [];
    const expose = {
      seatsLeft: () => seatsLeft,
      setSeatsLeft: (value: number) => void (seatsLeft = value),
      issueTicket: (customer: string) => void tickets.push(customer),
      takeSeat: (customer: string) => {
        if (seatsLeft === 0) return false;
        seatsLeft--;
        tickets.push(customer);
        return true;
      },
    };
    const north = yield* LoopThread.start(AGENT, { name: 'north', expose });
    const south = yield* LoopThread.start(AGENT, { name: 'south', expose });
    try {
      // Bob comes 30 ms after Ada: whether he sees her booking depends on how fast the messages go.
      const bob = function* (): Coroutine<string> {
        yield* sleep(0.03);
        return yield* south.call<string>(booking, 'bob');
      };
      const outcomes = yield* gather([north.call<string>(booking, 'ada'), bob()]);
      if (tickets.length > 1) throw new Error(`the last seat was sold ${tickets.length} times: ${tickets.join(', ')}`);
      return outcomes;
    } finally {
      yield* north.close();
      yield* south.close();
    }
  };
}

const racy = await explore(boxOffice('bookRacy'), { seeds: SEEDS, faults });
console.log(`bookRacy: ${racy.runs} seeds explored, ${racy.failures.length} sold the last seat twice (seeds ${racy.failures.map((failure) => failure.seed).join(', ')})`);
const found = racy.failures[0];
if (found !== undefined) {
  console.log(`replaying seed ${found.seed}:`);
  try {
    await simulate(boxOffice('bookRacy'), { seed: found.seed, faults });
    console.log('  it passed (not reproduced!)');
  } catch (error) {
    if (!(error instanceof SimulationError)) throw error;
    console.log(`  ${error.message}`);
    console.log(`  the same as the first time: ${error.message === (found.error as Error).message}`);
  }
}
const fixed = await explore(boxOffice('bookSafe'), { seeds: SEEDS, faults });
console.log(`bookSafe: ${fixed.runs} seeds explored, ${fixed.failures.length} failed`);
const one = await simulate(boxOffice('bookSafe'), { seed: 1, faults });
console.log(`seed 1: ${one.value.join('; ')}, at virtual time ${one.time.toFixed(4)} s; ${one.events.length} events, the first ones:`);
for (const event of one.events.slice(0, 4)) console.log(`  ${event.time.toFixed(4)} ${event.loop}: ${event.what}`);
