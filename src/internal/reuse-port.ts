/**
 * SO_REUSEPORT for servers (the `reusePort` option): whether this Node and platform have it, and
 * what a server that asks for it where they do not is told.
 *
 * Node's `net.Server.listen` takes `reusePort` from 22.12 (and 23.1 on the 23 line); older Nodes
 * ignore the option without a word. libuv sets SO_REUSEPORT only where the kernel spreads
 * connections over the sockets sharing a port (Linux, FreeBSD 12+ as SO_REUSEPORT_LB, Solaris
 * 11.4, AIX 7.2.5+) and fails the listen with ENOTSUP elsewhere (macOS, Windows, OpenBSD...),
 * where SO_REUSEPORT only lets a socket take another's port.
 */

/** The platforms (`process.platform`) whose libuv sets SO_REUSEPORT with load balancing. */
const PLATFORMS: ReadonlySet<string> = new Set(['linux', 'android', 'freebsd', 'sunos', 'aix']);

/** The errors with which a listen refuses SO_REUSEPORT it does not have. */
const REFUSALS: ReadonlySet<string> = new Set(['ENOTSUP', 'EOPNOTSUPP', 'ENOPROTOOPT']);

/** Whether Node `version` (`22.12.0`, `v24.1.0`) passes `reusePort` on to the socket. */
export function nodeHasReusePort(version: string): boolean {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/**
 * What is missing for `reusePort` on Node `version` on `platform`, as the error to throw; null
 * when nothing is. The platform goes first: a newer Node would not help there.
 */
export function reusePortMissing(version: string = process.version, platform: string = process.platform): RangeError | null {
  if (!PLATFORMS.has(platform)) {
    return new RangeError(
      `reusePort needs a platform whose SO_REUSEPORT spreads connections over the sockets sharing a port ` +
        `(Linux, FreeBSD 12+, Solaris 11.4, AIX 7.2.5+); this is ${platform}, where Node refuses it`,
    );
  }
  if (!nodeHasReusePort(version)) {
    const shown = version.startsWith('v') ? version : `v${version}`;
    return new RangeError(`reusePort needs Node 22.12 or later (23.1 or later on Node 23): net.Server.listen sets SO_REUSEPORT from there; this is Node ${shown}`);
  }
  return null;
}

/**
 * The error a listen with SO_REUSEPORT failed with, told as a missing reusePort when the kernel
 * refused the option (an older kernel than Node was built for), the OS error as its cause;
 * anything else (EADDRINUSE...) as it is.
 */
export function reusePortRefused(error: unknown, platform: string = process.platform): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !REFUSALS.has(code)) return error;
  return new RangeError(`reusePort is not supported by this ${platform} system: listen refused SO_REUSEPORT (${(error as Error).message})`, { cause: error });
}
