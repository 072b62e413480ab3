/**
 * What importing multiloop loads: the parts used by few (piscina's pools, the TypeScript hooks and
 * their compilers, the monitor's HTTP server, the distributed executor's engines) are loaded on
 * first use, in the process and in each LoopThread. What runs is the bundle (dist/lib,
 * scripts/bundle.mjs); dist/bundle-modules.json says which modules each of its files holds.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const dist = pathToFileURL(fileURLToPath(new URL('../dist/src/', import.meta.url))).href;
const lib = pathToFileURL(fileURLToPath(new URL('../dist/lib/', import.meta.url))).href;

/** Each file of the bundle: the modules it holds (`src/link.js`...), the files it imports at once. */
const bundle = JSON.parse(readFileSync(new URL('../dist/bundle-modules.json', import.meta.url), 'utf8')) as Record<string, { modules: string[]; imports: string[] }>;

/** The modules under src/ that the bundle's files among `urls` hold, relative to it (`internal/link.js`...). */
function ownFiles(urls: string[]): string[] {
  const modules = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith(lib)) continue;
    for (const module of bundle[url.slice(lib.length)]?.modules ?? []) if (module.startsWith('src/')) modules.add(module.slice('src/'.length));
  }
  return [...modules].sort();
}

/** The files of the bundle that loading `entry` loads before any import() (its static closure), as URLs. */
function loadedWith(entry: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const next of bundle[file]?.imports ?? []) visit(next);
  };
  visit(entry);
  return [...seen].map((file) => `${lib}${file}`);
}

/** Run `body` (an ES module's code) in a fresh process after a hook that records every module URL loaded; the URLs, and what `body` printed. */
function loadedBy(body: string): { urls: string[]; printed: string } {
  const hook = `data:text/javascript,${encodeURIComponent(
    'export function initialize(data) { globalThis.port = data.port; }' +
      "\nexport async function resolve(specifier, context, next) { const found = await next(specifier, context); globalThis.port?.postMessage(found.url); return found; }",
  )}`;
  const script = `
    import * as nodeModule from 'node:module';
    import { MessageChannel } from 'node:worker_threads';
    const urls = [];
    if (typeof nodeModule.registerHooks === 'function') {
      // Node 22.15+ (register() is deprecated on 26): hooks in this thread.
      nodeModule.registerHooks({ resolve(specifier, context, next) { const found = next(specifier, context); urls.push(found.url); return found; } });
    } else {
      const { port1, port2 } = new MessageChannel();
      port1.on('message', (url) => urls.push(url));
      port1.unref();
      nodeModule.register(${JSON.stringify(hook)}, { data: { port: port2 }, transferList: [port2] });
    }
    const printed = [];
    const print = (line) => printed.push(String(line));
    ${body}
    await new Promise((resolve) => setTimeout(resolve, 200));
    console.log(JSON.stringify({ urls, printed: printed.join('\\n') }));
  `;
  // A file, not --eval: the threads it starts inherit its flags, and --input-type would fail them.
  const folder = mkdtempSync(join(tmpdir(), 'multiloop-light-'));
  try {
    writeFileSync(join(folder, 'probe.mjs'), script);
    const ran = spawnSync(process.execPath, [join(folder, 'probe.mjs')], { encoding: 'utf8', timeout: 60_000 });
    expect(ran.stderr).toBe('');
    return JSON.parse(ran.stdout) as { urls: string[]; printed: string };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** Which of the lazily loaded parts `urls` and `required` (CommonJS module paths) hold. */
function lazyParts(urls: string[], required: string[]): string[] {
  const parts = new Set<string>();
  for (const file of ownFiles(urls)) {
    if (/^internal\/(ts-hooks|ts-hooks-in-thread|ts-compilers|monitor-server)\.js$/.test(file)) parts.add(file.slice(file.lastIndexOf('/') + 1));
  }
  for (const url of urls) {
    if (url === 'node:http') parts.add(url);
    if (/\/node_modules\/(bullmq|ioredis|pg|piscina)\//.test(url)) parts.add(/\/node_modules\/([^/]+)\//.exec(url)![1]!);
  }
  for (const path of required) {
    const name = /\/node_modules\/(bullmq|ioredis|pg|piscina)\//.exec(path)?.[1];
    if (name !== undefined) parts.add(name);
  }
  return [...parts].sort();
}

describe('importing multiloop', () => {
  it('loads neither piscina, nor the TypeScript hooks, nor the monitor server, nor BullMQ and its drivers; a pool loads piscina', () => {
    const { printed } = loadedBy(`
      const multiloop = await import(${JSON.stringify(`${lib}index.js`)});
      const { createRequire } = await import('node:module');
      const cache = () => Object.keys(createRequire(import.meta.url).cache);
      await new Promise((resolve) => setTimeout(resolve, 200)); // the hooks thread's reports (Node < 22.15) arrive
      print(JSON.stringify(urls));
      print(JSON.stringify(cache()));
      const executor = new multiloop.PiscinaExecutor({ maxThreads: 1 });
      print(JSON.stringify(cache()));
      await executor.shutdown();
    `);
    const [imported, before, after] = printed.split('\n').map((line) => JSON.parse(line) as string[]) as [string[], string[], string[]];
    expect(imported).toContain(`${lib}index.js`);
    expect(lazyParts(imported, before)).toEqual([]);
    expect(lazyParts([], after)).toEqual(['piscina']);
  });

  it('in a LoopThread hosting a JavaScript module: no piscina', () => {
    const { printed } = loadedBy(`
      const { LoopThread, ensureFuture, run } = await import(${JSON.stringify(`${lib}index.js`)});
      const service = ${JSON.stringify(new URL('./fixtures/light-service.mjs', import.meta.url).href)};
      print(JSON.stringify(await run((function* () {
        const thread = yield* ensureFuture(LoopThread.start(service));
        try { return yield* thread.call('required'); } finally { yield* ensureFuture(thread.close()); }
      })())));
    `);
    const required = JSON.parse(printed) as string[];
    expect(required.some((path) => path.includes('/comlink/'))).toBe(true);
    expect(lazyParts([], required)).toEqual([]);
  });
});

/** The I/O stack's modules among `files`. */
function ioModules(files: string[]): string[] {
  return files.filter((file) => /^(connections|transports|streams|pipes|subprocess|start-tls|sendfile|protocols)\.js$|^internal\/pipes\//.test(file));
}

describe('what a LoopThread carries', () => {
  it("loads the modules of a LoopThread's host without the I/O stack; a loop's first I/O call loads it and goes on", () => {
    const host = loadedWith('loop-host.js');
    const { urls, printed } = loadedBy(`
      const { newEventLoop } = await import(${JSON.stringify(`${lib}index.js`)});
      const loop = newEventLoop();
      const first = await loop.runUntilComplete(loop.getaddrinfo('127.0.0.1', 80));
      const second = await loop.runUntilComplete(loop.getaddrinfo('127.0.0.1', 81));
      loop.close();
      print(JSON.stringify([first[0][4], second[0][4]]));
    `);
    const answers = JSON.parse(printed) as unknown;
    expect(ownFiles(host)).toContain('base-events.js');
    expect(ownFiles(host)).toContain('internal/link.js');
    expect(ioModules(ownFiles(host))).toEqual([]);
    expect(answers).toEqual([
      ['127.0.0.1', 80],
      ['127.0.0.1', 81],
    ]);
    expect(ioModules(ownFiles(urls))).toEqual(expect.arrayContaining(['connections.js', 'pipes.js', 'sendfile.js', 'start-tls.js', 'transports.js']));
  });

  it('holds no character beyond Latin-1 in the JavaScript a LoopThread loads (V8 would keep such a file as two-byte source)', () => {
    const files = loadedWith('loop-host.js');
    expect(ownFiles(files).length).toBeGreaterThan(30);
    const wide = files.filter((file) => [...readFileSync(new URL(file), 'utf8')].some((char) => char.charCodeAt(0) > 0xff));
    expect(wide).toEqual([]);
  });

  it('builds the JavaScript without comments (but the bundle\'s line naming each module) and the declarations with their doc comments', () => {
    const file = Object.keys(bundle).find((name) => bundle[name]!.modules.includes('src/futures.js'));
    const code = readFileSync(new URL(file!, lib), 'utf8');
    const types = readFileSync(new URL('futures.d.ts', dist), 'utf8');
    expect(code).toContain('// dist/src/futures.js\n');
    expect(code.replace(/^\/\/ dist\/(src|workers)\/[\w/.-]+\.js$/gm, '')).not.toMatch(/\/\*\*|^\s*\/\/ /m);
    expect(types).toMatch(/\/\*\*\n \* Future: the eventual result of an operation/);
    expect(types).toContain('@example');
  });
});
