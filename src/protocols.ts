/**
 * The protocol interfaces (asyncio.protocols): what a transport calls as a connection lives. A
 * protocol is subclassed and the methods it needs overridden; the loop calls them inside loop
 * iterations, in order, never re-entrantly.
 */
import type { DatagramTransport, SocketAddress, Transport } from './transports.js';

/**
 * The base class of stream protocols (asyncio.Protocol): every method here does nothing.
 *
 * @example
 * ```ts
 * class Echo extends Protocol {
 *   #transport: Transport | null = null;
 *   override connectionMade(transport: Transport): void { this.#transport = transport; }
 *   override dataReceived(data: Uint8Array): void { this.#transport!.write(data); }
 * }
 * const server = yield* loop.createServer(() => new Echo(), '127.0.0.1', 0);
 * ```
 */
export class Protocol {
  /** The connection is up; `transport` is its transport. */
  connectionMade(transport: Transport): void {
    void transport;
  }

  /** Bytes arrived. */
  dataReceived(data: Uint8Array): void {
    void data;
  }

  /** The peer sent EOF; return true to keep the transport open (half-close), else it closes. */
  eofReceived(): boolean | void {
    return undefined;
  }

  /** The connection is closed: `exc` is null on a regular close or EOF, else the error. */
  connectionLost(exc: Error | null): void {
    void exc;
  }

  /** The transport's write buffer went over its high-water mark. */
  pauseWriting(): void {
    // Nothing to do by default.
  }

  /** The transport's write buffer drained below its low-water mark. */
  resumeWriting(): void {
    // Nothing to do by default.
  }
}

/**
 * The base class of UDP protocols (asyncio.DatagramProtocol): every method here does nothing.
 *
 * @example
 * ```ts
 * class Pong extends DatagramProtocol {
 *   #transport: DatagramTransport | null = null;
 *   override connectionMade(transport: DatagramTransport): void { this.#transport = transport; }
 *   override datagramReceived(data: Uint8Array, addr: SocketAddress): void { this.#transport!.sendto(data, addr); }
 * }
 * ```
 */
export class DatagramProtocol {
  /** The endpoint is open; `transport` is its transport. */
  connectionMade(transport: DatagramTransport): void {
    void transport;
  }

  /** A datagram arrived from `addr`. */
  datagramReceived(data: Uint8Array, addr: SocketAddress): void {
    void data;
    void addr;
  }

  /** A send or receive failed (e.g. ICMP port unreachable); the endpoint stays open. */
  errorReceived(exc: Error): void {
    void exc;
  }

  /** The endpoint is closed: `exc` is null on a regular close. */
  connectionLost(exc: Error | null): void {
    void exc;
  }
}
