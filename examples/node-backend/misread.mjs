// Test-only: plausible misreadings of PROTOCOL.md, one per rule, so that a
// test can prove the conformance suite fails each one and names the rule
// (tests/js/misreadings.test.mjs). A backend written from the documents
// alone could make any of them; this one never does unless the
// environment variable TASKWIRE_MISREAD names one. There is no flag, no
// default and no other way in, and a backend started with it says so on
// stderr (server.mjs), so no deployment runs one by accident.
//
// Only rules this backend decides itself can be misread here. The rules
// the core judges (fencing, absorption, a lease never shortened, a lapse
// after a cancel, which clock wins) reach it through TaskBook, so a
// misreading of them would be a second implementation of the rule, not a
// switch; the core's own vectors pin them.

/** Each misreading, and the PROTOCOL.md rule it breaks. */
export const MISREADINGS = {
  "token-no-max-lifetime": "§Credentials: a browser token's exp at most the maximum lifetime (+ skew) ahead",
  "token-no-exp-skew": "§Credentials: exp allows the clock skew",
  "token-exactly-one-scope": "§Credentials: a token needs at least one of tasks and batch (both allowed)",
  "token-no-claim-limits": "§Credentials: at most 100 task ids, a sub of at most 255 bytes",
  "authorization-last-wins": "§Credentials: only the first Authorization header counts",
  "sse-outlives-token": "§Credentials: a stream lasts no longer than its token",
  "start-recovers-unknown": "§Lifecycle › Leases: a start does not bring an unknown task back",
  "stale-progress-no-renew": "§Lifecycle › Leases: a stale progress still renews the lease",
  "sweeper-notifies-at-now": "§Lifecycle › The sweeper: a notification at the time the change fell due",
  "cancel-requested-in-ineffective": "§Lifecycle › Cancel: cancelRequested only while cancelling",
  "resume-task-with-input": "§Resume: the answer's task is the TaskView, without kind and input",
  "callback-task-id-optional": "§Executor callback / §Versioning: a callback body names its task (taskId)",
};

const chosen = process.env.TASKWIRE_MISREAD ?? "";
if (chosen !== "" && !Object.hasOwn(MISREADINGS, chosen)) {
  throw new Error(`TASKWIRE_MISREAD: unknown misreading ${JSON.stringify(chosen)} (one of ${Object.keys(MISREADINGS).join(", ")})`);
}

/** The misreading this process makes, or "" (always, unless a test set TASKWIRE_MISREAD). */
export const MISREAD = chosen;

/** True when this process deliberately misreads `name`. */
export const misreads = (name) => chosen === name;
