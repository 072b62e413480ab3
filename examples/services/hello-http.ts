/**
 * A small HTTP/1.1 server hosted by every thread of a LoopThreadPool in the reuseport example:
 * each thread listens on the same port (`reusePort`), and every answer says which thread's loop
 * served it. One request per connection (`connection: close`), so that each request is a new
 * connection for the kernel to hand to one of the threads.
 */
import { threadId } from 'node:worker_threads';
import { IncompleteReadError, LimitOverrunError, startServer, type Coroutine, type Server, type StreamReader, type StreamWriter } from 'multiloop';

const encoder = new TextEncoder();
let server: Server | null = null;
let served = 0;

function* respond(reader: StreamReader, writer: StreamWriter): Coroutine<void> {
  try {
    // The request head; its content does not matter here (a request line over 64 KiB is refused).
    yield* reader.readuntil('\r\n\r\n');
    served++;
    const body = `hello from thread ${threadId}\n`;
    writer.write(encoder.encode(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`));
    yield* writer.drain();
  } catch (error) {
    // A client that hung up before its head ended, or sent an endless one: nothing to answer.
    if (!(error instanceof IncompleteReadError || error instanceof LimitOverrunError)) throw error;
  } finally {
    writer.close();
  }
}

/** Listen on `port` of 127.0.0.1 (0: a free one) beside the other threads (reusePort); the port. */
export function* serve(port: number): Coroutine<number> {
  server ??= yield* startServer(respond, '127.0.0.1', port, { reusePort: true });
  return (server.address() as [string, number])[1];
}

/** Stop listening, end the connections still open, and wait for them; the requests served. */
export function* stop(): Coroutine<number> {
  if (server !== null) {
    server.close();
    server.closeClients();
    yield* server.waitClosed();
    server = null;
  }
  return served;
}
