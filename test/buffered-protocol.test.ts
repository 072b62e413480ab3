/**
 * BufferedProtocol over real sockets on 127.0.0.1 (plain TCP read through `onread`, and TLS read
 * as a stream): the bytes go into the memory getBuffer() hands out, in order, each part followed
 * by bufferUpdated(); asyncio's errors when either call fails or the buffer is empty; pausing;
 * switching protocols mid-connection.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BufferedProtocol, Protocol, getRunningLoop, run, sleep, type Coroutine, type ExceptionContext, type Transport } from '../src/index.js';
import { drivenPeer, nodeServer, noteCall, until } from './helpers/io.js';

const dec = new TextDecoder();

/** A BufferedProtocol with a buffer of `size` bytes that records every call, and marks one made outside a loop iteration. */
class Recording extends BufferedProtocol {
  readonly calls: string[] = [];
  readonly buffer: Uint8Array;
  transport: Transport | null = null;
  lost: Error | null | undefined = undefined;
  constructor(size: number) {
    super();
    this.buffer = new Uint8Array(size);
  }

  override connectionMade(transport: Transport): void {
    noteCall(this.calls, 'made');
    this.transport = transport;
  }

  override getBuffer(sizeHint: number): Uint8Array {
    noteCall(this.calls, `get:${sizeHint}`);
    return this.buffer;
  }

  override bufferUpdated(nbytes: number): void {
    noteCall(this.calls, `updated:${dec.decode(this.buffer.subarray(0, nbytes))}`);
  }

  override eofReceived(): boolean {
    noteCall(this.calls, 'eof');
    return false;
  }

  override connectionLost(exc: Error | null): void {
    noteCall(this.calls, `lost:${exc === null ? 'null' : exc.message}`);
    this.lost = exc;
  }

  /** What bufferUpdated() was given, joined. */
  text(): string {
    return this.calls
      .filter((call) => call.startsWith('updated:'))
      .map((call) => call.slice('updated:'.length))
      .join('');
  }
}

describe('BufferedProtocol', () => {
  it('receives into the buffer getBuffer() gives: the hint is the bytes waiting, a smaller buffer takes them in parts, in order', async () => {
    const peer = await nodeServer((socket) => socket.end('hello world!'));
    try {
      const calls = await run(
        (function* () {
          const loop = getRunningLoop();
          const [, protocol] = yield* loop.createConnection(() => new Recording(5), '127.0.0.1', peer.port);
          yield* until(() => protocol.lost !== undefined);
          return protocol.calls;
        })(),
      );
      expect(calls).toEqual(['made', 'get:12', 'updated:hello', 'get:7', 'updated: worl', 'get:2', 'updated:d!', 'eof', 'lost:null']);
    } finally {
      peer.server.close();
    }
  });

  it('echoes messages of every size exactly, through many connections of one thread at once', async () => {
    /** Echo into a buffer of its own; what is written is a copy, as the buffer is used again for the next bytes. */
    class Echo extends BufferedProtocol {
      #transport: Transport | null = null;
      readonly #buffer = new Uint8Array(64 * 1024);
      override connectionMade(transport: Transport): void {
        this.#transport = transport;
      }
      override getBuffer(): Uint8Array {
        return this.#buffer;
      }
      override bufferUpdated(nbytes: number): void {
        this.#transport!.write(this.#buffer.slice(0, nbytes));
      }
    }
    /** Keep what comes back in a buffer that grows. */
    class Collect extends BufferedProtocol {
      #buffer = new Uint8Array(1024);
      length = 0;
      override getBuffer(sizeHint: number): Uint8Array {
        if (this.#buffer.length - this.length < sizeHint) {
          const larger = new Uint8Array(Math.max(this.#buffer.length * 2, this.length + sizeHint));
          larger.set(this.#buffer.subarray(0, this.length));
          this.#buffer = larger;
        }
        return this.#buffer.subarray(this.length);
      }
      override bufferUpdated(nbytes: number): void {
        this.length += nbytes;
      }
      received(): Uint8Array {
        return this.#buffer.subarray(0, this.length);
      }
    }
    const sizes = [1, 700, 4096, 10240, 65536, 100 * 1024, 300 * 1024, 1 << 20];
    const payloads = sizes.map((size) => randomBytes(size));
    const digest = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const server = yield* loop.createServer(() => new Echo(), '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const clients: Array<[Transport, Collect]> = [];
        for (const payload of payloads) {
          const [transport, protocol] = yield* loop.createConnection(() => new Collect(), '127.0.0.1', port);
          // In pieces, so that reads of the server and of the clients interleave.
          for (let at = 0; at < payload.length; at += 50_000) transport.write(payload.subarray(at, at + 50_000));
          clients.push([transport, protocol]);
        }
        yield* until(() => clients.every(([, protocol], i) => protocol.length >= (payloads[i] as Buffer).length));
        for (const [transport] of clients) transport.close();
        server.close();
        yield* server.waitClosed();
        return clients.map(([, protocol], i) => protocol.length === sizes[i] && digest(protocol.received()) === digest(payloads[i] as Buffer));
      })(),
    );
    expect(seen).toEqual(sizes.map(() => true));
  });

  it('a BufferedProtocol over TLS (read as a stream) receives the same way', async () => {
    const key = readFileSync(new URL('./fixtures/tls-key.pem', import.meta.url));
    const cert = readFileSync(new URL('./fixtures/tls-cert.pem', import.meta.url));
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        class Greeter extends Protocol {
          override connectionMade(transport: Transport): void {
            transport.write(new TextEncoder().encode('secret greeting'));
            transport.close();
          }
        }
        const server = yield* loop.createServer(() => new Greeter(), '127.0.0.1', 0, { ssl: { key, cert } });
        const [, port] = server.address() as [string, number];
        const [, protocol] = yield* loop.createConnection(() => new Recording(6), '127.0.0.1', port, { ssl: { ca: cert }, serverHostname: 'localhost' });
        yield* until(() => protocol.lost !== undefined);
        server.close();
        yield* server.waitClosed();
        return { text: protocol.text(), hints: protocol.calls.filter((call) => call.startsWith('get:')).length, stray: protocol.calls.filter((call) => call.toUpperCase() === call) };
      })(),
    );
    expect(seen).toEqual({ text: 'secret greeting', hints: 3, stray: [] });
  });

  it('pauseReading() in bufferUpdated stops the calls until resumeReading(); every byte comes, in order, then EOF', async () => {
    const peer = await drivenPeer();
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          class Pausing extends Recording {
            override bufferUpdated(nbytes: number): void {
              super.bufferUpdated(nbytes);
              if (this.text().length === 1) this.transport!.pauseReading();
            }
          }
          const [transport, protocol] = yield* loop.createConnection(() => new Pausing(64), '127.0.0.1', peer.port);
          yield* until(() => protocol.calls.length > 0);
          peer.send('a');
          yield* until(() => protocol.text() === 'a');
          peer.send('b');
          yield* sleep(0.02);
          peer.send('c');
          peer.end();
          yield* sleep(0.05);
          const whilePaused = protocol.text();
          transport.resumeReading();
          yield* until(() => protocol.lost !== undefined);
          return { whilePaused, text: protocol.text(), tail: protocol.calls.slice(-2), stray: protocol.calls.filter((call) => call.toUpperCase() === call) };
        })(),
      );
      expect(seen).toEqual({ whilePaused: 'a', text: 'abc', tail: ['eof', 'lost:null'], stray: [] });
    } finally {
      peer.server.close();
    }
  });

  it("setProtocol() from a Protocol to a BufferedProtocol: data goes to dataReceived, then to the new protocol's buffers", async () => {
    const peer = await drivenPeer();
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const first: string[] = [];
          class Plain extends Protocol {
            override dataReceived(data: Uint8Array): void {
              first.push(dec.decode(data));
            }
          }
          const [transport] = yield* loop.createConnection(() => new Plain(), '127.0.0.1', peer.port);
          peer.send('one');
          yield* until(() => first.length > 0);
          const second = new Recording(16);
          transport.setProtocol(second);
          peer.send('two');
          yield* until(() => second.text() === 'two');
          transport.close();
          return { first, second: [...second.calls], current: transport.getProtocol() === second };
        })(),
      );
      expect(seen).toEqual({ first: ['one'], second: ['get:3', 'updated:two'], current: true });
    } finally {
      peer.server.close();
    }
  });

  const failures: Array<[string, (protocol: Recording) => void, string, string]> = [
    [
      'getBuffer() throws',
      (protocol) => {
        protocol.getBuffer = () => {
          throw new RangeError('no memory today');
        };
      },
      'Fatal error: protocol.getBuffer() call failed.',
      'RangeError: no memory today',
    ],
    ['getBuffer() returns an empty buffer', (protocol) => (protocol.getBuffer = () => new Uint8Array(0)), 'Fatal error: protocol.getBuffer() call failed.', 'RuntimeError: getBuffer() returned an empty buffer'],
    [
      'getBuffer() returns no buffer',
      (protocol) => (protocol.getBuffer = () => 'room' as unknown as Uint8Array),
      'Fatal error: protocol.getBuffer() call failed.',
      "TypeError: getBuffer() must return a Uint8Array or another ArrayBufferView, not 'string'",
    ],
    [
      'bufferUpdated() throws',
      (protocol) => {
        protocol.bufferUpdated = () => {
          throw new SyntaxError('cannot parse');
        };
      },
      'Fatal error: protocol.bufferUpdated() call failed.',
      'SyntaxError: cannot parse',
    ],
  ];
  for (const [what, breakIt, message, error] of failures) {
    it(`${what}: the exception handler hears it once with asyncio's message, and the connection ends with the error`, async () => {
      const peer = await nodeServer((socket) => socket.write('data'));
      try {
        const seen = await run(
          (function* () {
            const loop = getRunningLoop();
            const contexts: ExceptionContext[] = [];
            loop.setExceptionHandler((_loop, context) => contexts.push(context));
            const [transport, protocol] = yield* loop.createConnection(
              () => {
                const protocol = new Recording(8);
                breakIt(protocol);
                return protocol;
              },
              '127.0.0.1',
              peer.port,
            );
            yield* until(() => protocol.lost !== undefined);
            const exception = contexts[0]?.exception as Error;
            return {
              contexts: contexts.map((context) => [context.message, `${(context.exception as Error).name}: ${(context.exception as Error).message}`]),
              lostWith: protocol.lost === exception,
              closing: transport.isClosing(),
            };
          })(),
        );
        expect(seen).toEqual({ contexts: [[message, error]], lostWith: true, closing: true });
      } finally {
        peer.server.close();
      }
    });
  }

  it("a BufferedProtocol that does not override getBuffer() behaves as asyncio's: getBuffer() returns nothing, which the transport refuses", async () => {
    const peer = await nodeServer((socket) => socket.write('data'));
    try {
      const seen = await run(
        (function* (): Coroutine<string[]> {
          const loop = getRunningLoop();
          const contexts: ExceptionContext[] = [];
          loop.setExceptionHandler((_loop, context) => contexts.push(context));
          class Forgetful extends BufferedProtocol {
            lost: Error | null | undefined = undefined;
            override connectionLost(exc: Error | null): void {
              this.lost = exc;
            }
          }
          const [, protocol] = yield* loop.createConnection(() => new Forgetful(), '127.0.0.1', peer.port);
          yield* until(() => protocol.lost !== undefined);
          const reported = contexts.map((context) => `${context.message} ${String(context.exception)}`);
          return [...reported, `lost: ${String(protocol.lost)}`, `same error: ${contexts[0]?.exception === protocol.lost}`];
        })(),
      );
      // asyncio's get_buffer() returns None, which the transport refuses (a TypeError there too).
      expect(new BufferedProtocol().getBuffer(10)).toBeUndefined();
      expect(seen).toEqual([
        "Fatal error: protocol.getBuffer() call failed. TypeError: getBuffer() must return a Uint8Array or another ArrayBufferView, not 'undefined'",
        "lost: TypeError: getBuffer() must return a Uint8Array or another ArrayBufferView, not 'undefined'",
        'same error: true',
      ]);
    } finally {
      peer.server.close();
    }
  });

  it('dataReceived() of a BufferedProtocol feeds its buffers, as asyncio does for transports that hold bytes', () => {
    const parts: string[] = [];
    class Small extends BufferedProtocol {
      readonly buffer = new Uint8Array(4);
      override getBuffer(sizeHint: number): Uint8Array {
        parts.push(`get:${sizeHint}`);
        return this.buffer;
      }
      override bufferUpdated(nbytes: number): void {
        parts.push(dec.decode(this.buffer.subarray(0, nbytes)));
      }
    }
    new Small().dataReceived(new TextEncoder().encode('abcdefghij'));
    expect(parts).toEqual(['get:10', 'abcd', 'get:6', 'efgh', 'get:2', 'ij']);
  });
});
