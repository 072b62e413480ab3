/**
 * The echo servers of the I/O bench (bench/fixtures/echo-server.ts, built into dist/) echo every
 * byte, whatever their kind: a bench row of a server that drops or mangles bytes would measure
 * nothing. Each runs in a process of its own, as the bench runs it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SERVER = fileURLToPath(new URL('../dist/bench/fixtures/echo-server.js', import.meta.url));

/** What the server of `kind` sends back for `payload`, sent in one write. */
async function echoOf(kind: string, payload: Buffer): Promise<Buffer> {
  const child = spawn(process.execPath, [SERVER, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = (await once(child.stdout, 'data')) as [Buffer];
    const socket = connect(Number(line.toString().trim()), '127.0.0.1');
    const chunks: Buffer[] = [];
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        if (received >= payload.length) resolve();
      });
      socket.write(payload);
    });
    socket.destroy();
    return Buffer.concat(chunks);
  } finally {
    child.kill();
  }
}

describe('the echo servers of the I/O bench', () => {
  for (const kind of ['raw', 'floor', 'streams', 'protocols', 'buffered']) {
    it(`${kind}: echoes 300 KiB exactly`, async () => {
      const payload = randomBytes(300 * 1024);
      const echoed = await echoOf(kind, payload);
      expect(echoed.length).toBe(payload.length);
      expect(echoed.equals(payload)).toBe(true);
    });
  }

  it('refuses a kind it does not know, naming the kinds', async () => {
    const child = spawn(process.execPath, [SERVER, 'telepathy'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect({ code, stderr: stderr.trim() }).toEqual({ code: 2, stderr: 'usage: echo-server.js raw|streams|protocols|buffered|floor, got telepathy' });
  });
});
