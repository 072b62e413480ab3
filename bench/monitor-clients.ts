/**
 * `node dist/bench/monitor-clients.js <url> <clients> <seconds>`: clients of the live monitor in a
 * process of their own, so that they cost the app's loop only what the monitor does for them.
 * Each asks for `snapshot.json`, then the page, back to back, as a page refreshed over and over
 * would, for `seconds`; prints how many answers of each status came and how many bytes, as JSON.
 */
import { Agent, get } from 'node:http';
import { performance } from 'node:perf_hooks';

const [url = '', clientsArg = '', secondsArg = ''] = process.argv.slice(2);
const clients = Number(clientsArg);
const seconds = Number(secondsArg);
if (!url.startsWith('http://') || !(Number.isInteger(clients) && clients > 0) || !(seconds > 0)) {
  console.error(`usage: monitor-clients.js <url> <clients> <seconds>, got ${JSON.stringify(process.argv.slice(2))}`);
  process.exit(2);
}

const agent = new Agent({ keepAlive: true, maxSockets: clients });
const statuses: Record<string, number> = {};
let bytes = 0;

function fetchOnce(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    get(new URL(path, url), { agent, headers: { 'accept-encoding': 'gzip' } }, (response) => {
      const status = String(response.statusCode);
      response.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      response.on('end', () => {
        statuses[status] = (statuses[status] ?? 0) + 1;
        resolve();
      });
      response.on('error', reject);
    }).on('error', reject);
  });
}

const end = performance.now() + seconds * 1000;
async function client(): Promise<void> {
  while (performance.now() < end) {
    await fetchOnce('snapshot.json');
    await fetchOnce('');
  }
}

await Promise.all(Array.from({ length: clients }, client));
agent.destroy();
console.log(JSON.stringify({ statuses, bytes }));
