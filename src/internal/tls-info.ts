/**
 * What a TLS transport's `getExtraInfo('cipher')` and `getExtraInfo('peercert')` return, in
 * asyncio's shapes (ssl.SSLSocket's `cipher()` and `getpeercert()`), made from Node's
 * `getCipher()` and `getPeerCertificate()` (and the certificate's DER for what Node leaves out).
 */
import type { DetailedPeerCertificate, PeerCertificate, TLSSocket } from 'node:tls';
import { crlDistributionPoints } from './der.js';

/** asyncio's `cipher` extra: (name, protocol version, secret bits). */
export type CipherInfo = [name: string, version: string, secretBits: number | null];

/** One relative distinguished name: its attributes as [long name, value] pairs. */
export type NameEntry = Array<[attribute: string, value: string]>;

/** asyncio's `peercert` extra (ssl.SSLSocket.getpeercert()), the fields Node knows. */
export interface PeerCertInfo {
  subject?: NameEntry[];
  issuer?: NameEntry[];
  version?: number;
  serialNumber?: string;
  notBefore?: string;
  notAfter?: string;
  subjectAltName?: Array<[kind: string, value: string]>;
  OCSP?: string[];
  caIssuers?: string[];
  crlDistributionPoints?: string[];
}

/** OpenSSL's long names of the attributes Node gives by their short names (what getpeercert() prints). */
const LONG_NAMES: Readonly<Record<string, string>> = {
  C: 'countryName',
  ST: 'stateOrProvinceName',
  L: 'localityName',
  O: 'organizationName',
  OU: 'organizationalUnitName',
  CN: 'commonName',
  DC: 'domainComponent',
  UID: 'userId',
  SN: 'surname',
  GN: 'givenName',
  emailAddress: 'emailAddress',
  serialNumber: 'serialNumber',
  title: 'title',
  street: 'streetAddress',
  postalCode: 'postalCode',
};

/** The key sizes of the bulk ciphers, as OpenSSL counts a cipher suite's secret bits. */
const SECRET_BITS: ReadonlyArray<[RegExp, number]> = [
  [/CHACHA20/, 256],
  [/AES_?256|AES256|CAMELLIA_?256|CAMELLIA256|ARIA_?256|ARIA256/, 256],
  [/AES_?128|AES128|CAMELLIA_?128|CAMELLIA128|ARIA_?128|ARIA128|SM4/, 128],
  [/3DES|DES-CBC3|DES_EDE/, 112],
];

/** `getExtraInfo('cipher')` of a TLS socket: asyncio's 3-tuple, or null before the handshake. */
export function cipherInfo(socket: TLSSocket): CipherInfo | null {
  const cipher = socket.getCipher() as { name?: string; version?: string } | undefined;
  if (cipher === undefined || typeof cipher.name !== 'string') return null;
  const found = SECRET_BITS.find(([pattern]) => pattern.test(cipher.name as string));
  return [cipher.name, cipher.version ?? '', found === undefined ? null : found[1]];
}

/**
 * `getExtraInfo('peercert')` of a TLS socket as getpeercert() gives it: null when the peer sent
 * no certificate, `{}` when it was not verified (Python's CERT_NONE), else its fields.
 */
export function peerCertInfo(socket: TLSSocket): PeerCertInfo | null {
  const cert = socket.getPeerCertificate(true) as DetailedPeerCertificate | Record<string, never>;
  if (cert === null || Object.keys(cert).length === 0) return null;
  if (!socket.authorized) return {};
  const peer = cert as DetailedPeerCertificate;
  const info: PeerCertInfo = {
    subject: nameEntries(peer.subject),
    issuer: nameEntries(peer.issuer),
  };
  const version = certificateVersion(peer.raw);
  if (version !== null) info.version = version;
  info.serialNumber = peer.serialNumber.toUpperCase();
  info.notBefore = peer.valid_from;
  info.notAfter = peer.valid_to;
  if (typeof peer.subjectaltname === 'string' && peer.subjectaltname !== '') info.subjectAltName = altNames(peer.subjectaltname);
  const access = peer.infoAccess as Record<string, string[]> | undefined;
  if (access?.['OCSP - URI'] !== undefined) info.OCSP = [...access['OCSP - URI']];
  if (access?.['CA Issuers - URI'] !== undefined) info.caIssuers = [...access['CA Issuers - URI']];
  const crl = crlDistributionPoints(peer.raw);
  if (crl !== null) info.crlDistributionPoints = crl;
  return info;
}

/** Node's `{ CN: 'x', O: ['a', 'b'] }` as getpeercert()'s `((('commonName', 'x'),), ...)`. */
function nameEntries(name: PeerCertificate['subject'] | undefined): NameEntry[] {
  if (name === undefined || name === null) return [];
  const entries: NameEntry[] = [];
  for (const [short, value] of Object.entries(name as unknown as Record<string, string | string[]>)) {
    const long = LONG_NAMES[short] ?? short;
    for (const one of Array.isArray(value) ? value : [value]) entries.push([[long, one]]);
  }
  return entries;
}

/** Node's `'DNS:a, IP Address:127.0.0.1'` as getpeercert()'s `(('DNS', 'a'), ('IP Address', '127.0.0.1'))`. */
function altNames(text: string): Array<[string, string]> {
  const names: Array<[string, string]> = [];
  for (const part of text.split(', ')) {
    const colon = part.indexOf(':');
    if (colon !== -1) names.push([part.slice(0, colon), part.slice(colon + 1)]);
  }
  return names;
}

/**
 * The X.509 version (1 to 3) from the certificate's DER: a TBSCertificate starts with its
 * `[0] EXPLICIT INTEGER` version, absent for version 1. Null when the DER cannot be read.
 */
function certificateVersion(der: Buffer | undefined): number | null {
  if (der === undefined) return null;
  // Skip a tag and its length: the index of the content.
  const content = (at: number): number => {
    const first = der[at + 1];
    if (first === undefined) return -1;
    return first < 0x80 ? at + 2 : at + 2 + (first & 0x7f);
  };
  const tbs = content(0);
  if (tbs < 0 || der[tbs] !== 0x30) return null;
  const field = content(tbs);
  if (field < 0) return null;
  if (der[field] !== 0xa0) return 1;
  const integer = content(field);
  if (integer < 0 || der[integer] !== 0x02) return null;
  const value = der[content(integer)];
  return value === undefined ? null : value + 1;
}
