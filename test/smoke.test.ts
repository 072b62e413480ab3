import { describe, expect, it } from 'vitest';
import { newEventLoop, sleep, type Coroutine } from '../src/index.js';
import { VirtualLoop } from './helpers/virtual-loop.js';

describe('VirtualLoop', () => {
  it('jumps to the next timer instead of sleeping', async () => {
    const loop = new VirtualLoop();
    function* main(): Coroutine<number> {
      yield* sleep(3600);
      return loop.time();
    }
    await expect(loop.runUntilComplete(main())).resolves.toBe(3600);
    expect(loop.jumps).toBe(1);
    loop.close();
  });

  it('leaves a real loop on the real clock', () => {
    const loop = newEventLoop();
    expect(loop.time()).toBeGreaterThan(0);
    loop.close();
  });
});
