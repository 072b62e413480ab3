/**
 * loop.subprocessExec / subprocessShell with real children (node, cat, sh, sleep): asyncio's
 * SubprocessProtocol calls and their order, the subprocess transport's methods, signals,
 * close() killing a running child, children that cannot start, and faults: a child that dies
 * while it is being written to, and nothing left open afterwards.
 */
import { describe, expect, it } from 'vitest';
import {
  DEVNULL,
  STDOUT,
  SubprocessProtocol,
  getRunningLoop,
  run,
  sleep,
  type SubprocessTransport,
} from '../src/index.js';
import { codeOf, noteCall, settledHandles, until } from './helpers/io.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const NODE = process.execPath;

/** Records every call (data joined per fd), and marks one made outside a loop iteration. */
class Recorder extends SubprocessProtocol {
  readonly calls: string[] = [];
  readonly out: Record<number, string> = { 1: '', 2: '' };
  transport: SubprocessTransport | null = null;
  lost = false;
  override connectionMade(transport: SubprocessTransport): void {
    noteCall(this.calls, 'made');
    this.transport = transport;
  }

  override pipeDataReceived(fd: number, data: Uint8Array): void {
    if (!getRunningLoop()._inDrive()) this.calls.push('OUTSIDE AN ITERATION');
    this.out[fd] += dec.decode(data);
  }

  override pipeConnectionLost(fd: number, exc: Error | null): void {
    noteCall(this.calls, `pipeLost:${fd}:${codeOf(exc)}`);
  }

  override processExited(): void {
    noteCall(this.calls, `exited:${this.transport?.getReturncode()}`);
  }

  override connectionLost(exc: Error | null): void {
    noteCall(this.calls, `lost:${codeOf(exc)}`);
    this.lost = true;
  }
}

describe('loop.subprocessExec', () => {
  it('drives a SubprocessProtocol through cat: made first, every pipe lost, exited, then lost(null) last', async () => {
    const before = await settledHandles();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), 'cat');
        const madeWhenReturned = [...protocol.calls];
        const stdin = transport.getPipeTransport(0);
        stdin!.write(enc.encode('hello '));
        stdin!.writelines([enc.encode('cat')]);
        stdin!.close();
        yield* until(() => protocol.lost);
        const calls = protocol.calls;
        return {
          madeWhenReturned,
          first: calls[0],
          last: calls[calls.length - 1],
          middle: calls.slice(1, -1).sort(),
          out: protocol.out,
          pid: typeof transport.getPid() === 'number' && transport.getPid()! > 0,
          returncode: transport.getReturncode(),
          child: (transport.getExtraInfo('subprocess') as { pid?: number }).pid === transport.getPid(),
        };
      })(),
    );
    expect(seen).toEqual({
      madeWhenReturned: ['made'],
      first: 'made',
      last: 'lost:null',
      middle: ['exited:0', 'pipeLost:0:null', 'pipeLost:1:null', 'pipeLost:2:null'],
      out: { 1: 'hello cat', 2: '' },
      pid: true,
      returncode: 0,
      child: true,
    });
    expect(await settledHandles()).toBe(before);
  });

  it('asyncio\'s test_subprocess_protocol_events: per fd, data then pipeConnectionLost; stdin null is no pipe', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const events: string[] = [];
        class Events extends SubprocessProtocol {
          override pipeDataReceived(fd: number, data: Uint8Array): void {
            events.push(`data:${fd}:${dec.decode(data)}`);
          }

          override pipeConnectionLost(fd: number): void {
            events.push(`pipeLost:${fd}`);
          }

          override processExited(): void {
            events.push('exited');
          }

          override connectionLost(): void {
            events.push('lost');
          }
        }
        const code = 'process.stdout.write("stdout"); process.stderr.write("stderr")';
        const [transport] = yield* loop.subprocessExec(() => new Events(), NODE, '-e', code, { stdin: null });
        yield* until(() => events.includes('lost'));
        const perFd = (fd: number): string[] => events.filter((event) => event.includes(`:${fd}`));
        return { stdin: transport.getPipeTransport(0), one: perFd(1), two: perFd(2), exited: events.filter((e) => e === 'exited').length, last: events.at(-1) };
      })(),
    );
    expect(seen).toEqual({ stdin: null, one: ['data:1:stdout', 'pipeLost:1'], two: ['data:2:stderr', 'pipeLost:2'], exited: 1, last: 'lost' });
  });

  it('stderr: STDOUT reports both streams as fd 1, with one pipeConnectionLost(1); DEVNULL stdin is no pipe', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const code = 'process.stdout.write("a"); setTimeout(() => process.stderr.write("b"), 20)';
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), NODE, '-e', code, { stdin: DEVNULL, stderr: STDOUT });
        yield* until(() => protocol.lost);
        // Two pipes under it: which one's bytes come first is the poll's to say.
        const out = { 1: [...protocol.out[1]].sort().join(''), 2: protocol.out[2] };
        return { out, calls: protocol.calls.slice(1, -1).sort(), pipes: [0, 1, 2].map((fd) => transport.getPipeTransport(fd) !== null) };
      })(),
    );
    expect(seen).toEqual({ out: { 1: 'ab', 2: '' }, calls: ['exited:0', 'pipeLost:1:null'], pipes: [false, true, false] });
  });

  it('terminate(), kill() and sendSignal() reach the child; once the transport is done they raise ProcessLookupError', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const codes: Array<number | null> = [];
        for (const how of ['terminate', 'kill', 'SIGINT'] as const) {
          const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), 'sleep', '30');
          const running = transport.getReturncode();
          if (how === 'terminate') transport.terminate();
          else if (how === 'kill') transport.kill();
          else transport.sendSignal(how);
          yield* until(() => protocol.lost);
          codes.push(running, transport.getReturncode());
        }
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), 'true');
        yield* until(() => protocol.lost);
        const errors: string[] = [];
        for (const call of [() => transport.sendSignal('SIGTERM'), () => transport.terminate(), () => transport.kill()]) {
          try {
            call();
          } catch (error) {
            errors.push(`${(error as Error).name}:${(error as { code?: string }).code}`);
          }
        }
        return { codes, errors };
      })(),
    );
    expect(seen).toEqual({ codes: [null, -15, null, -9, null, -2], errors: Array(3).fill('ProcessLookupError:ESRCH') });
  });

  it('close() kills a running child and closes its pipes; isClosing() is true; connectionLost(null) follows', async () => {
    const before = await settledHandles();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), 'sleep', '30');
        transport.close();
        transport.close();
        yield* until(() => protocol.lost);
        return { closing: transport.isClosing(), returncode: transport.getReturncode(), calls: protocol.calls.slice(1, -1).sort(), last: protocol.calls.at(-1) };
      })(),
    );
    expect(seen).toEqual({ closing: true, returncode: -9, calls: ['exited:-9', 'pipeLost:0:null', 'pipeLost:1:null', 'pipeLost:2:null'], last: 'lost:null' });
    expect(await settledHandles()).toBe(before);
  });

  it('subprocessShell runs the command through sh; its exit code is the transport\'s', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport, protocol] = yield* loop.subprocessShell(() => new Recorder(), 'echo "$((6 * 7))"; echo oops >&2; exit 3');
        yield* until(() => protocol.lost);
        return { out: protocol.out, returncode: transport.getReturncode() };
      })(),
    );
    expect(seen).toEqual({ out: { 1: '42\n', 2: 'oops\n' }, returncode: 3 });
  });

  it('a program that cannot start raises the OS error, calls nothing on the protocol, and leaves nothing open', async () => {
    const before = await settledHandles();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        let protocol: Recorder | null = null;
        let error: unknown = null;
        try {
          yield* loop.subprocessExec(() => (protocol = new Recorder()), '/nonexistent/program');
        } catch (caught) {
          error = caught;
        }
        yield* sleep(0.05);
        return { code: (error as { code?: string }).code, calls: protocol!.calls };
      })(),
    );
    expect(seen).toEqual({ code: 'ENOENT', calls: [] });
    expect(await settledHandles()).toBe(before);
  });

  it('checks its arguments as asyncio does', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const errors: string[] = [];
        const attempts = [
          () => loop.subprocessShell(() => new Recorder(), 42 as unknown as string),
          () => loop.subprocessExec(() => new Recorder(), 'echo', 'a', 7 as unknown as string),
          () => loop.subprocessExec(() => new Recorder(), 'echo', { stdout: 5.5 }),
          () => loop.subprocessExec(null as unknown as () => Recorder, 'echo'),
          // The arguments as one array, where the options go: an argument, not options (it ran echo without them).
          () => loop.subprocessExec(() => new Recorder(), 'echo', ['-n', 'x'] as never),
          () => loop.subprocessExec(() => new Recorder(), 'echo', 'a', new Uint8Array([1]) as never),
          () => loop.subprocessShell(() => new Recorder(), 'echo', ['x'] as never),
        ];
        for (const attempt of attempts) {
          try {
            yield* attempt();
            errors.push('no error');
          } catch (error) {
            errors.push(`${(error as Error).name}: ${(error as Error).message}`);
          }
        }
        return errors;
      })(),
    );
    expect(seen).toEqual([
      'RangeError: cmd must be a string',
      'TypeError: subprocessExec() args[1] must be a string, got 7',
      'RangeError: stdout must be PIPE, DEVNULL, a file descriptor or null, got 5.5',
      'TypeError: subprocessExec() needs a protocol factory (a function returning a protocol), got null',
      "TypeError: subprocessExec() args[0] must be a string, got an array [ '-n', 'x' ]: give the arguments one by one after the program, subprocessExec(factory, program, ...args)",
      'TypeError: subprocessExec() args[1] must be a string, got Uint8Array(1) [ 1 ]',
      "TypeError: subprocessShell() options must be an object, got [ 'x' ]",
    ]);
  });

  it('pauses reading a child\'s stdout through getPipeTransport(1) and resumes it', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        // The last byte only once told to: it comes while the parent has paused reading.
        const code = 'process.stdout.write("x".repeat(1000)); process.stdin.once("data", () => { process.stdout.write("y"); process.exit(0) })';
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), NODE, '-e', code);
        yield* until(() => protocol.out[1].length === 1000);
        const stdout = transport.getPipeTransport(1)!;
        stdout.pauseReading();
        transport.getPipeTransport(0)!.write(enc.encode('go'));
        yield* until(() => protocol.calls.some((call) => call.startsWith('exited')));
        yield* sleep(0.02);
        const whilePaused = protocol.out[1].length;
        const lostWhilePaused = protocol.lost;
        stdout.resumeReading();
        yield* until(() => protocol.lost);
        return { whilePaused, lostWhilePaused, after: protocol.out[1].length };
      })(),
    );
    expect(seen).toEqual({ whilePaused: 1000, lostWhilePaused: false, after: 1001 });
  });
});

describe('subprocess faults', () => {
  it('a child that dies mid-write: stdin\'s pipeConnectionLost gets the error once, connectionLost(null) once, nothing open', async () => {
    const before = await settledHandles();
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        // Reads one byte, then exits: the rest of a 4 MiB write has no reader.
        const code = 'process.stdin.once("data", () => process.exit(0))';
        const [transport, protocol] = yield* loop.subprocessExec(() => new Recorder(), NODE, '-e', code, { stdout: DEVNULL, stderr: DEVNULL });
        const stdin = transport.getPipeTransport(0)!;
        for (let i = 0; i < 64; i++) stdin.write(new Uint8Array(64 * 1024));
        yield* until(() => protocol.lost);
        yield* sleep(0.02);
        stdin.write(new Uint8Array(1));
        return { calls: protocol.calls, closing: stdin.isClosing() };
      })(),
    );
    expect(seen.calls[0]).toBe('made');
    expect(seen.calls.at(-1)).toBe('lost:null');
    expect(seen.calls.slice(1, -1).sort()).toEqual(['exited:0', 'pipeLost:0:EPIPE']);
    expect(seen.closing).toBe(true);
    expect(await settledHandles()).toBe(before);
  });

  it('a child still running when its loop closes is killed and its pipes closed: nothing left open', async () => {
    const before = await settledHandles();
    const pid = await run(
      (function* () {
        const loop = getRunningLoop();
        const [transport] = yield* loop.subprocessExec(() => new Recorder(), 'sleep', '30');
        return transport.getPid()!;
      })(),
    );
    expect(await settledHandles()).toBe(before);
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch {
      alive = false;
    }
    expect(alive).toBe(false);
  });
});
