// A signed callback request is used once (PROTOCOL.md §Executor callback,
// "Secrets and binding"). A callback id is remembered on its task only
// when its event changed the task (core fix 1), so a request that changed
// nothing is remembered here instead, by what names its exact signed
// bytes: tenant, webhook-id, webhook-timestamp and the body's SHA-256
// (nobody without the secret can change one and keep the signature). The
// same request again is a duplicate callback; a resend signed again (a
// fresh timestamp) is another request. Kept while the timestamp could
// still be accepted, plus a minute.

import { TOLERANCE_SECONDS } from "./sign.mjs";

const MARGIN_SECONDS = 60;

export class UsedRequests {
  /** JSON [tenant, callbackId, at, sha256] → at (seconds). */
  #used = new Map();

  /** Whether the signed request (`{at, sha256}`, or undefined: none) was used. */
  has(tenant, callbackId, signed) {
    return signed !== undefined && this.#used.has(JSON.stringify([tenant, callbackId, signed.at, signed.sha256]));
  }

  /** Remembers a signed request (undefined: none); whether it was new. */
  add(tenant, callbackId, signed) {
    if (signed === undefined || this.has(tenant, callbackId, signed)) return false;
    this.#used.set(JSON.stringify([tenant, callbackId, signed.at, signed.sha256]), signed.at);
    return true;
  }

  /** Forgets requests whose timestamp can no longer be accepted at `nowMs`. */
  forget(nowMs) {
    const before = Math.floor(nowMs / 1000) - TOLERANCE_SECONDS - MARGIN_SECONDS;
    for (const [key, at] of this.#used) if (at < before) this.#used.delete(key);
  }
}
