/**
 * A real headless Chromium (Debian's `chromium`) driven through the DevTools protocol over its
 * debugging pipe (fds 3 and 4): open a page, evaluate in it, wait for what it shows. No browser
 * library and no download: the one on the machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

type Reply = { result?: Record<string, unknown>; error?: { message: string } };

/** A headless Chromium and its DevTools connection. */
export class Browser {
  readonly #child: ChildProcess;
  readonly #input: Writable;
  readonly #profile: string;
  #nextId = 0;
  readonly #waiting = new Map<number, (reply: Reply) => void>();
  #buffer = '';

  private constructor(child: ChildProcess, profile: string) {
    this.#child = child;
    this.#profile = profile;
    this.#input = child.stdio[3] as Writable;
    (child.stdio[4] as Readable).on('data', (chunk: Buffer) => this.#read(chunk));
    child.once('exit', () => {
      for (const reply of this.#waiting.values()) reply({ error: { message: 'chromium exited' } });
      this.#waiting.clear();
    });
  }

  /** Start `chromium` headless, with nothing of its own reaching the network; `args`: more switches (`--host-resolver-rules=...`). */
  static launch(args: readonly string[] = []): Browser {
    const profile = mkdtempSync(join(tmpdir(), 'multiloop-chromium-'));
    const child = spawn(
      'chromium',
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-extensions',
        `--user-data-dir=${profile}`,
        ...args,
        '--remote-debugging-pipe',
        'about:blank',
      ],
      { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] },
    );
    return new Browser(child, profile);
  }

  #read(chunk: Buffer): void {
    this.#buffer += chunk.toString('utf8');
    for (let end = this.#buffer.indexOf('\0'); end >= 0; end = this.#buffer.indexOf('\0')) {
      const message = JSON.parse(this.#buffer.slice(0, end)) as Reply & { id?: number };
      this.#buffer = this.#buffer.slice(end + 1);
      if (message.id !== undefined) {
        this.#waiting.get(message.id)?.(message);
        this.#waiting.delete(message.id);
      }
    }
  }

  /** Send one DevTools command (to a page's session when given); its result. */
  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, (reply) => (reply.error !== undefined ? reject(new Error(`${method}: ${reply.error.message}`)) : resolve(reply.result ?? {})));
      this.#input.write(`${JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) })}\0`);
    });
  }

  /** Open `url` in a new page. */
  async open(url: string): Promise<Page> {
    const { targetId } = (await this.send('Target.createTarget', { url })) as { targetId: string };
    const { sessionId } = (await this.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    return new Page(this, sessionId);
  }

  /** Quit and remove the profile. */
  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => (this.#child.exitCode !== null ? resolve() : this.#child.once('exit', () => resolve())));
    await this.send('Browser.close').catch(() => undefined);
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    rmSync(this.#profile, { recursive: true, force: true });
  }
}

/** A page of the browser. */
export class Page {
  readonly #browser: Browser;
  readonly #session: string;

  constructor(browser: Browser, session: string) {
    this.#browser = browser;
    this.#session = session;
  }

  /** Evaluate `expression` in the page; its value. */
  async evaluate(expression: string): Promise<unknown> {
    const reply = (await this.#browser.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, this.#session)) as {
      result?: { value?: unknown };
      exceptionDetails?: { text?: string };
    };
    if (reply.exceptionDetails !== undefined) throw new Error(`in the page: ${reply.exceptionDetails.text ?? 'an exception'}`);
    return reply.result?.value;
  }

  /** Wait until `expression` is truthy in the page (checked every 50 ms, for at most `seconds`); false when it never was. */
  async waitFor(expression: string, seconds = 10): Promise<boolean> {
    for (let i = 0; i < seconds * 20; i++) {
      if ((await this.evaluate(expression).catch(() => false)) === true) return true;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return false;
  }
}
