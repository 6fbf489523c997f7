// A task's live output on the task's own watch routes (PROTOCOL.md §Live
// output, Following): `GET /v1/tasks/{id}/resume` and `/events` with
// `?output=<stream>[&outputAttempt=A&outputOffset=O]`.
//
// Only a follower that asks gets output: the routes without `output`
// answer as before, and an append wakes none of their held requests
// (appends wake `store.watchOutput`, not `store.watch`). With it, one held
// request serves both: it wakes on the task's next version or on an
// append to the stream it follows, and says what the follower lacks as
// core's `OutputLog::since` decides (`store.readOutput`).

import { isTerminal } from "./lifecycle.mjs";
import { outputJson } from "./output.mjs";

/** A resume answer with the output after its other fields. */
export function withOutput(answer, wanted, lacks) {
  return { ...answer, output: outputJson(wanted.stream, lacks) };
}

/**
 * Resolves when the task `id` changes, when an append gives the follower
 * holding `wanted` something it lacks (core's `news`), when `waitMs`
 * passes or when the client goes away, whichever comes first. The caller
 * then answers, unless `res.destroyed`.
 */
export function changeOrOutput(store, id, wanted, waitMs, res) {
  return new Promise((done) => {
    const finish = () => {
      clearTimeout(timer);
      unwatch();
      unwatchOutput();
      res.off("close", finish);
      done();
    };
    const unwatch = store.watch(id, finish);
    const unwatchOutput = store.watchOutput(id, (stream) => {
      // An append to another stream is nothing this follower lacks.
      if (stream === wanted.stream && store.readOutput(id, wanted).news) finish();
    });
    const timer = setTimeout(finish, waitMs);
    res.on("close", finish);
  });
}

/**
 * Whether an event stream starting at a terminal version with `wanted`
 * is answered 204 (nothing will ever follow): the follower lacks no text
 * and no newer attempt, as the Rust server judges it (its completeness
 * the follower learns from the terminal version itself).
 */
export function nothingToFollow(store, id, wanted) {
  const lacks = store.readOutput(id, wanted);
  return lacks.text === "" && lacks.attempt <= wanted.attempt;
}

/**
 * Serves an event stream with output (opened by the caller, `stream` from
 * watch.mjs's `openStream`): `resume` messages as without output (their
 * `id` the version), and an `output` message (no id: `Last-Event-ID`
 * carries the version only) whenever the follower lacks text, a newer
 * attempt or the end. It ends once the task's terminal message and the
 * output's `complete` one are sent. `first` is the answer to `cursor`.
 */
export function followWithOutput(stream, store, id, cursor, wanted, first) {
  let taskDone = false;
  let outputDone = false;
  let held = { ...wanted };
  const sendOutput = () => {
    if (outputDone) return;
    const lacks = store.readOutput(id, held);
    if (!lacks.news) return;
    // What the follower holds after this message (offsets are UTF-16
    // units, as JavaScript strings count them).
    held = { stream: wanted.stream, attempt: lacks.attempt, offset: lacks.offset + lacks.text.length };
    outputDone = lacks.complete;
    stream.send("output", undefined, JSON.stringify(outputJson(wanted.stream, lacks)));
  };
  const endIfDone = () => {
    if (taskDone && outputDone) stream.end();
  };
  const sendTask = (answer) => {
    cursor = answer.task.version;
    taskDone = isTerminal(answer.task.state);
    stream.send("resume", cursor, JSON.stringify(answer));
    sendOutput();
    endIfDone();
  };
  stream.onClose(store.watch(id, () => {
    if (taskDone) return;
    const answer = store.resume(id, cursor);
    if (answer.mode !== "caught-up") sendTask(answer);
  }));
  stream.onClose(store.watchOutput(id, (name) => {
    if (name !== wanted.stream) return;
    sendOutput();
    endIfDone();
  }));
  sendTask(first);
}
