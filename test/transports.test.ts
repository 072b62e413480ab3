/**
 * Transports and protocols over real sockets on 127.0.0.1: the order of protocol callbacks, a
 * protocol that throws, half-close, pausing reading, write-buffer limits with pauseWriting and
 * resumeWriting, abort; UDP endpoints; getaddrinfo.
 */
import { createHash, randomBytes } from 'node:crypto';
import { connect as netConnect, type Server as NetServer, type Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  BufferedProtocol,
  DatagramProtocol,
  KeyboardInterrupt,
  Protocol,
  SystemExit,
  NI_NAMEREQD,
  NI_NUMERICHOST,
  NI_NUMERICSERV,
  getRunningLoop,
  newEventLoop,
  run,
  sleep,
  type Coroutine,
  type DatagramTransport,
  type ExceptionContext,
  type SocketAddress,
  Transport,
  ensureFuture,
} from '../src/index.js';
import { reasonOf } from './helpers/errors.js';
import { drivenPeer, nodeServer, noteCall, until } from './helpers/io.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A protocol that records every call, and marks one made outside a loop iteration. */
class Recorder extends Protocol {
  readonly calls: string[] = [];
  transport: Transport | null = null;
  override connectionMade(transport: Transport): void {
    noteCall(this.calls, 'made');
    this.transport = transport;
  }

  override dataReceived(data: Uint8Array): void {
    noteCall(this.calls, `data:${dec.decode(data)}`);
  }

  override eofReceived(): boolean {
    noteCall(this.calls, 'eof');
    return false;
  }

  override connectionLost(exc: Error | null): void {
    noteCall(this.calls, `lost:${exc === null ? 'null' : ((exc as Error & { code?: string }).code ?? exc.message)}`);
  }

  override pauseWriting(): void {
    noteCall(this.calls, 'pauseWriting');
  }

  override resumeWriting(): void {
    noteCall(this.calls, 'resumeWriting');
  }
}



describe('Transport and Protocol', () => {
  it('calls the protocol in order, inside loop iterations, never re-entrantly: made, data, eof, lost', async () => {
    // The second piece goes once the first arrived (the client says so): two reads whatever the load.
    const peer = await nodeServer((socket) => {
      socket.write('one');
      socket.once('data', () => socket.end('two'));
    });
    try {
      const calls = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          yield* until(() => protocol.calls.includes('data:one'));
          transport.write(Buffer.from('go'));
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          return protocol.calls;
        })(),
      );
      expect(calls).toEqual(['made', 'data:one', 'data:two', 'eof', 'lost:null']);
    } finally {
      peer.server.close();
    }
  });

  it('a protocol whose dataReceived throws: the exception handler hears it once, and connectionLost gets the error', async () => {
    const peer = await nodeServer((socket) => socket.write('boom'));
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const contexts: ExceptionContext[] = [];
          loop.setExceptionHandler((_loop, context) => contexts.push(context));
          class Throwing extends Recorder {
            override dataReceived(data: Uint8Array): void {
              super.dataReceived(data);
              throw new RangeError('cannot parse');
            }
          }
          const [transport, protocol] = yield* loop.createConnection(() => new Throwing(), '127.0.0.1', peer.port);
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          return {
            calls: protocol.calls,
            closing: transport.isClosing(),
            contexts: contexts.map((c) => [c.message, (c.exception as Error).message, c.transport === transport, c.protocol === protocol]),
          };
        })(),
      );
      expect(seen).toEqual({
        calls: ['made', 'data:boom', 'lost:cannot parse'],
        closing: true,
        contexts: [['Fatal error: protocol.dataReceived() call failed.', 'cannot parse', true, true]],
      });
    } finally {
      peer.server.close();
    }
  });

  it('KeyboardInterrupt from dataReceived and SystemExit from bufferUpdated leave the loop; the exception handler hears neither', async () => {
    const peer = await nodeServer((socket) => socket.write('go'));
    const loop = newEventLoop();
    try {
      const handled: ExceptionContext[] = [];
      loop.setExceptionHandler((_loop, context) => handled.push(context));
      const interrupt = new KeyboardInterrupt();
      const exit = new SystemExit(4);
      class Interrupted extends Protocol {
        override dataReceived(): void {
          throw interrupt;
        }
      }
      class Exiting extends BufferedProtocol {
        override getBuffer(): Uint8Array {
          return new Uint8Array(16);
        }
        override bufferUpdated(): void {
          throw exit;
        }
      }
      const escaped: unknown[] = [];
      for (const factory of [(): Protocol => new Interrupted(), (): Protocol => new Exiting()]) {
        escaped.push(
          await reasonOf(
            loop.runUntilComplete(
              (function* (): Coroutine<void> {
                yield* getRunningLoop().createConnection(factory, '127.0.0.1', peer.port);
                yield* sleep(5);
              })(),
            ),
          ),
        );
      }
      expect(escaped).toEqual([interrupt, exit]);
      expect(handled).toEqual([]);
    } finally {
      loop.close();
      peer.server.close();
    }
  });

  it('eofReceived returning true keeps the transport open for writing (half-close)', async () => {
    let answer = '';
    let answered: () => void = () => undefined;
    const allAnswered = new Promise<void>((resolve) => (answered = resolve));
    const peer = await nodeServer((socket) => {
      socket.end('question');
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      // The transport is lost once its bytes are with the kernel: the peer reads them a moment later.
      socket.on('close', () => answered());
    });
    try {
      const calls = await run(
        (function* () {
          const loop = getRunningLoop();
          class HalfClose extends Recorder {
            override eofReceived(): boolean {
              super.eofReceived();
              this.transport!.write(enc.encode('answer after eof'));
              this.transport!.close();
              return true;
            }
          }
          const [, protocol] = yield* loop.createConnection(() => new HalfClose(), '127.0.0.1', peer.port);
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          return protocol.calls;
        })(),
      );
      expect(calls).toEqual(['made', 'data:question', 'eof', 'lost:null']);
      await allAnswered;
      expect(answer).toBe('answer after eof');
    } finally {
      peer.server.close();
    }
  });

  it('pauseReading stops dataReceived until resumeReading; nothing is lost', async () => {
    const peer = await drivenPeer();
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          yield* until(() => protocol.calls.length > 0);
          peer.send('a');
          yield* until(() => protocol.calls.includes('data:a'));
          transport.pauseReading();
          const reading = transport.isReading();
          peer.send('b');
          peer.send('c');
          yield* sleep(0.05);
          const whilePaused = protocol.calls.join(',');
          transport.resumeReading();
          yield* until(() => protocol.calls.join('').includes('c'));
          transport.close();
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          return { reading, whilePaused, after: protocol.calls.join(',').replace('data:b,data:c', 'data:bc') };
        })(),
      );
      expect(seen).toEqual({ reading: false, whilePaused: 'made,data:a', after: 'made,data:a,data:bc,lost:null' });
    } finally {
      peer.server.close();
    }
  });

  it('a peer that ends while the protocol paused reading: every chunk, then eof, then connectionLost', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        // A pipe whose three chunks and end all arrive before the loop delivers the first one.
        const pipe = new PassThrough();
        const protocol = new (class extends Recorder {
          override dataReceived(data: Uint8Array): void {
            super.dataReceived(data);
            if (this.calls.length === 2) {
              this.transport!.pauseReading();
              loop.callLater(0.02, () => this.transport!.resumeReading());
            }
          }
        })();
        new Transport(loop, protocol, { readable: pipe, writable: null });
        pipe.write('a');
        pipe.write('b');
        pipe.end('c');
        yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
        return protocol.calls.join(',');
      })(),
    );
    expect(seen).toBe('made,data:a,data:b,data:c,eof,lost:null');
  });

  it('calls pauseWriting past the high-water mark and resumeWriting once the buffer drained below the low one', async () => {
    let release: () => void = () => undefined;
    let received = 0;
    let ended: Promise<void> = Promise.resolve();
    const peer = await nodeServer((socket) => {
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
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          transport.setWriteBufferLimits(1000, 100);
          const limits = transport.getWriteBufferLimits();
          transport.write(new Uint8Array(500));
          const belowHigh = protocol.calls.slice();
          transport.write(new Uint8Array(16 << 20));
          const paused = protocol.calls.slice();
          const buffered = transport.getWriteBufferSize() > 1000;
          yield* sleep(0.05);
          const stillPaused = !protocol.calls.includes('resumeWriting');
          release();
          yield* until(() => protocol.calls.includes('resumeWriting'));
          transport.close();
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          return { limits, belowHigh, paused, buffered, stillPaused, calls: protocol.calls };
        })(),
      );
      expect(seen).toEqual({
        limits: [100, 1000],
        belowHigh: ['made'],
        paused: ['made', 'pauseWriting'],
        buffered: true,
        stillPaused: true,
        calls: ['made', 'pauseWriting', 'resumeWriting', 'lost:null'],
      });
      await ended;
      expect(received).toBe(500 + (16 << 20));
    } finally {
      peer.server.close();
    }
  });

  it('setWriteBufferLimits checks its marks as asyncio does', async () => {
    const peer = await nodeServer(() => undefined);
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          const defaults = transport.getWriteBufferLimits();
          transport.setWriteBufferLimits(null, 1000);
          const fromLow = transport.getWriteBufferLimits();
          let error: Error | null = null;
          try {
            transport.setWriteBufferLimits(10, 20);
          } catch (caught) {
            error = caught as Error;
          }
          transport.abort();
          return { defaults, fromLow, error: `${error?.name}: ${error?.message}` };
        })(),
      );
      expect(seen).toEqual({ defaults: [16384, 65536], fromLow: [1000, 4000], error: 'RangeError: high (10) must be >= low (20) must be >= 0' });
    } finally {
      peer.server.close();
    }
  });

  it('abort() drops what is buffered and ends the connection at once with connectionLost(null)', async () => {
    let got = 0;
    let peerClosed = false;
    const peer = await nodeServer((socket) => {
      socket.pause();
      socket.on('data', (chunk: Buffer) => (got += chunk.length));
      socket.on('end', () => (peerClosed = true));
      socket.on('close', () => (peerClosed = true));
      setTimeout(() => socket.resume(), 100);
    });
    try {
      const calls = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          transport.write(new Uint8Array(32 << 20));
          transport.abort();
          yield* until(() => protocol.calls.some((call) => call.startsWith('lost')));
          yield* until(() => peerClosed);
          return protocol.calls;
        })(),
      );
      // Past the high-water mark, as asyncio; never resumed, the buffer being dropped.
      expect(calls).toEqual(['made', 'pauseWriting', 'lost:null']);
      expect(got).toBeLessThan(32 << 20);
    } finally {
      peer.server.close();
    }
  });

  it('a connection refused raises the OS error; the protocol factory is never called', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        let made = 0;
        try {
          yield* loop.createConnection(() => {
            made++;
            return new Recorder();
          }, '127.0.0.1', 1);
          return null;
        } catch (error) {
          return { code: (error as Error & { code?: string }).code, made };
        }
      })(),
    );
    expect(seen).toEqual({ code: 'ECONNREFUSED', made: 0 });
  });

  it('createServer gives each connection a protocol from the factory; the transport knows its addresses', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const accepted: Recorder[] = [];
        class Echo extends Recorder {
          override dataReceived(data: Uint8Array): void {
            super.dataReceived(data);
            this.transport!.write(data);
          }
        }
        const server = yield* loop.createServer(() => {
          const protocol = new Echo();
          accepted.push(protocol);
          return protocol;
        }, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const [transport, client] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', port);
        transport.write(enc.encode('echo me'));
        yield* until(() => client.calls.includes('data:echo me'));
        const sockname = transport.getExtraInfo('sockname') as [string, number];
        const serverPeer = accepted[0]!.transport!.getExtraInfo('peername') as [string, number];
        transport.close();
        server.close();
        yield* server.waitClosed();
        return { server: accepted[0]!.calls, samePort: sockname[1] === serverPeer[1], peer: transport.getExtraInfo('peername') };
      })(),
    );
    expect(seen.server).toEqual(['made', 'data:echo me', 'eof', 'lost:null']);
    expect(seen.samePort).toBe(true);
    expect((seen.peer as [string, number])[0]).toBe('127.0.0.1');
  });
});

/** Bytes whose every position says which message and offset it is: a byte overwritten later shows. */
function patterned(message: number, size: number): Buffer {
  const data = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) data[i] = (message * 131 + i * 7) & 0xff;
  return data;
}

/** A protocol that keeps every Uint8Array dataReceived gave it, with a copy taken at the time. */
class Keeper extends Protocol {
  readonly kept: Uint8Array[] = [];
  readonly copies: Buffer[] = [];
  transport: Transport | null = null;
  eof = false;
  lost = false;

  override connectionMade(transport: Transport): void {
    this.transport = transport;
  }

  override dataReceived(data: Uint8Array): void {
    this.kept.push(data);
    this.copies.push(Buffer.from(data));
  }

  override eofReceived(): boolean {
    this.eof = true;
    return false;
  }

  override connectionLost(): void {
    this.lost = true;
  }

  /** Everything received, as kept now; and whether every kept array still holds what it held when it came. */
  received(): { all: Buffer; unchanged: boolean } {
    const all = Buffer.concat(this.kept);
    return { all, unchanged: this.kept.every((data, i) => Buffer.compare(Buffer.from(data), this.copies[i] as Buffer) === 0) };
  }
}

/** Sizes from a byte to 300 KiB: small reads, mid-sized ones, and reads larger than Node's 64 KiB. */
const SIZES = [1, 700, 3000, 4096, 5000, 10240, 16384, 20000, 65536, 100 * 1024, 300 * 1024];

describe('Transport: bytes from sockets', () => {
  it('a protocol that keeps the bytes dataReceived gave it still sees them after more data arrives (client side)', async () => {
    // Each message waits for the previous one to be read, so reads do not merge and every size is seen.
    const messages = SIZES.map((size, i) => patterned(i, size));
    const peer = await nodeServer((socket) => {
      let i = 0;
      const next = (): void => {
        if (i < messages.length) socket.write(messages[i++] as Buffer, () => setTimeout(next, 5));
        else socket.end();
      };
      next();
    });
    try {
      const seen = await run(
        (function* () {
          const [, protocol] = yield* getRunningLoop().createConnection(() => new Keeper(), '127.0.0.1', peer.port);
          yield* until(() => protocol.lost);
          return protocol.received();
        })(),
      );
      expect(seen.unchanged).toBe(true);
      expect(Buffer.compare(seen.all, Buffer.concat(messages))).toBe(0);
    } finally {
      peer.server.close();
    }
  });

  it('the bytes each accepted connection keeps stay its own while other connections read (server side)', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const accepted: Keeper[] = [];
        const server = yield* loop.createServer(() => {
          const protocol = new Keeper();
          accepted.push(protocol);
          return protocol;
        }, '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        // Three Node clients write their messages interleaved: the server reads them all through one buffer.
        const sent: Buffer[][] = [[], [], []];
        const clients = sent.map(() => netConnect(port, '127.0.0.1'));
        for (let i = 0; i < SIZES.length; i++) {
          for (let c = 0; c < clients.length; c++) {
            const message = patterned(i * 3 + c, SIZES[i] as number);
            (sent[c] as Buffer[]).push(message);
            (clients[c] as Socket).write(message);
          }
          yield* sleep(0.005);
        }
        for (const client of clients) client.end();
        yield* until(() => accepted.length === 3 && accepted.every((protocol) => protocol.lost));
        server.close();
        yield* server.waitClosed();
        // Which accepted connection is which client: the first byte tells.
        return accepted.map((protocol) => {
          const { all, unchanged } = protocol.received();
          const c = sent.findIndex((messages) => (messages[0] as Buffer)[0] === all[0]);
          return { unchanged, exact: c !== -1 && Buffer.compare(all, Buffer.concat(sent[c] as Buffer[])) === 0 };
        });
      })(),
    );
    expect(seen).toEqual([
      { unchanged: true, exact: true },
      { unchanged: true, exact: true },
      { unchanged: true, exact: true },
    ]);
  });

  it('pauseReading stops reading from the socket; resumeReading delivers every byte in order', async () => {
    const payload = randomBytes(8 << 20);
    const peer = await nodeServer((socket) => socket.end(payload));
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          // Paused from the first dataReceived on, before the peer's 8 MiB could all be read.
          class PausesAtOnce extends Keeper {
            override dataReceived(data: Uint8Array): void {
              super.dataReceived(data);
              if (this.kept.length === 1) this.transport!.pauseReading();
            }
          }
          const [transport, protocol] = yield* loop.createConnection(() => new PausesAtOnce(), '127.0.0.1', peer.port);
          yield* until(() => protocol.kept.length > 0);
          const socket = transport.getExtraInfo('socket') as Socket;
          const before = [protocol.kept.length, socket.bytesRead];
          yield* sleep(0.1);
          // Nothing delivered, and nothing read from the socket: the rest waits in the kernel (and the peer).
          const duringPause = [protocol.kept.length - (before[0] as number), socket.bytesRead - (before[1] as number)];
          transport.resumeReading();
          yield* until(() => protocol.lost);
          const { all, unchanged } = protocol.received();
          return { duringPause, partial: (before[1] as number) > 0 && (before[1] as number) < payload.length, unchanged, exact: Buffer.compare(all, payload) === 0, eof: protocol.eof };
        })(),
      );
      expect(seen).toEqual({ duringPause: [0, 0], partial: true, unchanged: true, exact: true, eof: true });
    } finally {
      peer.server.close();
    }
  });

  it('echoes large messages exactly through a protocol server, and the net.Server counts its connections until they end', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        class Echo extends Protocol {
          #transport: Transport | null = null;
          override connectionMade(transport: Transport): void {
            this.#transport = transport;
          }
          override dataReceived(data: Uint8Array): void {
            this.#transport!.write(data);
          }
        }
        const server = yield* loop.createServer(() => new Echo(), '127.0.0.1', 0);
        const [, port] = server.address() as [string, number];
        const netServer = server.sockets[0] as NetServer;
        const count = (): Promise<number> => new Promise((resolve, reject) => netServer.getConnections((error, n) => (error ? reject(error) : resolve(n))));
        const echoOnce = function* (payload: Buffer): Coroutine<[Transport, Keeper]> {
          const [transport, protocol] = yield* loop.createConnection(() => new Keeper(), '127.0.0.1', port);
          transport.write(payload);
          yield* until(() => protocol.kept.reduce((n, data) => n + data.length, 0) >= payload.length);
          return [transport, protocol];
        };
        const payloads = [randomBytes(100 * 1024), randomBytes(1 << 20), randomBytes(5 << 20)];
        const results: Array<[Transport, Keeper]> = [];
        for (const payload of payloads) results.push(yield* echoOnce(payload));
        const open = yield* ensureFuture(count());
        for (const [transport] of results) transport.close();
        yield* until(() => results.every(([, protocol]) => protocol.lost));
        server.close();
        yield* server.waitClosed();
        const afterwards = yield* ensureFuture(count());
        const digest = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');
        return {
          open,
          afterwards,
          unchanged: results.every(([, protocol]) => protocol.received().unchanged),
          exact: results.every(([, protocol], i) => digest(protocol.received().all) === digest(payloads[i] as Buffer)),
        };
      })(),
    );
    expect(seen).toEqual({ open: 3, afterwards: 0, unchanged: true, exact: true });
  });
});

describe('UDP: createDatagramEndpoint', () => {
  class Udp extends DatagramProtocol {
    readonly calls: string[] = [];
    transport: DatagramTransport | null = null;
    override connectionMade(transport: DatagramTransport): void {
      this.transport = transport;
      this.calls.push('made');
    }
    override datagramReceived(data: Uint8Array, addr: SocketAddress): void {
      this.calls.push(`from ${(addr as [string, number])[0]}: ${dec.decode(data)}`);
    }
    override errorReceived(exc: Error): void {
      this.calls.push(`error ${(exc as Error & { code?: string }).code}`);
    }
    override connectionLost(exc: Error | null): void {
      this.calls.push(`lost ${exc}`);
    }
  }

  it('sends and receives datagrams between a bound endpoint and a connected one', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        class Pong extends Udp {
          override datagramReceived(data: Uint8Array, addr: SocketAddress): void {
            super.datagramReceived(data, addr);
            this.transport!.sendto(enc.encode(`pong ${dec.decode(data)}`), addr);
          }
        }
        const [server, pong] = yield* loop.createDatagramEndpoint(() => new Pong(), { localAddr: ['127.0.0.1', 0] });
        const [, port] = server.getExtraInfo('sockname') as [string, number];
        const [client, ping] = yield* loop.createDatagramEndpoint(() => new Udp(), { remoteAddr: ['127.0.0.1', port] });
        client.sendto(enc.encode('1'));
        client.sendto(enc.encode('2'), ['127.0.0.1', port]);
        yield* until(() => ping.calls.length >= 3);
        let wrongAddress: Error | null = null;
        try {
          client.sendto(enc.encode('x'), ['127.0.0.1', port + 1]);
        } catch (error) {
          wrongAddress = error as Error;
        }
        client.close();
        server.close();
        yield* until(() => ping.calls.length >= 4 && pong.calls.length >= 4);
        return { ping: ping.calls, pong: pong.calls, peer: client.getExtraInfo('peername'), wrongAddress: wrongAddress?.message, port };
      })(),
    );
    expect(seen.ping).toEqual(['made', 'from 127.0.0.1: pong 1', 'from 127.0.0.1: pong 2', 'lost null']);
    expect(seen.pong).toEqual(['made', 'from 127.0.0.1: 1', 'from 127.0.0.1: 2', 'lost null']);
    expect(seen.peer).toEqual(['127.0.0.1', seen.port]);
    expect(seen.wrongAddress).toBe(`Invalid address: must be null or ['127.0.0.1', ${seen.port}]`);
  });

  it('an ICMP port-unreachable reaches errorReceived; the endpoint stays open', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        // A free port, closed again: nobody listens there.
        const [probe] = yield* loop.createDatagramEndpoint(() => new Udp(), { localAddr: ['127.0.0.1', 0] });
        const [, port] = probe.getExtraInfo('sockname') as [string, number];
        probe.close();
        yield* sleep(0.01);
        const [client, protocol] = yield* loop.createDatagramEndpoint(() => new Udp(), { remoteAddr: ['127.0.0.1', port] });
        for (let i = 0; i < 20 && !protocol.calls.some((c) => c.startsWith('error')); i++) {
          client.sendto(enc.encode('anyone?'));
          yield* sleep(0.01);
        }
        const closing = client.isClosing();
        client.close();
        yield* until(() => protocol.calls.includes('lost null'));
        return { error: protocol.calls.find((c) => c.startsWith('error')), closing };
      })(),
    );
    expect(seen).toEqual({ error: 'error ECONNREFUSED', closing: false });
  });

  it('refuses an endpoint without any address, and sendto without an address when it is not connected', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        let noAddress: Error | null = null;
        try {
          yield* loop.createDatagramEndpoint(() => new Udp(), {});
        } catch (error) {
          noAddress = error as Error;
        }
        const [transport] = yield* loop.createDatagramEndpoint(() => new Udp(), { localAddr: ['127.0.0.1', 0] });
        let noTarget: Error | null = null;
        try {
          transport.sendto(enc.encode('x'));
        } catch (error) {
          noTarget = error as Error;
        }
        transport.close();
        return [noAddress?.message, noTarget?.message];
      })(),
    );
    expect(seen).toEqual([
      'unexpected address family: createDatagramEndpoint() needs localAddr or remoteAddr',
      'sendto() needs an address: the endpoint was opened without remoteAddr',
    ]);
  });
});

describe('getaddrinfo', () => {
  it("resolves without blocking, one 5-tuple per address and socket type, as asyncio's", async () => {
    const infos = await run(getRunningLoopInfos());
    expect(infos).toContainEqual([4, 1, 6, '', ['127.0.0.1', 8080]]);
    expect(infos).toContainEqual([4, 2, 17, '', ['127.0.0.1', 8080]]);
    expect(infos.every(([family]) => family === 4)).toBe(true);
  });

  function* getRunningLoopInfos(): Coroutine<Array<[number, number, number, string, [string, number]]>> {
    return yield* getRunningLoop().getaddrinfo('127.0.0.1', '8080', { family: 4 });
  }

  it('raises the resolver error for a name that does not exist', async () => {
    const code = await run(
      (function* () {
        try {
          yield* getRunningLoop().getaddrinfo('no-such-host.invalid', 80);
          return null;
        } catch (error) {
          return (error as Error & { code?: string }).code;
        }
      })(),
    );
    expect(['ENOTFOUND', 'EAI_AGAIN']).toContain(code);
  });
});

describe('getnameinfo', () => {
  it('names an address and its service as getnameinfo(3) does, numeric on request, and refuses what asyncio refuses', async () => {
    const got = await run(
      (function* (): Coroutine<unknown[]> {
        const loop = getRunningLoop();
        const out: unknown[] = [
          yield* loop.getnameinfo(['127.0.0.1', 80]),
          yield* loop.getnameinfo(['127.0.0.1', 80], NI_NUMERICHOST | NI_NUMERICSERV),
          yield* loop.getnameinfo(['127.0.0.1', 443], NI_NUMERICHOST),
          yield* loop.getnameinfo(['127.0.0.1', 22], NI_NUMERICSERV),
          // TEST-NET-1 has no name: the address comes back, unless a name is required.
          yield* loop.getnameinfo(['192.0.2.1', 80]),
        ];
        for (const [sockaddr, flags] of [
          [['192.0.2.1', 80], NI_NAMEREQD],
          [['localhost', 80], 0],
          [['127.0.0.1'], 0],
          ['127.0.0.1', 0],
          [['127.0.0.1', 'x'], 0],
          [['127.0.0.1', 70000], 0],
        ] as Array<[unknown, number]>) {
          try {
            out.push(yield* loop.getnameinfo(sockaddr as [string, number], flags));
          } catch (error) {
            out.push(`${(error as Error).name}: ${(error as Error).message}${(error as { code?: string }).code === undefined ? '' : ` (${(error as { code?: string }).code})`}`);
          }
        }
        return out;
      })(),
    );
    expect(got).toEqual([
      ['localhost', 'http'],
      ['127.0.0.1', '80'],
      ['127.0.0.1', 'https'],
      ['localhost', '22'],
      ['192.0.2.1', 'http'],
      // ENOTFOUND, or EAI_AGAIN where no DNS server answers.
      expect.stringMatching(/^Error: getnameinfo (ENOTFOUND|EAI_AGAIN) 192\.0\.2\.1 \((ENOTFOUND|EAI_AGAIN)\)$/),
      'Error: getnameinfo ENOTFOUND localhost (ENOTFOUND)',
      'TypeError: getnameinfo(): illegal sockaddr argument',
      "TypeError: getnameinfo() argument 1 must be a [host, port] array, got '127.0.0.1'",
      "TypeError: getnameinfo() port must be an integer, got 'x'",
      'RangeError: getnameinfo(): port must be 0-65535.',
    ]);
  });
});
