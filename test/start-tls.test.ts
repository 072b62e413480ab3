/**
 * Upgrading connections to TLS in place (loop.startTls, StreamWriter.startTls) and adopting a
 * socket accepted elsewhere (loop.connectAcceptedSocket), over real sockets on 127.0.0.1 with the
 * certificate in test/fixtures: the upgrade, a handshake that fails or times out (the connection
 * closed, connectionLost told once, no socket left open), and asyncio's argument checks.
 */
import * as dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { connect as netConnect, createServer as netCreateServer, type Server as NetServer, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as tlsCreateServer } from 'node:tls';
import { describe, expect, it, vi } from 'vitest';
import { Protocol, getRunningLoop, openConnection, run, startServer, type Coroutine, type Transport } from '../src/index.js';
import { raisedBy } from './helpers/coroutines.js';
import { nodeServer, until } from './helpers/io.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const bytes = (text: string): Uint8Array => enc.encode(text);
const text = (data: Uint8Array): string => dec.decode(data);

const key = readFileSync(new URL('./fixtures/tls-key.pem', import.meta.url));
const cert = readFileSync(new URL('./fixtures/tls-cert.pem', import.meta.url));

/** How many TCP sockets and servers this process holds open right now. */
function openTcpHandles(): number {
  return process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap' || name === 'TCPServerWrap').length;
}

/** A protocol that records what it hears. */
class Recorder extends Protocol {
  readonly calls: string[] = [];
  readonly lost: Array<Error | null> = [];
  override connectionMade(transport: Transport): void {
    void transport;
    this.calls.push('made');
  }

  override dataReceived(data: Uint8Array): void {
    this.calls.push(`data:${text(data)}`);
  }

  override connectionLost(exc: Error | null): void {
    this.lost.push(exc);
    this.calls.push('lost');
  }
}

describe('StreamWriter.startTls', () => {
  it('upgrades both ends of a stream connection to TLS after a plain exchange (STARTTLS)', async () => {
    const seen = await run(
      (function* () {
        const server = yield* startServer(
          function* (reader, writer) {
            if (text(yield* reader.readline()) !== 'STARTTLS\n') return;
            writer.write(bytes('GO\n'));
            yield* writer.startTls({ key, cert });
            writer.write(bytes(`secure: ${text(yield* reader.readline())}`));
            writer.close();
          },
          '127.0.0.1',
          0,
        );
        const [, port] = server.address() as [string, number];
        const [reader, writer] = yield* openConnection('127.0.0.1', port);
        const plainCipher = writer.getExtraInfo('cipher');
        const plainTransport = writer.transport;
        writer.write(bytes('STARTTLS\n'));
        const go = text(yield* reader.readline());
        yield* writer.startTls({ ca: cert }, { serverHostname: 'localhost' });
        writer.write(bytes('hello\n'));
        const answer = text(yield* reader.readline());
        const cipher = writer.getExtraInfo('cipher') as [string, string, number];
        const subject = (writer.getExtraInfo('peercert') as { subject: unknown }).subject;
        const replaced = writer.transport !== plainTransport;
        const rest = yield* reader.read();
        writer.close();
        server.close();
        yield* server.waitClosed();
        return { plainCipher, go, answer, tls: cipher[1].startsWith('TLS'), subject, replaced, rest: rest.length };
      })(),
    );
    expect(seen).toEqual({ plainCipher: null, go: 'GO\n', answer: 'secure: hello\n', tls: true, subject: [[['commonName', 'localhost']]], replaced: true, rest: 0 });
  });
});

describe('StreamWriter.startTls: a failed handshake', () => {
  it('raises the error, which the reader raises too; the server side, whose peer left mid-handshake, gets ConnectionResetError', async () => {
    const seen = await run(
      (function* () {
        let serverError: Error | null = null;
        const server = yield* startServer(
          function* (reader, writer) {
            yield* reader.readline();
            writer.write(bytes('GO\n'));
            // The client does not trust this certificate: it goes away mid-handshake.
            serverError = (yield* raisedBy(() => writer.startTls({ key, cert }))) as Error;
            writer.close();
          },
          '127.0.0.1',
          0,
        );
        const [, port] = server.address() as [string, number];
        const [reader, writer] = yield* openConnection('127.0.0.1', port);
        writer.write(bytes('STARTTLS\n'));
        yield* reader.readline();
        const error = (yield* raisedBy(() => writer.startTls({}, { serverHostname: 'localhost' }))) as Error & { code?: string };
        const readError = yield* raisedBy(() => reader.read());
        server.close();
        yield* server.waitClosed();
        const onServer = serverError as Error | null;
        return { code: error.code, sameOnRead: readError === error, closing: writer.isClosing(), server: `${onServer?.name}: ${onServer?.message}` };
      })(),
    );
    expect(seen).toEqual({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT', sameOnRead: true, closing: true, server: 'ConnectionResetError: Connection lost' });
  });
});

describe('EventLoop.startTls', () => {
  it('a handshake that fails closes the connection, tells connectionLost the error once and raises it; nothing is left open', async () => {
    // The peer speaks TLS with a certificate the client does not trust.
    const tlsPeer = tlsCreateServer({ key, cert });
    tlsPeer.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => tlsPeer.listen(0, '127.0.0.1', resolve));
    const port = (tlsPeer.address() as { port: number }).port;
    // Only the peer's listening server is open (the sockets of earlier tests have gone).
    await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', port);
          const error = (yield* raisedBy(() => loop.startTls(transport, protocol, {}, { serverHostname: 'localhost' }))) as Error & { code?: string };
          yield* until(() => protocol.lost.length > 0);
          return { code: error.code, lost: protocol.lost.length, sameError: protocol.lost[0] === error, calls: protocol.calls };
        })(),
      );
      expect(seen).toEqual({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT', lost: 1, sameError: true, calls: ['made', 'lost'] });
      // The client's socket, and the one the peer accepted, are gone.
      await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    } finally {
      tlsPeer.close();
    }
  });

  it('a handshake that takes longer than sslHandshakeTimeout is aborted with ConnectionAbortedError, asyncio\'s message; nothing is left open', async () => {
    // A peer that accepts and never answers the ClientHello.
    const silent = await nodeServer((socket) => socket.resume().on('end', () => socket.end()));
    // Only the peer's listening server is open (the sockets of earlier tests have gone).
    await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', silent.port);
          const error = (yield* raisedBy(() => loop.startTls(transport, protocol, { ca: cert }, { sslHandshakeTimeout: 0.05 }))) as Error & { code?: string };
          yield* until(() => protocol.lost.length > 0);
          return { name: error.name, message: error.message, code: error.code, lost: protocol.lost.length, sameError: protocol.lost[0] === error };
        })(),
      );
      expect(seen).toEqual({
        name: 'ConnectionAbortedError',
        message: 'SSL handshake is taking longer than 0.05 seconds: aborting the connection',
        code: 'ECONNABORTED',
        lost: 1,
        sameError: true,
      });
      await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    } finally {
      silent.server.close();
    }
  });

  it("checks its arguments as asyncio does", async () => {
    const peer = await nodeServer((socket) => socket.resume().on('end', () => socket.end()));
    try {
      const errors = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createConnection(() => new Recorder(), '127.0.0.1', peer.port);
          const [datagrams] = yield* loop.createDatagramEndpoint(() => new (class extends Protocol {})() as never, { localAddr: ['127.0.0.1', 0] });
          const attempts: Array<() => Coroutine<unknown>> = [
            () => loop.startTls(transport, protocol, null as never),
            () => loop.startTls(datagrams as never, protocol, {}),
            () => loop.startTls(transport, protocol, {}, { sslHandshakeTimeout: 0 }),
            () => loop.startTls(transport, protocol, {}, { sslHandshakeTimeout: -1 }),
          ];
          const messages: string[] = [];
          for (const attempt of attempts) {
            const error = (yield* raisedBy(attempt)) as Error;
            messages.push(`${error.name}: ${error.message.replace(/^(transport ).*( is not)/, '$1…$2')}`);
          }
          transport.close();
          const closing = (yield* raisedBy(() => loop.startTls(transport, protocol, {}))) as Error;
          messages.push(`${closing.name}: ${closing.message.replace(/^(transport ).*( is not)/, '$1…$2')}`);
          datagrams.close();
          return messages;
        })(),
      );
      expect(errors).toEqual([
        'TypeError: sslcontext is expected to be an object of node:tls options, got null',
        'TypeError: transport … is not supported by startTls()',
        'RangeError: ssl_handshake_timeout should be a positive number, got 0',
        'RangeError: ssl_handshake_timeout should be a positive number, got -1',
        'TypeError: transport … is not supported by startTls()',
      ]);
    } finally {
      peer.server.close();
    }
  });
});

describe('EventLoop.connectAcceptedSocket', () => {
  it('drives a protocol from a socket a Node server accepted, plain and as the TLS server', async () => {
    const accepted: Socket[] = [];
    const server: NetServer = netCreateServer((socket) => accepted.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          class Echo extends Recorder {
            transport: Transport | null = null;
            override connectionMade(transport: Transport): void {
              super.connectionMade(transport);
              this.transport = transport;
            }

            override dataReceived(data: Uint8Array): void {
              super.dataReceived(data);
              this.transport?.write(data);
            }
          }
          const answers: string[] = [];
          const plainClient = netConnect(port, '127.0.0.1');
          plainClient.on('data', (data) => answers.push(`plain ${data.toString()}`));
          yield* until(() => accepted.length === 1);
          const [plain, plainProtocol] = yield* loop.connectAcceptedSocket(() => new Echo(), accepted[0] as Socket);
          plainClient.write('ping');
          yield* until(() => answers.length === 1);
          const secureClient = tlsConnect({ port, host: '127.0.0.1', ca: cert, servername: 'localhost' });
          secureClient.on('data', (data) => answers.push(`tls ${data.toString()}`));
          yield* until(() => accepted.length === 2);
          const [secure, secureProtocol] = yield* loop.connectAcceptedSocket(() => new Echo(), accepted[1] as Socket, { ssl: { key, cert } });
          secureClient.write('pong');
          yield* until(() => answers.length === 2);
          const cipher = secure.getExtraInfo('cipher');
          plainClient.end();
          secureClient.end();
          yield* until(() => plainProtocol.lost.length + secureProtocol.lost.length === 2);
          return { answers, plainPeer: (plain.getExtraInfo('peername') as [string, number])[0], secureCipher: Array.isArray(cipher), calls: [plainProtocol.calls, secureProtocol.calls] };
        })(),
      );
      expect(seen).toEqual({
        answers: ['plain ping', 'tls pong'],
        plainPeer: '127.0.0.1',
        secureCipher: true,
        calls: [
          ['made', 'data:ping', 'lost'],
          ['made', 'data:pong', 'lost'],
        ],
      });
    } finally {
      server.close();
    }
  });

  it('reads a socket a pauseOnConnect server accepted, or one paused by hand, plain and as the TLS server (asyncio reads any socket it is given)', async () => {
    const accepted: Socket[] = [];
    const server: NetServer = netCreateServer({ pauseOnConnect: true }, (socket) => accepted.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          class Echo extends Recorder {
            transport: Transport | null = null;
            override connectionMade(transport: Transport): void {
              super.connectionMade(transport);
              this.transport = transport;
            }

            override dataReceived(data: Uint8Array): void {
              super.dataReceived(data);
              this.transport?.write(data);
            }
          }
          const answers: string[] = [];
          const reading: boolean[] = [];
          const protocols: Echo[] = [];
          const clients = [
            ['plain', () => netConnect(port, '127.0.0.1')],
            ['tls', () => tlsConnect({ port, host: '127.0.0.1', ca: cert, servername: 'localhost' })],
            ['paused', () => netConnect(port, '127.0.0.1')],
          ] as const;
          for (const [index, [name, connect]] of clients.entries()) {
            const client = connect();
            client.on('error', () => undefined);
            client.on('data', (data) => answers.push(`${name} ${data.toString()}`));
            // Sent before the socket is adopted: it waits in the kernel until the transport reads.
            if (name !== 'tls') client.write(`early-${name}`);
            yield* until(() => accepted.length === index + 1);
            const socket = accepted[index] as Socket;
            if (name === 'paused') socket.resume().pause();
            const [transport, protocol] = yield* loop.connectAcceptedSocket(() => new Echo(), socket, name === 'tls' ? { ssl: { key, cert } } : {});
            protocols.push(protocol);
            reading.push(transport.isReading());
            if (name === 'tls') client.write('early-tls');
            yield* until(() => answers.length === index + 1);
            client.end();
          }
          yield* until(() => protocols.every((protocol) => protocol.lost.length === 1));
          return { answers, reading, calls: protocols.map((protocol) => protocol.calls) };
        })(),
      );
      expect(seen).toEqual({
        answers: ['plain early-plain', 'tls early-tls', 'paused early-paused'],
        reading: [true, true, true],
        calls: [
          ['made', 'data:early-plain', 'lost'],
          ['made', 'data:early-tls', 'lost'],
          ['made', 'data:early-paused', 'lost'],
        ],
      });
    } finally {
      server.close();
    }
  });

  it('checks its arguments as asyncio does', async () => {
    const udp = dgram.createSocket('udp4');
    try {
      const errors = await run(
        (function* () {
          const loop = getRunningLoop();
          const socket = netConnect(9, '127.0.0.1');
          socket.on('error', () => undefined);
          const attempts: Array<() => Coroutine<unknown>> = [
            () => loop.connectAcceptedSocket(() => new Recorder(), udp as never),
            () => loop.connectAcceptedSocket(() => new Recorder(), socket, { sslHandshakeTimeout: 1 }),
          ];
          const messages: string[] = [];
          for (const attempt of attempts) {
            const error = (yield* raisedBy(attempt)) as Error;
            messages.push(`${error.name}: ${error.message.replace(/, got .*/, ', got …')}`);
          }
          socket.destroy();
          return messages;
        })(),
      );
      expect(errors).toEqual(['RangeError: A Stream Socket was expected, got …', 'RangeError: ssl_handshake_timeout is only meaningful with ssl']);
    } finally {
      udp.close();
    }
  });
});

describe('sslHandshakeTimeout on connections and servers', () => {
  it('a client handshake that takes too long is aborted with ConnectionAbortedError; nothing is left open', async () => {
    const silent = await nodeServer((socket) => socket.resume().on('end', () => socket.end()));
    await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    try {
      const error = (await run(
        (function* () {
          return yield* raisedBy(() => openConnection('127.0.0.1', silent.port, { ssl: { ca: cert }, sslHandshakeTimeout: 0.05 }));
        })(),
      )) as Error & { code?: string };
      expect({ name: error.name, message: error.message, code: error.code }).toEqual({
        name: 'ConnectionAbortedError',
        message: 'SSL handshake is taking longer than 0.05 seconds: aborting the connection',
        code: 'ECONNABORTED',
      });
      await vi.waitFor(() => expect(openTcpHandles()).toBe(1));
    } finally {
      silent.server.close();
    }
  });

  it('a server drops a client whose handshake takes too long, and its handler never runs', async () => {
    const seen = await run(
      (function* () {
        let handled = 0;
        const server = yield* startServer(
          () => {
            handled++;
          },
          '127.0.0.1',
          0,
          { ssl: { key, cert }, sslHandshakeTimeout: 0.05 },
        );
        const [, port] = server.address() as [string, number];
        let closed = false;
        const mute = netConnect(port, '127.0.0.1');
        mute.on('error', () => undefined);
        mute.on('close', () => (closed = true));
        yield* until(() => closed);
        server.close();
        yield* server.waitClosed();
        return { closed, handled };
      })(),
    );
    expect(seen).toEqual({ closed: true, handled: 0 });
  });

  it('checks it as asyncio does, and ssl: true on a server', async () => {
    const errors = await run(
      (function* () {
        const loop = getRunningLoop();
        const attempts: Array<() => Coroutine<unknown>> = [
          () => openConnection('127.0.0.1', 9, { sslHandshakeTimeout: 1 }),
          () => loop.createConnection(() => new Recorder(), '127.0.0.1', 9, { ssl: {}, sslHandshakeTimeout: 0 }),
          () => startServer(() => undefined, '127.0.0.1', 0, { sslHandshakeTimeout: 1 }),
          () => loop.createServer(() => new Recorder(), '127.0.0.1', 0, { ssl: true as never }),
        ];
        const messages: string[] = [];
        for (const attempt of attempts) {
          const error = (yield* raisedBy(attempt)) as Error;
          messages.push(`${error.name}: ${error.message}`);
        }
        return messages;
      })(),
    );
    expect(errors).toEqual([
      'RangeError: ssl_handshake_timeout is only meaningful with ssl',
      'RangeError: ssl_handshake_timeout should be a positive number, got 0',
      'RangeError: ssl_handshake_timeout is only meaningful with ssl',
      "TypeError: ssl argument must be node:tls server options (asyncio's SSLContext) or undefined",
    ]);
  });
});
