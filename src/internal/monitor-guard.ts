/**
 * Who the live monitor answers: requests that name it in their `Host` header (a page of another
 * site whose DNS name is rebound to this address sends its own name, and is refused), and, from
 * a browser, only its own page or the user (a fetch that a page of another origin makes is
 * refused before any snapshot is taken, though that page could not read the answer anyway).
 */
import type { IncomingMessage } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { repr } from './format.js';

/** A host name, IPv4 address or bracketed IPv6 address, and an optional port. */
const HOST = /^(\[[0-9a-f:.]+\]|[0-9a-z_.-]+)(?::(\d{1,5}))?$/i;

/** A host as a `Host` header names it: its name, lowercased (IPv6 in brackets), and its port (null: none given). */
export interface HostName {
  readonly name: string;
  readonly port: number | null;
}

/** `value` (a `Host` header, an Origin's host, an allowedHosts entry) as a HostName, or null when it is none. */
export function parseHost(value: string): HostName | null {
  const match = HOST.exec(value);
  if (match === null) return null;
  const name = (match[1] as string).toLowerCase();
  if (name.startsWith('[') && isIP(name.slice(1, -1)) !== 6) return null;
  const port = match[2] === undefined ? null : Number(match[2]);
  if (port !== null && (port < 1 || port > 65535)) return null;
  return { name, port };
}

/** How an address is written in a `Host` header and a URL: IPv6 in brackets. */
export function asHostName(address: string): string {
  return isIP(address) === 6 ? `[${address.toLowerCase()}]` : address.toLowerCase();
}

function isLoopbackOrAny(address: string): boolean {
  return address.startsWith('127.') || address === '::1' || address === '::ffff:127.0.0.1' || address === '0.0.0.0' || address === '::';
}

/** The names a monitor answers to: `name:port` pairs, and names on any port (allowedHosts without one). */
export interface Accepted {
  readonly exact: ReadonlySet<string>;
  readonly anyPort: ReadonlySet<string>;
}

/**
 * The names a monitor listening on `bound` (asked to listen on `host`) answers to: that address
 * and `host` with its port; `localhost`, `127.0.0.1` and `[::1]` with its port when it listens
 * on loopback or on every interface; and `allowed`.
 */
export function acceptedHosts(bound: AddressInfo, host: string, allowed: readonly HostName[]): Accepted {
  const exact = new Set<string>([`${asHostName(bound.address)}:${bound.port}`, `${asHostName(host)}:${bound.port}`]);
  if (isLoopbackOrAny(bound.address)) for (const name of ['localhost', '127.0.0.1', '[::1]']) exact.add(`${name}:${bound.port}`);
  const anyPort = new Set<string>();
  for (const { name, port } of allowed) {
    if (port === null) anyPort.add(name);
    else exact.add(`${name}:${port}`);
  }
  return { exact, anyPort };
}

/** Whether `value` (a `Host` header, or an Origin's host) names the monitor; no port means 80, as in HTTP. */
function answersTo(accepted: Accepted, value: string): boolean {
  const parsed = parseHost(value);
  if (parsed === null) return false;
  return accepted.anyPort.has(parsed.name) || accepted.exact.has(`${parsed.name}:${parsed.port ?? 80}`);
}

/** Why the monitor refuses `request` (the status and one line to answer), or null when it does not. */
export function refusal(request: IncomingMessage, accepted: Accepted): [status: number, reason: string] | null {
  const host = request.headers.host;
  if (host === undefined || host === '') return [421, 'refused: no Host header'];
  if (!answersTo(accepted, host)) return [421, `refused: this monitor does not answer to Host ${repr(host.slice(0, 100))} (see startMonitor's allowedHosts)`];
  // A user following a link (a navigation) may come from anywhere; a page's own fetches may not.
  const site = request.headers['sec-fetch-site'];
  if ((site === 'cross-site' || site === 'same-site') && request.headers['sec-fetch-mode'] !== 'navigate') {
    return [403, 'refused: a request made by a page of another site'];
  }
  const origin = request.headers.origin;
  if (origin !== undefined) {
    let url: URL | null;
    try {
      url = new URL(origin);
    } catch {
      url = null;
    }
    if (url === null || url.protocol !== 'http:' || !answersTo(accepted, url.host)) return [403, 'refused: a request made by a page of another origin'];
  }
  return null;
}
