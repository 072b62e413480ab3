import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as exceptions from '../src/exceptions.js';
import {
  BrokenBarrierError,
  CancelledError,
  ExceptionGroup,
  IncompleteReadError,
  InvalidStateError,
  KeyboardInterrupt,
  LimitOverrunError,
  LookupError,
  QueueEmpty,
  QueueFull,
  QueueShutDown,
  RuntimeError,
  SystemExit,
  TimeoutError,
} from '../src/exceptions.js';
import { MAX_ERROR_DEPTH, decodeError, encodeError, type EncodedError } from '../src/internal/errors.js';

/** Encode, clone as postMessage would, decode. */
function roundTrip(value: unknown): unknown {
  return decodeError(structuredClone(encodeError(value)));
}

function roundTripError(error: Error): Error {
  const decoded = roundTrip(error);
  expect(decoded).toBeInstanceOf(Error);
  return decoded as Error;
}

describe('encodeError/decodeError with built-in classes', () => {
  const builtIns: Array<[string, new (message: string) => Error]> = [
    ['Error', Error],
    ['TypeError', TypeError],
    ['RangeError', RangeError],
    ['ReferenceError', ReferenceError],
    ['SyntaxError', SyntaxError],
    ['EvalError', EvalError],
    ['URIError', URIError],
  ];

  it.each(builtIns)('restores %s as itself with its message and stack', (name, cls) => {
    const error = new cls('it broke');
    const decoded = roundTripError(error);
    expect(decoded.constructor).toBe(cls);
    expect(decoded).toBeInstanceOf(cls);
    expect(decoded.name).toBe(name);
    expect(decoded.message).toBe('it broke');
    expect(decoded.stack).toBe(error.stack);
    expect(Object.hasOwn(decoded, 'name')).toBe(false);
    expect(Object.keys(decoded)).toEqual([]);
  });

  it('restores an AggregateError with its errors, each as its own class', () => {
    const error = new AggregateError([new TypeError('a'), new RuntimeError('b'), 'c'], 'several');
    const decoded = roundTripError(error) as AggregateError;
    expect(decoded.constructor).toBe(AggregateError);
    expect(decoded.message).toBe('several');
    expect(decoded.errors).toHaveLength(3);
    expect(decoded.errors[0]).toBeInstanceOf(TypeError);
    expect((decoded.errors[0] as Error).message).toBe('a');
    expect(decoded.errors[1]).toBeInstanceOf(RuntimeError);
    expect((decoded.errors[1] as Error).message).toBe('b');
    expect(decoded.errors[2]).toBe('c');
    expect(Object.getOwnPropertyDescriptor(decoded, 'errors')?.enumerable).toBe(false);
  });

  it('restores a built-in error of another realm as this realm\'s class', () => {
    const foreign = runInNewContext("const e = new URIError('far'); e.code = 'E_VM'; e") as Error;
    expect(foreign).not.toBeInstanceOf(Error);
    const decoded = roundTrip(foreign) as URIError & { code: string };
    expect(decoded.constructor).toBe(URIError);
    expect(decoded.message).toBe('far');
    expect(decoded.code).toBe('E_VM');
    expect(decoded.stack).toBe(foreign.stack);
  });

  it('keeps an empty message empty', () => {
    const decoded = roundTripError(new Error());
    expect(decoded.message).toBe('');
    expect(String(decoded)).toBe('Error');
  });
});

describe('encodeError/decodeError with library classes', () => {
  const simple: Array<[string, new (message?: string) => Error]> = [
    ['RuntimeError', RuntimeError],
    ['CancelledError', CancelledError],
    ['KeyboardInterrupt', KeyboardInterrupt],
    ['InvalidStateError', InvalidStateError],
    ['TimeoutError', TimeoutError],
    ['QueueEmpty', QueueEmpty],
    ['QueueFull', QueueFull],
    ['QueueShutDown', QueueShutDown],
    ['BrokenBarrierError', BrokenBarrierError],
    ['LookupError', LookupError],
  ];

  it.each(simple)('restores %s as itself', (name, cls) => {
    const error = new cls('state is wrong');
    const decoded = roundTripError(error);
    expect(decoded.constructor).toBe(cls);
    expect(decoded.name).toBe(name);
    expect(decoded.message).toBe('state is wrong');
    expect(decoded.stack).toBe(error.stack);
  });

  it('covers every error class exported by src/exceptions.ts', () => {
    const samples: Record<string, () => Error> = {
      RuntimeError: () => new RuntimeError('r'),
      CancelledError: () => new CancelledError('c'),
      KeyboardInterrupt: () => new KeyboardInterrupt(),
      SystemExit: () => new SystemExit(1),
      InvalidStateError: () => new InvalidStateError('i'),
      TimeoutError: () => new TimeoutError(),
      QueueEmpty: () => new QueueEmpty(),
      QueueFull: () => new QueueFull(),
      QueueShutDown: () => new QueueShutDown(),
      BrokenBarrierError: () => new BrokenBarrierError('b'),
      IncompleteReadError: () => new IncompleteReadError(new Uint8Array(0), null),
      LimitOverrunError: () => new LimitOverrunError('l', 1),
      ExceptionGroup: () => new ExceptionGroup('g', [new Error('e')]),
      LookupError: () => new LookupError('k'),
    };
    const exported = Object.entries(exceptions)
      .filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error)
      .map(([name]) => name)
      .sort();
    expect(Object.keys(samples).sort()).toEqual(exported);
    for (const [name, make] of Object.entries(samples)) {
      const decoded = roundTripError(make());
      expect(decoded.constructor).toBe(exceptions[name as keyof typeof exceptions]);
      expect(decoded.name).toBe(name);
    }
  });

  it('restores SystemExit with its code', () => {
    const decoded = roundTripError(new SystemExit(3)) as SystemExit;
    expect(decoded).toBeInstanceOf(SystemExit);
    expect(decoded.code).toBe(3);
    expect(decoded.message).toBe('exit code 3');
  });

  it('restores IncompleteReadError with its partial bytes and expected count', () => {
    const decoded = roundTripError(new IncompleteReadError(new Uint8Array([1, 2]), 4)) as IncompleteReadError;
    expect(decoded).toBeInstanceOf(IncompleteReadError);
    expect(decoded.partial).toBeInstanceOf(Uint8Array);
    expect([...decoded.partial]).toEqual([1, 2]);
    expect(decoded.expected).toBe(4);
    expect(decoded.message).toBe('2 bytes read on a total of 4 expected bytes');

    const unknownTotal = roundTripError(new IncompleteReadError(new Uint8Array([7]), null)) as IncompleteReadError;
    expect(unknownTotal.expected).toBeNull();
    expect(unknownTotal.message).toBe('1 bytes read on a total of undefined expected bytes');
  });

  it('restores LimitOverrunError with its consumed count', () => {
    const message = 'Separator is not found, and chunk exceed the limit';
    const decoded = roundTripError(new LimitOverrunError(message, 10)) as LimitOverrunError;
    expect(decoded).toBeInstanceOf(LimitOverrunError);
    expect(decoded.message).toBe(message);
    expect(decoded.consumed).toBe(10);
  });

  it('restores an ExceptionGroup with nested groups, errors and exceptions', () => {
    const inner = new ExceptionGroup('inner', [new CancelledError('c')]);
    const group = new ExceptionGroup('unhandled errors in a TaskGroup', [new RangeError('x'), inner]);
    const decoded = roundTripError(group) as ExceptionGroup;
    expect(decoded).toBeInstanceOf(ExceptionGroup);
    expect(decoded).toBeInstanceOf(AggregateError);
    expect(decoded.message).toBe('unhandled errors in a TaskGroup');
    expect(decoded.stack).toBe(group.stack);
    expect(decoded.errors).toHaveLength(2);
    expect(decoded.exceptions).toHaveLength(2);
    expect(decoded.exceptions[0]).toBe(decoded.errors[0]);
    expect(decoded.exceptions[1]).toBe(decoded.errors[1]);
    expect(Object.isFrozen(decoded.exceptions)).toBe(true);
    expect(decoded.exceptions[0]).toBeInstanceOf(RangeError);
    expect(decoded.exceptions[0]!.message).toBe('x');
    const decodedInner = decoded.exceptions[1] as ExceptionGroup;
    expect(decodedInner).toBeInstanceOf(ExceptionGroup);
    expect(decodedInner.message).toBe('inner');
    expect(decodedInner.exceptions).toHaveLength(1);
    expect(decodedInner.exceptions[0]).toBeInstanceOf(CancelledError);
    expect(decodedInner.exceptions[0]!.message).toBe('c');
  });
});

describe('encodeError/decodeError with causes', () => {
  it('keeps the cause chain, each cause as its own class', () => {
    const error = new RuntimeError('outer', { cause: new TypeError('inner', { cause: 'root reason' }) });
    const decoded = roundTripError(error);
    expect(decoded).toBeInstanceOf(RuntimeError);
    const cause = decoded.cause as Error;
    expect(cause).toBeInstanceOf(TypeError);
    expect(cause.message).toBe('inner');
    expect(cause.stack).toBe((error.cause as Error).stack);
    expect(cause.cause).toBe('root reason');
    expect(Object.getOwnPropertyDescriptor(decoded, 'cause')?.enumerable).toBe(false);
  });

  it('keeps a TimeoutError caused by a CancelledError', () => {
    const error = new TimeoutError('', { cause: new CancelledError('') });
    const decoded = roundTripError(error);
    expect(decoded).toBeInstanceOf(TimeoutError);
    expect(decoded.cause).toBeInstanceOf(CancelledError);
  });

  it('tells an absent cause from an undefined one', () => {
    expect(Object.hasOwn(roundTripError(new Error('no cause')), 'cause')).toBe(false);
    const decoded = roundTripError(new Error('undefined cause', { cause: undefined }));
    expect(Object.hasOwn(decoded, 'cause')).toBe(true);
    expect(decoded.cause).toBeUndefined();
  });

  it('restores an error that is its own cause', () => {
    const error = new RuntimeError('loop');
    error.cause = error;
    const decoded = roundTripError(error);
    expect(decoded.cause).toBe(decoded);
  });

  it('restores a cause cycle through two errors', () => {
    const a = new RangeError('a');
    const b = new QueueFull('b', { cause: a });
    a.cause = b;
    const decoded = roundTripError(a);
    const decodedB = decoded.cause as Error;
    expect(decodedB).toBeInstanceOf(QueueFull);
    expect(decodedB.cause).toBe(decoded);
  });

  it('restores a group member that is the group itself', () => {
    const member = new Error('member');
    const group = new ExceptionGroup('self', [member]);
    (group.errors as unknown[]).push(group);
    const decoded = roundTripError(group) as ExceptionGroup;
    expect(decoded.errors[1]).toBe(decoded);
    expect((decoded.errors[0] as Error).message).toBe('member');
  });

  it('restores one error shared by two places as one object', () => {
    const shared = new InvalidStateError('shared');
    const group = new ExceptionGroup('twice', [shared, new RuntimeError('other', { cause: shared })]);
    const decoded = roundTripError(group) as ExceptionGroup;
    expect(decoded.exceptions[0]).toBeInstanceOf(InvalidStateError);
    expect(decoded.exceptions[1]!.cause).toBe(decoded.exceptions[0]);
  });

  it(`keeps ${MAX_ERROR_DEPTH} levels of causes and drops deeper ones`, () => {
    let error = new Error('level 11');
    for (let level = 10; level >= 0; level--) error = new Error(`level ${level}`, { cause: error });
    const messages: string[] = [];
    let current: unknown = roundTrip(error);
    while (current instanceof Error) {
      messages.push(current.message);
      if (!Object.hasOwn(current, 'cause')) break;
      current = current.cause;
    }
    expect(messages).toEqual(Array.from({ length: MAX_ERROR_DEPTH + 1 }, (_, level) => `level ${level}`));
  });

  it('keeps the plain properties of an error at the depth limit', () => {
    let error = new Error('deepest kept');
    (error as Error & { code: string }).code = 'E_DEEP';
    error.cause = new Error('dropped');
    for (let level = 0; level < MAX_ERROR_DEPTH; level++) error = new Error('above', { cause: error });
    let current = roundTripError(error);
    for (let level = 0; level < MAX_ERROR_DEPTH; level++) current = current.cause as Error;
    expect(current.message).toBe('deepest kept');
    expect((current as Error & { code: string }).code).toBe('E_DEEP');
    expect(Object.hasOwn(current, 'cause')).toBe(false);
  });
});

describe('encodeError/decodeError with own properties', () => {
  it('keeps cloneable own enumerable properties and describes the others', () => {
    const error = Object.assign(new RangeError('bad'), {
      code: 'E_BAD',
      details: { limits: [1, 2], when: new Date(0) },
      callback: () => 1,
      tag: Symbol('tag'),
      registry: new WeakMap(),
      withMethod: { run() {} },
    });
    Object.defineProperty(error, 'hidden', { value: 'not enumerable', enumerable: false });
    const decoded = roundTripError(error) as RangeError & Record<string, unknown>;
    expect(decoded).toBeInstanceOf(RangeError);
    expect(decoded.code).toBe('E_BAD');
    expect(decoded.details).toEqual({ limits: [1, 2], when: new Date(0) });
    expect(decoded.callback).toBe('[uncloneable function]');
    expect(decoded.tag).toBe('[uncloneable symbol]');
    expect(decoded.registry).toBe('[uncloneable WeakMap]');
    expect(decoded.withMethod).toBe('[uncloneable Object]');
    expect(Object.hasOwn(decoded, 'hidden')).toBe(false);
    expect(Object.keys(decoded)).toEqual(['code', 'details', 'callback', 'tag', 'registry', 'withMethod']);
  });

  it('describes a property whose getter throws', () => {
    const error = new Error('getter');
    Object.defineProperty(error, 'broken', {
      enumerable: true,
      get() {
        throw new Error('no');
      },
    });
    expect((roundTripError(error) as Error & { broken: unknown }).broken).toBe('[unreadable broken]');
  });

  it('restores an error-valued property as its own class', () => {
    const error = Object.assign(new Error('wrapper'), { original: new QueueEmpty('empty') });
    const decoded = roundTripError(error) as Error & { original: Error };
    expect(decoded.original).toBeInstanceOf(QueueEmpty);
    expect(decoded.original.message).toBe('empty');
  });

  it('keeps a stack that was not a string as no stack', () => {
    const error = new Error('no stack');
    (error as { stack: unknown }).stack = 42;
    expect(roundTripError(error).stack).toBeUndefined();
  });

  it('keeps a message edited after construction', () => {
    const error = new SystemExit(2);
    error.message = 'bye';
    const decoded = roundTripError(error) as SystemExit;
    expect(decoded.message).toBe('bye');
    expect(decoded.code).toBe(2);
  });
});

describe('encodeError/decodeError with unknown classes', () => {
  class RetryableError extends Error {
    readonly attempts: number;
    constructor(message: string, attempts: number) {
      super(message);
      this.name = 'RetryableError';
      this.attempts = attempts;
    }
  }

  it('restores an unknown Error subclass as an Error keeping its name and properties', () => {
    const error = new RetryableError('try again', 3);
    const decoded = roundTripError(error);
    expect(decoded.constructor).toBe(Error);
    expect(decoded.name).toBe('RetryableError');
    expect(decoded.message).toBe('try again');
    expect((decoded as RetryableError).attempts).toBe(3);
    expect(decoded.stack).toBe(error.stack);
    expect(String(decoded)).toBe('RetryableError: try again');
  });

  it('restores a subclass of a known class as that known class', () => {
    class DatabaseTimeout extends TimeoutError {
      constructor() {
        super('db did not answer');
        this.name = 'DatabaseTimeout';
      }
    }
    class NativeLike extends TypeError {}
    const decoded = roundTripError(new DatabaseTimeout());
    expect(decoded.constructor).toBe(TimeoutError);
    expect(decoded.name).toBe('DatabaseTimeout');
    expect(decoded.message).toBe('db did not answer');
    expect(roundTripError(new NativeLike('n')).constructor).toBe(TypeError);
  });

  it('keeps the errors of an unknown AggregateError subclass', () => {
    class BatchError extends AggregateError {
      constructor(errors: Error[]) {
        super(errors, 'batch failed');
        this.name = 'BatchError';
      }
    }
    const decoded = roundTripError(new BatchError([new QueueShutDown('closed')])) as AggregateError;
    expect(decoded.constructor).toBe(AggregateError);
    expect(decoded.name).toBe('BatchError');
    expect(decoded.errors[0]).toBeInstanceOf(QueueShutDown);
  });
});

describe('encodeError/decodeError with thrown non-errors', () => {
  it.each([['a string', 'boom'], ['a number', 42], ['null', null], ['undefined', undefined], ['a boolean', false]])(
    'returns %s as itself',
    (_label, value) => {
      expect(roundTrip(value)).toBe(value);
    },
  );

  it('returns a cloneable object as a copy', () => {
    const thrown = { code: 7, reasons: ['a', 'b'] };
    const decoded = roundTrip(thrown);
    expect(decoded).toEqual(thrown);
    expect(decoded).not.toBe(thrown);
  });

  it('returns a description of what cannot be cloned', () => {
    expect(roundTrip(() => 1)).toBe('[uncloneable function]');
    expect(roundTrip(Symbol('s'))).toBe('[uncloneable symbol]');
    expect(roundTrip({ run() {} })).toBe('[uncloneable Object]');
  });

  it('describes a value it cannot even inspect instead of throwing', () => {
    const hostile = new Proxy(new Error('x'), {
      getPrototypeOf() {
        throw new Error('trap');
      },
    });
    expect(roundTrip(hostile)).toBe('[unencodable error]');
  });

  it('encodes into plain data that structuredClone copies unchanged', () => {
    const encoded = encodeError(new RuntimeError('x', { cause: new TypeError('y') }));
    expect(structuredClone(encoded)).toEqual(encoded);
    expect(encoded).toMatchObject({ kind: 'error', base: 'RuntimeError', name: 'RuntimeError', message: 'x' });
  });
});

describe('encodeError/decodeError across a worker thread', () => {
  let worker: Worker;
  let nextId = 0;
  const pending = new Map<number, (reply: Reply) => void>();

  interface Report {
    ctor?: string;
    isLibraryClass?: boolean;
    isBuiltInClass?: boolean;
    name?: string;
    message?: string;
    stack?: string;
    props?: Record<string, unknown>;
    cause?: Report;
  }
  interface Reply {
    encoded: EncodedError;
    report?: Report;
  }

  function ask(message: { op: 'make'; which: string } | { op: 'inspect'; encoded: EncodedError }): Promise<Reply> {
    const id = nextId++;
    return new Promise((resolve) => {
      pending.set(id, resolve);
      worker.postMessage({ id, ...message });
    });
  }

  beforeAll(() => {
    worker = new Worker(new URL('./fixtures/xthread-errors.mjs', import.meta.url));
    worker.on('message', (reply: Reply & { id: number }) => {
      pending.get(reply.id)?.(reply);
      pending.delete(reply.id);
    });
  });

  afterAll(async () => {
    await worker.terminate();
  });

  it('rebuilds a library error thrown in a worker as the same class with props, cause and stack', async () => {
    const decoded = decodeError((await ask({ op: 'make', which: 'runtime' })).encoded) as RuntimeError &
      Record<string, unknown>;
    expect(decoded).toBeInstanceOf(RuntimeError);
    expect(decoded.constructor).toBe(RuntimeError);
    expect(decoded.message).toBe('worker failed');
    expect(decoded.code).toBe('E_WORKER');
    expect(decoded.attempts).toEqual([1, 2]);
    expect(decoded.callback).toBe('[uncloneable function]');
    expect(decoded.stack).toMatch(/^RuntimeError: worker failed\n\s+at make \(.*xthread-errors\.mjs/);
    const cause = decoded.cause as TypeError & { field: string };
    expect(cause).toBeInstanceOf(TypeError);
    expect(cause.message).toBe('bad input');
    expect(cause.field).toBe('size');
    expect(cause.stack).toContain('xthread-errors.mjs');
  });

  it('rebuilds an ExceptionGroup from a worker with its members as their classes', async () => {
    const decoded = decodeError((await ask({ op: 'make', which: 'group' })).encoded) as ExceptionGroup;
    expect(decoded).toBeInstanceOf(ExceptionGroup);
    const [read, overrun, exit] = decoded.exceptions as [IncompleteReadError, LimitOverrunError, SystemExit];
    expect(read).toBeInstanceOf(IncompleteReadError);
    expect([...read.partial]).toEqual([1, 2]);
    expect(read.expected).toBe(4);
    expect(overrun).toBeInstanceOf(LimitOverrunError);
    expect(overrun.consumed).toBe(10);
    expect(exit).toBeInstanceOf(SystemExit);
    expect(exit.code).toBe(7);
  });

  it('rebuilds an unknown class and a thrown string from a worker', async () => {
    const custom = decodeError((await ask({ op: 'make', which: 'custom' })).encoded) as Error & { attempts: number };
    expect(custom.constructor).toBe(Error);
    expect(custom.name).toBe('RetryableError');
    expect(custom.attempts).toBe(3);
    expect(decodeError((await ask({ op: 'make', which: 'string' })).encoded)).toBe('plain failure');
  });

  it('sends an error to a worker, where it is the worker\'s library class, and back unchanged', async () => {
    const error = Object.assign(new CancelledError('stop', { cause: new QueueFull('full') }), { step: 4 });
    const reply = await ask({ op: 'inspect', encoded: encodeError(error) });
    expect(reply.report).toEqual({
      ctor: 'CancelledError',
      isLibraryClass: true,
      isBuiltInClass: false,
      name: 'CancelledError',
      message: 'stop',
      stack: error.stack,
      props: { name: 'CancelledError', step: 4 },
      cause: {
        ctor: 'QueueFull',
        isLibraryClass: true,
        isBuiltInClass: false,
        name: 'QueueFull',
        message: 'full',
        stack: (error.cause as Error).stack,
        props: { name: 'QueueFull' },
        cause: undefined,
      },
    });
    const back = decodeError(reply.encoded) as CancelledError & { step: number };
    expect(back).toBeInstanceOf(CancelledError);
    expect(back.stack).toBe(error.stack);
    expect(back.step).toBe(4);
    expect(back.cause).toBeInstanceOf(QueueFull);
  });
});
