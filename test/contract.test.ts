import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as multiloop from '../src/index.js';

/**
 * The members of every class that ../shared/multiloop.d.ts (the contract, beside the repository
 * in CI and the developers' workplace) declares must exist on our runtime classes: methods on
 * the prototype or the class, fields on an instance. contract-check only checks exported names.
 */
const contractPath = fileURLToPath(new URL('../../shared/multiloop.d.ts', import.meta.url));
const exported = multiloop as unknown as Record<string, new (...args: never[]) => object>;

/** Instances of classes whose fields the contract declares, built without threads or loops running. */
function instanceOf(name: string): object | null {
  switch (name) {
    case 'IncompleteReadError':
      return new multiloop.IncompleteReadError(new Uint8Array(1), 2);
    case 'LimitOverrunError':
      return new multiloop.LimitOverrunError('over', 3);
    case 'ExceptionGroup':
      return new multiloop.ExceptionGroup('group', [new Error('x')]);
    case 'EventLoop': {
      const loop = new multiloop.EventLoop();
      loop.close();
      return loop;
    }
    case 'Barrier':
      return new multiloop.Barrier(1);
    case 'Queue':
      return new multiloop.Queue();
    case 'ContextVar':
      return new multiloop.ContextVar('v');
    default:
      return null;
  }
}

// The contract lives beside the checkout (../shared), not in the repository: a clone of its own has none.
if (!existsSync(contractPath)) console.log(`skipped: the contract tests need ${contractPath} (the shared folder beside this checkout)`);

describe.runIf(existsSync(contractPath))('the contract in shared/multiloop.d.ts', () => {
  const dts = existsSync(contractPath) ? readFileSync(contractPath, 'utf8') : '';
  const classes = [...dts.matchAll(/export class (\w+)[^{]*\{([\s\S]*?)\n {2}\}/g)];

  it('declares the classes we check (the parser still reads it)', () => {
    expect(classes.length).toBeGreaterThan(30);
  });

  it.each(classes.map(([, name, body]) => [name as string, body as string]))('%s has every declared member', (name, body) => {
    const cls = exported[name];
    expect(cls, `class ${name} is exported`).toBeTypeOf('function');
    const missing: string[] = [];
    for (const [, isStatic, key, kind] of body.matchAll(/^ {4}(static\s+)?(?:readonly\s+)?(\w+)\??(?:<[^>]*>)?([(:])/gm)) {
      if (key === 'constructor') continue;
      if (isStatic !== undefined) {
        if (!(key in cls)) missing.push(`static ${key}`);
      } else if (kind === '(') {
        if (!(key in cls.prototype)) missing.push(`${key}()`);
      } else {
        const instance = instanceOf(name);
        if (instance !== null && !(key in instance)) missing.push(key);
      }
    }
    expect(missing).toEqual([]);
  });
});

/**
 * The second round's contract (../shared/multiloop-reach.d.ts) lands part by part: each part that
 * landed is checked here, member by member, as it lands.
 */
const reachPath = fileURLToPath(new URL('../../shared/multiloop-reach.d.ts', import.meta.url));

/** Fields the reach contract declares that our classes set on each instance (checked here by name, as no instance is made without I/O). */
const FIELDS: Record<string, string[]> = {
  StreamWriter: ['transport'],
  Process: ['stdin', 'stdout', 'stderr'],
};

describe.runIf(existsSync(reachPath))('the landed parts of shared/multiloop-reach.d.ts', () => {
  const dts = existsSync(reachPath) ? readFileSync(reachPath, 'utf8') : '';
  /** The methods an `interface Name { ... }` block of the reach contract adds to a class. */
  const added = (name: string): string[] => {
    const block = new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n {2}\\}`).exec(dts)?.[1] ?? '';
    return [...block.matchAll(/^ {4}(\w+)(?:<[^>]*>)?\(/gm)].map((match) => match[1] as string);
  };

  const landed = ['StreamReader', 'StreamWriter', 'Server', 'Protocol', 'DatagramProtocol', 'Transport', 'DatagramTransport', 'Process'];
  const reachClasses = [...dts.matchAll(/export class (\w+)[^{]*\{([\s\S]*?)\n {2}\}/g)].filter(([, name]) => landed.includes(name as string));

  it('declares the I/O classes we check (the parser still reads it)', () => {
    expect(reachClasses.map(([, name]) => name).sort()).toEqual([...landed].sort());
  });

  it.each(reachClasses.map(([, name, body]) => [name as string, body as string]))('streams, transports, subprocesses: %s has every declared member', (name, body) => {
    const cls = exported[name];
    expect(cls, `class ${name} is exported`).toBeTypeOf('function');
    const missing: string[] = [];
    for (const [, key, kind] of body.matchAll(/^ {4}(?:readonly\s+)?(\w+)\??(?:<[^>]*>)?([(:])/gm)) {
      if (key === 'constructor') continue;
      // Methods and accessors live on the prototype; fields (`readonly pid: number`) are checked as names of the prototype or instance docs.
      const onPrototype = key! in cls.prototype || Object.getOwnPropertyNames(cls.prototype).includes(key!);
      if (kind === '(' && !onPrototype) missing.push(`${key}()`);
      if (kind === ':' && !onPrototype && !FIELDS[name]?.includes(key!)) missing.push(key!);
    }
    expect(missing).toEqual([]);
  });

  it('streams, transports, subprocesses: the functions, constants and EventLoop methods', () => {
    for (const name of ['openConnection', 'startServer', 'openUnixConnection', 'startUnixServer', 'createSubprocessExec', 'createSubprocessShell']) {
      expect(dts).toContain(`export function ${name}(`);
      expect(exported[name], name).toBeTypeOf('function');
    }
    expect([multiloop.PIPE, multiloop.STDOUT, multiloop.DEVNULL]).toEqual([-1, -2, -3]);
    for (const method of added('EventLoop').filter((m) => m !== 'runUntilComplete')) {
      expect(multiloop.EventLoop.prototype, method).toHaveProperty(method);
    }
  });

  it('call graphs: captureCallGraph, formatCallGraph, printCallGraph', () => {
    for (const name of ['captureCallGraph', 'formatCallGraph', 'printCallGraph']) {
      expect(dts).toContain(`export function ${name}(`);
      expect(exported[name], name).toBeTypeOf('function');
    }
  });

  it('an executor on BullMQ: BullMQExecutor (an Executor), serveBullMQ, jobSignal', () => {
    expect(dts).toContain('export class BullMQExecutor implements Executor {');
    for (const method of ['submit', 'shutdown']) expect(multiloop.BullMQExecutor.prototype, method).toHaveProperty(method);
    for (const name of ['serveBullMQ', 'jobSignal']) {
      expect(dts).toContain(`export function ${name}(`);
      expect(exported[name], name).toBeTypeOf('function');
    }
  });

  it('Promises, AbortSignal and comlink: the functions, and the methods they add to LoopThread and Runner', () => {
    for (const name of ['fromAbortable', 'wrapComlink']) {
      expect(dts).toContain(`export function ${name}<`);
      expect(exported[name], name).toBeTypeOf('function');
    }
    expect(added('LoopThread')).toEqual(['comlinkPort']);
    expect(multiloop.LoopThread.prototype.comlinkPort).toBeTypeOf('function');
    expect(added('Runner')).toEqual(['run']);
    expect(multiloop.Runner.prototype.run).toBeTypeOf('function');
  });
});
