// One connection per browser (`TaskClient({shareAcrossTabs})`, issue 14).
//
// Every tab of an origin that makes a client with the same baseUrl (and
// share name) joins one group. A Web Lock elects its leader: only the
// leader runs watches against the server, one per subscription key (a
// kind and an id: "task" and a task id, or "batch" and a batch id)
// however many tabs
// follow it, and it posts their events on a BroadcastChannel. The lock
// is released when the leader's page goes away, so the next tab in the
// lock's queue takes over at once and restarts each watch from what the
// tabs hold (so by delta, not from version 0).
//
// Loaded only by clients that share (a dynamic import): a page that does
// not pays nothing for it.
//
// The messages, all on the channel (each tab also hears its own):
//   {t: "lead"}                                  a new leader: tabs, tell it what you follow
//   {t: "sub", sub, tab, kind, id, seed}         a tab follows (kind, id) and holds `seed`
//   {t: "unsub", sub, kind, id}                  it stopped
//   {t: "ev", kind, id, ev, data, to?}           an event of the leader's watch (to one
//                                                subscription only: a catch-up)
// `ev` is a watch event: update, reject, status, done or fail (`data`
// `{code, message, status}`: an Error does not survive the channel whole),
// or, for a batch, `answer` (`{cursor}`): the end of one answer's events.

/**
 * In every lock and channel name: tabs that run another version of these
 * messages (an old page still open after a deploy) form another group.
 */
const MESSAGES = "taskwire-tabs/2";

/** Updates a leader keeps per watch, to catch up a tab that joins behind it. */
const LOG = 64;

/**
 * A tab's membership in its group.
 *
 * `kinds[kind]` says how to run one kind of subscription:
 * - `open(id, seed, on)`: (leader) starts the real watch from a tab's
 *   `seed`; it reports each event as `on(ev, data)`; returns the watch,
 *   which `[Symbol.dispose]()` stops and frees;
 * - `stale(update, seed)`: the update brings a tab that holds `seed`
 *   nothing newer (a repeat, to drop);
 * - `catchUp(watch, log, seed)`: the events (`[ev, data]` pairs) that
 *   bring a tab holding `seed` to the open watch's state, given the
 *   watch's latest updates (`log`, oldest first); none when it is there.
 */
export class Tabs {
  #tab = Math.random().toString(36).slice(2);
  #count = 0;
  #name;
  #kinds;
  #channel;
  /** This tab's subscriptions: id → {kind, id, key, seed(), take(ev, data)}. */
  #subs = new Map();
  /** While leader: key → {real, subs: Map<sub, tab>, log, status}. */
  #shared;
  #release;
  #joining;
  /** Left (hidden in the back-forward cache, frozen): to join again when back. */
  #away = false;
  /** Tabs whose end the leader awaits (their lock). */
  #awaited = new Set();
  #ready;
  /** Lets go of this tab's own lock. */
  #unlock;
  #closed = false;

  constructor(name, kinds) {
    this.#name = name = `${MESSAGES} ${name}`;
    this.#kinds = kinds;
    this.#channel = new BroadcastChannel(name);
    this.#channel.onmessage = (e) => this.#receive(e.data);
    // Each tab holds a lock of its own while it lives: the leader waits
    // for it, so it learns that a tab closed (or crashed) without a word
    // and stops the watches only that tab wanted. A tab speaks only once
    // it holds it, or the leader would take the lock first.
    this.#ready = new Promise((held) => navigator.locks.request(this.#lockOf(this.#tab), () => (held(), this.#closed || new Promise((unlock) => (this.#unlock = unlock)))));
    this.#ready.then(() => this.#closed || this.#join());
    // A page put in the back-forward cache or frozen hands the lead over
    // (its watches would stand still) and takes its turn again when back.
    const on = (target, leave, back) => {
      target?.addEventListener?.(leave, () => this.#leave());
      target?.addEventListener?.(back, () => this.#away && !this.#closed && (this.#join(), this.#offerAll()));
    };
    on(globalThis, "pagehide", "pageshow");
    on(globalThis.document, "freeze", "resume");
  }

  /**
   * Follows `kind`/`id` through the leader. `seed()` is what this tab
   * holds now; `deliver(ev, data)` gets every event from the watch, in
   * order, without updates it already has. Returns the unsubscribe.
   */
  subscribe(kind, id, seed, deliver) {
    const sub = `${this.#tab}/${++this.#count}`;
    const { stale } = this.#kinds[kind];
    const take = (ev, data) => {
      // A repeat (a catch-up crossing live events, an old leader's last
      // post) brings nothing newer; a restarted history (`reason`) does.
      if (ev === "update" && !data.reason && stale(data, seed())) return;
      deliver(ev, data);
    };
    this.#subs.set(sub, { kind, id, key: kind + " " + id, seed, take });
    this.#ready.then(() => this.#offer(sub));
    return () => this.#subs.delete(sub) && this.#post({ t: "unsub", sub, kind, id });
  }

  /**
   * Leaves the group for good (`TaskClient.dispose`): hands the lead
   * over (the next leader carries on) or gives up its place in the
   * queue, lets go of this tab's lock, and closes the channel.
   */
  close() {
    this.#closed = true;
    this.#leave();
    this.#unlock?.();
    this.#channel.close();
  }

  #lockOf(tab) {
    return `${this.#name} tab ${tab}`;
  }

  /** Takes a place in the leader lock's queue. */
  #join() {
    this.#away = false;
    const queued = (this.#joining = new AbortController());
    navigator.locks
      .request(this.#name, { signal: queued.signal }, () => {
        this.#shared = new Map();
        this.#post({ t: "lead" });
        return new Promise((release) => (this.#release = release));
      })
      .catch(() => {}); // the place given up by #leave
  }

  /** Stops leading (silently: the next leader carries on) or waiting to. */
  #leave() {
    this.#away = true;
    this.#joining?.abort();
    const shared = this.#shared;
    this.#shared = undefined;
    for (const s of shared?.values() ?? []) s.real[Symbol.dispose]();
    this.#release?.();
  }

  /** Tells the leader what this tab follows (and holds), so it catches the tab up. */
  #offer(sub) {
    const s = this.#subs.get(sub);
    if (s) this.#post({ t: "sub", sub, tab: this.#tab, kind: s.kind, id: s.id, seed: s.seed() });
  }

  #offerAll() {
    for (const sub of this.#subs.keys()) this.#offer(sub);
  }

  /** Posts to every other tab, and to this one (a channel never echoes). */
  #post(message) {
    if (this.#closed) return;
    this.#channel.postMessage(message);
    queueMicrotask(() => this.#receive(message));
  }

  #receive(m) {
    const key = m.kind + " " + m.id;
    if (m.t === "lead") this.#ready.then(() => this.#offerAll());
    if (m.t === "ev") {
      for (const [sub, s] of this.#subs) if (s.key === key && (m.to ?? sub) === sub) s.take(m.ev, structuredClone(m.data));
    }
    if (!this.#shared) return;
    if (m.t === "sub") this.#follow(key, m);
    if (m.t === "unsub") this.#unfollow(key, m.sub);
  }

  /** Leader: a tab follows `key`: starts its watch, or catches the tab up with it. */
  #follow(key, { sub, tab, kind, id, seed }) {
    const k = this.#kinds[kind];
    const send = (ev, data) => this.#post({ t: "ev", kind, id, ev, data, to: sub });
    let s = this.#shared.get(key);
    if (!s) {
      s = { subs: new Map(), log: [] };
      this.#shared.set(key, s);
      try {
        s.real = k.open(id, seed, (ev, data) => this.#shared?.get(key) === s && this.#emit(key, s, kind, id, ev, data));
      } catch (e) {
        // What the tab's own watch would have thrown (a blank id, a
        // cursor out of range): its `done` rejects with it.
        this.#shared.delete(key);
        return send("fail", fault(e));
      }
    } else {
      // A tab that joins (or comes back from a freeze) behind the watch.
      if (s.status && !s.subs.has(sub)) send("status", s.status);
      for (const [ev, data] of k.catchUp(s.real, s.log, seed)) send(ev, data);
    }
    s.subs.set(sub, tab);
    if (tab !== this.#tab && !this.#awaited.has(tab)) {
      this.#awaited.add(tab);
      navigator.locks.request(this.#lockOf(tab), () => {
        this.#awaited.delete(tab);
        for (const [key, s] of this.#shared ?? []) for (const [sub, t] of s.subs) if (t === tab) this.#unfollow(key, sub);
      });
    }
  }

  #unfollow(key, sub) {
    const s = this.#shared.get(key);
    if (s?.subs.delete(sub) && s.subs.size === 0) {
      this.#shared.delete(key);
      s.real[Symbol.dispose]();
    }
  }

  /** Leader: an event of the watch of `key`, to every tab. */
  #emit(key, s, kind, id, ev, data) {
    if (ev === "update") {
      // A history that started over (`reason`) makes the old one useless.
      if (data.reason) s.log = [];
      if (s.log.push(data) > LOG) s.log.shift();
    }
    if (ev === "status") s.status = data;
    if (ev === "done" || ev === "fail") {
      this.#shared.delete(key);
      s.real[Symbol.dispose]();
    }
    this.#post({ t: "ev", kind, id, ev, data: ev === "fail" ? fault(data) : data });
  }
}

/** A `TaskwireError` as the channel can carry it (an Error loses its `code` there). */
function fault({ code, message, status }) {
  return { code, message, status };
}

/**
 * The "task" kind over `watchLocally(id, options, wrap)`, which runs one
 * ordinary watch in this tab (the leader's) with `wrap(storage)` as its
 * storage. A tab's seed is the task it holds (or its `cursor`): the
 * watch starts from it as a reload starts from a persisted task (what
 * is persisted, if anything, comes first: the leader saved it last).
 */
export function taskKind(watchLocally) {
  const at = ({ task, cursor }) => task?.version ?? cursor ?? 0;
  return {
    stale: (update, seed) => update.task.version <= at(seed),
    open(id, { task, cursor }, on) {
      const watch = watchLocally(
        id,
        {
          // A cursor would make the watch ignore the storage.
          cursor: task ? undefined : cursor,
          onUpdate: (u) => on("update", u),
          onStatus: (s) => on("status", s),
          onReject: (r) => on("reject", r),
        },
        (own) => (task ? { getItem: (k) => own?.getItem(k) ?? JSON.stringify({ taskId: id, task }), setItem: (k, v) => own?.setItem(k, v) } : own),
      );
      watch.done.then(
        (task) => on("done", { task }),
        (e) => on("fail", e),
      );
      return watch;
    },
    // One update, what the server would answer the tab's own watch: a
    // delta when the log holds every entry since the tab's version, else
    // a snapshot.
    catchUp({ task }, log, seed) {
      const from = at(seed);
      if (!task || task.version <= from) return [];
      const events = log.flatMap((u) => u.events).filter((e) => e.version > from);
      const update =
        events.length === task.version - from
          ? { task, mode: "delta", applied: events.map((e) => e.version), events, rejected: [] }
          : { task, mode: "snapshot", applied: [task.version], events: [], rejected: [] };
      return [["update", update]];
    },
  };
}

/**
 * The "batch" kind over `watchLocally(id, options)`, which runs one
 * ordinary batch watch in this tab (the leader's). A tab's seed is what
 * its batch watch holds: its tasks, the cursor they were read at and the
 * batch's size. The watch starts from them only when the tab holds every
 * task (a cursor with some tasks missing would never bring the others);
 * else from nothing, by a snapshot. The events of one answer are followed
 * by `answer` and the cursor they brought the batch to, so that every
 * tab takes them together (./tab-watch.js) and holds a cursor to resume
 * from.
 */
export function batchKind(watchLocally) {
  const held = (seed) => new Map((seed.tasks ?? []).map((t) => [t.id, t.version]));
  const snapshot = (task) => ["update", { task, mode: "snapshot", applied: [task.version], events: [], rejected: [] }];
  return {
    stale: ({ task }, seed) => task !== undefined && held(seed).get(task.id) >= task.version,
    open(id, seed, on) {
      const whole = seed.cursor > 0 && seed.size > 0 && seed.tasks?.length === seed.size;
      let watch;
      let marking = false;
      // A watch delivers one answer's events in one go: the marker
      // follows the last of them, and comes before a status (a watch
      // that ends says `closed` right after its last answer) or the
      // watch's end.
      const mark = () => {
        if (!marking) return;
        marking = false;
        on("answer", { cursor: watch.cursor });
      };
      const ofAnswer = (ev) => (data) => {
        on(ev, data);
        if (!marking) queueMicrotask(mark);
        marking = true;
      };
      watch = watchLocally(id, {
        ...(whole && { cursor: seed.cursor, tasks: seed.tasks }),
        onUpdate: ofAnswer("update"),
        onProgress: ofAnswer("progress"),
        onStatus: (s) => (mark(), on("status", s)),
        onReject: ofAnswer("reject"),
      });
      watch.done.then(
        (tasks) => (mark(), on("done", { tasks })),
        (e) => (mark(), on("fail", e)),
      );
      return watch;
    },
    // A snapshot update of each task newer than the tab's, the
    // aggregate, and the cursor they bring the tab to.
    catchUp(watch, log, seed) {
      const versions = held(seed);
      const out = watch.tasks.filter((t) => !(versions.get(t.id) >= t.version)).map(snapshot);
      if (watch.progress) out.push(["progress", watch.progress]);
      out.push(["answer", { cursor: watch.cursor }]);
      return out;
    },
  };
}
