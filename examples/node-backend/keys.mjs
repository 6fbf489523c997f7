// Create idempotency keys (PROTOCOL.md §Create a task, §Batches): per
// tenant, one namespace for single and batch creates, so a key that made
// a task cannot make a batch, nor the other way round (422
// `idempotency-key-reused`). A key remembers what it made and the request
// in canonical form (create.mjs), which a replay must equal.

import { HttpError, quoted } from "./http.mjs";
import { EXACT_REQUEST } from "./create.mjs";

export class CreateKeys {
  /** JSON [tenant, key] → {taskId, request} or {batchId, request} */
  #keys = new Map();

  /** Remembers what a create record under `key` made: `{taskId, request}` or `{batchId, request}`. */
  remember(tenant, key, made) {
    this.#keys.set(JSON.stringify([tenant, key]), made);
  }

  /**
   * What `idem` ({key, request, legacyRequest?} or undefined) already made
   * when this request is the same one (a replay): `{taskId}` or
   * `{batchId}`. Undefined for a new key (or none). A key used with
   * another request, or for the other kind of create (`made` is "task" or
   * "batch"), is 422.
   */
  replayOf(tenant, idem, made) {
    if (idem === undefined) return undefined;
    const known = this.#keys.get(JSON.stringify([tenant, idem.key]));
    if (known === undefined) return undefined;
    const sameKind = made === "task" ? known.taskId !== undefined : known.batchId !== undefined;
    // Keys of old journals hold the double-based form (create.mjs, legacyCreateRequest).
    const exact = made === "batch" || known.request.startsWith(EXACT_REQUEST);
    if (sameKind && known.request === (exact ? idem.request : idem.legacyRequest)) return known;
    const what = known.batchId === undefined ? "a task" : "a batch";
    throw new HttpError(422, "idempotency-key-reused", `Idempotency-Key: ${quoted(idem.key)} was used with a different body (it created ${what})`);
  }
}
