// `node bench/online.mjs`: time from the `online` event to caught-up.
//
// A TaskClient (default options) follows a task on a real server. The
// network "goes down": navigator.onLine turns false, `offline` fires, and
// every request in flight fails as a dropped connection would. Two
// versions happen on the server meanwhile. Then `online` fires and we time
// how long until the watch holds the server's version: the client must
// reconnect at once, not when its backoff timer says so.
import { TaskClient } from "../dist/client/node.js";
import { startServer } from "../tests/js/server.mjs";

const TRIALS = Number(process.env.TRIALS ?? 50);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const target = new EventTarget();
const nav = { onLine: true };
Object.defineProperty(globalThis, "navigator", { value: nav, configurable: true });
globalThis.addEventListener = target.addEventListener.bind(target);
globalThis.removeEventListener = target.removeEventListener.bind(target);

// The network: while down, requests fail, and those in flight are cut.
let down = false;
const cuts = new Set();
const network = (url, init) =>
  new Promise((resolve, reject) => {
    if (down) return reject(new TypeError("network is down"));
    const cut = () => reject(new TypeError("connection dropped"));
    cuts.add(cut);
    fetch(url, init).then(resolve, reject).finally(() => cuts.delete(cut));
  });
function setNetwork(up) {
  down = !up;
  nav.onLine = up;
  if (!up) for (const cut of cuts) cut();
  // SILENT=1: the network comes back without an `online` event, as a
  // client that ignores the event experiences it (it waits for a timer).
  if (up && process.env.SILENT === "1") return;
  target.dispatchEvent(new Event(up ? "online" : "offline"));
}

const server = await startServer();
const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: network });
const times = [];
try {
  for (let trial = 0; trial < TRIALS; trial++) {
    const task = await client.createTask({ ttlMs: 600_000, maxAttempts: 3 });
    const watch = client.watch(task.id);
    await server.callback(task.id, { type: "start", atMs: Date.now(), worker: "w" }, `${trial}-s`);
    while (watch.version < 1) await sleep(1);
    setNetwork(false);
    await sleep(50 + Math.random() * 200); // somewhere in its backoff
    await server.callback(task.id, { type: "progress", atMs: Date.now(), progress: 40, cursor: "" }, `${trial}-a`);
    await server.callback(task.id, { type: "progress", atMs: Date.now(), progress: 60, cursor: "" }, `${trial}-b`);
    const t0 = performance.now();
    setNetwork(true);
    while (watch.version < 3) await sleep(0);
    times.push(performance.now() - t0);
    watch.stop();
  }
} finally {
  await server.stop();
}
times.sort((a, b) => a - b);
const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))].toFixed(1);
const how = process.env.SILENT === "1" ? "network back, no event" : "online event";
console.log(`${how} -> caught-up over ${TRIALS} trials (loopback): p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${q(1)} ms`);
