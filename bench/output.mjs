// `node bench/output.mjs`: live output on the reference server (SQLite),
// PROTOCOL.md §Live output. Measures, over real HTTP:
//
// 1. appends/s on one task (one executor, each chunk sent when the last
//    was acknowledged: the per-task rate), and in total with TASKS tasks
//    appended to at once (the group commit shares one fsync among them);
// 2. chunk → follower latency: FOLLOWERS long-polls holding one task's
//    draft, a chunk every 50 ms; the time from the append's send to each
//    follower's answer, p50 and p99;
// 3. bytes stored per 1,000 characters: the database's growth (after a
//    WAL checkpoint) for STORED characters written in 20-character chunks.
//
// Needs `cargo build -p taskwire-server` (the debug build, unless
// CARGO_TARGET_DIR points at a release one) and python3 (the checkpoint).
// Env: SECONDS_EACH (5), TASKS (50), FOLLOWERS (100), STORED (200000).
import { execFileSync } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { statSync, existsSync } from "node:fs";
import { join } from "node:path";
import { startServer } from "../tests/js/server.mjs";


const SECONDS_EACH = Number(process.env.SECONDS_EACH ?? 5);
const TASKS = Number(process.env.TASKS ?? 50);
const FOLLOWERS = Number(process.env.FOLLOWERS ?? 100);
const STORED = Number(process.env.STORED ?? 200_000);

const server = await startServer();
const key = Buffer.from(server.secret.slice("whsec_".length), "base64");
const api = (path, init = {}) => fetch(`${server.baseUrl}${path}`, { ...init, headers: { ...server.headers, ...init.headers } });

async function runningTask(i) {
  const r = await api("/v1/tasks", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ttlMs: 3_600_000, maxAttempts: 1 }) });
  const { id } = await r.json();
  await server.callback(id, { type: "start", atMs: Date.now(), worker: `w${i}`, attempt: 1, leaseMs: 3_600_000 }, `s${i}`);
  return id;
}

/** One signed append; throws unless it was delivered. */
async function append(taskId, offset, text) {
  const body = JSON.stringify({ taskId, stream: "draft", attempt: 1, offset, text });
  const id = `out_${randomBytes(8).toString("hex")}`;
  const ts = Math.floor(Date.now() / 1000);
  const sig = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
  const r = await fetch(`${server.baseUrl}/v1/tasks/${taskId}/output/draft`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}` },
  });
  if (r.status !== 200) throw new Error(`append: ${r.status} ${await r.text()}`);
  await r.arrayBuffer();
}

/** Appends 8-character chunks to `taskId` one after the other until `until`; how many. */
async function appendUntil(taskId, until) {
  let n = 0;
  while (performance.now() < until) {
    await append(taskId, n * 8, "token.. ");
    n += 1;
  }
  return n;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

try {
  const one = await runningTask("one");
  const n1 = await appendUntil(one, performance.now() + SECONDS_EACH * 1000);
  console.log(`appends/s, one task, one executor: ${(n1 / SECONDS_EACH).toFixed(0)}`);

  const ids = await Promise.all(Array.from({ length: TASKS }, (_, i) => runningTask(`t${i}`)));
  const until = performance.now() + SECONDS_EACH * 1000;
  const counts = await Promise.all(ids.map((id) => appendUntil(id, until)));
  const total = counts.reduce((a, b) => a + b, 0);
  console.log(`appends/s, ${TASKS} tasks at once: ${(total / SECONDS_EACH).toFixed(0)} in total, ${(total / SECONDS_EACH / TASKS).toFixed(1)} per task`);

  const followed = await runningTask("followed");
  const vr = await api(`/v1/tasks/${followed}/resume?cursor=0`);
  const version = (await vr.json()).task.version;
  const latencies = [];
  let offset = 0;
  // When each 5-unit chunk was sent, by its index: a late answer is timed
  // from the send of the first chunk it carries, not from the latest.
  const sentAt = [];
  let stop = false;
  const follower = async () => {
    let held = 0;
    while (!stop) {
      const r = await api(`/v1/tasks/${followed}/resume?cursor=${version}&waitMs=10000&output=draft&outputAttempt=1&outputOffset=${held}`);
      const a = await r.json();
      const got = performance.now();
      if (a.output.text && sentAt[held / 5] !== undefined) {
        latencies.push(got - sentAt[held / 5]);
        held = a.output.offset + a.output.text.length;
      }
    }
  };
  const followers = Array.from({ length: FOLLOWERS }, follower);
  await new Promise((r) => setTimeout(r, 500));
  const chunks = SECONDS_EACH * 20;
  for (let i = 0; i < chunks; i++) {
    sentAt.push(performance.now());
    await append(followed, offset, "word ");
    offset += 5;
    await new Promise((r) => setTimeout(r, 50));
  }
  stop = true;
  await append(followed, offset, "end");
  await Promise.all(followers);
  latencies.sort((a, b) => a - b);
  console.log(`chunk -> follower, ${FOLLOWERS} followers, ${latencies.length} deliveries: p50 ${pct(latencies, 50).toFixed(1)} ms, p99 ${pct(latencies, 99).toFixed(1)} ms`);

  const file = join(server.data, "taskwire.sqlite3");
  const checkpoint = () =>
    execFileSync("python3", ["-c", `import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()`, file]);
  const size = () => statSync(file).size + (existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0);
  checkpoint();
  const before = size();
  const stored = await runningTask("stored");
  const text = "abcdefghijklmnopqrs ";
  const writers = 8;
  const per = Math.floor(STORED / text.length / writers);
  const tasks = await Promise.all(Array.from({ length: writers }, (_, i) => (i === 0 ? stored : runningTask(`st${i}`))));
  await Promise.all(tasks.map(async (id) => { for (let i = 0; i < per; i++) await append(id, i * text.length, text); }));
  checkpoint();
  const grew = size() - before;
  const chars = per * writers * text.length;
  console.log(`bytes stored per 1,000 characters (20-character chunks): ${((grew / chars) * 1000).toFixed(0)} (${chars} characters, the file grew ${grew} bytes)`);
} finally {
  await server.stop();
}
