// `npm run bench`: the npm package's speed in Node, through the public API
// (so every number includes the JS/wasm crossing and JSON conversion).
// Numbers go in the README; run on an idle machine, best of 5. FULL=dir
// and CLIENT=dir time other builds (e.g. an older dist/ kept aside).
const { TaskBook, TaskMirror } = await import(new URL(`${process.env.FULL ?? "../dist/full"}/node.js`, import.meta.url));

function best(label, n, unit, fn) {
  let bestMs = Infinity;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    fn();
    bestMs = Math.min(bestMs, performance.now() - t0);
  }
  const per = (bestMs * 1000) / n;
  console.log(`${label.padEnd(58)} ${(n / bestMs * 1000).toFixed(0).padStart(10)} ${unit}/s  ${per.toFixed(2).padStart(7)} µs/${unit}`);
  return per;
}

/** start, progress 1..98, retryable fail, and again: valid forever. */
function event(i) {
  const p = i % 100;
  if (p === 0) return { type: "start", atMs: i, worker: "w" };
  if (p === 99) return { type: "fail", atMs: i, error: "retry", retryable: true };
  return { type: "progress", atMs: i, progress: p, cursor: "c" };
}

console.log(`node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`);

// 1. Short tasks: create + start + 3 progress + succeed, 2,000 tasks.
const TASKS = 2000;
const short = [
  { type: "start", atMs: 1200, worker: "w" },
  { type: "progress", atMs: 6400, progress: 25, cursor: "c" },
  { type: "progress", atMs: 13100, progress: 55, cursor: "c" },
  { type: "progress", atMs: 20700, progress: 82, cursor: "c" },
  { type: "succeed", atMs: 24300, resultRef: "r", resultHash: "sha256:ab12" },
];
best("TaskBook.apply, short tasks (5 events each)", TASKS * short.length, "call", () => {
  const book = new TaskBook();
  for (let t = 0; t < TASKS; t++) {
    const id = "task-" + t;
    book.create({ id, nowMs: 0, ttlMs: 3_600_000, maxAttempts: 3 });
    for (let e = 0; e < short.length; e++) book.apply(id, short[e], id + ":" + e);
  }
  book.free();
});

// 2. One long task.
const LONG = 20_000;
const events = Array.from({ length: LONG }, (_, i) => event(i));
best("TaskBook.apply, one 20,000-event task", LONG, "call", () => {
  const book = new TaskBook();
  book.create({ id: "long", nowMs: 0, ttlMs: 1e15, maxAttempts: 1e9 });
  for (let i = 0; i < LONG; i++) book.apply("long", events[i]);
  book.free();
});

// 3. Mirror merge of a 1,000-event delta, three ways.
const book = new TaskBook({ retentionVersions: 1000 });
book.create({ id: "m", nowMs: 0, ttlMs: 1e15, maxAttempts: 1e9 });
for (let i = 0; i < 10_000; i++) book.apply("m", events[i]);
const base = book.resume("m", 0 + 10_000 + 1); // snapshot at 10,000
for (let i = 10_000; i < 11_000; i++) book.apply("m", events[i]);
const text = book.resumeJson("m", 10_000);
const object = JSON.parse(text);
const fresh = () => TaskMirror.fromSnapshot(base.task);
const REPS = 50;
const mirrors = Array.from({ length: REPS }, fresh);
let k = 0;
const asText = best("TaskMirror.mergeJson(text): 1,000-event delta, one crossing", 1000, "event", () => {
  const m = mirrors[k++ % REPS];
  if (m.mergeJson(text).applied.length !== 1000) throw new Error("merge failed");
});
const mirrors2 = Array.from({ length: REPS }, fresh);
k = 0;
const asObject = best("TaskMirror.merge(object): same delta, already parsed", 1000, "event", () => {
  const m = mirrors2[k++ % REPS];
  if (m.merge(object).applied.length !== 1000) throw new Error("merge failed");
});
const mirrors3 = Array.from({ length: REPS }, fresh);
k = 0;
const parseThenObject = best("JSON.parse(text) then merge(object): the naive client", 1000, "event", () => {
  const m = mirrors3[k++ % REPS];
  if (m.merge(JSON.parse(text)).applied.length !== 1000) throw new Error("merge failed");
});
console.log(`\nmergeJson(text) vs JSON.parse + merge(object): ${(parseThenObject / asText).toFixed(2)}x faster`);
console.log(`mergeJson(text) vs merge(already-parsed object): ${(asObject / asText).toFixed(2)}x`);

// 4. The page's build (taskwire/client: its allocator, JSON.parse walked
// into the readers, floats printed by the runtime): the same merge, as a
// browser client does it.
const client = await import(new URL(`${process.env.CLIENT ?? "../dist/client"}/node.js`, import.meta.url));
const pageMirrors = Array.from({ length: REPS }, () => client.TaskMirror.fromSnapshot(base.task));
k = 0;
best("client build: TaskMirror.mergeJson(text), same delta", 1000, "event", () => {
  const m = pageMirrors[k++ % REPS];
  if (m.mergeJson(text).applied.length !== 1000) throw new Error("merge failed");
});

// 5. The floor: one crossing with almost no work.
const small = new TaskBook();
small.create({ id: "x", nowMs: 0, ttlMs: 1000, maxAttempts: 1 });
best("TaskBook.resumeJson (caught-up, small): one crossing", 100_000, "call", () => {
  for (let i = 0; i < 100_000; i++) small.resumeJson("x", 0);
});
