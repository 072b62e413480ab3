/**
 * The live monitor: a small read-only web page (and its JSON) showing every thread's loop health
 * and the task tree across threads, refreshing itself. Served by `node:http` from the thread
 * that starts it, on loopback unless told otherwise; every answer is a fresh snapshot
 * (see ps.ts). It never keeps the process alive by itself: it watches an app, it is not one.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { repr } from './internal/format.js';
import { formatTree, snapshot } from './ps.js';

/** Options of `startMonitor`. */
export interface MonitorOptions {
  /** The TCP port (0: a free one). */
  port: number;
  /** The address to listen on (default `'127.0.0.1'`: loopback only). */
  host?: string;
}

/** A running monitor: a read-only live page (and JSON) of every thread's loop health and task tree. */
export interface Monitor {
  /** The page's URL, e.g. `http://127.0.0.1:8123/`. */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** Stop serving. */
  close(): Promise<void>;
}

/** How long each thread has to answer the page's snapshot, in seconds. */
const SNAPSHOT_TIMEOUT = 0.5;

/**
 * Serve the live monitor page: every thread's loop lag, utilisation, iterations, ready queue,
 * timers and tasks, and the task tree across threads, refreshed every second. `GET /` is the
 * page, `GET /snapshot.json` its data, `GET /pstree.txt` the tree as `pstree()` prints it;
 * nothing else is served and nothing can be changed through it.
 *
 * @example
 * ```ts
 * const monitor = await startMonitor({ port: 0 });
 * console.log(`watch it at ${monitor.url}`);
 * // ...
 * await monitor.close();
 * ```
 */
export async function startMonitor(options: MonitorOptions): Promise<Monitor> {
  if (options === null || typeof options !== 'object') throw new TypeError(`startMonitor() options must be an object, got ${repr(options)}`);
  const { port, host = '127.0.0.1' } = options;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`startMonitor() port must be an integer from 0 to 65535, got ${repr(port)}`);
  if (typeof host !== 'string' || host === '') throw new TypeError(`startMonitor() host must be a non-empty string, got ${repr(host)}`);
  const server = createServer((request, response) => void serve(request, response));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${shown}:${address.port}/`,
    port: address.port,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

async function serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
  response.setHeader('Cache-Control', 'no-store');
  response.setHeader('X-Content-Type-Options', 'nosniff');
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }).end('read-only: GET only\n');
    return;
  }
  const path = new URL(request.url ?? '/', 'http://monitor').pathname;
  try {
    if (path === '/') {
      response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(PAGE);
    } else if (path === '/snapshot.json') {
      const snap = await snapshot({ timeout: SNAPSHOT_TIMEOUT });
      response.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8' }).end(JSON.stringify(snap));
    } else if (path === '/pstree.txt') {
      const snap = await snapshot({ timeout: SNAPSHOT_TIMEOUT });
      response.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`${formatTree(snap)}\n`);
    } else {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found: / /snapshot.json /pstree.txt\n');
    }
  } catch (error) {
    response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`snapshot failed: ${String(error)}\n`);
  }
}

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
<script>
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
</script>
</body>
</html>
`;
