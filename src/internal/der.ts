/**
 * Reading the few parts of a peer's X.509 certificate (DER) that Node's getPeerCertificate()
 * leaves out. The bytes come from the peer: every read is bounds-checked, and anything that does
 * not parse is taken as absent, never as an error.
 */

/** One DER element: its tag byte and where its content starts and ends in the buffer. */
interface Element {
  readonly tag: number;
  readonly start: number;
  readonly end: number;
}

/** The element at `at`, which must end by `limit`; null when it does not (or uses a form X.509 never does). */
function elementAt(der: Uint8Array, at: number, limit: number): Element | null {
  if (at + 2 > limit) return null;
  const tag = der[at] as number;
  // High tag numbers (0x1f) appear nowhere in the structures read here.
  if ((tag & 0x1f) === 0x1f) return null;
  const first = der[at + 1] as number;
  let start = at + 2;
  let length = first;
  if (first >= 0x80) {
    const count = first & 0x7f;
    // Indefinite lengths are not DER; more than four length bytes exceed any buffer here.
    if (count === 0 || count > 4 || start + count > limit) return null;
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + (der[start + i] as number);
    start += count;
  }
  const end = start + length;
  return end > limit ? null : { tag, start, end };
}

/** The elements inside `parent`, in order; stops at the first that does not parse. */
function childrenOf(der: Uint8Array, parent: Element): Element[] {
  const children: Element[] = [];
  let at = parent.start;
  while (at < parent.end) {
    const child = elementAt(der, at, parent.end);
    if (child === null) break;
    children.push(child);
    at = child.end;
  }
  return children;
}

/** The DER of the OID 2.5.29.31 (id-ce-cRLDistributionPoints), after its tag and length. */
const CRL_DISTRIBUTION_POINTS = [0x55, 0x1d, 0x1f];

/** Context tags: [0] constructed (a DistributionPoint's name, its fullName), [3] (a TBSCertificate's extensions), [6] primitive (a URI GeneralName). */
const CONTEXT_0 = 0xa0;
const CONTEXT_3 = 0xa3;
const URI_NAME = 0x86;

/**
 * The URIs of the certificate's CRL distribution points (`der`: the whole certificate), as
 * Python's getpeercert() lists them under `crlDistributionPoints`: each point's full name's URIs,
 * in order (other kinds of names, and points named relative to the issuer, are skipped); null
 * when there are none, or the certificate does not parse.
 *
 * @example
 * ```ts
 * crlDistributionPoints(socket.getPeerCertificate().raw); // ['http://crl.example/ca.crl']
 * ```
 */
export function crlDistributionPoints(der: Uint8Array | undefined): string[] | null {
  if (der === undefined) return null;
  const certificate = elementAt(der, 0, der.length);
  if (certificate?.tag !== 0x30) return null;
  const tbs = childrenOf(der, certificate)[0];
  if (tbs?.tag !== 0x30) return null;
  const tagged = childrenOf(der, tbs).find((field) => field.tag === CONTEXT_3);
  const extensions = tagged === undefined ? undefined : childrenOf(der, tagged)[0];
  if (extensions?.tag !== 0x30) return null;
  for (const extension of childrenOf(der, extensions)) {
    const [oid, ...rest] = childrenOf(der, extension);
    if (oid?.tag !== 0x06 || !sameBytes(der, oid, CRL_DISTRIBUTION_POINTS)) continue;
    const value = rest.find((field) => field.tag === 0x04);
    const points = value === undefined ? null : elementAt(der, value.start, value.end);
    if (points?.tag !== 0x30) return null;
    const uris: string[] = [];
    for (const point of childrenOf(der, points)) {
      const name = childrenOf(der, point).find((field) => field.tag === CONTEXT_0);
      const fullName = name === undefined ? undefined : childrenOf(der, name)[0];
      if (fullName?.tag !== CONTEXT_0) continue;
      for (const general of childrenOf(der, fullName)) {
        if (general.tag === URI_NAME) uris.push(Buffer.from(der.subarray(general.start, general.end)).toString('utf8'));
      }
    }
    return uris.length > 0 ? uris : null;
  }
  return null;
}

function sameBytes(der: Uint8Array, element: Element, bytes: readonly number[]): boolean {
  return element.end - element.start === bytes.length && bytes.every((byte, i) => der[element.start + i] === byte);
}
