/**
 * The loop's connection and server options asyncio has, over real sockets on 127.0.0.1 and Unix
 * sockets: `localAddr` (bind before connect), `sock` (a Node server or dgram socket already
 * bound), `cleanupSocket`, `keepAlive`; and their argument checks, with asyncio's messages.
 */
import { X509Certificate } from 'node:crypto';
import * as dgram from 'node:dgram';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { createServer as netCreateServer, type Server as NetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as tlsCreateServer } from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DatagramProtocol,
  Protocol,
  getRunningLoop,
  openConnection,
  openUnixConnection,
  run,
  sleep,
  startServer,
  startUnixServer,
  type Coroutine,
  type SocketAddress,
  type Transport,
} from '../src/index.js';
import { crlDistributionPoints } from '../src/internal/der.js';
import { raisedBy } from './helpers/coroutines.js';
import { mulberry32 } from './helpers/prng.js';
import { freePort, nodeServer, until } from './helpers/io.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const bytes = (text: string): Uint8Array => enc.encode(text);
const text = (data: Uint8Array): string => dec.decode(data);

const dir = mkdtempSync(join(tmpdir(), 'multiloop-connections-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const key = readFileSync(new URL('./fixtures/tls-key.pem', import.meta.url));
const cert = readFileSync(new URL('./fixtures/tls-cert.pem', import.meta.url));
/** A certificate with CRL distribution points (made as test/fixtures/tls-crl.cnf says). */
const crlKey = readFileSync(new URL('./fixtures/tls-crl-key.pem', import.meta.url));
const crlCert = readFileSync(new URL('./fixtures/tls-crl-cert.pem', import.meta.url));

/** A Node server listening on `where` (a port of 127.0.0.1, or a path), not yet serving anything. */
async function listening(where: number | string): Promise<NetServer> {
  const server = netCreateServer();
  await new Promise<void>((resolve) => (typeof where === 'string' ? server.listen(where, resolve) : server.listen(where, '127.0.0.1', resolve)));
  return server;
}

/** A stream handler that echoes one line, then closes. */
function* echoLine(reader: { readline(): Coroutine<Uint8Array> }, writer: { write(data: Uint8Array): void; close(): void }): Coroutine<void> {
  writer.write(yield* reader.readline());
  writer.close();
}

class Nothing extends Protocol {}

describe('createConnection and openConnection: localAddr', () => {
  it('binds the socket to localAddr before it connects: the peer sees that port', async () => {
    const seenFrom: number[] = [];
    const peer = await nodeServer((socket) => {
      seenFrom.push(socket.remotePort as number);
      socket.end();
    });
    const local = await freePort();
    try {
      const seen = await run(
        (function* () {
          const [transport] = yield* getRunningLoop().createConnection(() => new Nothing(), '127.0.0.1', peer.port, { localAddr: ['127.0.0.1', local] });
          const sockname = transport.getExtraInfo('sockname');
          transport.close();
          const [, writer] = yield* openConnection('localhost', peer.port, { localAddr: ['127.0.0.1', 0] });
          const streamSockname = writer.getExtraInfo('sockname') as [string, number];
          writer.close();
          yield* until(() => seenFrom.length === 2);
          return { sockname, streamHost: streamSockname[0], streamPortSeen: seenFrom[1] === streamSockname[1] };
        })(),
      );
      expect(seen).toEqual({ sockname: ['127.0.0.1', local], streamHost: '127.0.0.1', streamPortSeen: true });
      expect(seenFrom[0]).toBe(local);
    } finally {
      peer.server.close();
    }
  });

  it('a local address in use fails with EADDRINUSE, worded as asyncio words it', async () => {
    const peer = await nodeServer((socket) => socket.end());
    const busy = await listening(0);
    const busyPort = (busy.address() as { port: number }).port;
    try {
      const error = (await run(
        (function* () {
          return yield* raisedBy(() => getRunningLoop().createConnection(() => new Nothing(), '127.0.0.1', peer.port, { localAddr: ['127.0.0.1', busyPort] }));
        })(),
      )) as Error & { code?: string; errno?: number; syscall?: string };
      expect(error.message).toBe(`error while attempting to bind on address ['127.0.0.1', ${busyPort}]: address already in use`);
      expect({ code: error.code, errno: error.errno, syscall: error.syscall }).toEqual({ code: 'EADDRINUSE', errno: -98, syscall: 'bind' });
      expect((error.cause as { code?: string }).code).toBe('EADDRINUSE');
    } finally {
      peer.server.close();
      busy.close();
    }
  });

  it('no local address of the remote family is an error naming the family; bad localAddr and a Unix connection with one are TypeErrors', async () => {
    const errors = await run(
      (function* () {
        const loop = getRunningLoop();
        const family = (yield* raisedBy(() => loop.createConnection(() => new Nothing(), '127.0.0.1', 9, { localAddr: ['::1', 0] }))) as Error;
        const family6 = (yield* raisedBy(() => openConnection('::1', 9, { localAddr: ['127.0.0.1', 0] }))) as Error;
        const shape = (yield* raisedBy(() => loop.createConnection(() => new Nothing(), '127.0.0.1', 9, { localAddr: '127.0.0.1' as never }))) as Error;
        const port = (yield* raisedBy(() => loop.createConnection(() => new Nothing(), '127.0.0.1', 9, { localAddr: ['127.0.0.1', 70000] }))) as Error;
        const unix = (yield* raisedBy(() => loop.createUnixConnection(() => new Nothing(), join(dir, 'none.sock'), { localAddr: ['127.0.0.1', 0] }))) as Error;
        const unixStream = (yield* raisedBy(() => openUnixConnection(join(dir, 'none.sock'), { localAddr: ['127.0.0.1', 0] }))) as Error;
        return [family, family6, shape, port, unix, unixStream].map((error) => `${error.name}: ${error.message}`);
      })(),
    );
    expect(errors).toEqual([
      'Error: no matching local address with family=AF_INET found',
      'Error: no matching local address with family=AF_INET6 found',
      "TypeError: createConnection() localAddr must be [host, port], got '127.0.0.1'",
      'RangeError: createConnection() localAddr port must be an integer from 0 to 65535, got 70000',
      "TypeError: createUnixConnection() got an unexpected keyword argument 'localAddr'",
      "TypeError: openUnixConnection() got an unexpected keyword argument 'localAddr'",
    ]);
  });
});

describe('createServer, startServer, startUnixServer: sock', () => {
  it('serves on a net.Server already listening, and closing the server closes it', async () => {
    const sock = await listening(0);
    const port = (sock.address() as { port: number }).port;
    const seen = await run(
      (function* () {
        const server = yield* startServer(echoLine, null, null, { sock });
        const address = server.address();
        const [reader, writer] = yield* openConnection('127.0.0.1', port);
        writer.write(bytes('over a given server\n'));
        const line = text(yield* reader.readline());
        writer.close();
        server.close();
        yield* server.waitClosed();
        return { address, line, stillListening: sock.listening };
      })(),
    );
    expect(seen).toEqual({ address: ['127.0.0.1', port], line: 'over a given server\n', stillListening: false });
  });

  it('serves TLS on a plain net.Server given with ssl, and a Unix net.Server through startUnixServer', async () => {
    const sock = await listening(0);
    const port = (sock.address() as { port: number }).port;
    const path = join(dir, 'given.sock');
    const unixSock = await listening(path);
    const seen = await run(
      (function* () {
        const server = yield* startServer(echoLine, null, null, { sock, ssl: { key, cert } });
        const [reader, writer] = yield* openConnection('127.0.0.1', port, { ssl: { ca: cert }, serverHostname: 'localhost' });
        writer.write(bytes('secure\n'));
        const line = text(yield* reader.readline());
        writer.close();
        server.close();
        yield* server.waitClosed();
        const unixServer = yield* startUnixServer(echoLine, null, { sock: unixSock });
        const [unixReader, unixWriter] = yield* openUnixConnection(path);
        unixWriter.write(bytes('unix\n'));
        const unixLine = text(yield* unixReader.readline());
        unixWriter.close();
        const address = unixServer.address();
        unixServer.close();
        yield* unixServer.waitClosed();
        return { line, unixLine, address, removed: !existsSync(path) };
      })(),
    );
    expect(seen).toEqual({ line: 'secure\n', unixLine: 'unix\n', address: path, removed: true });
  });

  it('checks sock as asyncio does: with host/port or path, neither, not a stream server, TLS already, not listening', async () => {
    const tcp = await listening(0);
    const path = join(dir, 'checks.sock');
    const unix = await listening(path);
    const tlsServer = tlsCreateServer({ key, cert });
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    try {
      const errors = await run(
        (function* () {
          const loop = getRunningLoop();
          const attempts: Array<() => Coroutine<unknown>> = [
            () => startServer(echoLine, '127.0.0.1', 0, { sock: tcp }),
            () => loop.createServer(() => new Nothing(), null, 0, { sock: tcp }),
            () => startServer(echoLine, null, null),
            () => startUnixServer(echoLine, path, { sock: unix }),
            () => loop.createUnixServer(() => new Nothing(), null),
            () => startServer(echoLine, null, null, { sock: dgram.createSocket('udp4') as never }),
            () => startUnixServer(echoLine, null, { sock: tcp }),
            () => startServer(echoLine, null, null, { sock: tlsServer }),
            () => startServer(echoLine, null, null, { sock: netCreateServer() }),
            () => startUnixServer(echoLine, join(dir, 'k.sock'), { keepAlive: true }),
            () => startServer(echoLine, '127.0.0.1', 0, { cleanupSocket: false }),
          ];
          const messages: string[] = [];
          for (const attempt of attempts) {
            const error = (yield* raisedBy(attempt)) as Error;
            messages.push(`${error.name}: ${error.message.replace(/, got .*/, ', got …')}`);
          }
          return messages;
        })(),
      );
      expect(errors).toEqual([
        'RangeError: host/port and sock can not be specified at the same time',
        'RangeError: host/port and sock can not be specified at the same time',
        'RangeError: Neither host/port nor sock were specified',
        'RangeError: path and sock can not be specified at the same time',
        'RangeError: path was not specified, and no sock specified',
        'RangeError: A Stream Socket was expected, got …',
        'RangeError: A UNIX Domain Stream Socket was expected, got …',
        'TypeError: Socket cannot be of type SSLSocket',
        'RangeError: sock must be a listening net.Server (Node binds a server as it listens), got …',
        "TypeError: startUnixServer() got an unexpected keyword argument 'keepAlive'",
        "TypeError: startServer() got an unexpected keyword argument 'cleanupSocket'",
      ]);
      // A refused sock is left as it was.
      expect([tcp.listening, unix.listening]).toEqual([true, true]);
    } finally {
      tcp.close();
      unix.close();
      tlsServer.close();
    }
  });
});

describe('startUnixServer: cleanupSocket', () => {
  it('cleanupSocket: false leaves the socket file on close', async () => {
    const path = join(dir, 'kept.sock');
    const kept = await run(
      (function* () {
        const server = yield* startUnixServer(echoLine, path, { cleanupSocket: false });
        server.close();
        yield* server.waitClosed();
        return existsSync(path) && statSync(path).isSocket();
      })(),
    );
    expect(kept).toBe(true);
    unlinkSync(path);
  });

  it('a socket file another server put in its place is not removed on close (asyncio 3.13 compares inodes)', async () => {
    const path = join(dir, 'replaced.sock');
    let other: NetServer | null = null;
    try {
      const seen = await run(
        (function* () {
          const server = yield* startUnixServer(echoLine, path);
          const first = statSync(path).ino;
          unlinkSync(path);
          const replacing = netCreateServer();
          other = replacing;
          const loop = getRunningLoop();
          const up = loop.createFuture<void>();
          replacing.listen(path, () => up.setResult(undefined));
          yield* up;
          const second = statSync(path).ino;
          server.close();
          yield* server.waitClosed();
          return { replaced: first !== second, stillThere: existsSync(path) && statSync(path).ino === second };
        })(),
      );
      expect(seen).toEqual({ replaced: true, stillThere: true });
    } finally {
      (other as NetServer | null)?.close();
    }
  });
});

/** The timer field of the connection from local port `from` to `to` in /proc/net/tcp ('02': the keep-alive timer runs). */
function tcpTimer(from: number, to: number): string | null {
  const hex = (port: number): string => port.toString(16).toUpperCase().padStart(4, '0');
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields[1]?.endsWith(`:${hex(from)}`) === true && fields[2]?.endsWith(`:${hex(to)}`) === true) return (fields[5] as string).split(':')[0] as string;
  }
  return null;
}

describe('startServer: keepAlive', () => {
  it.runIf(existsSync('/proc/net/tcp'))('turns TCP keep-alive on for every accepted connection, and only with keepAlive', async () => {
    const timers = await run(
      (function* () {
        const seen: Array<string | null> = [];
        for (const keepAlive of [true, false]) {
          const accepted: Transport[] = [];
          const server = yield* startServer(
            (_reader, writer) => {
              accepted.push(writer.transport);
            },
            '127.0.0.1',
            0,
            keepAlive ? { keepAlive } : {},
          );
          const [, port] = server.address() as [string, number];
          const [, writer] = yield* openConnection('127.0.0.1', port);
          yield* until(() => accepted.length === 1);
          const [, clientPort] = writer.getExtraInfo('sockname') as [string, number];
          seen.push(tcpTimer(port, clientPort));
          writer.close();
          server.close();
          server.closeClients();
          yield* server.waitClosed();
        }
        return seen;
      })(),
    );
    expect(timers).toEqual(['02', '00']);
  });
});

class Datagrams extends DatagramProtocol {
  readonly received: string[] = [];
  override datagramReceived(data: Uint8Array, addr: SocketAddress): void {
    this.received.push(`${text(data)} from ${Array.isArray(addr) ? addr[1] : addr}`);
  }
}

describe('createDatagramEndpoint: sock', () => {
  it('drives a dgram socket already bound (and one connected sends without an address)', async () => {
    const sock = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve));
    const sockPort = sock.address().port;
    const peer = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => peer.bind(0, '127.0.0.1', resolve));
    const peerPort = peer.address().port;
    const peerGot: string[] = [];
    peer.on('message', (data) => peerGot.push(data.toString()));
    const connected = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => connected.connect(peerPort, '127.0.0.1', resolve));
    try {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const [transport, protocol] = yield* loop.createDatagramEndpoint(() => new Datagrams(), { sock });
          peer.send('hello', sockPort, '127.0.0.1');
          yield* until(() => protocol.received.length === 1);
          const sockname = transport.getExtraInfo('sockname');
          transport.sendto(bytes('back'), ['127.0.0.1', peerPort]);
          const [connectedTransport] = yield* loop.createDatagramEndpoint(() => new Datagrams(), { sock: connected });
          connectedTransport.sendto(bytes('connected'));
          yield* until(() => peerGot.length === 2);
          const peername = connectedTransport.getExtraInfo('peername');
          transport.close();
          connectedTransport.close();
          return { received: protocol.received, sockname, peername };
        })(),
      );
      expect(seen).toEqual({ received: [`hello from ${peerPort}`], sockname: ['127.0.0.1', sockPort], peername: ['127.0.0.1', peerPort] });
      expect(peerGot.sort()).toEqual(['back', 'connected']);
    } finally {
      peer.close();
    }
  });

  it('checks sock as asyncio does: a stream server, or addresses beside it', async () => {
    const tcp = await listening(0);
    const sock = dgram.createSocket('udp4');
    try {
      const errors = await run(
        (function* () {
          const loop = getRunningLoop();
          const stream = (yield* raisedBy(() => loop.createDatagramEndpoint(() => new Datagrams(), { sock: tcp as never }))) as Error;
          const both = (yield* raisedBy(() => loop.createDatagramEndpoint(() => new Datagrams(), { sock, localAddr: ['127.0.0.1', 0], remoteAddr: ['127.0.0.1', 9] }))) as Error;
          return [stream, both].map((error) => `${error.name}: ${error.message.replace(/got .*/, 'got …')}`);
        })(),
      );
      expect(errors).toEqual([
        'RangeError: A datagram socket was expected, got …',
        "RangeError: socket modifier keyword arguments can not be used when sock is specified. (localAddr=[ '127.0.0.1', 0 ], remoteAddr=[ '127.0.0.1', 9 ])",
      ]);
    } finally {
      tcp.close();
      sock.close();
    }
  });
});


describe('Server: startServing false, closeClients, abortClients', () => {
  it('a server made with startServing: false is bound at once (its address known) and serves only from startServing()', async () => {
    const seen = await run(
      (function* () {
        let made = 0;
        const server = yield* startServer(
          (_reader, writer) => {
            made++;
            writer.write(bytes('served\n'));
            writer.close();
          },
          '127.0.0.1',
          0,
          { startServing: false },
        );
        const address = server.address() as [string, number];
        const servingBefore = server.isServing();
        // A connection before startServing() is refused (reset at once): no handler runs for it.
        const [early] = yield* openConnection('127.0.0.1', address[1]);
        const earlyRead = yield* raisedBy(() => early.readexactly(1));
        const madeBefore = made;
        yield* server.startServing();
        const [reader, writer] = yield* openConnection('127.0.0.1', address[1]);
        const line = text(yield* reader.readline());
        writer.close();
        server.close();
        yield* server.waitClosed();
        return { host: address[0], hasPort: address[1] > 0, servingBefore, earlyRead: (earlyRead as Error).name, madeBefore, line, made };
      })(),
    );
    expect(seen).toEqual({ host: '127.0.0.1', hasPort: true, servingBefore: false, earlyRead: 'IncompleteReadError', madeBefore: 0, line: 'served\n', made: 1 });
  });

  for (const how of ['closeClients', 'abortClients'] as const) {
    it(`after close() and ${how}() waitClosed() is done within two iterations, and the client reads EOF (empty bytes)`, async () => {
      const seen = await run(
        (function* () {
          const loop = getRunningLoop();
          const accepted: string[] = [];
          const server = yield* startServer(function* (reader, writer) {
            accepted.push('in');
            try {
              yield* reader.read();
            } finally {
              writer.close();
            }
          }, '127.0.0.1', 0);
          const [, port] = server.address() as [string, number];
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          yield* until(() => accepted.length === 1);
          const closed = loop.createTask(server.waitClosed());
          yield* sleepZero();
          const doneBefore = closed.done();
          server.close();
          server[how]();
          yield* sleepZero();
          yield* sleepZero();
          const doneAfter = closed.done();
          const read = yield* reader.read();
          writer.close();
          return { doneBefore, doneAfter, read: read.length, eof: reader.atEof() };
        })(),
      );
      expect(seen).toEqual({ doneBefore: false, doneAfter: true, read: 0, eof: true });
    });
  }
});

/** One loop iteration (asyncio's `await asyncio.sleep(0)`). */
function* sleepZero(): Coroutine<void> {
  yield* sleep(0);
}

describe('StreamWriter.drain after the transport closed', () => {
  it("raises ConnectionResetError('Connection lost') once the writer is closed, as asyncio 3.13", async () => {
    const peer = await nodeServer(() => undefined);
    try {
      const error = (await run(
        (function* () {
          const [, writer] = yield* openConnection('127.0.0.1', peer.port);
          writer.write(bytes('last words'));
          writer.close();
          return yield* raisedBy(() => writer.drain());
        })(),
      )) as Error & { code?: string };
      expect({ name: error.name, message: error.message, code: error.code }).toEqual({ name: 'ConnectionResetError', message: 'Connection lost', code: 'ECONNRESET' });
    } finally {
      peer.server.close();
    }
  });
});

describe('TLS extra info', () => {
  it("getExtraInfo('cipher') is asyncio's 3-tuple and 'peercert' its getpeercert() dict; Node's objects are nodeCipher and nodePeerCertificate", async () => {
    const seen = await run(
      (function* () {
        const serverSide: Array<unknown> = [];
        const server = yield* startServer(
          function* (reader, writer) {
            serverSide.push(writer.getExtraInfo('peercert'));
            writer.write(yield* reader.readline());
            writer.close();
          },
          '127.0.0.1',
          0,
          { ssl: { key, cert } },
        );
        const [, port] = server.address() as [string, number];
        const [reader, writer] = yield* openConnection('127.0.0.1', port, { ssl: { ca: cert }, serverHostname: 'localhost' });
        writer.write(bytes('hi\n'));
        yield* reader.readline();
        const cipher = writer.getExtraInfo('cipher') as [string, string, number];
        const peercert = writer.getExtraInfo('peercert') as Record<string, unknown>;
        const nodeCipher = writer.getExtraInfo('nodeCipher') as { name: string; version: string };
        const nodeCert = writer.getExtraInfo('nodePeerCertificate') as { subject: { CN: string } };
        writer.close();
        const [, unverified] = yield* openConnection('127.0.0.1', port, { ssl: { rejectUnauthorized: false } });
        const unverifiedCert = unverified.getExtraInfo('peercert');
        unverified.close();
        server.close();
        server.closeClients();
        yield* server.waitClosed();
        return { cipher, peercert, nodeCipher, nodeCN: nodeCert.subject.CN, serverSide, unverifiedCert };
      })(),
    );
    const { cipher, peercert, nodeCipher } = seen;
    expect(cipher).toEqual([nodeCipher.name, nodeCipher.version, expect.any(Number)]);
    expect(cipher[2]).toBe(/256|CHACHA20/.test(cipher[0]) ? 256 : 128);
    // What CPython 3.13's getpeercert() gives for the same certificate (test/fixtures/tls-cert.pem).
    expect(peercert).toEqual({
      subject: [[['commonName', 'localhost']]],
      issuer: [[['commonName', 'localhost']]],
      version: 3,
      serialNumber: '26680D3BF231FCE9FD02BC26C52B4A1CAA5473A9',
      notBefore: 'Nov 24 01:29:32 2026 GMT',
      notAfter: 'Oct 31 01:29:32 2126 GMT',
      subjectAltName: [
        ['DNS', 'localhost'],
        ['IP Address', '127.0.0.1'],
      ],
    });
    expect(seen.nodeCN).toBe('localhost');
    // A server whose client sent no certificate: None in asyncio; a certificate not verified: {}.
    expect(new Set(seen.serverSide)).toEqual(new Set([null]));
    expect(seen.unverifiedCert).toEqual({});
  });

  it("'peercert' lists the certificate's CRL distribution points as getpeercert() does", async () => {
    const peercert = await run(
      (function* () {
        const server = yield* startServer(
          function* (reader, writer) {
            writer.write(yield* reader.readline());
            writer.close();
          },
          '127.0.0.1',
          0,
          { ssl: { key: crlKey, cert: crlCert } },
        );
        const [, port] = server.address() as [string, number];
        const [reader, writer] = yield* openConnection('127.0.0.1', port, { ssl: { ca: crlCert }, serverHostname: 'localhost' });
        writer.write(bytes('hi\n'));
        yield* reader.readline();
        const info = writer.getExtraInfo('peercert');
        writer.close();
        server.close();
        server.closeClients();
        yield* server.waitClosed();
        return info;
      })(),
    );
    // What CPython 3.13's getpeercert() gives for it: the URIs of each point's full name, in order;
    // the e-mail name and the point named relative to its issuer are left out.
    expect(peercert).toEqual({
      subject: [[['commonName', 'localhost']]],
      issuer: [[['commonName', 'localhost']]],
      version: 3,
      serialNumber: '661CEEE19C697BE6D82C267956249D3F896286B2',
      notBefore: 'Nov 28 17:25:41 2026 GMT',
      notAfter: 'Nov  4 17:25:41 2126 GMT',
      subjectAltName: [
        ['DNS', 'localhost'],
        ['IP Address', '127.0.0.1'],
      ],
      crlDistributionPoints: ['http://crl.example/a.crl', 'http://crl.example/b.crl', 'ldap://crl.example/cn=b'],
    });
  });

  it('reads CRL distribution points from hostile DER without throwing: cut short or damaged, it has none', () => {
    const der = new X509Certificate(crlCert).raw;
    expect(crlDistributionPoints(der)).toEqual(['http://crl.example/a.crl', 'http://crl.example/b.crl', 'ldap://crl.example/cn=b']);
    expect(crlDistributionPoints(new X509Certificate(cert).raw)).toBeNull();
    for (let length = 0; length < der.length; length++) expect(crlDistributionPoints(der.subarray(0, length))).toBeNull();
    const random = mulberry32(32);
    for (let round = 0; round < 500; round++) {
      const damaged = Buffer.from(der);
      for (let flips = 1 + Math.floor(random() * 4); flips > 0; flips--) damaged[Math.floor(random() * damaged.length)] = Math.floor(random() * 256);
      const points = crlDistributionPoints(damaged);
      expect(points === null || (Array.isArray(points) && points.every((uri) => typeof uri === 'string'))).toBe(true);
    }
    // Lengths that claim more than there is, and more than four length bytes.
    expect(crlDistributionPoints(Uint8Array.from([0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30]))).toBeNull();
    expect(crlDistributionPoints(Uint8Array.from([0x30, 0x89, 1, 1, 1, 1, 1, 1, 1, 1, 1]))).toBeNull();
  });
});
