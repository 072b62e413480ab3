/**
 * A line-protocol server hosted by a LoopThread in the examples: each client sends commands, one
 * per line (`UPPER text`, `COUNT`, `QUIT`), and gets one line back for each.
 */
import { startServer, type Coroutine, type Server, type StreamReader, type StreamWriter } from '../../src/index.js';

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

/** Stop listening and wait until every session ended; the commands served. */
export function* shutdown(): Coroutine<number> {
  server?.close();
  if (server !== null) yield* server.waitClosed();
  return commands;
}
