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
