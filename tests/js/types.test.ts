// Compiled with `tsc --noEmit -p tests/js` in CI: the public types must
// accept correct use and reject incorrect use (the @ts-expect-error lines
// fail the build if they ever stop being errors).
import init, {
  TaskBook,
  TaskMirror,
  TaskwireError,
  OutputLog,
  applyEvent,
  checkStreamName,
  createTask,
  type OutputAppended,
  type OutputCatchup,
  type ActionAnswer,
  type BatchCancelAnswer,
  type CallbackResult,
  type ErrorCode,
  type Delivery,
  type MergeOutcome,
  type Notification,
  type ResumeAnswer,
  type State,
  type Swept,
  type Task,
  type TaskEvent,
  type TaskView,
  type TerminalState,
} from "taskwire";
import {
  TaskClient as SmallClient,
  type BatchAnswer,
  type BatchProgress,
  type BatchRejection,
  type BatchWatch,
  type CreatedBatch,
  type TokenSource,
  type WatchStatus,
  type WatchUpdate,
} from "taskwire/client";
import {
  useCreateTask,
  useTask,
  useTaskBatch,
  type CreateTaskState,
  type TaskBatchState,
  type TaskHookStatus,
  type TaskState,
  type UseTaskBatchOptions,
} from "taskwire/react";
import {
  CancelledError,
  FatalError,
  RetryableError,
  OutputError,
  OverBudget,
  StepError,
  SubmitUnknownError,
  Worker,
  budgetExhausted,
  classifyError,
  createWorker,
  isOutcomeUnknown,
  type BudgetExhausted,
  type CancelCode,
  type ClaimedTask,
  type Handler,
  type Job,
  type JobResult,
  type Output,
  type PollAnswer,
  type StepCheckpoint,
  type StepOutput,
  type StepRefusal,
  type WorkerOptions,
} from "taskwire/worker";

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
      // A watch that started over on another epoch of the server's history.
      const restarted: boolean = u.mode === "snapshot" && u.reason === "epoch-changed";
      // @ts-expect-error: update reasons are a closed union
      const other: WatchUpdate["reason"] = "restored";
      void p, restarted, other;
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
  // One connection per browser: the unnamed group, or a named one.
  new SmallClient({ baseUrl: "x", shareAcrossTabs: true });
  new SmallClient({ baseUrl: "x", shareAcrossTabs: "admin" });
  // @ts-expect-error: a boolean or a name
  new SmallClient({ baseUrl: "x", shareAcrossTabs: 1 });
}
async function lifecycle(): Promise<void> {
  const book = new TaskBook();
  const task = book.create({ id: "l", nowMs: 0, ttlMs: 60_000, maxAttempts: 2, deadlineMs: 30_000, unknownGraceMs: 1_000, autoRequeue: false });
  const deadline: number | undefined = task.deadlineAtMs;
  const started = book.apply("l", { type: "start", atMs: 1, worker: "w", attempt: 1, leaseMs: 500 });
  const until: number | undefined = started.lease?.expiresAtMs;
  book.apply("l", { type: "heartbeat", atMs: 2, attempt: 1 });
  book.apply("l", { type: "hold", atMs: 3, artifactRef: "blob://a", artifactHash: "sha256:a", question: "ok?", attempt: 1 });
  book.apply("l", { type: "decide", atMs: 4, decision: "request_changes", artifactHash: "sha256:a", version: 2, actor: "tenant:t" });
  book.apply("l", { type: "cancel", atMs: 5, reason: "stop" });
  book.apply("l", { type: "ack_cancel", atMs: 6, attempt: 2 });
  book.apply("l", { type: "cannot_cancel", atMs: 7, reason: "remote", attempt: 2 });
  for (const e of [{ type: "lapse", atMs: 8, attempt: 1 }, { type: "abandon", atMs: 9 }, { type: "timeout", atMs: 10 }] as const) book.apply("l", e);
  const swept: Swept[] = book.sweepDue(20_000);
  for (const s of swept) {
    const state: State = s.state;
    void state;
  }
  const reasons: CallbackResult["reason"][] = ["stale-attempt", "lease-lapsed", "succeeded-after-cancel", "stale-decision", "cancel-requested"];
  const states: State[] = ["cancelling", "cancel_ineffective", "cancelled", "waiting_approval", "unknown", "timed_out"];
  const ended: TerminalState[] = ["succeeded", "failed", "expired", "cancelled", "timed_out"];
  const notified: Notification["state"] = "timed_out";
  const view: TaskView = book.get("l")!;
  const decided: "approve" | "request_changes" | "reject" | undefined = view.decision;
  const held: string | undefined = view.artifactHash;
  void deadline, until, reasons, states, ended, notified, decided, held, view.continuations, view.decisionVersion;

  // @ts-expect-error: a decision is a closed union
  book.apply("l", { type: "decide", atMs: 4, decision: "maybe", artifactHash: "sha256:a", version: 2 });
  // @ts-expect-error: a hold needs its artifact's hash
  book.apply("l", { type: "hold", atMs: 3, artifactRef: "blob://a" });
  // @ts-expect-error: `running` is not terminal
  const notEnded: TerminalState = "running";
  void notEnded;

  const c = new SmallClient({ baseUrl: "http://127.0.0.1:8080" });
  const created = await c.createTask({ ttlMs: 60_000, maxAttempts: 2, deadlineMs: 30_000, unknownGraceMs: 5_000, autoRequeue: true });
  const cancelled: ActionAnswer = await c.cancel(created.id, { reason: "changed my mind" });
  await c.cancel(created.id);
  const rest: BatchCancelAnswer = await c.cancelBatch("bat_1", { reason: "the rest is not needed" });
  const stopped: number = (rest.reasons.cancelled ?? 0) + rest.changed + rest.size;
  void stopped;
  // @ts-expect-error: a batch id is a string
  await c.cancelBatch(1);
  const answer: ActionAnswer = await c.decide(created.id, { decision: "approve", artifactHash: "sha256:a", version: 3, reason: "fine" });
  const changed: boolean = answer.changed && cancelled.task.state === "cancelled";
  void changed;
  // @ts-expect-error: a decision names the artifact and the version
  await c.decide(created.id, { decision: "approve" });
  // @ts-expect-error: decisions are a closed union
  await c.decide(created.id, { decision: "ok", artifactHash: "h", version: 1 });
}

// The hooks (called outside a component only to check their types).
async function hooks(): Promise<void> {
  const c = new SmallClient({ baseUrl: "http://127.0.0.1:8080" });
  const made0 = await c.createTask({ ttlMs: 1, maxAttempts: 1 });
  const state: TaskState = useTask(c, "t", { onUpdate: (u) => void u.applied, onReject: (r) => void r.version });
  const version: number | undefined = state.task?.version;
  const status: TaskHookStatus = state.status;
  const idle: "idle" | WatchStatus["state"] = status.state;
  const code: string | undefined = state.error?.code;
  useTask(c, made0.id, { initial: made0 });
  // @ts-expect-error: initial is a task
  useTask(c, "t", { initial: { id: "t" } });
  useTask(c, null);
  useTask(c, undefined);
  // A fake with only `watch` is a client for useTask.
  useTask({ watch: c.watch.bind(c) }, "t");
  // @ts-expect-error: a task id is a string
  useTask(c, 42);
  // @ts-expect-error: the status of a watch, not an update
  useTask(c, "t", { onStatus: () => {} });
  // @ts-expect-error: useTask needs a client that can watch
  useTask({ createTask: c.createTask.bind(c) }, "t");

  const creator: CreateTaskState = useCreateTask(c);
  const made = await creator.create({ ttlMs: 60_000, maxAttempts: 1, kind: "k" });
  const id: string = made.id;
  const pending: boolean = creator.pending;
  const shown: string | undefined = creator.task?.id;
  creator.reset();
  // @ts-expect-error: a request needs ttlMs and maxAttempts
  await creator.create({ kind: "k" });
  // @ts-expect-error: the key is the hook's, not the caller's
  await creator.create({ ttlMs: 1, maxAttempts: 1 }, { idempotencyKey: "k" });
  void version, idle, code, id, pending, shown;
  // The hook keeps a created task's kind and input; its error is a TaskwireError.
  const kind: string | undefined = useTask(c, made0.id, { initial: made0 }).task?.kind;
  const failed: TaskwireError | undefined = creator.error;
  const failedCode: ErrorCode | undefined = creator.error?.code;
  void kind, failed, failedCode;
}

// Issue 29: tokens per scope, narrowing by state, dispose.
async function issue29(): Promise<void> {
  const c = new SmallClient({
    baseUrl: "http://127.0.0.1:8080",
    token: async ({ tasks, batch }) => `tok-${tasks?.[0] ?? batch ?? "any"}`,
  });
  const zeroArg: TokenSource = () => "tok";
  new SmallClient({ baseUrl: "http://127.0.0.1:8080", token: zeroArg });
  // @ts-expect-error: a scope's tasks are strings
  const badToken: TokenSource = (scope: { tasks: number[] }) => String(scope.tasks);
  const watch = c.watch("t", {
    onUpdate: async ({ task }) => {
      if (task.state === "waiting_approval") {
        // Narrowed: the held artifact is there, no `!`.
        await c.decide(task.id, { decision: "approve", artifactHash: task.artifactHash, version: task.version });
      }
      // @ts-expect-error: outside waiting_approval the artifact may be absent
      const hash: string = task.artifactHash;
      void hash;
    },
  });
  void watch;
  c.dispose();
  c[Symbol.dispose]();
  void badToken;
}

async function batches(): Promise<void> {
  const c = new SmallClient({ baseUrl: "http://127.0.0.1:8080", transport: "sse" });
  const batch: CreatedBatch = await c.createBatch([{ ttlMs: 60_000, maxAttempts: 1, kind: "moderation", input: { item: 1 } }], { idempotencyKey: "run-7" });
  const first: string = batch.tasks[0].batchId;
  const watch: BatchWatch = c.watchBatch(batch.batchId, {
    cursor: batch.cursor,
    tasks: batch.tasks,
    onUpdate: (u: WatchUpdate) => void u.task.id,
    onProgress: (p: BatchProgress) => void (p.counts.succeeded + p.counts.cancel_ineffective + p.terminal + p.progress),
    onReject: (r: BatchRejection) => void (r.taskId ?? r.version),
  });
  const all: TaskView[] = await watch.done;
  const one: TaskView | undefined = watch.task(first);
  const cursor: number = watch.cursor;
  const known: BatchProgress | undefined = watch.progress;
  watch.stop();
  watch[Symbol.dispose]();
  // The wire shape of its answers.
  const answer: BatchAnswer = { batchId: "b", mode: "delta", cursor: 3, size: 1, open: 1, tasks: [] };
  // @ts-expect-error: counts are per state, a closed union
  void known?.counts.done;
  // @ts-expect-error: items are create requests
  await c.createBatch([{ kind: "x" }]);
  // @ts-expect-error: onProgress receives the aggregate, not a task
  c.watchBatch("b", { onProgress: (t: TaskView) => void t });
  // @ts-expect-error: a batch answer's mode is a resume mode
  const bad: BatchAnswer = { ...answer, mode: "later" };
  void all, one, cursor, bad;
}

// useTaskBatch (called outside a component only to check its types).
async function batchHook(): Promise<void> {
  const c = new SmallClient({ baseUrl: "http://127.0.0.1:8080" });
  const created: CreatedBatch = await c.createBatch([{ ttlMs: 60_000, maxAttempts: 1 }]);
  const options: UseTaskBatchOptions = {
    initial: created,
    onUpdate: (u: WatchUpdate) => void u.task.version,
    onProgress: (p: BatchProgress) => void p.terminal,
    onReject: (r: BatchRejection) => void (r.taskId ?? r.version),
  };
  const state: TaskBatchState = useTaskBatch(c, created.batchId, options);
  const first: TaskView | undefined = state.tasks[0];
  const cursor: number = state.cursor;
  const terminal: number | undefined = state.progress?.counts.succeeded;
  const status: TaskHookStatus = state.status;
  const idle: "idle" | WatchStatus["state"] = status.state;
  const code: string | undefined = state.error?.code;
  useTaskBatch(c, null);
  useTaskBatch(c, undefined);
  // A fake with only `watchBatch` is a client for useTaskBatch.
  useTaskBatch({ watchBatch: c.watchBatch.bind(c) }, "b");
  // @ts-expect-error: the hook's tasks are its state, read-only
  state.tasks.push(created.tasks[0]);
  // @ts-expect-error: a batch id is a string
  useTaskBatch(c, 7);
  // @ts-expect-error: the status is in the state, not a listener
  useTaskBatch(c, "b", { onStatus: () => {} });
  // @ts-expect-error: onProgress receives the aggregate, not a task
  useTaskBatch(c, "b", { onProgress: (t: TaskView) => void t });
  // @ts-expect-error: initial is a created batch, with the cursor its tasks were read at
  useTaskBatch(c, "b", { initial: { batchId: "b", tasks: created.tasks } });
  // @ts-expect-error: useTaskBatch needs a client that can watch batches
  useTaskBatch({ watch: c.watch.bind(c) }, "b");
  void first, cursor, terminal, idle, code;
}
// taskwire/worker (Node only).
async function workers(): Promise<void> {
  const options: WorkerOptions = { url: "http://127.0.0.1:8080", tenant: "acme", secret: "whsec_AAAA", concurrency: 2, leaseMs: 30_000, now: () => Date.now() };
  const worker: Worker = createWorker(options);
  const summarise: Handler = async (job: Job): Promise<JobResult | BudgetExhausted | void> => {
    const attempt: number = job.attempt;
    const task: ClaimedTask = job.task;
    const decision: "approve" | "request_changes" | "reject" | undefined = task.decision;
    const leaseEnds: number = task.lease.expiresAtMs;
    const why: CancelCode | undefined = job.signal.reason?.code;
    job.checkpoint();
    job.check();
    await job.progress(50, "half");
    const key: string = job.key("publish", "post");
    if (decision === undefined) return job.hold("s3://draft", "sha256:d1", "Publish?");
    const text: string = await job.vendor({
      step: "ocr",
      submit: async (k: string, signal: AbortSignal) => ({ id: k, signal }),
      poll: async (handle: { id: string }): Promise<PollAnswer<string>> => ({ done: true, value: handle.id }),
      lookup: (k: string) => (k ? { id: k, signal: job.signal } : undefined),
      timeoutMs: 60_000,
    });
    const loaded: StepCheckpoint | undefined = await job.step("load", async (): Promise<StepOutput> => ({ outputRef: "r", outputHash: "h", usage: { tokens: 1, costCents: 0, toolCalls: 0 } }));
    await job.step("load", () => ({ outputRef: "r", outputHash: "h" }), { label: "1/3: load" });
    const again: StepCheckpoint | undefined = job.stepCheckpoint("load");
    const finished: boolean = job.stepDone("load");
    const draft: Output = job.output("draft");
    await draft.write("Once upon");
    await draft.flush();
    const held: number = draft.acknowledged;
    const stream: string = draft.name;
    // @ts-expect-error: a step's run resolves to its checkpoint, both fields
    await job.step("s", async () => ({ outputRef: "r" }));
    // @ts-expect-error: usage has all three counts
    await job.step("s", () => ({ outputRef: "r", outputHash: "h", usage: { tokens: 1 } }));
    // @ts-expect-error: a label is text
    await job.step("s", () => ({ outputRef: "r", outputHash: "h" }), { label: 3 });
    // @ts-expect-error: output writes text
    await draft.write(42);
    const words: number = await job.spend("draft", { tokens: 100, costCents: 2 }, async () => ({ value: 3, usage: { tokens: 80, toolCalls: 1 } }), { step: "draft" });
    const ticket: string = await job.effect("publish", "ticket", async (k: string) => `T-${k}`);
    const known: string | undefined = job.recordedEffect("publish", "ticket");
    const usedTokens: number | undefined = task.used?.tokens;
    const effectIds: string[] | undefined = task.effects?.map((e) => e.resourceId);
    // @ts-expect-error: spend's call answers { value, usage }
    await job.spend("draft", { tokens: 1 }, async () => 3);
    // @ts-expect-error: write answers the resource id
    await job.effect("publish", "ticket", async () => 42);
    if (words > 1000) return budgetExhausted({ resultRef: "s3://partial", resultHash: "sha256:p" });
    void attempt, leaseEnds, why, key, loaded, again, finished, held, stream, ticket, known, usedTokens, effectIds;
    return { resultRef: text, resultHash: "sha256:1" };
  };
  worker.handle("summary", summarise).handle("", () => ({ resultRef: "r", resultHash: "h" }));
  const run: Promise<void> = worker.run();
  await worker.shutdown(5_000);
  await run;
  const cls: "retryable" | "final" = classifyError(new RetryableError("busy"));
  const unknown: boolean = isOutcomeUnknown(new FatalError("no"));
  const code: "submit-unknown" = new SubmitUnknownError("lost", "t:ocr:submit").code;
  const reason: CancelCode = new CancelledError("shutdown").code;
  const stepCode: StepRefusal = new StepError("unknown-step", "load", "refused").code;
  const stepName: string = new StepError("no-plan", "load", "refused").step;
  const outputErr: OutputError = new OutputError("output-gap", "draft", "refused", 409);
  const fatal: FatalError = outputErr;
  const over: FatalError = new OverBudget("1:draft", "over-budget");
  const overId: string = new OverBudget("1:draft", "over-budget").reservation;
  const nothingLeft: BudgetExhausted = budgetExhausted();
  // @ts-expect-error: a partial result needs both fields
  budgetExhausted({ resultRef: "r" });
  // @ts-expect-error: a step's refusals are a closed union
  const badStep: StepRefusal = "not-running";
  // @ts-expect-error: the secret is required
  createWorker({ url: "http://127.0.0.1:8080" });
  // @ts-expect-error: a result needs resultHash
  worker.handle("k", () => ({ resultRef: "r" }));
  // @ts-expect-error: progress is a number
  worker.handle("k", async (job) => job.progress("50%"));
  // @ts-expect-error: poll answers { done, value }
  worker.handle("k", async (job) => void (await job.vendor({ step: "s", submit: () => 1, poll: () => "done" })));
  // @ts-expect-error: the signal's reasons are a closed union
  const badWhy: CancelCode = "timeout";
  void cls, unknown, code, reason, badWhy, stepCode, stepName, fatal, badStep, over, overId, nothingLeft;
}
function liveOutput(): void {
  checkStreamName("draft", "output");
  const log = new OutputLog();
  const judged: OutputAppended = log.append({ attempt: 1, offset: 0, text: "Once" }, 1, true, "body");
  const delivered: boolean = judged.accepted && judged.reason !== "output-gap";
  const lacks: OutputCatchup = log.since(1, 0, 1, true);
  const held: boolean = !lacks.news;
  const units: number = log.units + log.attempt;
  // @ts-expect-error: the reasons are a closed union
  const badReason: OutputAppended["reason"] = "gap";
  // @ts-expect-error: a chunk needs its attempt
  log.append({ offset: 0, text: "x" }, 1, true);
  log.free();
  void delivered, held, units, badReason;
}
void example, client, lifecycle, hooks, batches, batchHook, workers, issue29, liveOutput;
