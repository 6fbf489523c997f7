// The live-output streams of the backend's tasks (PROTOCOL.md §Live
// output): one core `OutputLog` per task and stream, holding the newest
// attempt's text inside WebAssembly. Every judgement is core's; this only
// finds the stream and tells core where the task is now (its attempt,
// whether it is live), as the Rust server's store does
// (server/src/store/output.rs).
//
// Durability is the store's: an append that changed a stream is a
// journal record (`{"op":"output",…}`, store.mjs), and a replay runs the
// records again through fresh logs, in order, so each chunk meets the
// task as it was when it was judged and is judged the same.

import { OutputLog } from "taskwire";
import { isTerminal } from "./lifecycle.mjs";
import { Watchers } from "./watch.mjs";

export class OutputStreams {
  /** taskId → stream name → OutputLog (only streams that were appended to) */
  #logs = new Map();
  /** What a stream nothing was appended to reads as. */
  #empty = new OutputLog();
  /**
   * Who waits for an append to a task's streams: apart from the task's
   * watchers, so that an append wakes no follower that did not ask for
   * output (PROTOCOL.md: without `output` nothing changes).
   */
  #watchers = new Watchers();

  /**
   * Core's judgement of the chunk {taskId, stream, attempt, offset, text}
   * (a bad value is an `invalid-request` error naming `body.attempt`,
   * `.offset`, `.text`), the task's current fields being `view`.
   */
  append({ taskId, stream, attempt, offset, text }, view) {
    const chunk = { attempt, offset, text };
    const known = this.#logs.get(taskId)?.get(stream);
    const log = known ?? new OutputLog();
    const judged = log.append(chunk, view.attempts, !isTerminal(view.state), "body");
    if (known === undefined) {
      if (judged.reason === "appended") this.#streamsOf(taskId).set(stream, log);
      else log.free();
    }
    return judged;
  }

  /**
   * What a follower holding `wanted` ({stream, attempt, offset}) of
   * `taskId` lacks, the task's current fields being `view`: `{attempt,
   * offset, text, complete, news}` (core's `OutputLog::since`).
   */
  since(taskId, { stream, attempt, offset }, view) {
    const log = this.#logs.get(taskId)?.get(stream) ?? this.#empty;
    return log.since(attempt, offset, view.attempts, !isTerminal(view.state));
  }

  /** Calls `fn(stream)` after each append to one of task `id`'s streams; returns the unsubscribe. */
  watch(id, fn) {
    return this.#watchers.watch(id, fn);
  }

  /** Wakes the watchers of task `id`'s streams: `stream` gained text (once it is on disk). */
  wake(id, stream) {
    this.#watchers.wake(id, stream);
  }

  #streamsOf(taskId) {
    let streams = this.#logs.get(taskId);
    if (!streams) this.#logs.set(taskId, (streams = new Map()));
    return streams;
  }
}
