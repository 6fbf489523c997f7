// Who is asking (PROTOCOL.md, "Credentials"): a tenant token
// (`--token TOKEN=TENANT`, for backends) or a browser token (a JWT the
// application's backend mints, verified here with `jose`), and what the
// caller may do. The same rules as the reference server
// (server/src/auth/): a task out of a browser token's scope is 404, a
// right it lacks 403 `right-not-granted`, the tenant-wide endpoints 403
// `tenant-token-required`; an expired token 401 `token-expired`, any other
// bad token 401 `unauthorized`; on the watch routes `?access_token=` takes
// a browser token, never a tenant token (401 `browser-token-required`).

import { createPublicKey, createSecretKey } from "node:crypto";
import { decodeProtectedHeader, errors as jose, jwtVerify } from "jose";
import { HttpError, MAX_ID_BYTES, invalid, notFound, quoted } from "./http.mjs";
import { misreads } from "./misread.mjs";

export const RIGHTS = ["watch", "cancel", "decide", "deliver"];
/** Shortest HMAC secret accepted (RFC 7518 §3.2). */
const MIN_HMAC_BYTES = 32;
/** Most task ids one token may name. */
const MAX_TASKS = 100;

const unauthorized = (message, code = "unauthorized") => new HttpError(401, code, message);

/** The browser-token keys by kid, and the rules tokens are checked against. */
export class BrowserKeys {
  #keys = new Map();
  #audience;
  #leewaySecs;
  #maxTtlSecs;

  /**
   * `specs`: `--browser-token-key` values, `TENANT:KID=ALG:KEY` (ALG HS256
   * with a base64 secret, or EdDSA / ES256 with a base64 SPKI DER public
   * key). Throws an Error naming the flag for anything wrong.
   */
  constructor(specs, tenants, { audience = "taskwire", leewaySecs = 30, maxTtlSecs = 3600 } = {}) {
    const known = new Set(tenants);
    for (const spec of specs) {
      const { kid, key } = parseKey(spec, known);
      if (this.#keys.has(kid)) throw new Error(`--browser-token-key: kid ${JSON.stringify(kid)} is given twice (a kid names one key)`);
      this.#keys.set(kid, key);
    }
    if (audience.trim() === "") throw new Error("--browser-token-audience: must not be blank");
    this.#audience = audience;
    this.#leewaySecs = leewaySecs;
    this.#maxTtlSecs = maxTtlSecs;
  }

  get size() {
    return this.#keys.size;
  }

  get leewaySecs() {
    return this.#leewaySecs;
  }

  /** The tenant and grant of a browser token, or a 401 HttpError. */
  async verify(token) {
    let header;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw unauthorized("Authorization: unknown token (not a tenant token, nor a browser token: not a well-formed JWT)");
    }
    if (typeof header.kid !== "string") throw unauthorized("token: the header has no kid");
    const key = this.#keys.get(header.kid);
    if (key === undefined) throw unauthorized(`token: kid ${quoted(header.kid)} is not a key of this server (retired, or never configured)`);
    let verified;
    try {
      // Only the key's own algorithm: `alg: none`, or an HMAC over a
      // public key, never verify.
      verified = await jwtVerify(token, key.material, {
        algorithms: [key.alg],
        audience: this.#audience,
        clockTolerance: this.#leewaySecs,
        requiredClaims: ["exp", "aud", "sub"],
      });
    } catch (err) {
      throw refusal(err, this.#audience);
    }
    const claims = verified.payload;
    const now = Math.floor(Date.now() / 1000);
    if (misreads("token-no-exp-skew") && claims.exp < now) throw unauthorized("token: expired; ask the backend for a fresh one", "token-expired");
    if (!misreads("token-no-max-lifetime") && claims.exp > now + this.#maxTtlSecs + this.#leewaySecs) {
      throw unauthorized(`token.exp: more than ${this.#maxTtlSecs} s ahead; browser tokens are short-lived`);
    }
    return { tenant: key.tenant, grant: grant(claims) };
  }
}

/** A jose error (or ours) as the 401 to answer. */
function refusal(err, audience) {
  if (err instanceof HttpError) return err;
  if (err instanceof jose.JWTExpired) return unauthorized("token: expired; ask the backend for a fresh one", "token-expired");
  if (err instanceof jose.JWTClaimValidationFailed) {
    if (err.claim === "aud") return unauthorized(`token.aud: must be ${quoted(audience)}`);
    if (err.claim === "nbf") return unauthorized("token: not valid yet (nbf)");
    return unauthorized(`token: claim ${quoted(err.claim ?? "?")} is not as specified (${err.reason ?? err.message})`);
  }
  if (err instanceof jose.JOSEAlgNotAllowed || err instanceof jose.JOSENotSupported) return unauthorized("token: alg is not the key's algorithm");
  if (err instanceof jose.JWSSignatureVerificationFailed) return unauthorized("token: bad signature");
  return unauthorized("Authorization: unknown token (not a tenant token, nor a browser token: not a well-formed JWT)");
}

/** The scope claims, checked. */
function grant(claims) {
  const id = (field, v) => {
    if (typeof v !== "string" || v.trim() === "" || Buffer.byteLength(v) > MAX_ID_BYTES) {
      throw unauthorized(`${field}: must be a non-blank string of at most ${MAX_ID_BYTES} bytes`);
    }
    return v;
  };
  const limits = !misreads("token-no-claim-limits");
  const subject = limits ? id("token.sub", claims.sub) : claims.sub;
  const tasks = claims.tasks ?? [];
  if (!Array.isArray(tasks)) throw unauthorized("token.tasks: claims: must be an array of task ids");
  if (limits && tasks.length > MAX_TASKS) throw unauthorized(`token.tasks: at most ${MAX_TASKS} task ids, got ${tasks.length}`);
  tasks.forEach((t) => id("token.tasks", t));
  const batch = claims.batch ?? undefined;
  if (batch !== undefined) id("token.batch", batch);
  if (tasks.length === 0 && batch === undefined) throw unauthorized("token: needs a scope: a non-empty tasks or batch claim");
  if (misreads("token-exactly-one-scope") && tasks.length > 0 && batch !== undefined) throw unauthorized("token: exactly one of tasks and batch");
  if (!Array.isArray(claims.rights)) throw unauthorized("token.rights: claims: must be an array of rights");
  for (const r of claims.rights) {
    if (!RIGHTS.includes(r)) throw unauthorized(`token.rights: unknown right ${quoted(String(r))} (${RIGHTS.join(", ")})`);
  }
  return { subject, tasks: new Set(tasks), batch, rights: new Set(claims.rights), expiresAt: claims.exp };
}

/** `TENANT:KID=ALG:KEY` → {kid, key}. */
function parseKey(spec, tenants) {
  const redacted = spec.includes("=") ? `${spec.slice(0, spec.indexOf("="))}=…` : "…";
  const bad = (why) => new Error(`--browser-token-key: ${why} in ${JSON.stringify(redacted)}`);
  const eq = spec.indexOf("=");
  if (eq < 0) throw bad("expected TENANT:KID=ALG:KEY");
  const name = spec.slice(0, eq);
  const material = spec.slice(eq + 1);
  const colon = name.lastIndexOf(":");
  if (colon < 0) throw bad("expected TENANT:KID before '='");
  const tenant = name.slice(0, colon);
  const kid = name.slice(colon + 1);
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(kid)) throw bad("KID must be 1-64 of A-Z a-z 0-9 - _ .");
  if (!tenants.has(tenant)) throw new Error(`--browser-token-key: tenant ${JSON.stringify(tenant)} has no --token (tenants: ${[...tenants].join(", ")})`);
  const sep = material.indexOf(":");
  if (sep < 0) throw bad("expected ALG:KEY after '='");
  const alg = material.slice(0, sep);
  const text = material.slice(sep + 1).trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw bad("KEY is not base64");
  const bytes = Buffer.from(text, text.includes("-") || text.includes("_") ? "base64url" : "base64");
  let key;
  if (alg === "HS256") {
    if (bytes.length < MIN_HMAC_BYTES) throw bad(`an HS256 secret must be at least ${MIN_HMAC_BYTES} bytes, got ${bytes.length}`);
    key = createSecretKey(bytes);
  } else if (alg === "EdDSA" || alg === "ES256") {
    const want = alg === "EdDSA" ? "not an Ed25519 public key (base64 DER, SPKI)" : "not a P-256 public key (base64 DER, SPKI)";
    try {
      key = createPublicKey({ key: bytes, format: "der", type: "spki" });
    } catch {
      throw bad(`KEY is ${want}`);
    }
    const ok = alg === "EdDSA" ? key.asymmetricKeyType === "ed25519" : key.asymmetricKeyType === "ec" && key.asymmetricKeyDetails?.namedCurve === "prime256v1";
    if (!ok) throw bad(`KEY is ${want}`);
  } else {
    throw bad(`ALG must be HS256, EdDSA or ES256, got ${JSON.stringify(alg)}`);
  }
  return { kid, key: { tenant, alg, material: key } };
}

/** The caller of a request: its tenant, and what it may do there. */
export class Credential {
  constructor(tenant, browser) {
    this.tenant = tenant;
    /** undefined for a tenant token; else {subject, tasks, batch, rights, expiresAt}. */
    this.browser = browser;
  }

  /** Recorded for cancels and decisions: `user:<sub>`, or `tenant:<name>`. */
  get actor() {
    return this.browser ? `user:${this.browser.subject}` : `tenant:${this.tenant}`;
  }

  /** 404 for a task out of scope, 403 for a right not granted. */
  require(right, taskId) {
    if (!this.browser) return;
    if (!this.browser.tasks.has(taskId)) throw notFound(`taskId: no task with id ${quoted(taskId)}`);
    if (!this.browser.rights.has(right)) throw new HttpError(403, "right-not-granted", `token.rights: does not grant ${quoted(right)}`);
  }

  /** For batch watches: 404 unless the token's `batch` claim names it, 403 without the right. */
  requireBatch(right, batchId) {
    if (!this.browser) return;
    if (this.browser.batch !== batchId) throw notFound(`batchId: no batch with id ${quoted(batchId)}`);
    if (!this.browser.rights.has(right)) throw new HttpError(403, "right-not-granted", `token.rights: does not grant ${quoted(right)}`);
  }

  /** For create and the feed: a browser token is 403. */
  requireTenantToken(what) {
    if (this.browser) {
      throw new HttpError(403, "tenant-token-required", `Authorization: ${what} takes the tenant token (a backend's), not a browser token`);
    }
  }
}

function bearer(authorization) {
  if (authorization === undefined) return undefined;
  const m = /^bearer +(\S+) *$/i.exec(authorization);
  if (!m) throw unauthorized("Authorization: must be Bearer <token>");
  return m[1];
}

/**
 * The request's credential, or 401. `query` (URLSearchParams) only on the
 * watch routes, which also take `?access_token=`.
 */
export async function credentialOf(authorization, config, query) {
  const fromHeader = bearer(authorization);
  const fromUrl = query?.get("access_token") ?? undefined;
  if (fromHeader !== undefined && fromUrl !== undefined) {
    throw invalid("access_token: give the token in Authorization or in access_token, not both");
  }
  const token = fromHeader ?? (fromUrl?.trim() || undefined);
  if (token === undefined) {
    throw unauthorized(query ? "Authorization: a Bearer token is required (or a browser token in access_token)" : "Authorization: a Bearer token is required");
  }
  const tenant = config.tokens.get(token);
  if (tenant !== undefined) {
    if (fromHeader === undefined) {
      throw unauthorized(
        "access_token: a tenant token must never be put in a URL; give a browser token here, or the tenant token in Authorization",
        "browser-token-required",
      );
    }
    return new Credential(tenant);
  }
  if (config.browserKeys.size === 0) throw unauthorized("Authorization: unknown token");
  const { tenant: owner, grant: g } = await config.browserKeys.verify(token);
  return new Credential(owner, g);
}
