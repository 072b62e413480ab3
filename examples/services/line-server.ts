/**
 * A line-protocol server hosted by a LoopThread in the examples: each client sends commands, one
 * per line (`UPPER text`, `COUNT`, `QUIT`), and gets one line back for each.
 */
import { startServer, type Coroutine, type Server, type StreamReader, type StreamWriter } from 'multiloop';

const decoder = new TextDecoder();
const encoder = new TextEncoder();
let server: Server | null = null;
let commands = 0;

function* session(reader: StreamReader, writer: StreamWriter): Coroutine<void> {
  try {
    for (;;) {
      const line = decoder.decode(yield* reader.readline()).trimEnd();
      if (line === '' || line === 'QUIT') break;
      commands++;
      const [command, ...rest] = line.split(' ');
      const answer = command === 'UPPER' ? rest.join(' ').toUpperCase() : command === 'COUNT' ? String(commands) : `unknown command ${command}`;
      writer.write(encoder.encode(`${answer}\n`));
      yield* writer.drain();
    }
  } finally {
    writer.close();
  }
}

/** Listen on a free port of 127.0.0.1, in this thread's loop; the port. */
export function* listen(): Coroutine<number> {
  server = yield* startServer(session, '127.0.0.1', 0);
  return (server.address() as [string, number])[1];
}

/**
 * Stop listening, close the connections still open, and wait until every session ended; the
 * commands served. As in asyncio 3.12+, `waitClosed()` waits for every connection: a client that
 * stays connected would keep it waiting forever, so the server closes them (asyncio 3.13's
 * `close_clients()`), and their sessions read the end of the stream and return. The same idiom
 * ends an app on Ctrl-C, in a `finally` around its serving.
 */
export function* shutdown(): Coroutine<number> {
  if (server === null) return commands;
  server.close();
  server.closeClients();
  yield* server.waitClosed();
  return commands;
}
