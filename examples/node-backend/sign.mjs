// Standard Webhooks signatures (https://www.standardwebhooks.com/), as
// PROTOCOL.md §Executor callback uses them:
//
//   webhook-id: cb_…            the callback id
//   webhook-timestamp: 1764409200   seconds since the epoch, ±5 minutes
//   webhook-signature: v1,<base64 HMAC-SHA256> [v1,… …]
//
// signed over the bytes "{webhook-id}.{webhook-timestamp}.{raw body}" with
// the base64-decoded part of the `whsec_…` secret. Verification works on
// the raw body, before anything parses it.

import { createHmac, timingSafeEqual } from "node:crypto";
import { HttpError } from "./http.mjs";

/** How far webhook-timestamp may be from the server's clock, either way. */
export const TOLERANCE_SECONDS = 5 * 60;

/** The public development secret (the reference server's default). Never use it for real. */
export const DEV_SECRET = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The HMAC key of a `whsec_<base64>` secret; throws an Error saying what is wrong. */
export function secretKey(secret) {
  if (!secret.startsWith("whsec_")) throw new Error("--callback-secret: must start with whsec_");
  const b64 = secret.slice("whsec_".length);
  if (!BASE64.test(b64)) throw new Error("--callback-secret: invalid base64 after whsec_");
  const key = Buffer.from(b64, "base64");
  if (key.length === 0) throw new Error("--callback-secret: the key must not be empty");
  return key;
}

/** `v1,<base64>` for a message (executors and tests use it). */
export function sign(key, id, timestamp, body) {
  return `v1,${mac(key, Buffer.from(id, "latin1"), String(timestamp), body).toString("base64")}`;
}

function mac(key, idBytes, timestamp, body) {
  return createHmac("sha256", key)
    .update(idBytes)
    .update(`.${timestamp}.`)
    .update(body)
    .digest();
}

const refused = (message) => new HttpError(401, "unauthorized", message);

/**
 * Checks a callback's signature headers against its raw body and returns
 * the `webhook-id` (the callback id). Throws 401 otherwise.
 * `headers` are Node's (lower-case names, latin1 values: the bytes sent).
 */
export function verify(key, headers, body, nowSeconds = Math.floor(Date.now() / 1000)) {
  const get = (name) => {
    const v = headers[name];
    if (typeof v !== "string") throw refused(`${name}: header is required`);
    return v;
  };
  const id = get("webhook-id");
  const timestamp = get("webhook-timestamp");
  const signatures = get("webhook-signature");
  if (!/^[0-9]{1,15}$/.test(timestamp)) {
    throw refused("webhook-timestamp: must be an integer (seconds since the epoch)");
  }
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) {
    throw refused(`webhook-timestamp: ${timestamp} is more than ${TOLERANCE_SECONDS} s from the server's clock`);
  }
  const expected = mac(key, Buffer.from(id, "latin1"), timestamp, body);
  const valid = signatures.split(" ").some((candidate) => {
    if (!candidate.startsWith("v1,")) return false;
    const b64 = candidate.slice(3);
    if (!BASE64.test(b64)) return false;
    const tag = Buffer.from(b64, "base64");
    // timingSafeEqual needs equal lengths; a length says nothing secret.
    return tag.length === expected.length && timingSafeEqual(tag, expected);
  });
  if (!valid) throw refused("webhook-signature: no valid v1 signature");
  return id;
}
