// Standard Webhooks signatures (https://www.standardwebhooks.com/), as
// PROTOCOL.md §Executor callback uses them.

import { createHmac } from 'node:crypto';

/** The HMAC key of a `whsec_<base64>` secret. */
export function secretKey(secret) {
  if (typeof secret !== 'string' || !secret.startsWith('whsec_')) {
    throw new Error('the callback secret must look like whsec_<base64>');
  }
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  if (key.length === 0) throw new Error('the callback secret has an empty key');
  return key;
}

/**
 * `v1,<base64 HMAC-SHA256>` of `"{id}.{timestamp}.{body}"`; `body` is the
 * exact string or bytes sent.
 */
export function sign(secret, id, timestamp, body) {
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return `v1,${mac.digest('base64')}`;
}

/** Seconds since the epoch, as webhook-timestamp wants them. */
export function nowSeconds(offsetSeconds = 0) {
  return Math.floor(Date.now() / 1000) + offsetSeconds;
}

/**
 * A callback's body: the event's fields and `taskId`, the task the
 * signature is for (PROTOCOL.md §Executor callback, "Secrets and binding").
 */
export function callbackBody(taskId, event) {
  return JSON.stringify({ taskId, ...event });
}

/** The three headers of a signed callback. */
export function signedHeaders(secret, id, body, { timestamp = nowSeconds() } = {}) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(secret, id, timestamp, body),
  };
}
