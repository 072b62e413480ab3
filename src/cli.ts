/**
 * The `multiloop` command: `multiloop worker ...` serves a BullMQExecutor's jobs (cli-worker.ts);
 * `multiloop ps <pid>` and `multiloop pstree <pid>` print the tasks of another process on this
 * machine that runs multiloop loops (asyncio 3.14's `python -m asyncio ps/pstree`), without
 * restarting it. Each of its threads answers on an attach socket only its user can reach
 * (internal/attach/): nothing is opened in the process, and nothing is sent to it but the request.
 */
import { AttachError, snapshotOf } from './internal/attach/client.js';
import { printable } from './internal/format.js';
import { formatTable, formatTree, join } from './ps.js';

const USAGE = `usage: multiloop ps <pid> [--timeout S]      the tasks of every loop in every thread of process <pid>
       multiloop pstree <pid> [--timeout S]  the same, as a tree of who awaits whom
       multiloop worker --allow SPEC ...     serve jobs of a BullMQExecutor (multiloop worker --help)
  --timeout S  how long each thread of <pid> has to answer, in seconds (default 3); one that does
               not answer in time is listed as unresponsive, with how long its loop has been busy
Only the user running <pid> (or root) can read its tasks; nothing is opened or signalled in it.`;

/** How long each thread of the process has to answer, by default, in seconds. */
const DEFAULT_TIMEOUT = 3;

/** A failure the command reports in one line, with the exit code it ends with. */
class CommandError extends Error {
  constructor(
    message: string,
    readonly code = 1,
  ) {
    super(message);
  }
}

function parsePid(text: string | undefined): number {
  const pid = Number(text);
  if (text === undefined || !Number.isInteger(pid) || pid <= 0) throw new CommandError(`a pid is a positive integer, got ${text === undefined ? 'nothing' : JSON.stringify(text)}\n${USAGE}`, 2);
  return pid;
}

/**
 * Run the command with `argv` (without node and the script); resolves to the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await main(['pstree', '4242']);
 * ```
 */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    }
    if (command === 'worker') {
      const { workerCommand } = await import('./cli-worker.js');
      return await workerCommand(rest);
    }
    if (command === 'ps' || command === 'pstree') {
      let timeout = DEFAULT_TIMEOUT;
      const operands: string[] = [];
      for (let i = 0; i < rest.length; i++) {
        const arg = rest[i] as string;
        if (arg === '--timeout' || arg.startsWith('--timeout=')) {
          const value = arg === '--timeout' ? rest[++i] : arg.slice('--timeout='.length);
          timeout = Number(value);
          if (value === undefined || value === '' || !Number.isFinite(timeout) || timeout <= 0 || timeout > 3600) {
            throw new CommandError(`--timeout takes a number of seconds (more than 0, at most 3600), got ${JSON.stringify(value ?? '')}`, 2);
          }
        } else if (arg.startsWith('-')) throw new CommandError(`unknown option ${JSON.stringify(arg)}\n${USAGE}`, 2);
        else operands.push(arg);
      }
      if (operands.length > 1) throw new CommandError(`one pid at a time, got ${operands.length}\n${USAGE}`, 2);
      const snap = join(await snapshotOf(parsePid(operands[0]), timeout * 1000));
      console.log(command === 'ps' ? formatTable(snap) : formatTree(snap));
      return 0;
    }
    throw new CommandError(`unknown command ${JSON.stringify(command)}\n${USAGE}`, 2);
  } catch (error) {
    // Our own messages (user input in them JSON-quoted); an AttachError's may quote the target.
    if (error instanceof CommandError) {
      console.error(`multiloop: ${error.message}`);
      return error.code;
    }
    if (error instanceof AttachError) {
      console.error(`multiloop: ${printable(error.message)}`);
      return 1;
    }
    // Whatever else went wrong: one line, never a stack trace on the user's terminal.
    console.error(`multiloop: ${printable(String(error instanceof Error ? error.message : error))}`);
    return 1;
  }
}
