// Compiled with `tsc --noEmit -p tests/js` in CI: the public types must
// accept correct use and reject incorrect use (the @ts-expect-error lines
// fail the build if they ever stop being errors).
import init, {
  TaskBook,
  TaskMirror,
  TaskwireError,
  applyEvent,
  createTask,
  type CallbackResult,
  type ErrorCode,
  type Delivery,
  type MergeOutcome,
  type ResumeAnswer,
  type Task,
  type TaskEvent,
  type TaskView,
} from "taskwire";
import { TaskClient as SmallClient, type TokenSource, type WatchStatus, type WatchUpdate } from "taskwire/client";

async function example(): Promise<void> {
  await init();
  const book = new TaskBook({ retentionVersions: 8 });
  const task: Task = book.create({ id: "t", nowMs: 0, ttlMs: 1000, maxAttempts: 3 });
  const event: TaskEvent = { type: "progress", atMs: 1, progress: 25, cursor: "c" };
  const result: CallbackResult = book.apply(task.id, event, "cb-1");
  const reason: "progress" | "started" | string = result.reason;
  void reason;

  // @ts-expect-error: a progress event needs `cursor`
  book.apply("t", { type: "progress", atMs: 1, progress: 25 });
  // @ts-expect-error: unknown event type
  book.apply("t", { type: "launch", atMs: 1 });
  // @ts-expect-error: reasons are a closed union
  const bad: CallbackResult["reason"] = "done";
  void bad;

  const answer: ResumeAnswer = book.resume("t", 3);
  switch (answer.mode) {
    case "delta":
      for (const entry of answer.events) {
        if (entry.event.type === "succeed") {
          const hash: string = entry.event.resultHash;
          void hash;
        }
      }
      break;
    case "snapshot": {
      const view: TaskView = answer.task;
      void view;
      break;
    }
    case "caught-up":
      break;
    default: {
      const never: never = answer;
      void never;
    }
  }

  const delivery: Delivery = book.deliverResult("t", "k", 1);
  if (delivery.ok) {
    const key: string = delivery.receipt.idempotencyKey;
    void key;
  }

  const mirror = new TaskMirror("t");
  const outcome: MergeOutcome = mirror.merge(answer);
  if (outcome.next === "snapshot") {
    mirror.mergeJson("{}");
  }
  const version: number = mirror.version;
  const restored = TaskMirror.fromJSON(mirror.toJSON());
  void restored, version;

  const t2 = applyEvent(createTask({ id: "x", nowMs: 0, ttlMs: 1, maxAttempts: 1 }), { type: "expire", atMs: 0 });
  const history: number = t2.task.history.length;
  void history;

  try {
    book.get("t");
  } catch (e) {
    if (e instanceof TaskwireError) {
      const code: ErrorCode = e.code;
      const network: ErrorCode = "network";
      const http: ErrorCode = "http-502";
      // @ts-expect-error: codes are a closed union
      const unknown: ErrorCode = "kaput";
      const status: number | undefined = e.status;
      void code, network, http, unknown, status;
    }
  }
}
async function client(): Promise<void> {
  const c = new SmallClient({ baseUrl: "http://127.0.0.1:8080", headers: { Authorization: "Bearer demo" }, persist: true, transport: "sse" });
  const task = await c.createTask({ ttlMs: 1000, maxAttempts: 1, kind: "summary", input: { doc: 1 } }, { idempotencyKey: "k" });
  const watch = c.watch(task.id, {
    onUpdate(u: WatchUpdate) {
      const p: number = u.task.progress;
      void p;
    },
    onStatus(s: WatchStatus) {
      if (s.state === "reconnecting") {
        const ms: number | undefined = s.retryInMs;
        void ms;
      }
    },
  });
  const done: TaskView = await watch.done;
  void done;
  // A token, or a function returning one, sync or async.
  const source: TokenSource = async () => "browser-token";
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: "browser-token" });
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: () => "browser-token" });
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: source });
  // @ts-expect-error: a token is a string
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: 42 });
  // @ts-expect-error: the function gives a string (or its promise)
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: async () => 42 });
  watch.stop();
  const receipt = await c.deliver(task.id, "k");
  const hash: string = receipt.resultHash;
  void hash;
  // @ts-expect-error: the transport is a closed union
  new SmallClient({ baseUrl: "x", transport: "websocket" });
}
void example, client;
