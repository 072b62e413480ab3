/**
 * The live monitor's server (see monitor.ts, `startMonitor`): options checked, the HTTP server,
 * its page and script. Loaded when a monitor is first started.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { YieldablePromise } from '../coroutines.js';
import type { Monitor, MonitorOptions, MonitorStatistics } from '../monitor.js';
import { repr } from './format.js';
import { yieldable } from './yieldable.js';
import { acceptedHosts, asHostName, parseHost, refusal, type Accepted } from './monitor-guard.js';
import { IDLE_TIMEOUT, MAX_CONNECTIONS, limitConnections, requestLimits, type ConnectionLimits } from './monitor-limits.js';
import { Snapshots, send, takesGzip } from './monitor-snapshots.js';

/** How long each thread has to answer the page's snapshot, in seconds, by default. */
const SNAPSHOT_TIMEOUT = 0.5;

/** The least time between two snapshots, in seconds, by default: the page refreshes once a second. */
const MIN_INTERVAL = 1;

const TEXT = 'text/plain; charset=utf-8';

/** Check `options`, then serve the monitor (what `startMonitor` does). */
export async function startServing(options: MonitorOptions): Promise<Monitor> {
  if (options === null || typeof options !== 'object') throw new TypeError(`startMonitor() options must be an object, got ${repr(options)}`);
  const { port, host = '127.0.0.1', allowedHosts = [], minInterval = MIN_INTERVAL, timeout = SNAPSHOT_TIMEOUT, idleTimeout = IDLE_TIMEOUT, maxConnections = MAX_CONNECTIONS } = options;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`startMonitor() port must be an integer from 0 to 65535, got ${repr(port)}`);
  if (typeof host !== 'string' || host === '') throw new TypeError(`startMonitor() host must be a non-empty string, got ${repr(host)}`);
  if (!Array.isArray(allowedHosts)) throw new TypeError(`startMonitor() allowedHosts must be an array of host names ('name' or 'name:port'), got ${repr(allowedHosts)}`);
  const allowed = allowedHosts.map((entry: unknown, i) => {
    const parsed = typeof entry === 'string' ? parseHost(entry) : null;
    if (parsed === null) throw new TypeError(`startMonitor() allowedHosts[${i}] must be a host name, or a host name and port ('name' or 'name:port'), got ${repr(entry)}`);
    return parsed;
  });
  if (typeof minInterval !== 'number' || !(minInterval >= 0) || !Number.isFinite(minInterval)) {
    throw new RangeError(`startMonitor() minInterval must be a number of seconds, 0 or more, got ${repr(minInterval)}`);
  }
  if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
    throw new RangeError(`startMonitor() timeout must be a positive number of seconds, got ${repr(timeout)}`);
  }
  if (typeof idleTimeout !== 'number' || !(idleTimeout > 0) || !Number.isFinite(idleTimeout)) {
    throw new RangeError(`startMonitor() idleTimeout must be a positive number of seconds, got ${repr(idleTimeout)}`);
  }
  if (!Number.isInteger(maxConnections) || maxConnections < 1) throw new RangeError(`startMonitor() maxConnections must be a positive integer, got ${repr(maxConnections)}`);
  const snapshots = new Snapshots(minInterval, timeout);
  let limits: ConnectionLimits | null = null;
  let requests = 0;
  let refused = 0;
  let accepted: Accepted | null = null;

  const serve = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    requests++;
    response.setHeader('Cache-Control', 'no-store');
    response.setHeader('X-Content-Type-Options', 'nosniff');
    const refuse = refusal(request, accepted!);
    if (refuse !== null) {
      refused++;
      response.writeHead(refuse[0], { 'Content-Type': TEXT, Connection: 'close' }).end(`${refuse[1]}\n`);
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': TEXT }).end('read-only: GET only\n');
      return;
    }
    let path: string;
    try {
      path = new URL(request.url ?? '/', 'http://monitor').pathname;
    } catch {
      response.writeHead(400, { 'Content-Type': TEXT }).end('bad request: the path is no URL\n');
      return;
    }
    try {
      if (path === '/') {
        response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': PAGE_POLICY, 'X-Frame-Options': 'DENY' }).end(PAGE);
      } else if (path === '/snapshot.json') {
        const served = await limits!.waiting(request.socket, snapshots.forConnection(request.socket, 'json'));
        const headers = { 'Content-Type': 'application/json; charset=utf-8', Vary: 'Accept-Encoding' };
        if (takesGzip(request)) send(response, 200, { ...headers, 'Content-Encoding': 'gzip' }, await limits!.waiting(request.socket, snapshots.gzip(served)));
        else send(response, 200, headers, served.json);
      } else if (path === '/pstree.txt') {
        const served = await limits!.waiting(request.socket, snapshots.forConnection(request.socket, 'tree'));
        send(response, 200, { 'Content-Type': TEXT }, await limits!.waiting(request.socket, snapshots.tree(served)));
      } else {
        response.writeHead(404, { 'Content-Type': TEXT }).end('not found: / /snapshot.json /pstree.txt\n');
      }
    } catch (error) {
      if (!response.headersSent) send(response, 500, { 'Content-Type': TEXT }, Buffer.from(`snapshot failed: ${String(error)}\n`));
    }
  };

  const server = createServer(requestLimits(idleTimeout), (request, response) => {
    // Nothing a client sends may end the app (an unhandled rejection would): what escapes ends that answer only.
    serve(request, response).catch(() => response.destroy());
  });
  limits = limitConnections(server, idleTimeout, maxConnections);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  const address = server.address() as AddressInfo;
  accepted = acceptedHosts(address, host, allowed);
  let closing: YieldablePromise<void> | null = null;
  const close = (): YieldablePromise<void> => {
    closing ??= yieldable(
      new Promise<void>((resolve) => {
        snapshots.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
    );
    return closing;
  };
  return {
    url: `http://${asHostName(address.address)}:${address.port}/`,
    port: address.port,
    statistics: (): MonitorStatistics => ({ requests, refused, snapshots: snapshots.taken }),
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The page's script: it redraws the threads and the tree of tasks from /snapshot.json every second. */
const SCRIPT = `
'use strict';
const previous = new Map();
function ms(seconds) { return seconds == null ? '—' : (seconds * 1000).toFixed(seconds < 0.01 ? 2 : 1) + ' ms'; }
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}
function drawThreads(snap) {
  const body = document.querySelector('#threads tbody');
  body.replaceChildren();
  for (const thread of snap.threads) {
    const name = thread.threadName + ' (' + thread.threadId + ')';
    if (!thread.responsive) {
      const state = 'unresponsive' + (thread.blockedFor == null ? '' : ', blocked ' + thread.blockedFor.toFixed(1) + ' s');
      body.append(el('tr', { class: 'unresponsive', 'data-thread': thread.threadName }, el('td', {}, name), el('td', {}, state), ...Array.from({ length: 8 }, () => el('td', {}, '—'))));
      continue;
    }
    const open = thread.loops.filter((loop) => loop.state !== 'closed');
    const iterations = open.reduce((sum, loop) => sum + loop.iterations, 0);
    const before = previous.get(thread.threadId);
    previous.set(thread.threadId, { iterations, at: snap.at });
    const rate = before && snap.at > before.at ? Math.round((iterations - before.iterations) / ((snap.at - before.at) / 1000)) : '—';
    const health = thread.health;
    body.append(el('tr', { 'data-thread': thread.threadName },
      el('td', {}, name),
      el('td', {}, open.map((loop) => loop.state).join(', ') || 'no loop'),
      el('td', {}, ms(health && health.lag.p50)), el('td', {}, ms(health && health.lag.p99)), el('td', {}, ms(health && health.lag.max)),
      el('td', {}, health ? Math.round(health.utilization * 100) + '%' : '—'),
      el('td', {}, String(rate)),
      el('td', {}, String(open.reduce((sum, loop) => sum + loop.ready, 0))),
      el('td', {}, String(open.reduce((sum, loop) => sum + loop.timers, 0))),
      el('td', {}, String(open.reduce((sum, loop) => sum + loop.tasks, 0)))));
  }
}
function drawTasks(snap) {
  const known = new Set(snap.tasks.map((task) => task.taskId));
  const children = new Map();
  const roots = [];
  for (const task of snap.tasks) {
    const parents = task.awaitedBy.filter((id) => known.has(id));
    if (parents.length === 0) roots.push(task);
    for (const parent of parents) { if (!children.has(parent)) children.set(parent, []); children.get(parent).push(task); }
  }
  const drawn = new Set();
  function item(task) {
    const li = el('li', { 'data-task': task.name });
    if (drawn.has(task.taskId)) { li.append(el('span', { class: 'name' }, task.name), el('span', { class: 'meta' }, ' (shown above)')); return li; }
    drawn.add(task.taskId);
    const what = task.state === 'running' ? 'running' : task.awaiting == null ? task.state + ', ready' : 'waiting ' + ms(task.waitingFor) + ' for ' + task.awaiting;
    li.append(el('span', { class: 'name' }, task.name), ' ', el('code', {}, task.stack.join(' ← ')), el('span', { class: 'meta' }, ' — ' + (task.threadName || 'thread ' + task.threadId) + ', ' + what));
    const below = (children.get(task.taskId) || []).map(item);
    for (const leaf of task.leaves) below.push(el('li', { class: 'leaf' }, leaf));
    if (below.length > 0) li.append(el('ul', {}, ...below));
    return li;
  }
  const list = document.getElementById('tasks');
  list.replaceChildren(...roots.map(item), ...snap.tasks.filter((task) => !drawn.has(task.taskId)).map(item));
  if (snap.tasks.length === 0) list.append(el('li', { class: 'meta' }, '(no tasks)'));
}
async function refresh() {
  try {
    const response = await fetch('snapshot.json', { cache: 'no-store' });
    const snap = await response.json();
    drawThreads(snap);
    drawTasks(snap);
    document.getElementById('status').textContent = 'updated ' + new Date(snap.at).toLocaleTimeString() + ' · ' + snap.threads.length + ' threads · ' + snap.tasks.length + ' tasks';
  } catch (error) {
    document.getElementById('status').textContent = 'cannot reach the app: ' + error;
  }
  setTimeout(refresh, 1000);
}
refresh();
`;

/**
 * What the page may do: run its own script (by hash), fetch from its own origin, and nothing
 * else; no other page may frame it.
 */
const PAGE_POLICY = [
  "default-src 'none'",
  `script-src 'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'`,
  "style-src 'unsafe-inline'",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** The page: a table of threads and a tree of tasks, both redrawn from /snapshot.json every second. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>multiloop monitor</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
  h1 { font-size: 1.2rem; margin: 0 0 .2rem; }
  #status { color: #666; margin-bottom: 1rem; }
  table { border-collapse: collapse; margin-bottom: 1.5rem; }
  th, td { padding: .25rem .6rem; border-bottom: 1px solid #ddd; text-align: right; }
  th:first-child, td:first-child { text-align: left; }
  tr.unresponsive td { background: #fde8e8; }
  ul.tree, ul.tree ul { list-style: none; padding-left: 1.2rem; margin: 0; }
  ul.tree { padding-left: 0; }
  li { margin: .15rem 0; }
  .name { font-weight: 600; }
  .meta { color: #555; }
  .leaf { color: #6b4e00; }
  code { font-size: 13px; }
</style>
</head>
<body>
<h1>multiloop monitor</h1>
<div id="status">loading…</div>
<table id="threads">
  <thead><tr><th>thread</th><th>state</th><th>lag p50</th><th>lag p99</th><th>lag max</th><th>busy</th><th>iterations/s</th><th>ready</th><th>timers</th><th>tasks</th></tr></thead>
  <tbody></tbody>
</table>
<h2 style="font-size:1rem">Tasks, by who awaits whom</h2>
<ul class="tree" id="tasks"></ul>
<script>${SCRIPT}</script>
</body>
</html>
`;
