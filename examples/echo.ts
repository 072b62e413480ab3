/**
 * asyncio's I/O in every loop: a line-protocol server runs in a LoopThread's loop, three clients
 * talk to it concurrently from the main loop, a client that stays connected is closed by the
 * server's shutdown (`closeClients()`, as on Ctrl-C), and a subprocess's output is read line by line.
 *
 * Run: npm run example:echo
 */
import { LoopThread, PIPE, createSubprocessExec, ensureFuture, gather, openConnection, run, type Coroutine } from 'multiloop';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function* client(port: number, name: string): Coroutine<string[]> {
  const [reader, writer] = yield* openConnection('127.0.0.1', port);
  const answers: string[] = [];
  for (const command of [`UPPER hello from ${name}`, 'COUNT', 'QUIT']) {
    writer.write(encoder.encode(`${command}\n`));
    const line = decoder.decode(yield* reader.readline()).trimEnd();
    if (line !== '') answers.push(line);
  }
  writer.close();
  yield* writer.waitClosed();
  return answers;
}

function* main(): Coroutine<void> {
  const server = yield* ensureFuture(LoopThread.start(new URL('./services/line-server.js', import.meta.url), { name: 'line-server' }));
  const port = yield* server.call<number>('listen');
  console.log(`line server listening on 127.0.0.1:${port} in thread ${server.threadId}`);
  const sessions = yield* gather(['ada', 'bob', 'cy'].map((name) => client(port, name)));
  for (const answers of sessions) console.log(`  ${answers.join(' | ')}`);
  // A client that stays connected and says nothing: shutdown() closes it rather than wait for it.
  const [idleReader, idleWriter] = yield* openConnection('127.0.0.1', port);
  console.log(`server stopped after ${yield* server.call<number>('shutdown')} commands`);
  console.log(`the idle client read ${(yield* idleReader.read()).length} bytes: the server closed its connection`);
  idleWriter.close();
  yield* ensureFuture(server.close());

  // A subprocess, its output read line by line as it comes.
  const child = yield* createSubprocessExec(process.execPath, ['-e', 'for (const n of [3, 2, 1]) console.log(`countdown ${n}`)'], { stdout: PIPE });
  for (;;) {
    const line = yield* child.stdout!.readline();
    if (line.length === 0) break;
    console.log(`child says: ${decoder.decode(line).trimEnd()}`);
  }
  console.log(`child exited with ${yield* child.wait()}`);
}

await run(main());
