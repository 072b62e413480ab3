/**
 * Pipe transports (loop.connectReadPipe / connectWritePipe) on real FIFOs, pipes and child
 * processes' stdio: asyncio's callback order, pausing, flow control, close/abort/writeEof, a
 * reader or writer that goes away, and nothing left open afterwards.
 */
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync, realpathSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Protocol, getRunningLoop, logger, newEventLoop, run, sleep, type ReadPipeTransport, type WritePipeTransport } from '../src/index.js';
import { codeOf, noteCall, settledHandles, until } from './helpers/io.js';
import { startFixture } from './helpers/child-process.js';
import { restoreLogger } from './helpers/logger.js';

const dec = new TextDecoder();
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'multiloop-pipes-')));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
restoreLogger();

let fifos = 0;
/** A new FIFO, opened both ways without blocking: [read fd, write fd]. */
function fifo(): [read: number, write: number] {
  const path = join(dir, `fifo-${fifos++}`);
  execFileSync('mkfifo', [path]);
  const read = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const write = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
  return [read, write];
}

/** Records every call, and marks one made outside a loop iteration. */
class Recorder extends Protocol {
  readonly calls: string[] = [];
  transport: ReadPipeTransport | WritePipeTransport | null = null;
  override connectionMade(transport: unknown): void {
    noteCall(this.calls, 'made');
    this.transport = transport as ReadPipeTransport;
  }

  override dataReceived(data: Uint8Array): void {
    noteCall(this.calls, `data:${dec.decode(data)}`);
  }

  override eofReceived(): boolean {
    noteCall(this.calls, 'eof');
    // Ignored by a read pipe: connectionLost follows whatever it returns.
    return true;
  }

  override connectionLost(exc: Error | null): void {
    noteCall(this.calls, `lost:${codeOf(exc)}`);
  }

  override pauseWriting(): void {
    noteCall(this.calls, 'pauseWriting');
  }

  override resumeWriting(): void {
    noteCall(this.calls, 'resumeWriting');
  }
}

/** Read everything a non-blocking fd has right now. */
function drainFd(fd: number): string {
  const buffer = Buffer.alloc(1 << 20);
  let text = '';
  for (;;) {
    try {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) return text;
      text += buffer.toString('latin1', 0, n);
    } catch (error) {
      if ((error as { code?: string }).code === 'EAGAIN') return text;
      throw error;
    }
  }
}

describe('loop.connectReadPipe', () => {
  it('calls made, data, eof, then lost(null) whatever eofReceived returns, in iterations, and closes the fd', async () => {
    const before = await settledHandles();
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectReadPipe(() => new Recorder(), readFd);
        const madeWhenReturned = [...protocol.calls];
        const info = transport.getExtraInfo('pipe');
        const writer = new Socket({ fd: writeFd, readable: false, writable: true });
        writer.write('one');
        yield* until(() => protocol.calls.length > 1);
        writer.end('two');
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        return { calls: protocol.calls, madeWhenReturned, info, closing: transport.isClosing(), reading: transport.isReading() };
      })(),
    );
    expect(seen).toEqual({ calls: ['made', 'data:one', 'data:two', 'eof', 'lost:null'], madeWhenReturned: ['made'], info: readFd, closing: true, reading: false });
    expect(await settledHandles()).toBe(before);
  });

  it('refuses a regular file with asyncio\'s message, and a descriptor that is not open', async () => {
    const file = join(dir, 'regular');
    writeFileSync(file, 'x');
    const fd = openSync(file, 'r');
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const errors: string[] = [];
          for (const attempt of [() => loop.connectReadPipe(() => new Recorder(), fd), () => loop.connectWritePipe(() => new Recorder(), fd), () => loop.connectReadPipe(() => new Recorder(), 1_000_000)]) {
            try {
              yield* attempt();
            } catch (error) {
              errors.push(`${(error as Error).name}: ${(error as Error).message}`);
            }
          }
          return errors;
        })(),
      );
      expect(seen).toEqual([
        'RangeError: Pipe transport is for pipes/sockets only.',
        'RangeError: Pipe transport is only for pipes, sockets and character devices',
        'RangeError: connectReadPipe(): 1000000 is not an open file descriptor (EBADF)',
      ]);
    } finally {
      closeSync(fd);
    }
  });

  it('delivers nothing while paused and the rest, then EOF, after resumeReading()', async () => {
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectReadPipe(() => new Recorder(), readFd);
        const writer = new Socket({ fd: writeFd, readable: false, writable: true });
        writer.write('first');
        yield* until(() => protocol.calls.length > 1);
        transport.pauseReading();
        const reading = transport.isReading();
        writer.end('second');
        yield* sleep(0.05);
        const whilePaused = [...protocol.calls];
        transport.resumeReading();
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        return { reading, whilePaused, calls: protocol.calls };
      })(),
    );
    expect(seen).toEqual({ reading: false, whilePaused: ['made', 'data:first'], calls: ['made', 'data:first', 'data:second', 'eof', 'lost:null'] });
  });

  it('close() calls connectionLost(null) once, without EOF, and closes the read end (the writer then gets EPIPE)', async () => {
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectReadPipe(() => new Recorder(), readFd);
        transport.close();
        transport.close();
        yield* sleep(0.02);
        let writeError = 'none';
        try {
          // A write to a FIFO whose reader is gone fails with EPIPE (Node ignores SIGPIPE).
          writeSync(writeFd, 'x');
        } catch (error) {
          writeError = (error as { code?: string }).code ?? String(error);
        }
        return { calls: protocol.calls, closing: transport.isClosing(), writeError };
      })(),
    );
    closeSync(writeFd);
    expect(seen).toEqual({ calls: ['made', 'lost:null'], closing: true, writeError: 'EPIPE' });
  });

  it('a stream its owner destroys ends the transport as EOF would: eof, then lost(null), once', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [readFd, writeFd] = fifo();
        const stream = new Socket({ fd: readFd, readable: true, writable: false });
        const [, protocol] = yield* loop.connectReadPipe(() => new Recorder(), stream);
        stream.destroy();
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        yield* sleep(0.02);
        closeSync(writeFd);
        return protocol.calls;
      })(),
    );
    expect(seen).toEqual(['made', 'eof', 'lost:null']);
  });

  it('reads and writes the null device (a character device that is no terminal)', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [, reading] = yield* loop.connectReadPipe(() => new Recorder(), openSync('/dev/null', 'r'));
        const [writer, writing] = yield* loop.connectWritePipe(() => new Recorder(), openSync('/dev/null', 'w'));
        writer.write(new Uint8Array(100));
        writer.close();
        yield* until(() => [reading, writing].every((protocol) => protocol.calls.some((call) => call.startsWith('lost'))));
        return [reading.calls, writing.calls];
      })(),
    );
    expect(seen).toEqual([
      ['made', 'eof', 'lost:null'],
      ['made', 'lost:null'],
    ]);
  });

  it('reads a child\'s stdout given as a Node stream; getExtraInfo("pipe") is that stream', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const child = spawn(process.execPath, ['-e', 'process.stdout.write("from child")'], { stdio: ['ignore', 'pipe', 'ignore'] });
        const [transport, protocol] = yield* loop.connectReadPipe(() => new Recorder(), child.stdout);
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        return { calls: protocol.calls.join('|').replace(/data:/g, ''), same: transport.getExtraInfo('pipe') === child.stdout };
      })(),
    );
    expect(seen).toEqual({ calls: 'made|from child|eof|lost:null', same: true });
  });
});

describe('loop.connectWritePipe', () => {
  it('writes, writelines, then writeEof(): the reader gets everything and EOF; connectionLost(null) once', async () => {
    const before = await settledHandles();
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectWritePipe(() => new Recorder(), writeFd);
        const enc = new TextEncoder();
        transport.write(enc.encode('a'));
        transport.writelines([enc.encode('b'), enc.encode('c')]);
        transport.write(new Uint8Array(0));
        const canWriteEof = transport.canWriteEof();
        transport.writeEof();
        const closing = transport.isClosing();
        transport.write(enc.encode('ignored'));
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        return { calls: protocol.calls, canWriteEof, closing, info: transport.getExtraInfo('pipe') };
      })(),
    );
    const text = drainFd(readFd);
    closeSync(readFd);
    expect({ ...seen, text }).toEqual({ calls: ['made', 'lost:null'], canWriteEof: true, closing: true, info: writeFd, text: 'abc' });
    expect(await settledHandles()).toBe(before);
  });

  it('pauseWriting past the high-water mark, resumeWriting once the reader drained it below the low one', async () => {
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectWritePipe(() => new Recorder(), writeFd);
        const limits = transport.getWriteBufferLimits();
        transport.setWriteBufferLimits(1024);
        const set = transport.getWriteBufferLimits();
        // More than the kernel's pipe buffer (64 KiB on Linux): the rest stays in ours.
        for (let i = 0; i < 8; i++) transport.write(new Uint8Array(64 * 1024).fill(0x61));
        yield* sleep(0.01);
        const buffered = transport.getWriteBufferSize();
        const paused = [...protocol.calls];
        let read = 0;
        while (!protocol.calls.includes('resumeWriting')) {
          read += drainFd(readFd).length;
          yield* sleep(0.002);
        }
        transport.close();
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        read += drainFd(readFd).length;
        let badLimits = '';
        try {
          transport.setWriteBufferLimits(10, 20);
        } catch (error) {
          badLimits = `${(error as Error).name}: ${(error as Error).message}`;
        }
        return { limits, set, overHigh: buffered > 1024, paused, calls: protocol.calls, read, badLimits };
      })(),
    );
    closeSync(readFd);
    expect(seen).toEqual({
      limits: [16384, 65536],
      set: [256, 1024],
      overHigh: true,
      paused: ['made', 'pauseWriting'],
      calls: ['made', 'pauseWriting', 'resumeWriting', 'lost:null'],
      read: 8 * 64 * 1024,
      badLimits: 'RangeError: high (10) must be >= low (20) must be >= 0',
    });
  });

  it('abort() drops what is buffered and calls connectionLost(null) once', async () => {
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.connectWritePipe(() => new Recorder(), writeFd);
        for (let i = 0; i < 4; i++) transport.write(new Uint8Array(64 * 1024));
        transport.abort();
        transport.abort();
        transport.close();
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        yield* sleep(0.01);
        return protocol.calls.filter((call) => call !== 'pauseWriting');
      })(),
    );
    const read = drainFd(readFd).length;
    closeSync(readFd);
    expect(seen).toEqual(['made', 'lost:null']);
    expect(read).toBeLessThan(4 * 64 * 1024);
  });

  it('a reader that goes: the next write fails, connectionLost(EPIPE) once, later writes pass silently then warn', async () => {
    const before = await settledHandles();
    const [readFd, writeFd] = fifo();
    const warnings: string[] = [];
    logger.warning = (message: string) => {
      warnings.push(message);
    };
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const handled: string[] = [];
        loop.setExceptionHandler((_loop, context) => {
          handled.push(context.message);
        });
        const [transport, protocol] = yield* loop.connectWritePipe(() => new Recorder(), writeFd);
        closeSync(readFd);
        transport.write(new Uint8Array(10));
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        for (let i = 0; i < 7; i++) transport.write(new Uint8Array(1));
        yield* sleep(0.01);
        return { calls: protocol.calls, handled, closing: transport.isClosing() };
      })(),
    );
    expect(seen).toEqual({ calls: ['made', 'lost:EPIPE'], handled: [], closing: true });
    // asyncio's counter: the failed write counts, so the fifth later write is the first to warn.
    expect(warnings).toEqual(Array(3).fill('pipe closed by peer or os.write(pipe, data) raised exception.'));
    expect(await settledHandles()).toBe(before);
  });

  it('a socket given by descriptor: the reader closing its end ends the transport with nothing written (asyncio\'s reader trick)', async () => {
    const started = startFixture('pipe-peer-gone.mjs');
    await started.printed('ready\n');
    started.child.stdout!.destroy();
    const exit = await started.exited;
    expect({ code: exit.code, stderr: exit.stderr }).toEqual({ code: 0, stderr: 'made,lost:null closing=true\n' });
  });

  it('checks its arguments: a closed loop, a factory that is no function, a pipe of another kind, data that is no bytes', async () => {
    const closed = newEventLoop();
    closed.close();
    const [readFd, writeFd] = fifo();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const errors: string[] = [];
        const [transport] = yield* loop.connectWritePipe(() => new Recorder(), writeFd);
        const attempts: Array<() => unknown> = [
          () => closed.connectWritePipe(() => new Recorder(), writeFd).next(),
          () => loop.connectWritePipe(null as unknown as () => Recorder, writeFd).next(),
          () => loop.connectWritePipe(() => new Recorder(), 'fd' as unknown as number).next(),
          () => loop.connectReadPipe(() => new Recorder(), -1).next(),
          () => transport.write('text' as unknown as Uint8Array),
        ];
        for (const attempt of attempts) {
          try {
            attempt();
            errors.push('no error');
          } catch (error) {
            errors.push(`${(error as Error).name}: ${(error as Error).message}`);
          }
        }
        transport.close();
        return errors;
      })(),
    );
    closeSync(readFd);
    expect(seen).toEqual([
      'RuntimeError: Event loop is closed',
      'TypeError: connectWritePipe() needs a protocol factory (a function returning a protocol), got null',
      "TypeError: connectWritePipe() pipe must be a file descriptor or a Writable stream, got 'fd'",
      'RangeError: connectReadPipe(): a file descriptor must be a non-negative integer, got -1',
      "TypeError: data argument must be a bytes-like object, not 'string'",
    ]);
  });
});
