/**
 * The pipe workload: 32 MiB from the parent through a `cat` child and back, in 64 KiB writes,
 * the writer held back by the pipe's flow control; MiB/s from the first write to the last byte
 * back (the child's start and exit are not timed). multiloop's side is `loop.subprocessExec` with
 * a SubprocessProtocol (pipe transports, pauseWriting/resumeWriting); the baseline is the same
 * child's stdin and stdout as raw Node streams (write until `write()` says false, then 'drain').
 * The two take turns, round after round, so that they meet the same machine.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { newEventLoop, SubprocessProtocol, type Coroutine, type SubprocessTransport, type WritePipeTransport } from '../src/index.js';
import { interleaved, median, now, type Row } from './harness.js';

const TOTAL = 32 << 20;
const CHUNK = 64 << 10;
const ROUNDS = 9;

/** MiB/s of `TOTAL` bytes moved in `ms` milliseconds. */
function mibPerSecond(ms: number): number {
  return TOTAL / (1 << 20) / (ms / 1000);
}

/** Writes its share while the pipe takes it, counts what comes back; settles `done` with the time taken. */
class Through extends SubprocessProtocol {
  readonly #chunk = Buffer.alloc(CHUNK, 0x61);
  #stdin: WritePipeTransport | null = null;
  #sent = 0;
  #received = 0;
  #paused = false;
  #started = 0;
  readonly done: { setResult(value: number): void };

  constructor(done: { setResult(value: number): void }) {
    super();
    this.done = done;
  }

  override connectionMade(transport: SubprocessTransport): void {
    this.#stdin = transport.getPipeTransport(0);
    this.#started = now();
    this.#pump();
  }

  #pump(): void {
    const stdin = this.#stdin as WritePipeTransport;
    while (!this.#paused && this.#sent < TOTAL) {
      stdin.write(this.#chunk);
      this.#sent += CHUNK;
    }
    if (this.#sent >= TOTAL) stdin.close();
  }

  override pauseWriting(): void {
    this.#paused = true;
  }

  override resumeWriting(): void {
    this.#paused = false;
    this.#pump();
  }

  override pipeDataReceived(_fd: number, data: Uint8Array): void {
    this.#received += data.length;
    if (this.#received === TOTAL) this.done.setResult(now() - this.#started);
  }
}

/** Milliseconds multiloop's pipe transports took to move TOTAL bytes through cat and back. */
async function throughTransports(): Promise<number> {
  const loop = newEventLoop();
  function* main(): Coroutine<number> {
    const done = loop.createFuture<number>();
    const [transport] = yield* loop.subprocessExec(() => new Through(done), 'cat', { stderr: null });
    const ms = yield* done;
    transport.close();
    return ms;
  }
  try {
    return await loop.runUntilComplete(main());
  } finally {
    loop.close();
  }
}

/** Milliseconds raw Node streams took to move TOTAL bytes through cat and back. */
async function throughStreams(): Promise<number> {
  const child = spawn('cat', [], { stdio: ['pipe', 'pipe', 'inherit'] });
  await once(child, 'spawn');
  const chunk = Buffer.alloc(CHUNK, 0x61);
  const stdin = child.stdin;
  const started = now();
  const finished = new Promise<number>((resolve) => {
    let received = 0;
    child.stdout.on('data', (data: Buffer) => {
      received += data.length;
      if (received === TOTAL) resolve(now() - started);
    });
  });
  let sent = 0;
  const pump = (): void => {
    while (sent < TOTAL) {
      sent += CHUNK;
      if (!stdin.write(chunk)) {
        stdin.once('drain', pump);
        return;
      }
    }
    stdin.end();
  };
  pump();
  const ms = await finished;
  await once(child, 'close');
  return ms;
}

/** The pipe row: pipe transports through cat beside raw Node streams on the same kind of pipe. */
export async function pipeWorkloads(log: (line: string) => void): Promise<Row[]> {
  const [ours, raws] = await interleaved(ROUNDS, throughTransports, throughStreams);
  const value = mibPerSecond(median(ours));
  const baseline = mibPerSecond(median(raws));
  log(`  32 MiB through cat in 64 KiB writes: pipe transports ${value.toFixed(0)} MiB/s, raw Node streams ${baseline.toFixed(0)} MiB/s (${(value / baseline).toFixed(2)}×)`);
  return [
    {
      workload: '32 MiB parent → cat → parent, 64 KiB writes, pipe transports',
      unit: 'MiB/s',
      value,
      baseline,
      baselineName: 'raw Node streams on the same pipes',
      higherIsBetter: true,
      target: '>= 0.9x raw Node streams',
    },
  ];
}
