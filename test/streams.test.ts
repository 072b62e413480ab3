/**
 * Streams over real sockets on 127.0.0.1 (and a Unix socket, and TLS with a self-signed
 * certificate in test/fixtures): StreamReader's reads with asyncio's errors and limits,
 * cancellation that loses no bytes, back-pressure both ways, StreamWriter's closing, and Server's
 * lifecycle while handlers run.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CancelledError,
  IncompleteReadError,
  type LimitOverrunError,
  RuntimeError,
  type Server,
  StreamReader,
  type StreamWriter,
  TimeoutError,
  ensureFuture,
  gather,
  getRunningLoop,
  openConnection,
  openUnixConnection,
  run,
  sleep,
  startServer,
  startUnixServer,
  waitFor,
  type Coroutine,
  type ExceptionContext,
} from '../src/index.js';
import { raisedBy } from './helpers/coroutines.js';
import { nodeServer } from './helpers/io.js';
import { mulberry32 } from './helpers/prng.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const bytes = (text: string): Uint8Array => enc.encode(text);
const text = (data: Uint8Array): string => dec.decode(data);

const dir = mkdtempSync(join(tmpdir(), 'multiloop-streams-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));


/** Run `body` on a fresh loop with the connection to a Node server that writes `chunks` (with pauses), then ends unless `keepOpen`. */
async function withPeer<T>(
  chunks: Array<string | Uint8Array>,
  body: (reader: StreamReader, writer: StreamWriter) => Coroutine<T>,
  options: { keepOpen?: boolean; limit?: number } = {},
): Promise<T> {
  const { server, port } = await nodeServer((socket) => {
    let i = 0;
    const next = (): void => {
      if (i < chunks.length) {
        socket.write(chunks[i++] as string | Uint8Array);
        setTimeout(next, 5);
      } else if (options.keepOpen !== true) socket.end();
    };
    next();
  });
  try {
    return await run(
      (function* () {
        const [reader, writer] = yield* openConnection('127.0.0.1', port, options.limit === undefined ? {} : { limit: options.limit });
        try {
          return yield* body(reader, writer);
        } finally {
          writer.close();
        }
      })(),
    );
  } finally {
    server.close();
  }
}


describe('StreamReader', () => {
  it('reads lines, exact byte counts and everything to EOF, across chunk boundaries', async () => {
    const seen = await withPeer(['hel', 'lo\nwor', 'ld\n12', '345', '6789 tail'], function* (reader) {
      const first = text(yield* reader.readline());
      const second = text(yield* reader.readline());
      const exact = text(yield* reader.readexactly(5));
      const rest = text(yield* reader.read());
      return { first, second, exact, rest, atEof: reader.atEof(), again: (yield* reader.read()).length };
    });
    expect(seen).toEqual({ first: 'hello\n', second: 'world\n', exact: '12345', rest: '6789 tail', atEof: true, again: 0 });
  });

  it('keeps every byte in order while its buffer empties and fills again, a burst of 200 chunks included', async () => {
    const seen = await run(
      (function* () {
        const reader = new StreamReader();
        const out: string[] = [];
        const expected: string[] = [];
        for (const count of [3, 200, 2, 5]) {
          const parts = Array.from({ length: count }, (_, i) => `${count}.${i};`);
          for (const part of parts) reader._feedData(new TextEncoder().encode(part));
          // Across every chunk at once (readuntil joins them), then piece by piece.
          out.push(text(yield* reader.readexactly(parts[0]!.length - 1)));
          out.push(text(yield* reader.readuntil(new TextEncoder().encode(parts.at(-1)!))));
          expected.push(parts.join('').slice(0, parts[0]!.length - 1), parts.join('').slice(parts[0]!.length - 1));
        }
        reader._feedEof();
        return { out, expected, atEof: reader.atEof() };
      })(),
    );
    expect(seen.out).toEqual(seen.expected);
    expect(seen.atEof).toBe(true);
  });

  it('read(n) returns what is buffered, at most n bytes; readline at EOF gives the partial line, then empty', async () => {
    // The peer sends its second piece only when asked: both in the buffer at once would make read(100) take them together.
    const { server, port } = await nodeServer((socket) => {
      socket.write('abcdef');
      socket.once('data', () => socket.end('partial'));
    });
    try {
      const seen = await run(
        (function* () {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          try {
            const a = text(yield* reader.read(4));
            const b = text(yield* reader.read(100));
            writer.write(bytes('more'));
            const line = text(yield* reader.readline());
            const after = (yield* reader.readline()).length;
            return [a, b, line, after];
          } finally {
            writer.close();
          }
        })(),
      );
      expect(seen).toEqual(['abcd', 'ef', 'partial', 0]);
    } finally {
      server.close();
    }
  });

  it('readexactly: the peer closing first raises IncompleteReadError with the partial bytes and the count expected', async () => {
    const error = await withPeer(['12', '345'], function* (reader) {
      return (yield* raisedBy(() => reader.readexactly(10))) as Error;
    });
    expect(error).toBeInstanceOf(IncompleteReadError);
    const incomplete = error as IncompleteReadError;
    expect(text(incomplete.partial)).toBe('12345');
    expect(incomplete.expected).toBe(10);
    expect(incomplete.message).toBe('5 bytes read on a total of 10 expected bytes');
  });

  it('readexactly refuses a negative count; readuntil an empty separator', async () => {
    const errors = await withPeer(['x'], function* (reader) {
      return [(yield* raisedBy(() => reader.readexactly(-1))) as Error, (yield* raisedBy(() => reader.readuntil(''))) as Error];
    });
    expect(errors[0]).toBeInstanceOf(RangeError);
    expect(errors[0]!.message).toBe('readexactly size can not be less than zero');
    expect(errors[1]).toBeInstanceOf(RangeError);
    expect(errors[1]!.message).toBe('Separator should be at least one-byte string');
  });

  it('readuntil finds a separator split across chunks; EOF first gives IncompleteReadError with expected null', async () => {
    const seen = await withPeer(['one\r', '\ntwo\r\nthree'], function* (reader) {
      const one = text(yield* reader.readuntil('\r\n'));
      const two = text(yield* reader.readuntil(bytes('\r\n')));
      const error = (yield* raisedBy(() => reader.readuntil('\r\n'))) as IncompleteReadError;
      return { one, two, partial: text(error.partial), expected: error.expected, name: error.name };
    });
    expect(seen).toEqual({ one: 'one\r\n', two: 'two\r\n', partial: 'three', expected: null, name: 'IncompleteReadError' });
  });

  it('readuntil past the limit raises LimitOverrunError and keeps the data buffered', async () => {
    // The rest is sent only once the reader has failed (it says so): two writes a few ms apart could arrive as one.
    const { server, port } = await nodeServer((socket) => {
      socket.write('0123456789abcdef');
      socket.once('data', () => socket.end('|rest'));
    });
    const seen = await run(
      (function* () {
        const [reader, writer] = yield* openConnection('127.0.0.1', port, { limit: 8 });
        try {
          const notFound = (yield* raisedBy(() => reader.readuntil('|'))) as LimitOverrunError;
          writer.write(new TextEncoder().encode('go'));
          // The bytes are still there: the separator shows up once more data arrives and a larger read takes them.
          const kept = text(yield* reader.readexactly(17));
          return { name: notFound.name, message: notFound.message, consumed: notFound.consumed, kept };
        } finally {
          writer.close();
        }
      })(),
    ).finally(() => server.close());
    expect(seen.name).toBe('LimitOverrunError');
    expect(seen.message).toBe('Separator is not found, and chunk exceed the limit');
    expect(seen.consumed).toBe(16);
    expect(seen.kept).toBe('0123456789abcdef|');
  });

  it('readuntil: a separator found beyond the limit is a LimitOverrunError naming where it is', async () => {
    const error = await withPeer(['0123456789|'], function* (reader) {
      return (yield* raisedBy(() => reader.readuntil('|'))) as LimitOverrunError;
    }, { limit: 8 });
    expect(error.message).toBe('Separator is found, but chunk is longer than limit');
    expect(error.consumed).toBe(10);
  });

  it('readline over the limit raises RangeError, drops that line, and the stream stays usable', async () => {
    const seen = await withPeer(['a very long line indeed\nshort\n'], function* (reader) {
      const error = (yield* raisedBy(() => reader.readline())) as Error;
      return { error, next: text(yield* reader.readline()) };
    }, { limit: 8 });
    expect(seen.error).toBeInstanceOf(RangeError);
    expect(seen.error.message).toBe('Separator is found, but chunk is longer than limit');
    expect(seen.next).toBe('short\n');
  });

  it('a reader cancelled while waiting loses no bytes: the next reader gets them all', async () => {
    const seen = await withPeer(['abc', 'def', 'ghij'], function* (reader) {
      const loop = getRunningLoop();
      const waiting = loop.createTask(reader.readexactly(100));
      yield* sleep(0.03);
      waiting.cancel();
      const error = (yield* raisedBy(() => waiting)) as Error;
      return { cancelled: error instanceof CancelledError, all: text(yield* reader.readexactly(10)) };
    }, { keepOpen: true });
    expect(seen).toEqual({ cancelled: true, all: 'abcdefghij' });
  });

  it('a timeout around readline leaves the partial line for the next read', async () => {
    const seen = await withPeer(['partial ', 'line'], function* (reader) {
      const error = (yield* raisedBy(() => waitFor(reader.readline(), 0.02))) as Error;
      return { timedOut: error instanceof TimeoutError, rest: text(yield* reader.readexactly(12)) };
    }, { keepOpen: true });
    expect(seen).toEqual({ timedOut: true, rest: 'partial line' });
  });

  it('two coroutines waiting at once: the second gets a RuntimeError', async () => {
    const error = await withPeer([], function* (reader) {
      const loop = getRunningLoop();
      const first = loop.createTask(reader.readexactly(1));
      yield* sleep(0);
      const second = (yield* raisedBy(() => reader.readline())) as Error;
      first.cancel();
      return second;
    }, { keepOpen: true });
    expect(error).toBeInstanceOf(RuntimeError);
    expect(error.message).toBe('readuntil() called while another coroutine is already waiting for incoming data');
  });

  it('a reset connection raises its error from the waiting read and from exception()', async () => {
    const { server, port } = await nodeServer((socket) => {
      socket.write('x');
      setTimeout(() => socket.resetAndDestroy(), 20);
    });
    try {
      const seen = await run(
        (function* () {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          yield* reader.readexactly(1);
          const error = (yield* raisedBy(() => reader.read(10))) as Error;
          const drainError = (yield* raisedBy(() => writer.drain())) as Error;
          return { code: (error as Error & { code?: string }).code, same: reader.exception() === error, drain: drainError === error };
        })(),
      );
      expect(seen).toEqual({ code: 'ECONNRESET', same: true, drain: true });
    } finally {
      server.close();
    }
  });
});

type Piece = string | Uint8Array;

/** What a read on a fed reader came to: its line or its error, and the bytes it left buffered. */
interface Outcome {
  line?: string;
  error?: { name: string; message: string; consumed?: number };
  left: string;
}

/**
 * On a fresh loop, a reader of `limit` bytes fed `pieces`, all before `read` starts (`burst`) or
 * one per loop iteration while it waits (each wakes it); what `read` returned or raised, and what
 * was left buffered.
 */
async function afterPieces(pieces: Piece[], read: (reader: StreamReader) => Coroutine<Uint8Array>, options: { limit?: number; burst?: boolean } = {}): Promise<Outcome> {
  return run(
    (function* () {
      const reader = new StreamReader(options.limit);
      const feed = function* (): Coroutine<void> {
        for (const piece of pieces) {
          if (options.burst !== true) yield* sleep(0);
          reader._feedData(typeof piece === 'string' ? bytes(piece) : piece);
        }
      };
      const feeder = getRunningLoop().createTask(feed());
      if (options.burst === true) yield* feeder;
      let outcome: Outcome;
      try {
        outcome = { line: text(yield* read(reader)), left: '' };
      } catch (error) {
        const { name, message, consumed } = error as LimitOverrunError;
        outcome = { error: consumed === undefined ? { name, message } : { name, message, consumed }, left: '' };
      }
      yield* feeder;
      reader._feedEof();
      outcome.left = text(yield* reader.read());
      return outcome;
    })(),
  );
}

/** The lines `data` splits into, found in the whole of it at once: each ends where the earliest-ending separator ends, the shorter on a tie. */
function splitByFirstEnd(data: Buffer, separators: string[][]): { lines: string[]; partial: string } {
  const lines: string[] = [];
  let at = 0;
  for (let call = 0; ; call++) {
    let end = -1;
    for (const separator of [...(separators[call % separators.length] as string[])].sort((a, b) => a.length - b.length)) {
      const found = data.indexOf(separator, at);
      if (found !== -1 && (end === -1 || found + separator.length < end)) end = found + separator.length;
    }
    if (end === -1) return { lines, partial: data.subarray(at).toString() };
    lines.push(data.subarray(at, end).toString());
    at = end;
  }
}

describe('StreamReader.readuntil', () => {
  it('finds a separator split across two and three chunks, and one that starts again right after a false start at an edge', async () => {
    const cases: Array<[Piece[], string, string, string]> = [
      [['xxAB', 'CDEyy'], 'ABCDE', 'xxABCDE', 'yy'],
      [['xxA', 'BC', 'DEyy'], 'ABCDE', 'xxABCDE', 'yy'],
      [['xxAB', 'C', 'D', 'Eyy'], 'ABCDE', 'xxABCDE', 'yy'],
      [['xxABCAB', 'CDE'], 'ABCDE', 'xxABCABCDE', ''],
      [['ABCDABCDABC', 'DABCDEz'], 'ABCDABCDE', 'ABCDABCDABCDABCDE', 'z'],
      [['QWEaa', 'XYaa', 'a'], 'aaa', 'QWEaaXYaaa', ''],
      [['QWEaa', 'XYa', 'aa'], 'aaa', 'QWEaaXYaaa', ''],
      [['XXX', 'a', 'a', 'a'], 'aaa', 'XXXaaa', ''],
      [['one\r', '\ntwo\r\n'], '\r\n', 'one\r\n', 'two\r\n'],
    ];
    for (const burst of [true, false]) {
      for (const [pieces, separator, line, left] of cases) {
        const outcome = await afterPieces(pieces, (reader) => reader.readuntil(separator), { burst });
        expect({ pieces, burst, ...outcome }).toEqual({ pieces, burst, line, left });
      }
    }
  });

  it('splits random data in random pieces exactly as a search of the whole data does, one separator or several', async () => {
    const random = mulberry32(20250611);
    const separatorSets = [[['ab']], [['aab'], ['b']], [['abab']], [['bbba'], ['ab', 'bb'], ['a']], [['aaab', 'ab', 'abba']]];
    for (const separators of separatorSets) {
      for (const burst of [true, false]) {
        const data = Buffer.from(Array.from({ length: 3000 }, () => (random() < 0.6 ? 0x61 : 0x62)));
        const pieces: Buffer[] = [];
        for (let at = 0; at < data.length; ) {
          const size = 1 + Math.floor(random() * 9);
          pieces.push(data.subarray(at, at + size));
          at += size;
        }
        const seen = await run(
          (function* () {
            const reader = new StreamReader(1 << 20);
            const feeder = getRunningLoop().createTask(
              (function* () {
                for (const piece of pieces) {
                  if (!burst) yield* sleep(0);
                  reader._feedData(piece);
                }
                reader._feedEof();
              })(),
            );
            if (burst) yield* feeder;
            const lines: string[] = [];
            for (let call = 0; ; call++) {
              const separator = separators[call % separators.length] as string[];
              try {
                lines.push(text(yield* reader.readuntil(separator.length === 1 ? (separator[0] as string) : separator)));
              } catch (error) {
                yield* feeder;
                return { lines, partial: text((error as IncompleteReadError).partial) };
              }
            }
          })(),
        );
        expect({ separators, burst, ...seen }).toEqual({ separators, burst, ...splitByFirstEnd(data, separators) });
      }
    }
  });

  it('searches and copies each byte a bounded number of times: 9 MiB in 4 KiB pieces, each waking the reader, through readuntil and readline', async () => {
    const total = 9 << 20;
    const size = 4 << 10;
    const count = total / size;
    const seen = await run(
      (function* () {
        const figures: Array<{ line: number; scanned: number; copied: number; visited: number }> = [];
        for (const separator of ['\r\n', '\n']) {
          const reader = new StreamReader(2 * total);
          // '\r\n' split across the last two pieces; '\n' ending the last.
          const piece = Buffer.alloc(size, 0x61);
          const beforeLast = Buffer.alloc(size, 0x61);
          const last = Buffer.alloc(size, 0x61);
          if (separator === '\r\n') {
            beforeLast[size - 1] = 0x0d;
            last[0] = 0x0a;
          } else last[size - 1] = 0x0a;
          const feeder = getRunningLoop().createTask(
            (function* () {
              for (let i = 1; i <= count; i++) {
                yield* sleep(0);
                reader._feedData(i === count ? last : i === count - 1 ? beforeLast : piece);
              }
            })(),
          );
          const line = separator === '\n' ? yield* reader.readline() : yield* reader.readuntil(separator);
          yield* feeder;
          figures.push({ line: line.length, ...reader._searchStatistics() });
        }
        return figures;
      })(),
    );
    const [crlf, lf] = seen as [(typeof seen)[number], (typeof seen)[number]];
    expect(crlf.line).toBe(total - size + 1);
    expect(lf.line).toBe(total);
    // Linear: each byte searched about once and copied once (into the line); a few bytes more
    // around each edge. Joining the buffer for each search instead copies about count² / 2 pieces.
    for (const { scanned, copied, visited } of [crlf, lf]) {
      expect(scanned).toBeLessThanOrEqual(total + 4 * count);
      expect(copied).toBeLessThanOrEqual(total + 4 * count);
      expect(visited).toBeLessThanOrEqual(3 * count);
    }
  });

  it('steps through each chunk a bounded number of times: readline through a burst of 20,000 one-line chunks', async () => {
    const count = 20_000;
    const seen = await run(
      (function* () {
        const reader = new StreamReader();
        for (let i = 0; i < count; i++) reader._feedData(bytes(`${i % 10}\n`));
        let last = '';
        for (let i = 0; i < count; i++) last = text(yield* reader.readline());
        return { last, atEnd: reader.toString(), ...reader._searchStatistics() };
      })(),
    );
    expect(seen.last).toBe('9\n');
    expect(seen.atEnd).toBe('<StreamReader>');
    // Each line's search starts at the front chunk, which holds it: walking to it from the back
    // instead steps through every chunk still buffered, about count² / 2 steps.
    expect(seen.visited).toBe(count);
    expect(seen.scanned).toBe(2 * count);
  });

  it('counts LimitOverrunError.consumed from what arrived in each piece, and leaves the data buffered', async () => {
    const notFound = 'Separator is not found, and chunk exceed the limit';
    const found = 'Separator is found, but chunk is longer than limit';
    const error = (message: string, consumed: number): Outcome['error'] => ({ name: 'LimitOverrunError', message, consumed });
    // Each figure as CPython 3.13's asyncio gives it for the same pieces.
    const cases: Array<[Piece[], number, boolean, Outcome]> = [
      [['0123', '4567', '89ab', 'cdef'], 10, false, { error: error(notFound, 14), left: '0123456789abcdef' }],
      [['0123', '4567', '89ab', 'cdef'], 10, true, { error: error(notFound, 14), left: '0123456789abcdef' }],
      [['0123456789a', 'bcdefgh'], 10, false, { error: error(notFound, 16), left: '0123456789abcdefgh' }],
      [['012345A', 'BC'], 5, false, { error: error(found, 6), left: '012345ABC' }],
      [['012', '345A', 'B', 'Cz'], 5, false, { error: error(notFound, 6), left: '012345ABCz' }],
      [['012', '345A', 'BCz'], 5, false, { error: error(found, 6), left: '012345ABCz' }],
    ];
    for (const [pieces, limit, burst, expected] of cases) {
      const outcome = await afterPieces(pieces, (reader) => reader.readuntil('ABC'), { limit, burst });
      expect({ pieces, ...outcome }).toEqual({ pieces, ...expected });
    }
  });

  it('readline over the limit across pieces: RangeError, the buffered part of the line dropped (through its newline when found)', async () => {
    const notFound = await afterPieces(['abc', 'def', 'gh\nnext\n'], (reader) => reader.readline(), { limit: 5 });
    expect(notFound).toEqual({ error: { name: 'RangeError', message: 'Separator is not found, and chunk exceed the limit' }, left: 'gh\nnext\n' });
    const found = await afterPieces(['abcd', 'ef\nnext\n'], (reader) => reader.readline(), { limit: 5 });
    expect(found).toEqual({ error: { name: 'RangeError', message: 'Separator is found, but chunk is longer than limit' }, left: 'next\n' });
  });

  it('takes several separators: the line that ends first wins, the shorter separator on a tie (as asyncio 3.13)', async () => {
    const seen = await run(
      (function* () {
        const reader = new StreamReader();
        reader._feedData(bytes('line 1\nline 2\r'));
        const first = text(yield* reader.readuntil(['\r', '\n']));
        const second = text(yield* reader.readuntil([bytes('\r'), '\n']));
        // 'BCDE' ends before 'DEF', although 'DEF' is shorter.
        reader._feedData(bytes('ABCDEFG'));
        const earliestEnd = text(yield* reader.readuntil(['DEF', 'BCDE']));
        const left = text(yield* reader.read(100));
        return { first, second, earliestEnd, left };
      })(),
    );
    expect(seen).toEqual({ first: 'line 1\n', second: 'line 2\r', earliestEnd: 'ABCDE', left: 'FG' });
    // Both end at the 'A': the shorter one matched, and it starts past the limit.
    expect(await afterPieces(['some dataA'], (reader) => reader.readuntil(['A', 'ome dataA']), { limit: 3, burst: true })).toEqual({
      error: { name: 'LimitOverrunError', message: 'Separator is found, but chunk is longer than limit', consumed: 9 },
      left: 'some dataA',
    });
    // Room for the short separator but not the long one: the search starts at 0, not before it.
    expect(await afterPieces(['data', 'Z', 'Aaaa'], (reader) => reader.readuntil(['A', 'long sep']))).toEqual({ line: 'dataZA', left: 'aaa' });
    // '\r\n' split across pieces, '\n' also ends there: the tie goes to '\n', which starts past the limit.
    expect(await afterPieces(['012', '3\r', '\nxy'], (reader) => reader.readuntil(['\r\n', '\n']), { limit: 4 })).toEqual({
      error: { name: 'LimitOverrunError', message: 'Separator is found, but chunk is longer than limit', consumed: 5 },
      left: '0123\r\nxy',
    });
    expect(await afterPieces(['0123', '456\r', '\nxy'], (reader) => reader.readuntil(['\r\n', '\n']), { limit: 8 })).toEqual({ line: '0123456\r\n', left: 'xy' });
    // Not found: consumed leaves room for the longest separator.
    expect(await afterPieces(['0123', '4567', '89'], (reader) => reader.readuntil(['X', 'XYZW']), { limit: 6 })).toEqual({
      error: { name: 'LimitOverrunError', message: 'Separator is not found, and chunk exceed the limit', consumed: 7 },
      left: '0123456789',
    });
  });

  it('refuses an empty list of separators, an empty separator among them, and what is not bytes or a string', async () => {
    const errors = await run(
      (function* () {
        const reader = new StreamReader();
        reader._feedData(bytes('x\n'));
        return [
          (yield* raisedBy(() => reader.readuntil([]))) as Error,
          (yield* raisedBy(() => reader.readuntil(['\n', '']))) as Error,
          (yield* raisedBy(() => reader.readuntil(['\n', 10 as never]))) as Error,
          (yield* raisedBy(() => reader.readuntil(10 as never))) as Error,
        ].map((error) => `${error.name}: ${error.message}`);
      })(),
    );
    expect(errors).toEqual([
      'RangeError: Separator should contain at least one element',
      'RangeError: Separator should be at least one-byte string',
      'TypeError: readuntil() separator must be a string, a Uint8Array or an array of them, got 10',
      'TypeError: readuntil() separator must be a string, a Uint8Array or an array of them, got 10',
    ]);
  });
});

describe('StreamWriter', () => {
  it('drain() waits while a slow reader holds the data back, and returns at once for a fast one', async () => {
    let release: () => void = () => undefined;
    const received: number[] = [];
    let ended: Promise<void> = Promise.resolve();
    const { server, port } = await nodeServer((socket) => {
      socket.pause();
      ended = new Promise((resolve) => socket.once('end', resolve));
      release = () => {
        socket.on('data', (chunk: Buffer) => received.push(chunk.length));
        socket.resume();
      };
    });
    try {
      const seen = await run(
        (function* () {
          const [, writer] = yield* openConnection('127.0.0.1', port);
          // A fast path: a small write leaves the buffer below the high-water mark.
          writer.write(new Uint8Array(10));
          const quick = ensureFuture(writer.drain());
          yield* sleep(0);
          const quickDone = quick.done();
          // Far more than the kernel buffers hold: the transport's buffer stays above its mark.
          writer.write(new Uint8Array(16 << 20));
          const slow = ensureFuture(writer.drain());
          yield* sleep(0.1);
          const waitedWhileHeld = !slow.done();
          release();
          yield* slow;
          const buffered = writer.transport.getWriteBufferSize();
          writer.close();
          yield* writer.waitClosed();
          return { quickDone, waitedWhileHeld, belowLow: buffered <= writer.transport.getWriteBufferLimits()[0] };
        })(),
      );
      expect(seen).toEqual({ quickDone: true, waitedWhileHeld: true, belowLow: true });
      await ended;
      expect(received.reduce((a, b) => a + b, 0)).toBe(10 + (16 << 20));
    } finally {
      server.close();
    }
  });

  it('a task cancelled while blocked in drain() gets CancelledError there; nothing written is lost', async () => {
    let release: () => void = () => undefined;
    let received = 0;
    let ended: Promise<void> = Promise.resolve();
    const { server, port } = await nodeServer((socket) => {
      socket.pause();
      ended = new Promise((resolve) => socket.once('end', resolve));
      release = () => {
        socket.on('data', (chunk: Buffer) => (received += chunk.length));
        socket.resume();
      };
    });
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [, writer] = yield* openConnection('127.0.0.1', port);
          const writing = loop.createTask(
            (function* () {
              writer.write(new Uint8Array(16 << 20));
              yield* writer.drain();
              return 'drained';
            })(),
          );
          yield* sleep(0.05);
          writing.cancel();
          const error = (yield* raisedBy(() => writing)) as Error;
          release();
          writer.write(new Uint8Array(100));
          yield* writer.drain();
          writer.close();
          yield* writer.waitClosed();
          return error instanceof CancelledError;
        })(),
      );
      expect(seen).toBe(true);
      await ended;
      expect(received).toBe((16 << 20) + 100);
    } finally {
      server.close();
    }
  });

  it('writeEof half-closes: the peer sees EOF and still answers; write after writeEof is a RuntimeError', async () => {
    const { server, port } = await nodeServer((socket) => {
      let total = 0;
      socket.on('data', (chunk: Buffer) => (total += chunk.length));
      socket.on('end', () => socket.end(`got ${total}`));
    });
    try {
      const seen = await run(
        (function* () {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          expect(writer.canWriteEof()).toBe(true);
          writer.write(bytes('12345'));
          writer.writeEof();
          const afterEof = (() => {
            try {
              writer.write(bytes('x'));
              return null;
            } catch (error) {
              return error as Error;
            }
          })();
          const answer = text(yield* reader.read());
          writer.close();
          yield* writer.waitClosed();
          return { answer, afterEof: afterEof?.message };
        })(),
      );
      expect(seen).toEqual({ answer: 'got 5', afterEof: 'Cannot call write() after writeEof()' });
    } finally {
      server.close();
    }
  });

  it('writing after close is dropped silently (asyncio logs only past five writes); write refuses what is not bytes', async () => {
    const seen = await withPeer([], function* (_reader, writer) {
      writer.close();
      writer.write(bytes('dropped'));
      yield* writer.waitClosed();
      writer.write(bytes('dropped too'));
      let typeError: Error | null = null;
      try {
        writer.write('text' as unknown as Uint8Array);
      } catch (error) {
        typeError = error as Error;
      }
      return { closing: writer.isClosing(), typeError: typeError?.message };
    }, { keepOpen: true });
    expect(seen).toEqual({ closing: true, typeError: "data argument must be a bytes-like object, not 'string'" });
  });

  it('reports its addresses and socket through getExtraInfo', async () => {
    const seen = await withPeer([], function* (_reader, writer) {
      const peer = writer.getExtraInfo('peername') as [string, number];
      const local = writer.getExtraInfo('sockname') as [string, number];
      const socket = writer.getExtraInfo('socket');
      return { peerHost: peer[0], localHost: local[0], samePort: socket?.remotePort === peer[1], other: writer.getExtraInfo('nothing', 7) };
    }, { keepOpen: true });
    expect(seen).toEqual({ peerHost: '127.0.0.1', localHost: '127.0.0.1', samePort: true, other: 7 });
  });
});

describe('startServer and Server', () => {
  function* echoLines(reader: StreamReader, writer: StreamWriter): Coroutine<void> {
    for (;;) {
      const line = yield* reader.readline();
      if (line.length === 0) break;
      writer.write(line);
      yield* writer.drain();
    }
    writer.close();
  }

  it('serves each connection with its own reader and writer; a coroutine handler runs as a Task', async () => {
    const seen = await run(
      (function* () {
        const server = yield* startServer(echoLines, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const talk = function* (name: string): Coroutine<string> {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          writer.write(bytes(`${name}-1\n${name}-2\n`));
          const answer = text(yield* reader.readexactly(2 * (name.length + 3)));
          writer.close();
          yield* writer.waitClosed();
          return answer;
        };
        const answers = yield* gather([talk('a'), talk('bb'), talk('ccc')]);
        server.close();
        yield* server.waitClosed();
        return { answers, serving: server.isServing(), sockets: server.sockets.length };
      })(),
    );
    expect(seen).toEqual({ answers: ['a-1\na-2\n', 'bb-1\nbb-2\n', 'ccc-1\nccc-2\n'], serving: false, sockets: 0 });
  });

  it('waitClosed waits until the server is closed and every connection it accepted ended', async () => {
    const order = await run(
      (function* () {
        const order: string[] = [];
        const server = yield* startServer(function* (reader, writer) {
          yield* reader.readline();
          order.push('handler done');
          writer.close();
        }, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const [, writer] = yield* openConnection('127.0.0.1', port);
        yield* sleep(0.02);
        server.close();
        const closed = ensureFuture(server.waitClosed());
        closed.addDoneCallback(() => order.push('waitClosed returned'));
        yield* sleep(0.02);
        order.push('client writes');
        writer.write(bytes('bye\n'));
        yield* closed;
        writer.close();
        return order;
      })(),
    );
    expect(order).toEqual(['client writes', 'handler done', 'waitClosed returned']);
  });

  it('closeClients() and abortClients() end the connections it accepted; a new client is refused once it is closed', async () => {
    const seen = await run(
      (function* () {
        const server = yield* startServer(function* (reader) {
          yield* reader.read();
        }, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const [r1] = yield* openConnection('127.0.0.1', port);
        const [r2] = yield* openConnection('127.0.0.1', port);
        yield* sleep(0.02);
        server.close();
        server.closeClients();
        const first = (yield* r1.read()).length;
        server.abortClients();
        const second = (yield* r2.read()).length;
        yield* server.waitClosed();
        const refused = (yield* raisedBy(() => openConnection('127.0.0.1', port))) as Error & { code?: string };
        return { first, second, code: refused.code };
      })(),
    );
    expect(seen).toEqual({ first: 0, second: 0, code: 'ECONNREFUSED' });
  });

  it('serveForever until cancelled closes the server; twice is a RuntimeError; on a closed server too', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const server = yield* startServer(echoLines, '127.0.0.1', 0);
        const forever = loop.createTask(server.serveForever());
        yield* sleep(0);
        const twice = (yield* raisedBy(() => server.serveForever())) as Error;
        forever.cancel();
        const cancelled = (yield* raisedBy(() => forever)) as Error;
        const afterClose = (yield* raisedBy(() => server.serveForever())) as Error;
        return { twice: twice.message, cancelled: cancelled instanceof CancelledError, closed: server.sockets.length, afterClose: afterClose.message };
      })(),
    );
    expect(seen.twice).toMatch(/^server <Server sockets=\(127\.0\.0\.1:\d+\)> is already being awaited on serveForever\(\)$/);
    expect(seen.cancelled).toBe(true);
    expect(seen.closed).toBe(0);
    expect(seen.afterClose).toBe('server <Server sockets=()> is closed');
  });

  it('run(body) closes the server after the body, as `async with server` does', async () => {
    const seen = await run(
      (function* () {
        const server = yield* startServer(echoLines, '127.0.0.1', 0);
        const answer = yield* server.run(function* (s) {
          const [, port] = s.address() as [string, number];
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          writer.write(bytes('inside\n'));
          const line = text(yield* reader.readline());
          writer.close();
          return line;
        });
        return { answer, open: server.sockets.length };
      })(),
    );
    expect(seen).toEqual({ answer: 'inside\n', open: 0 });
  });

  it('a handler that raises is reported once to the exception handler and its connection closed; the server keeps serving', async () => {
    const seen = await run(
      (function* () {
        const contexts: ExceptionContext[] = [];
        getRunningLoop().setExceptionHandler((_loop, context) => contexts.push(context));
        const server = yield* startServer(function* (reader, writer) {
          const line = text(yield* reader.readline());
          if (line === 'boom\n') throw new RangeError('bad request');
          writer.write(bytes(`ok ${line}`));
          writer.close();
        }, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const [r1, w1] = yield* openConnection('127.0.0.1', port);
        w1.write(bytes('boom\n'));
        const closed = (yield* r1.read()).length;
        const [r2, w2] = yield* openConnection('127.0.0.1', port);
        w2.write(bytes('fine\n'));
        const answer = text(yield* r2.readline());
        w1.close();
        w2.close();
        server.close();
        yield* server.waitClosed();
        return { closed, answer, contexts: contexts.map((c) => [c.message, (c.exception as Error).message]) };
      })(),
    );
    expect(seen).toEqual({ closed: 0, answer: 'ok fine\n', contexts: [['Unhandled exception in client_connected_cb', 'bad request']] });
  });

  it('a port in use fails with the OS error and its code', async () => {
    const { server, port } = await nodeServer(() => undefined);
    try {
      const error = await run(
        (function* () {
          return (yield* raisedBy(() => startServer(echoLines, '127.0.0.1', port))) as Error & { code?: string };
        })(),
      );
      expect(error.code).toBe('EADDRINUSE');
    } finally {
      server.close();
    }
  });

  it('refuses bad arguments with errors that name them', async () => {
    const errors = await run(
      (function* () {
        return [
          (yield* raisedBy(() => startServer(null as never, '127.0.0.1', 0))) as Error,
          (yield* raisedBy(() => startServer(echoLines, '127.0.0.1', 70000))) as Error,
          (yield* raisedBy(() => openConnection('', 80))) as Error,
          (yield* raisedBy(() => openConnection('127.0.0.1', 80, { limit: 0 }))) as Error,
        ].map((error) => `${error.name}: ${error.message}`);
      })(),
    );
    expect(errors[0]).toBe('TypeError: startServer() clientConnected must be a function, got null');
    expect(errors[1]).toBe('RangeError: startServer() port must be an integer from 0 to 65535, got 70000');
    expect(errors[2]).toBe("TypeError: openConnection() host must be a non-empty string, got ''");
    expect(errors[3]).toBe('RangeError: Limit cannot be <= 0: got 0');
  });

  it('stream functions need a running loop', () => {
    const coroutine = openConnection('127.0.0.1', 1);
    expect(() => coroutine.next()).toThrow('openConnection() must be awaited in a running loop: no running event loop');
  });

  it('a server still open when its loop closes stops listening, and its connections end', async () => {
    let port = 0;
    let client: Socket | null = null;
    await run(
      (function* () {
        const server = yield* startServer(function* (reader) {
          yield* reader.read();
        }, '127.0.0.1', 0);
        port = (server.address() as [string, number])[1];
        client = netConnect(port, '127.0.0.1');
        yield* sleep(0.02);
      })(),
    );
    const ended = await new Promise<string>((resolve) => {
      (client as Socket | null)!.on('close', () => resolve('closed by the server'));
      (client as Socket | null)!.resume();
    });
    expect(ended).toBe('closed by the server');
    const refused = await new Promise<string>((resolve) => {
      const socket = netConnect(port, '127.0.0.1');
      socket.on('error', (error: Error & { code?: string }) => resolve(error.code ?? ''));
      socket.on('connect', () => {
        socket.destroy();
        resolve('connected');
      });
    });
    expect(refused).toBe('ECONNREFUSED');
  });
});

describe('Unix sockets and TLS', () => {
  it('startUnixServer and openUnixConnection talk through a socket file, which closing the server removes (a stale one is replaced)', async () => {
    const path = join(dir, 'echo.sock');
    writeFileSync(path, 'not a socket');
    const notASocket = await run(
      (function* () {
        return (yield* raisedBy(() => startUnixServer(() => undefined, path))) as Error & { code?: string };
      })(),
    );
    expect(notASocket.code).toBe('EADDRINUSE');
    rmSync(path);
    const seen = await run(
      (function* () {
        const server: Server = yield* startUnixServer(function* (reader, writer) {
          writer.write(yield* reader.readline());
          writer.close();
        }, path);
        const existed = existsSync(path);
        const [reader, writer] = yield* openUnixConnection(path);
        writer.write(bytes('over a unix socket\n'));
        const line = text(yield* reader.readline());
        const peer = writer.getExtraInfo('peername');
        writer.close();
        server.close();
        yield* server.waitClosed();
        return { existed, line, peer, removed: !existsSync(path) };
      })(),
    );
    expect(seen).toEqual({ existed: true, line: 'over a unix socket\n', peer: path, removed: true });
  });

  it('serves and connects over TLS; a client that does not trust the certificate fails its handshake', async () => {
    const key = readFileSync(new URL('./fixtures/tls-key.pem', import.meta.url));
    const cert = readFileSync(new URL('./fixtures/tls-cert.pem', import.meta.url));
    const seen = await run(
      (function* () {
        const server = yield* startServer(
          function* (reader, writer) {
            writer.write(bytes(`secure ${text(yield* reader.readline())}`));
            writer.close();
          },
          '127.0.0.1',
          0,
          { ssl: { key, cert } },
        );
        const [, port] = server.address() as [string, number];
        const [reader, writer] = yield* openConnection('127.0.0.1', port, { ssl: { ca: cert }, serverHostname: 'localhost' });
        const canWriteEof = writer.canWriteEof();
        writer.write(bytes('hello\n'));
        const answer = text(yield* reader.read());
        const cipher = writer.getExtraInfo('cipher') as [string, string, number] | null;
        const subject = (writer.getExtraInfo('nodePeerCertificate') as { subject: { CN: string } }).subject.CN;
        writer.close();
        const untrusted = (yield* raisedBy(() => openConnection('127.0.0.1', port, { ssl: true }))) as Error & { code?: string };
        server.close();
        yield* server.waitClosed();
        return { canWriteEof, answer, hasCipher: typeof cipher?.[0] === 'string', subject, untrusted: untrusted.code };
      })(),
    );
    expect(seen).toEqual({ canWriteEof: false, answer: 'secure hello\n', hasCipher: true, subject: 'localhost', untrusted: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
  });
});
