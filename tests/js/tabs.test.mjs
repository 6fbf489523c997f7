// One connection per browser (`shareAcrossTabs`, js/tabs.js) in real
// browsers, Chromium and Firefox, against the real server behind the TCP
// proxy (tests/e2e/proxy.mjs), which sees every request line and knows
// which requests are held: tabs of one browser share its sockets, so only
// the proxy can count them.
//
// Three pages of one origin watch task 1, one of them task 2 too. A page
// of another browser context (nothing shared) watches both with its own
// watches: the reference. Each page counts the requests its own client
// sends (its `fetch`). Checked: one held request per task in all, only
// from the leader; every tab's updates equal the reference's; the leader
// page closed, another takes over within a second and resumes by delta;
// a late tab is caught up; a frozen leader hands over; persistence; and
// without Web Locks each tab watches for itself.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { startServer, freePort } from "./server.mjs";
import { newTaskId, seedTimeline, servePage } from "./pages.mjs";
import { ENGINES, PAGE, held, holds, seen, sent, until, version } from "./tab-pages.mjs";
import { startProxy } from "../e2e/proxy.mjs";

let api, statics, origin;
/** One browser per engine, started by its first test. */
const browsers = new Map();

/**
 * The engine's browser, and a fresh proxy to the server; both a group
 * (`group()`) and the proxy end with the test.
 */
async function setUp(t, engine) {
  if (!browsers.has(engine.name)) browsers.set(engine.name, engine.launch(origin + "/"));
  const browser = await browsers.get(engine.name);
  const proxy = await startProxy(Number(new URL(api.baseUrl).port));
  const groups = [];
  t.after(async () => {
    for (const group of groups) await group.close();
    await proxy.close();
  });
  const group = async (init) => {
    const made = await browser.group(init);
    groups.push(made);
    return made;
  };
  return { group, proxy };
}

before(async () => {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin]);
  statics = await servePage(port, { "/": { type: "text/html", body: PAGE } });
});

after(async () => {
  for (const browser of browsers.values()) await (await browser).close();
  statics?.close();
  await api?.stop();
});

/** Posts event `i` of the seed's timeline to each task. */
function step(timelines, i) {
  return Promise.all(Object.entries(timelines).map(([id, events]) => api.callback(id, events[i], `${id}-${i}`)));
}

for (const engine of ENGINES) {
  test(`${engine.name}: tabs share one watch per task, the leader's; a closed leader is replaced within a second, resuming by delta`, async (t) => {
    if (!existsSync(engine.binary)) {
      if (process.env.TASKWIRE_BROWSERS_REQUIRED) throw new Error(`no ${engine.name} at ${engine.binary}`);
      return t.skip(`no ${engine.name} at ${engine.binary}`);
    }
    const { group, proxy } = await setUp(t, engine);
    const [one, two] = [await newTaskId(api), await newTaskId(api)];
    const shared = { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, share: true };

    // The reference: own watches, in a context of its own, straight to the server.
    const reference = await (await group()).page();
    await reference.evaluate((o) => window.start(o), { baseUrl: api.baseUrl, headers: api.headers, share: false, ids: [one, two] });

    const tabs = await group();
    const [a, b, c] = [await tabs.page(), await tabs.page(), await tabs.page()];
    await a.evaluate((o) => window.start(o), { ...shared, ids: [one] });
    await until(async () => (await sent(a)) > 0, "the first tab leads");
    await b.evaluate((o) => window.start(o), { ...shared, ids: [one] });
    await c.evaluate((o) => window.start(o), { ...shared, ids: [one, two] });
    await until(() => held(proxy)[two] === 1, "task 2 is watched");

    // Sampled all along: the most held requests for one task, when.
    const samples = [];
    const sampler = setInterval(() => samples.push([Date.now(), Math.max(0, ...Object.values(held(proxy)))]), 5);
    t.after(() => clearInterval(sampler));

    const timelines = { [one]: seedTimeline(Date.now()), [two]: seedTimeline(Date.now()) };
    const everyone = async (v) => {
      const views = [[reference, one], [reference, two], [b, one], [c, one], [c, two]];
      if (!a.isClosed()) views.push([a, one]);
      for (const [page, id] of views) if ((await version(page, id)) < v) return false;
      return true;
    };
    for (const i of [0, 1]) {
      await step(timelines, i);
      await until(() => everyone(i + 1), `every tab sees version ${i + 1}`);
    }
    await holds(proxy, { [one]: 1, [two]: 1 }, "one held request per task, for three tabs");
    assert.equal(await sent(b), 0, "a follower sends nothing");
    assert.equal(await sent(c), 0, "a follower sends nothing");

    // The leader goes; another tab takes over.
    const before = proxy.requests.length;
    const closed = Date.now();
    await a.close();
    await step(timelines, 2);
    await until(() => everyone(3), "every tab sees version 3 after the leader closed");
    const resumed = proxy.requests.slice(before).filter((r) => r.method === "GET" && r.path.includes("/resume"));
    for (const id of [one, two]) {
      const first = resumed.find((r) => r.path.startsWith(`/v1/tasks/${id}/`));
      assert.ok(first, `task ${id} is resumed`);
      assert.ok(first.atMs - closed < 1000, `resumed ${first.atMs - closed} ms after the leader closed`);
      t.diagnostic(`task ${id === one ? 1 : 2} resumed ${first.atMs - closed} ms after the leader page closed`);
      assert.match(first.path, /[?&]cursor=2(&|$)/, "by delta, from the version the tabs hold");
    }
    const leaders = [(await sent(b)) > 0, (await sent(c)) > 0].filter(Boolean);
    assert.equal(leaders.length, 1, "one new leader");

    for (const i of [3, 4]) {
      await step(timelines, i);
      await until(() => everyone(i + 1), `every tab sees version ${i + 1}`);
    }
    await until(async () => (await seen(b, one)).end && (await seen(c, two)).end, "the watches end");
    clearInterval(sampler);
    // A closed page's socket may outlive its lock by a moment (the browser
    // tears it down on its own time): two, then, but only at the takeover.
    const overlap = samples.filter(([at, most]) => most > 1 && at >= closed && at < closed + 1000);
    const others = samples.filter(([at, most]) => most > 1 && !overlap.some(([o]) => o === at));
    assert.deepEqual(others, [], "never two held requests for one task");
    assert.ok(samples.some(([, most]) => most === 1));
    t.diagnostic(`two held requests for a task during the takeover: ${overlap.length * 5} ms`);

    const expected = { [one]: await seen(reference, one), [two]: await seen(reference, two) };
    assert.equal(expected[one].updates.length, 5);
    assert.ok(expected[one].updates.every((u) => u.mode === "delta" && u.applied.length === 1));
    for (const [page, id] of [[b, one], [c, one], [c, two]]) {
      const view = await seen(page, id);
      assert.deepEqual(view.updates, expected[id].updates, "the same updates as the tab's own watch");
      assert.equal(view.end, "succeeded");
      assert.equal(view.states.at(-1), "closed");
    }
    await holds(proxy, {}, "nothing held after the end");
    for (const page of [reference, b, c]) assert.deepEqual(page.errors, []);
  });

  test(`${engine.name}: a tab that joins late is caught up by delta without a request; the watch ends when no tab wants it`, async (t) => {
    if (!existsSync(engine.binary)) return t.skip(`no ${engine.name} at ${engine.binary}`);
    const { group, proxy } = await setUp(t, engine);
    const id = await newTaskId(api);
    const options = { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, share: true, ids: [id] };
    const tabs = await group();
    const a = await tabs.page();
    await a.evaluate((o) => window.start(o), options);
    const timeline = { [id]: seedTimeline(Date.now()) };
    for (const i of [0, 1]) {
      await step(timeline, i);
      await until(async () => (await version(a, id)) === i + 1, `version ${i + 1}`);
    }
    const late = await tabs.page();
    await late.evaluate((o) => window.start(o), options);
    await until(async () => (await version(late, id)) === 2, "the late tab catches up");
    // What the server answers a watch from cursor 0: one delta of both entries.
    assert.deepEqual((await seen(late, id)).updates, [{ mode: "delta", applied: [1, 2], events: [1, 2], rejected: [], version: 2, state: "running" }]);
    await step(timeline, 2);
    await until(async () => (await version(late, id)) === 3, "then follows live");
    assert.equal(await sent(late), 0, "the late tab sends nothing");
    await holds(proxy, { [id]: 1 });
    // The leader's refusal reaches the tab as its own watch's would.
    const missing = await late.evaluate(() =>
      Promise.race([client.watch("tsk_" + "0".repeat(32)).done.catch((e) => [e instanceof Error, e.name, e.code, e.status]), new Promise((r) => setTimeout(r, 3000, "no answer"))]),
    );
    assert.deepEqual(missing, [true, "TaskwireError", "not-found", 404]);
    assert.equal(await sent(late), 0);
    // The leader's own watch stops; the late tab still wants the task.
    await a.evaluate((id) => window.stop(id), id);
    assert.equal((await seen(a, id)).end, "stopped");
    assert.equal((await seen(a, id)).states.at(-1), "closed");
    await step(timeline, 3);
    await until(async () => (await version(late, id)) === 4, "the late tab goes on");
    await holds(proxy, { [id]: 1 });
    // The late tab closes without a word: its lock tells the leader.
    await late.close();
    await holds(proxy, {}, "no watch once no tab wants it");
    // What a watch of this tab's own would refuse (Rust's rule) the leader refuses for it.
    const refused = await a.evaluate(() =>
      Promise.race([client.watch(" ").done.catch((e) => [e instanceof Error, e.name, e.code, e.message]), new Promise((r) => setTimeout(r, 3000, "no answer"))]),
    );
    assert.deepEqual(refused, [true, "TaskwireError", "invalid-request", "taskId: must not be blank"]);
    assert.deepEqual(a.errors, []);
  });

  // A browser freezes a background page (Chromium) and parks a page in
  // its back-forward cache; a page there must not keep the lead. Headless
  // browsers do neither on their own (CDP's setWebLifecycleState does not
  // freeze a visible page), so the page is sent the events they fire.
  test(`${engine.name}: a leader that is frozen hands over within a second, and follows again on resume`, async (t) => {
    if (!existsSync(engine.binary)) return t.skip(`no ${engine.name} at ${engine.binary}`);
    const { group, proxy } = await setUp(t, engine);
    const id = await newTaskId(api);
    const options = { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, share: true, ids: [id] };
    const tabs = await group();
    const [a, b] = [await tabs.page(), await tabs.page()];
    await a.evaluate((o) => window.start(o), options);
    await until(async () => (await sent(a)) > 0, "the first tab leads");
    await b.evaluate((o) => window.start(o), options);
    const timeline = { [id]: seedTimeline(Date.now()) };
    for (const i of [0, 1]) {
      await step(timeline, i);
      await until(async () => (await version(b, id)) === i + 1, `version ${i + 1}`);
    }
    assert.equal(await sent(b), 0);
    const before = proxy.requests.length;
    const frozen = Date.now();
    await a.evaluate(() => document.dispatchEvent(new Event("freeze")));
    await until(async () => (await sent(b)) > 0, "the other tab takes over", 1000);
    const resumed = () => proxy.requests.slice(before).find((r) => r.method === "GET");
    await until(resumed, "the proxy sees the new leader's request");
    t.diagnostic(`resumed ${resumed().atMs - frozen} ms after the freeze`);
    assert.match(resumed().path, /[?&]cursor=2(&|$)/, "by delta");
    await holds(proxy, { [id]: 1 }, "the frozen tab's request ended");
    const led = await sent(a);
    await a.evaluate(() => document.dispatchEvent(new Event("resume")));
    for (const i of [2, 3]) {
      await step(timeline, i);
      await until(async () => (await version(a, id)) === i + 1 && (await version(b, id)) === i + 1, `both see version ${i + 1}`);
    }
    assert.equal(await sent(a), led, "back, it follows the new leader");
    await holds(proxy, { [id]: 1 });
    // Back in the lock's queue: it leads again when the other tab goes.
    await b.close();
    await until(async () => (await sent(a)) > led, "the woken tab leads again", 1000);
    await step(timeline, 4);
    await until(async () => (await seen(a, id)).end === "succeeded", "the watch ends");
    assert.deepEqual((await seen(a, id)).updates.map((u) => u.version), [1, 2, 3, 4, 5]);
    assert.deepEqual(a.errors, []);
  });

  test(`${engine.name}: with persist, a new tab starts from the stored task and a takeover resumes from it`, async (t) => {
    if (!existsSync(engine.binary)) return t.skip(`no ${engine.name} at ${engine.binary}`);
    const { group, proxy } = await setUp(t, engine);
    const id = await newTaskId(api);
    const options = { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, share: true, persist: true, ids: [id] };
    const tabs = await group();
    const a = await tabs.page();
    await a.evaluate((o) => window.start(o), options);
    const timeline = { [id]: seedTimeline(Date.now()) };
    for (const i of [0, 1]) {
      await step(timeline, i);
      await until(async () => (await version(a, id)) === i + 1, `version ${i + 1}`);
    }
    const b = await tabs.page();
    await b.evaluate((o) => window.start(o), options);
    assert.equal((await seen(b, id)).initial, 2, "the stored task, at once, as a watch of its own would restore it");
    await step(timeline, 2);
    await until(async () => (await version(b, id)) === 3, "then follows live");
    assert.deepEqual((await seen(b, id)).updates, [{ mode: "delta", applied: [3], events: [3], rejected: [], version: 3, state: "running" }]);
    const before = proxy.requests.length;
    await a.close();
    const resumed = () => proxy.requests.slice(before).find((r) => r.method === "GET");
    await until(resumed, "the other tab takes over");
    assert.match(resumed().path, /[?&]cursor=3(&|$)/, "from the stored task");
    for (const i of [3, 4]) {
      await step(timeline, i);
      await until(async () => (await version(b, id)) === i + 1, `version ${i + 1}`);
    }
    await until(async () => (await seen(b, id)).end === "succeeded", "the watch ends");
    assert.deepEqual(b.errors, []);
  });

  test(`${engine.name}: without Web Locks each tab keeps its own connection`, async (t) => {
    if (!existsSync(engine.binary)) return t.skip(`no ${engine.name} at ${engine.binary}`);
    const { group, proxy } = await setUp(t, engine);
    const id = await newTaskId(api);
    const tabs = await group("delete Navigator.prototype.locks;");
    const pages = [await tabs.page(), await tabs.page(), await tabs.page()];
    for (const page of pages) {
      assert.equal(await page.evaluate(() => "locks" in navigator), false);
      await page.evaluate((o) => window.start(o), { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, share: true, ids: [id] });
    }
    await holds(proxy, { [id]: 3 }, "three held requests, one per tab");
    const timeline = { [id]: seedTimeline(Date.now()) };
    for (const i of [0, 1, 2, 3, 4]) {
      await step(timeline, i);
      await until(async () => (await Promise.all(pages.map((p) => version(p, id)))).every((v) => v === i + 1), `every tab sees version ${i + 1}`);
    }
    for (const page of pages) {
      const view = await seen(page, id);
      assert.ok((await sent(page)) > 0, "each tab sends its own requests");
      assert.deepEqual(view.updates.map((u) => u.version), [1, 2, 3, 4, 5]);
      await until(async () => (await seen(page, id)).end === "succeeded", "the watch ends");
      assert.deepEqual(page.errors, []);
    }
  });
}
