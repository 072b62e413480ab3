/**
 * The examples run as a user runs them (`npm start`, `npm run example:*` run the built files):
 * each ends with exit code 0 and prints what it promises.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { needProgram } from './helpers/system.js';

const run = promisify(execFile);

/** Run `dist/examples/<name>.js` in a child node process; its output. */
async function example(name: string): Promise<string> {
  const script = fileURLToPath(new URL(`../dist/examples/${name}.js`, import.meta.url));
  const { stdout } = await run(process.execPath, [script], { timeout: 60_000 });
  return stdout;
}

describe('examples', () => {
  it('interop: a fetch cancelled by waitFor is aborted at the server, and a pool job reports progress into this loop', async () => {
    const out = await example('interop');
    expect(out).toMatch(/^fetch http:\/\/127\.0\.0\.1:\d+\/fast: quick\n/);
    expect(out).toContain('fetch /slow: TimeoutError after 0.2 s\n');
    expect(out).toMatch(/server: the client hung up on \/slow after \d+ ms: the request was aborted, not left running\n/);
    for (let i = 1; i <= 8; i++) expect(out).toContain(`] ${i}/8 (in this loop: true)\n`);
    expect(out).toMatch(/indexed 8 MiB in a pool thread: [0-9a-f]{16}\n$/);
  });

  it('echo: a line server in a LoopThread answers three concurrent clients, closes an idle one as it stops; a child is read line by line', async () => {
    const out = await example('echo');
    expect(out).toMatch(/^line server listening on 127\.0\.0\.1:\d+ in thread \d+\n/);
    for (const name of ['ADA', 'BOB', 'CY']) expect(out).toMatch(new RegExp(`  HELLO FROM ${name} \\| [1-6]\n`));
    expect(out).toContain('server stopped after 6 commands\nthe idle client read 0 bytes: the server closed its connection\n');
    expect(out).toContain('child says: countdown 3\nchild says: countdown 2\nchild says: countdown 1\nchild exited with 0\n');
  });

  it('offload: twelve jobs ran on the pool', async () => {
    expect(await example('offload')).toMatch(/^12 jobs of 50 ms CPU each ran in [\d.]+ s on the pool \(\d+ rounds\)\nthe loop's worst lag meanwhile: [\d.]+ ms\n$/);
  });

  it('testing: explore finds the planted race between two LoopThreads, its seed replays it, the fix passes every seed', { timeout: 120_000 }, async () => {
    // Seeds 1 to 12: the output is the same on every run and every Node.
    expect(await example('testing')).toBe(
      'bookRacy: 12 seeds explored, 3 sold the last seat twice (seeds 3, 9, 10)\n' +
        'replaying seed 3:\n' +
        '  simulation (seed 3) failed at virtual time 0.1146726862480864: Error: the last seat was sold 2 times: ada, bob\n' +
        '  the same as the first time: true\n' +
        'bookSafe: 12 seeds explored, 0 failed\n' +
        'seed 1: ada: booked; bob: sold out, refunded, at virtual time 0.0882 s; 15 events, the first ones:\n' +
        '  0.0001 north: delivery from the parent loop: bell\n' +
        '  0.0105 main: delivery from LoopThread \'south\': bell\n' +
        '  0.0125 main: delivery from LoopThread \'north\': bell\n' +
        '  0.0194 north: delivery from the parent loop: origin, call \'bookSafe\'\n',
    );
  });

  it('multi-loop: a service thread answers, refuses a reservation with its own error, and closes', async () => {
    expect(await example('multi-loop')).toBe(
      'in stock: 12 apples, 4 pears (asked thread 1 concurrently)\nreserved, 7 left\nreservation failed: RangeError: only 4 pear left, 9 asked\ninventory thread closed: true\n',
    );
  });

  it('pipeline: 200 orders through a ThreadQueue, a pool of stage threads that heals a crash, and an aggregator thread, each exactly once', async () => {
    const out = await example('pipeline');
    expect(out).toMatch(/^pipeline: 200 orders through a pool of 2 stage threads into an aggregator thread\n/);
    expect(out).toMatch(/\nLoopThread 'stage-[01]' \(thread \d+\) died: it exited with code 1; the pool replaced it, and the stage goes on there\n/);
    expect(out).toContain('\npriced 200 orders, 200 distinct: each exactly once, none lost in the crash\n');
    expect(out).toContain('\ntotal 1500.00; run run-2026-11-26 (set in the main thread, read in the stage threads)\n');
    expect(out).toMatch(/\n[23] stage threads priced them; the pool restarted 1 thread\n/);
    expect(out).toMatch(/\nstage-0 \(thread \d+\): loop 0x[0-9a-f]+ idle/);
    expect(out).toMatch(/\naggregator \(thread \d+\): loop 0x[0-9a-f]+ idle/);
  });

  it('reuseport: every thread of a pool serves one port, and more than one answers; a Node without reusePort says what it needs', async () => {
    const out = await example('reuseport');
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    if (process.platform === 'linux' && (major > 22 || (major === 22 && minor >= 12))) {
      expect(out).toMatch(/^a pool of ([234]) loops \(web-0, web-1[^)]*\) serves http:\/\/127\.0\.0\.1:\d+\/ \(reusePort\)\n200 requests, each on a new connection, 8 at a time\n/);
      const counts = [...out.matchAll(/^ {2}web-\d \(thread \d+\) answered (\d+)$/gm)].map((line) => Number(line[1]));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(200);
      expect(counts.filter((count) => count > 0).length).toBeGreaterThan(1);
      expect(out).toMatch(/\n[234] of [234] threads answered: the kernel spread the connections over their loops\nservers stopped: 200 requests served in all\n$/);
    } else {
      expect(out).toBe(
        `this Node cannot serve one port from several threads: reusePort needs Node 22.12 or later (23.1 or later on Node 23): net.Server.listen sets SO_REUSEPORT from there; this is Node ${process.version}\n` +
          'run this example with Node 22.12 or later on Linux to see it\n',
      );
    }
  });

  it('chaining: futures chain across three threads, and a timeout cancels the remote task', async () => {
    const out = await example('chaining');
    expect(out).toContain('10 apples cost 4.5 (pricing -> main -> inventory -> main -> pricing -> main)\n');
    expect(out).toContain('audit timed out after 0.2 s: the remote task was cancelled\n');
    expect(out).toContain('inventory: audit finally ran\n');
  });
});

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the distributed example');

describe.runIf(hasRedis)('the distributed example', () => {
  it('distributed: 10k jobs on two workers, one killed mid-run, every result arrives once', async () => {
    const out = await example('distributed');
    expect(out).toMatch(/^redis-server on 127\.0\.0\.1:\d+; workers (\d+) and (\d+)\n10000 jobs sent from one loop\n/);
    expect(out).toMatch(/\n2500 results in: worker \d+ killed with SIGKILL in the middle of its jobs\n/);
    expect(out).toMatch(/\n10000 results in [\d.]+ s: 10000 distinct, 0 missing, 0 wrong, each Future settled once\n/);
    const delivered = /worker \d+ delivered (\d+) before it died; worker \d+ delivered (\d+), including/.exec(out);
    expect(Number(delivered?.[1]) + Number(delivered?.[2])).toBe(10000);
  }, 60_000);

  it('otel: one trace across three threads and a BullMQ worker process, each span under the one that caused it', async () => {
    const out = await example('otel');
    expect(out).toMatch(
      new RegExp(
        '^10 apples cost 4\\.5\n10 apples packed\n' +
          "one trace \\([0-9a-f]{32}\\), 10 spans from main thread, thread 'pricing', thread 'inventory', worker process:\n" +
          'checkout \\[INTERNAL\\] in main thread\n' +
          '  multiloop call quote \\[CLIENT\\] in main thread\n' +
          "    multiloop call quote \\[SERVER\\] in thread 'pricing'\n" +
          "      look up stock \\[INTERNAL\\] in thread 'pricing'\n" +
          "        multiloop call stock \\[CLIENT\\] in thread 'pricing'\n" +
          "          multiloop call stock \\[SERVER\\] in thread 'inventory'\n" +
          "            count apple \\[INTERNAL\\] in thread 'inventory'\n" +
          '  multiloop call ship \\[CLIENT\\] in main thread\n' +
          '    multiloop call ship \\[SERVER\\] in worker process (\\d+)\n' +
          '      pack parcel \\[INTERNAL\\] in worker process \\1\n$',
      ),
    );
  }, 60_000);
});
