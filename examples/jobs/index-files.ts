/**
 * A pool job that reports its progress through a callback the caller passed as
 * `Comlink.proxy(fn)`: the callback stays in the caller's thread and runs in its loop.
 */
import { createHash } from 'node:crypto';

/** Hash `count` blocks of `size` bytes, reporting after each; returns the last digest. */
export async function indexBlocks(count: number, size: number, report: (done: number, total: number) => Promise<void>): Promise<string> {
  let digest = '';
  for (let i = 1; i <= count; i++) {
    const block = Buffer.alloc(size, i);
    digest = createHash('sha256').update(block).update(digest).digest('hex');
    await report(i, count);
  }
  return digest.slice(0, 16);
}
