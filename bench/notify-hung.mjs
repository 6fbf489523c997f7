// `node bench/notify-hung.mjs`: does a hung notify receiver hold back
// another tenant's?
//
// Tenant `tenant` posts to a receiver that accepts connections and never
// answers; tenant `other` to one that answers 200 at once. N tasks of each
// reach `succeeded`, interleaved. Prints how long after the last commit
// the answering receiver had all N of its notifications, and how many
// posts (and connections at once, at most) the hung one saw meanwhile.
// Needs `cargo build -p taskwire-server`. Env: N (20), WAIT_MS (3000),
// and FLAGS, extra server flags (e.g. "--notify-in-flight 1").
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { startServer } from "../tests/js/server.mjs";

const N = Number(process.env.N ?? 20);
const WAIT_MS = Number(process.env.WAIT_MS ?? 3000);
const FLAGS = (process.env.FLAGS ?? "").split(" ").filter(Boolean);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const listen = (server) =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));

const answered = new Map(); // webhook-id -> ms since start
const ok = createServer((req, res) => {
  answered.set(req.headers["webhook-id"], performance.now());
  req.resume();
  res.end();
});
let hungPosts = 0;
let open = 0;
let mostOpen = 0;
const hung = createTcpServer((sock) => {
  open += 1;
  mostOpen = Math.max(mostOpen, open);
  let head = "";
  sock.on("data", (d) => {
    head += d;
    if (head.includes("\r\n\r\n")) {
      hungPosts += 1;
      head = "";
    }
  });
  sock.on("close", () => (open -= 1));
  sock.on("error", () => {});
});
const okUrl = `http://127.0.0.1:${await listen(ok)}/hook`;
const hungUrl = `http://127.0.0.1:${await listen(hung)}/hook`;

const server = await startServer([
  "--token", "b=other",
  "--tenant-notify-url", `tenant=${hungUrl}`,
  "--tenant-notify-url", `other=${okUrl}`,
  ...FLAGS,
]);
async function succeed(token, i) {
  const r = await fetch(`${server.baseUrl}/v1/tasks`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ ttlMs: 600_000, maxAttempts: 1 }),
  });
  const { id } = await r.json();
  await server.callback(id, { type: "start", atMs: 1, worker: "w" }, `s${i}`);
  await server.callback(id, { type: "succeed", atMs: 2, resultRef: "blob://r", resultHash: "sha256:ab" }, `ok${i}`);
  return `${id}:succeeded:2`;
}
try {
  const keys = [];
  for (let i = 0; i < N; i++) {
    await succeed(server.token, i);
    keys.push(await succeed("b", i));
  }
  const committed = performance.now();
  while (!keys.every((k) => answered.has(k)) && performance.now() - committed < WAIT_MS) await sleep(1);
  const got = keys.filter((k) => answered.has(k));
  const last = Math.max(...got.map((k) => answered.get(k)));
  const after = got.length === N ? `${Math.max(0, last - committed).toFixed(0)} ms after the last commit` : `not all within ${WAIT_MS} ms`;
  await sleep(Math.max(0, WAIT_MS - (performance.now() - committed)));
  console.log(`answering receiver: ${got.length}/${N} notifications, ${after}`);
  console.log(`hung receiver: ${hungPosts} posts of ${N} notifications in ${WAIT_MS} ms, at most ${mostOpen} connections at once`);
} finally {
  await server.stop();
  ok.close();
  hung.close();
}
