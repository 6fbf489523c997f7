// Standard Webhooks signatures (https://www.standardwebhooks.com/), as
// PROTOCOL.md §Executor callback uses them:
//
//   webhook-id: cb_…            the callback id
//   webhook-timestamp: 1764409200   seconds since the epoch, ±5 minutes
//   webhook-signature: v1,<base64 HMAC-SHA256> [v1,… …]
//
// signed over the bytes "{webhook-id}.{webhook-timestamp}.{raw body}" with
// the base64-decoded part of a `whsec_…` secret of the task's tenant.
// Checked in two steps, so that nothing of an unsigned request is kept:
// `checkHeaders` before any of the body is read, then a `verifier` fed the
// body as it arrives.

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { HttpError, quoted, readBody, unauthorized } from "./http.mjs";

/** How far webhook-timestamp may be from the server's clock, either way. */
export const TOLERANCE_SECONDS = 5 * 60;

/** The public development secret (the reference server's default). Never use it for real. */
export const DEV_SECRET = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const SIGNATURE_HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"];

/** The HMAC key of a `whsec_<base64>` secret; throws an Error saying what is wrong. */
export function secretKey(secret) {
  if (!secret.startsWith("whsec_")) throw new Error("--callback-secret: must start with whsec_");
  const b64 = secret.slice("whsec_".length);
  if (!BASE64.test(b64)) throw new Error("--callback-secret: invalid base64 after whsec_");
  const key = Buffer.from(b64, "base64");
  if (key.length === 0) throw new Error("--callback-secret: the key must not be empty");
  return key;
}

/**
 * The callback secrets of every tenant, from `--callback-secret` values:
 * `TENANT=whsec_…` is one of that tenant's (repeat it for a rotation: all
 * are accepted); a bare `whsec_…` is shared by every tenant without one of
 * its own; none at all is the public development secret, shared. Throws an
 * Error for a tenant left without a secret, a TENANT= that no --token
 * names, or a tenant's secret that is also another's.
 */
export class Keyring {
  #own = new Map();
  #shared = [];
  /** A key nobody holds: hashed for tasks without secrets (see routes.mjs). */
  decoy = randomBytes(32);
  development;

  constructor(specs, tenants) {
    const known = new Set(tenants);
    for (const spec of specs) {
      const eq = spec.indexOf("=");
      const tenant = !spec.startsWith("whsec_") && eq > 0 ? spec.slice(0, eq) : undefined;
      const key = secretKey(tenant === undefined ? spec : spec.slice(eq + 1));
      if (tenant !== undefined && !known.has(tenant)) {
        throw new Error(`--callback-secret: tenant ${JSON.stringify(tenant)} has no --token (tenants: ${[...known].join(", ")})`);
      }
      const into = tenant === undefined ? this.#shared : this.#own.get(tenant) ?? [];
      if (tenant !== undefined) this.#own.set(tenant, into);
      if (!into.some((k) => k.equals(key))) into.push(key);
    }
    this.development = specs.length === 0;
    if (this.development) this.#shared.push(secretKey(DEV_SECRET));
    const without = [...known].filter((t) => !this.#own.has(t));
    if (this.#shared.length === 0 && without.length > 0) {
      throw new Error(`--callback-secret: no secret for tenant(s) ${without.join(", ")}: give each TENANT=whsec_…, or one shared whsec_… for every tenant without one`);
    }
    for (const [tenant, keys] of this.#own) {
      for (const key of keys) {
        const other = [...this.#own].find(([t, ks]) => t !== tenant && ks.some((k) => k.equals(key)));
        const clash = other ? `tenant ${JSON.stringify(other[0])}` : this.#shared.some((k) => k.equals(key)) ? "the shared secret" : null;
        if (clash) throw new Error(`--callback-secret: a secret of tenant ${JSON.stringify(tenant)} is also ${clash}; each tenant's secrets must be its own`);
      }
    }
  }

  /** The keys a callback for one of `tenant`'s tasks may be signed with. */
  keysOf(tenant) {
    return this.#own.get(tenant) ?? this.#shared;
  }
}

/** `v1,<base64>` for a message (executors and tests use it). */
export function sign(key, id, timestamp, body) {
  return `v1,${createHmac("sha256", key).update(Buffer.from(id, "latin1")).update(`.${timestamp}.`).update(body).digest("base64")}`;
}

const refused = (message) => new HttpError(401, "unauthorized", message);

/** A `v1,<base64>` candidate decoded to a 32-byte tag, or null. */
function v1Tag(candidate) {
  if (!candidate.startsWith("v1,")) return null;
  const b64 = candidate.slice(3);
  if (!BASE64.test(b64)) return null;
  const tag = Buffer.from(b64, "base64");
  return tag.length === 32 ? tag : null;
}

/**
 * Checks a callback's signature headers alone (before the body): each
 * exactly once, a timestamp within the tolerance, at least one
 * well-formed `v1` signature. Returns `{id, timestamp, tags}`; throws 401.
 * `distinct` is Node's `req.headersDistinct` (every line of a header).
 */
export function checkHeaders(distinct, nowSeconds = Math.floor(Date.now() / 1000)) {
  const [id, timestamp, signatures] = SIGNATURE_HEADERS.map((name) => {
    const values = distinct[name] ?? [];
    if (values.length === 0) throw refused(`${name}: header is required`);
    if (values.length > 1) {
      const hint = name === "webhook-signature" ? " (several signatures go space-separated in one header)" : "";
      throw refused(`${name}: header sent more than once${hint}`);
    }
    return values[0];
  });
  if (!/^[0-9]{1,15}$/.test(timestamp)) {
    throw refused("webhook-timestamp: must be an integer (seconds since the epoch)");
  }
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) {
    throw refused(`webhook-timestamp: ${timestamp} is more than ${TOLERANCE_SECONDS} s from the server's clock`);
  }
  const tags = signatures.split(" ").map(v1Tag).filter((t) => t !== null);
  if (tags.length === 0) throw refused("webhook-signature: no well-formed v1 signature (v1,<base64 of 32 bytes>)");
  return { id, timestamp, tags };
}

/**
 * HMACs of the checked headers under `keys`, fed the body as it arrives.
 * `finish()` says whether any signature matches any key (a `decoy`
 * verifier hashes the same way and never matches).
 */
export function verifier({ id, timestamp, tags }, keys, { decoy = false } = {}) {
  const macs = keys.map((key) => createHmac("sha256", key).update(Buffer.from(id, "latin1")).update(`.${timestamp}.`));
  return {
    update: (chunk) => macs.forEach((m) => m.update(chunk)),
    finish() {
      let valid = false;
      for (const m of macs) {
        const expected = m.digest();
        // Every pair is compared, so the time says nothing about which matched.
        for (const tag of tags) valid = timingSafeEqual(tag, expected) || valid;
      }
      return valid && !decoy;
    },
  };
}

/**
 * Steps 2 and 3 of every signed request (PROTOCOL.md §Executor callback,
 * "Order of the checks"; callbacks and output appends alike): the secrets
 * of the task's tenant, then the body, read within the callback body
 * timeout and hashed as it arrives. An unknown task has no secrets: its
 * body is hashed with a key nobody holds and dropped, and the answer is a
 * wrong signature's, so existence is not revealed. Returns `{tenant,
 * raw}`; throws 401 when no secret of the tenant signed the body.
 */
export async function readSigned(req, signed, taskId, { store, config, limit }) {
  const tenant = store.tenantOf(taskId);
  const keys = tenant === undefined ? [] : config.keyring.keysOf(tenant);
  const check = keys.length > 0 ? verifier(signed, keys) : verifier(signed, [config.keyring.decoy], { decoy: true });
  const raw = await readBody(req, { timeoutMs: config.callbackBodyTimeoutMs, onChunk: check.update, keep: keys.length > 0, limit });
  if (!check.finish()) {
    throw unauthorized(`webhook-signature: no valid signature for task ${quoted(taskId)} (check the secret of the task's tenant, and the task id)`);
  }
  return { tenant, raw };
}
