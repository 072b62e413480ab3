/**
 * Connection strings as messages and logs may show them: never with their credentials, even when
 * the string does not parse as a URL (a password holding an unencoded '/', '?', '#' or '@', a URL
 * missing its host) or parses as a different one than its writer meant.
 */

/** Query parameters whose values may be secrets (`?password=...`, `sslpassword`, `sslkey`, tokens). */
const SECRET_PARAMETER = /(?:^|[?&])[^=&]*(?:pass|pwd|secret|token|key|cred|auth)[^=&]*=/i;

/**
 * `text` (a connection URL, or what was meant as one) without anything that may be a credential:
 * what comes before the last '@' (a password may hold '/', '?', '#' or '@' itself) becomes `***`;
 * without an '@', a ':' after the host followed by something other than a port number starts what
 * becomes `***` (a `user:password` whose host is missing); a query naming a secret becomes `?***`.
 *
 * @example
 * ```ts
 * redactConnection('postgres://app:pa/ss@db.local/jobs'); // 'postgres://***@db.local/jobs'
 * redactConnection('redis://app:hunter2');                // 'redis://app:***'
 * ```
 */
export function redactConnection(text: string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(text)?.[0] ?? '';
  let rest = text.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  if (at !== -1) rest = `***@${rest.slice(at + 1)}`;
  else {
    const end = rest.search(/[/?#]/);
    const authority = end === -1 ? rest : rest.slice(0, end);
    const hostEnd = authority.startsWith('[') ? authority.indexOf(']') + 1 : 0;
    const colon = authority.indexOf(':', hostEnd);
    if (colon !== -1 && !/^\d*$/.test(authority.slice(colon + 1))) return `${scheme}${authority.slice(0, colon)}:***`;
  }
  const query = rest.indexOf('?', at === -1 ? 0 : 4);
  if (query !== -1 && SECRET_PARAMETER.test(rest.slice(query))) rest = `${rest.slice(0, query)}?***`;
  return `${scheme}${rest}`;
}

/**
 * Whether the URL `url` parsed from a connection string has an '@' after its host: its user name
 * or password held a '/', '?' or '#' that was not percent-encoded, which ended the host early (the
 * URL names another host, and its path, query or fragment holds part of the password).
 *
 * @example
 * ```ts
 * credentialsCutShort(new URL('redis://app:123/x@db.local')); // true: host 'app', port 123
 * ```
 */
export function credentialsCutShort(url: URL): boolean {
  return `${url.pathname}${url.search}${url.hash}`.includes('@');
}
