// What the page does to a task besides following it: cancel it, decide on
// its held draft, kill its worker (a demo control), and show the notes the
// demo's workers leave for what no task history holds (a killed worker's
// task taken over by another, a cancel the work could not honour).
//
// Cancel and decisions go through `TaskClient.cancel` / `decide` with the
// task's browser token, as a real page would; the answer says what the
// server made of them (`changed`, `reason`), and a refusal is shown, not
// swallowed. What the task then does arrives through the watch.

/**
 * The workers' notes the log shows (`killed` is not: the page logs its
 * own kill from the answer, at once).
 */
const NOTE_KINDS = new Set(["replaced", "cannot-cancel"]);

export class Actions {
  #app;
  /** The newest note already logged (notes carry an increasing `seq`). */
  #lastNote = 0;

  constructor(app) {
    this.#app = app;
  }

  /** POST /v1/tasks/{id}/cancel. */
  async cancel(t) {
    try {
      const answer = await this.#app.taskClient.cancel(t.id, { reason: "cancelled on the demo page" });
      const state = answer.task?.state;
      const text = {
        "cancel-requested": "cancel requested: the worker learns it from its next callback answer",
        cancelled: "cancelled at once (no worker held it)",
        "duplicate-cancel": "cancel already requested (duplicate-cancel: nothing new)",
      }[answer.reason];
      t.log("cancel", text ?? `cancel: ${answer.reason} (task ${state})`, { reason: answer.reason, changed: answer.changed });
    } catch (e) {
      t.log("error", `cancel failed: ${e.message}`, { code: e.code });
    }
  }

  /**
   * POST /v1/tasks/{id}/decisions on the draft shown, or with
   * `replaced: true` on the draft a revision replaced, which the server
   * must refuse (`stale-decision`).
   */
  async decide(t, decision, { replaced }) {
    const draft = replaced ? t.replacedDraft : t.entry.task;
    if (!draft?.artifactHash) return;
    const { artifactHash, version } = draft;
    t.card.showRefusal(null);
    try {
      const answer = await this.#app.taskClient.decide(t.id, { decision, artifactHash, version, reason: `${decision} from the demo page` });
      const words = decision.replace("_", " ");
      if (answer.changed) {
        t.log("decide", `${words} on draft ${artifactHash} (v${version}): ${answer.reason}`, { reason: answer.reason, decision });
        return;
      }
      const why =
        answer.reason === "stale-decision"
          ? `decision refused (stale-decision): draft ${artifactHash} of v${version} is no longer the one waiting`
          : `decision changed nothing (${answer.reason})`;
      t.card.showRefusal(why, answer.reason);
      t.log("decide", why, { reason: answer.reason, decision, refused: "true" });
    } catch (e) {
      t.card.showRefusal(`decision failed: ${e.message}`, e.code);
      t.log("error", `decision failed: ${e.message}`, { code: e.code });
    }
  }

  /** POST /v1/demo/tasks/{id}/kill-worker: the worker dies with its jobs. */
  async kill(t) {
    try {
      const { attempt, worker } = await this.#app.api("POST", `/v1/demo/tasks/${t.id}/kill-worker`);
      t.log("executor", `killed ${worker} (attempt ${attempt}): no more heartbeats, its lease will lapse`, { note: "kill-sent", attempt });
    } catch (e) {
      t.log("error", `kill the worker: ${e.message}`);
    }
  }

  /** Logs the workers' notes not logged yet (from /v1/demo/stats). */
  showNotes(notes) {
    if (!Array.isArray(notes)) return;
    for (const note of notes) {
      if (!(note?.seq > this.#lastNote) || !NOTE_KINDS.has(note.kind)) continue;
      this.#lastNote = note.seq;
      const t = this.#app.tracked.get(note.taskId);
      if (t) t.log("executor", note.text, { note: note.kind });
    }
  }
}
