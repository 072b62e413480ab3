/**
 * How the PostgreSQL backend (postgres.ts) moves outcome rows so that each reaches its executor
 * once, whatever the connection does meanwhile:
 *
 * - A worker's write that fails because the connection was lost is tried again until it goes
 *   through (`retryWhileLost`): a write whose commit went through but whose reply was lost is
 *   then written twice, which the executor, settling each call once, does not mind.
 * - An executor reads its rows without deleting them, settles their calls, and deletes them by
 *   id in the statement of its next read (`OutcomeTake`): a reply lost with the connection loses
 *   no row, the rows are read again, and the rows it already applied are skipped.
 * - A read takes the rows' sizes before their data: a row larger than an entry may be
 *   (MAX_OUTCOME_BYTES) is never fetched (its first bytes name its job), and the rows of one read
 *   take about READ_BYTES at most (one row within the limit is always taken).
 */
import { MAX_OUTCOME_BYTES } from './wire.js';
import type { OutcomeSink } from './channels.js';

/** Rows taken per read at most. */
const READ_COUNT = 256;
/** Bytes of outcome data one read takes at most, unless its first row alone is larger. */
const READ_BYTES = 16 * 1024 * 1024;
/** Bytes of an oversized row fetched to find the job it names (an entry starts with its job's id). */
const HEAD_BYTES = 64;

/** SQLSTATEs of a connection that is lost or not there yet: connection exceptions, and the server shutting down or starting. */
const LOST_STATE = /^(08...|57P0[123])$/;
/** What node-postgres and node:net say when the connection is lost or refused. */
const LOST_MESSAGE = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Connection ended)/i;

/**
 * Whether `error` says the connection to PostgreSQL was lost (or could not be made), so that the
 * statement may not have run, or ran without its reply arriving.
 *
 * @example
 * ```ts
 * if (isConnectionLost(error)) retry();
 * ```
 */
export function isConnectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (LOST_STATE.test(code) || /^E[A-Z]+$/.test(code))) return true;
  return LOST_MESSAGE.test(String((error as { message?: unknown }).message));
}

/** Reconnect soon after the server comes back: 100 ms, 200 ms, ... at most 2 s apart. */
export function retryDelay(times: number): number {
  return Math.min(100 * times, 2000);
}

/**
 * Run `write` until it goes through, waiting `retryDelay` between tries while it fails because
 * the connection is lost; it fails with its error when the error is another one, or when
 * `stopped()` says to give up.
 *
 * @example
 * ```ts
 * await retryWhileLost(() => pool.query(sql, values), () => this.#closed);
 * ```
 */
export async function retryWhileLost(write: () => Promise<unknown>, stopped: () => boolean): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await write();
      return;
    } catch (error) {
      if (stopped() || !isConnectionLost(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, retryDelay(attempt)).unref());
    }
  }
}

/** A row of `multiloop_outcome` as a take returns it: `data` only when it was fetched, `head` only for a row too large. */
interface OutcomeRow {
  id: string;
  notice: string | null;
  bytes: number | null;
  data: Buffer | null;
  head: Buffer | null;
}

/**
 * The reads of one executor's outcome rows (see the file's comment): rows are applied in the
 * order they were written, each once; deleted by id in the next read's statement.
 */
export class OutcomeTake {
  readonly #sql: string;
  readonly #executorId: string;
  /** Ids of rows applied whose deletion has not been seen to commit. */
  #applied = new Set<string>();
  /** The take under way: takes run one after the other. */
  #last: Promise<unknown> = Promise.resolve();

  /** Reads the rows of executor `executorId` in `table` (schema-qualified, quoted). */
  constructor(table: string, executorId: string) {
    this.#executorId = executorId;
    // The sizes come first: octet_length reads a stored value's size without fetching it, and
    // `data` is fetched only for the rows within both limits.
    this.#sql =
      `WITH gone AS (DELETE FROM ${table} WHERE id = ANY($2::bigint[])), ` +
      `taken AS (SELECT id, notice, data, octet_length(data) AS bytes FROM ${table} WHERE executor = $1 AND id <> ALL($2::bigint[]) ORDER BY id LIMIT ${READ_COUNT}), ` +
      `sized AS (SELECT id, notice, data, bytes, sum(CASE WHEN bytes <= $3 THEN bytes ELSE 0 END) OVER (ORDER BY id) - CASE WHEN bytes <= $3 THEN bytes ELSE 0 END AS before FROM taken) ` +
      `SELECT id, notice, bytes, CASE WHEN bytes <= $3 AND before < $4 THEN data END AS data, CASE WHEN bytes > $3 THEN substring(data FROM 1 FOR ${HEAD_BYTES}) END AS head ` +
      'FROM sized ORDER BY id';
  }

  /**
   * Delete the rows applied so far, read the next rows (`query` runs a statement on the reader's
   * connection) and hand them to `sink`; how many rows it applied. Rejects, applying nothing,
   * when the statement fails: the rows stay, and the next take reads them.
   */
  take(query: <T>(sql: string, values: unknown[]) => Promise<T[]>, sink: OutcomeSink): Promise<number> {
    const taking = this.#last.then(
      () => this.#take(query, sink),
      () => this.#take(query, sink),
    );
    this.#last = taking.catch(() => undefined);
    return taking;
  }

  async #take(query: <T>(sql: string, values: unknown[]) => Promise<T[]>, sink: OutcomeSink): Promise<number> {
    const deleting = [...this.#applied];
    const rows = await query<OutcomeRow>(this.#sql, [this.#executorId, deleting, MAX_OUTCOME_BYTES, READ_BYTES]);
    for (const id of deleting) this.#applied.delete(id);
    let count = 0;
    for (const row of rows) {
      if (row.data !== null) sink.outcome(row.id, row.data);
      else if (row.notice !== null) sink.started(row.notice);
      else if (row.bytes !== null && row.bytes > MAX_OUTCOME_BYTES) sink.oversized(row.id, Number(row.bytes), row.head ?? Buffer.alloc(0));
      else if (row.bytes !== null) break; // Past this read's bytes: the next read takes it, in order.
      this.#applied.add(row.id);
      count++;
    }
    return count;
  }
}
