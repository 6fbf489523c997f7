// The server's history goes back (issue 14, "An epoch for the server's
// history"): a backup of the database is taken, tasks advance, the backup
// is put back and marked restored (`taskwire-server --mark-restored`). A
// client that persisted the newer versions must recover to the restored
// truth in the same watch, without a reload: the real npm client in Node
// against the real server, on SQLite and on PostgreSQL (scripts/pg.sh;
// skipped without PostgreSQL binaries unless TASKWIRE_PG_REQUIRED=1).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { TaskClient } from "../../dist/client/node.js";
import { freePort, serverBinary, startServer } from "./server.mjs";
import { installStorage } from "./storage.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, check, ms = 15_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** `--mark-restored` on `data`: prints `… epoch OLD -> NEW` and exits 0. */
function markRestored(data) {
  const out = execFileSync(serverBinary(), ["--data", data, "--mark-restored"], { encoding: "utf8" });
  const m = /epoch (\S+) -> ([0-9a-f]{32})$/m.exec(out);
  assert.ok(m, out);
  return { before: m[1], after: m[2] };
}

/**
 * A SQLite backup as copies of the server's files into `saved`, and its
 * restore, taken while the server is down: then the file and its WAL are
 * the database.
 */
function sqliteCopies(server, saved) {
  const files = (dir) => readdirSync(dir).filter((f) => f.startsWith("taskwire.sqlite3"));
  return {
    backup: async () => {
      for (const f of files(server.data)) copyFileSync(join(server.data, f), join(saved, f));
    },
    restore: async () => {
      for (const f of files(server.data)) rmSync(join(server.data, f));
      for (const f of files(saved)) copyFileSync(join(saved, f), join(server.data, f));
    },
  };
}

/**
 * The scenario, for one backend: `backup()` and `restore()` copy the
 * database aside and back while the server is down.
 */
async function restoredHistoryScenario(server, { backup, restore }, transport) {
  const storage = installStorage();
  try {
    const client = new TaskClient({
      baseUrl: server.baseUrl,
      headers: server.headers,
      persist: true,
      transport,
      backoff: { initialMs: 50, maxMs: 200 },
    });
    const created = await client.createTask({ ttlMs: 600_000, maxAttempts: 3, kind: "summary" });
    assert.match(created.epoch, /^[0-9a-f]{32}$/, "a create answer carries the epoch");
    const epoch = created.epoch;
    const t = Date.now();
    await server.callback(created.id, { type: "start", atMs: t, worker: "w" }, "s");
    await server.callback(created.id, { type: "progress", atMs: t + 1, progress: 25, cursor: "a" }, "p25");
    const updates = [];
    const watch = client.watch(created.id, { onUpdate: (u) => updates.push(u) });
    await until("version 2", () => watch.version === 2);

    // The backup: the database at version 2.
    await server.kill();
    await backup();
    await server.restart();
    assert.equal((await server.task(created.id)).epoch, epoch, "a restart keeps the epoch");

    // The lost future: versions 3 and 4, which the client persists.
    await server.callback(created.id, { type: "progress", atMs: t + 2, progress: 55, cursor: "b" }, "p55");
    await server.callback(created.id, { type: "progress", atMs: t + 3, progress: 82, cursor: "c" }, "p82");
    await until("version 4", () => watch.version === 4);
    const stored = () => JSON.parse(storage.get(`taskwire:${created.id}`));
    assert.equal(stored().task.version, 4);
    assert.equal(stored().epoch, epoch, "the mirror persists its epoch");

    // The restore, marked: the same watch goes on against it.
    await server.kill();
    await restore();
    const marked = await markRestored(server.data);
    assert.equal(marked.before, epoch);
    await server.restart();
    await until("the restored version 2", () => watch.version === 2);
    const restart = updates.at(-1);
    assert.equal(restart.mode, "snapshot");
    assert.equal(restart.reason, "epoch-changed");
    assert.equal(restart.task.progress, 25, "the restored truth, not the lost future");
    assert.equal(watch.task.progress, 25);
    assert.equal(stored().task.version, 2);
    assert.equal(stored().epoch, marked.after, "the new epoch is persisted");
    assert.equal((await server.task(created.id)).epoch, marked.after);

    // Within the new epoch everything is as before: deltas, to the end.
    await server.callback(created.id, { type: "progress", atMs: t + 4, progress: 60, cursor: "d" }, "p60");
    await server.callback(created.id, { type: "succeed", atMs: t + 5, resultRef: "r", resultHash: "sha256:ab" }, "ok");
    const done = await watch.done;
    assert.equal(done.state, "succeeded");
    assert.equal(done.version, 4);
    assert.ok(updates.slice(updates.indexOf(restart) + 1).every((u) => u.reason === undefined));

    // A reload starts from the persisted mirror of the new epoch.
    const again = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true });
    const reloaded = again.watch(created.id);
    assert.equal(reloaded.version, 4);
    assert.equal((await reloaded.done).state, "succeeded");
  } finally {
    delete globalThis.localStorage;
  }
}

for (const transport of ["long-poll", "sse"]) {
  test(`sqlite (${transport}): a client that persisted lost versions recovers to a marked restore without a reload`, async () => {
    const server = await startServer();
    const saved = mkdtempSync(join(tmpdir(), "taskwire-backup-"));
    try {
      await restoredHistoryScenario(server, sqliteCopies(server, saved), transport);
    } finally {
      await server.stop();
      rmSync(saved, { recursive: true, force: true });
    }
  });
}

/**
 * A restore to the very version a page holds (issue 29): the page
 * persisted version 3 (progress 80) of the lost history; the restored
 * store reached its own version 3 (progress 40) before the page came
 * back. The cursors agree, so only the epoch tells them apart: a
 * long-poll carries it, and the server answers one from another epoch at
 * once instead of holding it for its whole `waitMs`.
 */
async function sameVersionScenario(server, { backup, restore }, transport) {
  const storage = installStorage();
  const WAIT_MS = 20_000;
  const client = () =>
    new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true, transport, waitMs: WAIT_MS, backoff: { initialMs: 50, maxMs: 200 } });
  try {
    const created = await client().createTask({ ttlMs: 600_000, maxAttempts: 3, kind: "summary" });
    const t = Date.now();
    await server.callback(created.id, { type: "start", atMs: t, worker: "w" }, "s");
    await server.callback(created.id, { type: "progress", atMs: t + 1, progress: 25, cursor: "a" }, "p25");
    await server.kill();
    await backup();
    await server.restart();
    await server.callback(created.id, { type: "progress", atMs: t + 2, progress: 80, cursor: "b" }, "p80");
    const before = client().watch(created.id);
    await until("the lost version 3", () => before.version === 3 && before.task.progress === 80);
    before.stop();

    await server.kill();
    await restore();
    const marked = markRestored(server.data);
    await server.restart();
    await server.callback(created.id, { type: "progress", atMs: t + 3, progress: 40, cursor: "c" }, "p40-restored");
    assert.equal((await server.task(created.id)).version, 3, "the restored store is at the page's version");

    // The page comes back with its persisted version 3 of the old epoch.
    const updates = [];
    const started = Date.now();
    const after = client().watch(created.id, { onUpdate: (u) => updates.push(u) });
    assert.equal(after.task.progress, 80, "the page starts from what it persisted");
    await until("the restored truth", () => after.task?.progress === 40, WAIT_MS * 2);
    const elapsed = Date.now() - started;
    assert.ok(elapsed < WAIT_MS / 2, `the restore was noticed after ${elapsed} ms: held instead of answered at once (waitMs ${WAIT_MS})`);
    assert.equal(updates.at(-1).reason, "epoch-changed");
    assert.equal(JSON.parse(storage.get(`taskwire:${created.id}`)).epoch, marked.after);
    after.stop();
  } finally {
    delete globalThis.localStorage;
  }
}

for (const transport of ["long-poll", "sse"]) {
  test(`sqlite (${transport}): a restore to the very version a page persisted is noticed at once, not after waitMs`, async () => {
    const server = await startServer();
    const saved = mkdtempSync(join(tmpdir(), "taskwire-backup-"));
    try {
      await sameVersionScenario(server, sqliteCopies(server, saved), transport);
    } finally {
      await server.stop();
      rmSync(saved, { recursive: true, force: true });
    }
  });
}

/** scripts/pg.sh run: PostgreSQL lives until its stdin closes; null without binaries. */
async function startPostgres() {
  const port = await freePort();
  const dir = join(tmpdir(), `taskwire-pg-epoch-${process.pid}-${Date.now()}`);
  const child = spawn("bash", [join(root, "scripts/pg.sh"), "run", dir, String(port)], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const line = await new Promise((res) => {
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) res(out.split("\n")[0]);
    });
    child.once("exit", () => res(null));
  });
  if (line === null || !line.startsWith("ready ")) {
    if (child.exitCode === 3 && process.env.TASKWIRE_PG_REQUIRED !== "1") return null;
    throw new Error(`scripts/pg.sh could not start PostgreSQL:\n${err}`);
  }
  const base = line.slice("ready ".length).replace(/\/postgres$/, "");
  const psqlBin = ["/usr/lib/postgresql"].flatMap((d) => (existsSync(d) ? readdirSync(d).map((v) => join(d, v, "bin/psql")) : [])).find(existsSync) ?? "psql";
  return {
    base,
    /** One statement on the `postgres` database, retried while a killed server's backend goes away. */
    async sql(statement) {
      for (let i = 0; ; i++) {
        try {
          return execFileSync(psqlBin, [`${base}/postgres`, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], { encoding: "utf8", stdio: "pipe" });
        } catch (e) {
          if (i > 50 || !/being accessed by other users/.test(String(e.stderr))) throw e;
          await sleep(100);
        }
      }
    },
    stop: () =>
      new Promise((done) => {
        if (child.exitCode !== null) return done();
        child.once("exit", done);
        child.stdin.end();
      }),
  };
}

test("postgres: a client that persisted lost versions recovers to a marked restore without a reload", async (t) => {
  const pg = await startPostgres();
  if (pg === null) return t.skip("PostgreSQL server binaries not found (scripts/setup.sh postgres installs them)");
  try {
    await pg.sql("CREATE DATABASE tw");
    const server = await startServer([], { data: `${pg.base}/tw` });
    try {
      await restoredHistoryScenario(
        server,
        {
          // A copy database is the backup; putting it back is a new
          // database made from it, under the old name.
          backup: () => pg.sql("CREATE DATABASE tw_backup TEMPLATE tw"),
          restore: async () => {
            await pg.sql("DROP DATABASE tw");
            await pg.sql("CREATE DATABASE tw TEMPLATE tw_backup");
          },
        },
        "long-poll",
      );
    } finally {
      await server.stop();
    }
  } finally {
    await pg.stop();
  }
});
