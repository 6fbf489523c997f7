// Browser tokens as an application's backend mints them (PROTOCOL.md,
// "Credentials"): HS256 JWTs, made with node:crypto so the suite keeps
// no npm dependency. Also the broken ones the token matrix sends.

import { createHmac, randomBytes } from 'node:crypto';

const b64url = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** `KID=BASE64` (a `--browser-key` value) → {kid, secret: Buffer}. */
export function parseBrowserKey(text) {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new Error(`--browser-key: expected KID=BASE64SECRET, got ${JSON.stringify(text)}`);
  const secret = Buffer.from(text.slice(eq + 1), 'base64');
  if (secret.length < 32) throw new Error(`--browser-key: the secret of ${text.slice(0, eq)} must be at least 32 bytes`);
  return { kid: text.slice(0, eq), secret };
}

/** A key no backend was ever configured with (a retired key, as far as it knows). */
export function retiredKey() {
  return { kid: `retired-${randomBytes(4).toString('hex')}`, secret: randomBytes(32) };
}

const now = () => Math.floor(Date.now() / 1000);

/** Claims for `tasks` with `rights`, valid for 10 minutes. */
export function claims(audience, tasks, rights, extra = {}) {
  return { sub: 'conformance-user', aud: audience, exp: now() + 600, tasks, rights, ...extra };
}

/** An HS256 token signed with `key` ({kid, secret}). */
export function hs256(key, payload, header = {}) {
  const head = b64url({ alg: 'HS256', typ: 'JWT', kid: key.kid, ...header });
  const body = b64url(payload);
  const sig = createHmac('sha256', key.secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

/** `alg: none`, no signature. */
export function algNone(key, payload) {
  return `${b64url({ alg: 'none', typ: 'JWT', kid: key.kid })}.${b64url(payload)}.`;
}

/** `token` with its claims replaced and its signature kept. */
export function tampered(token, payload) {
  const [head, , sig] = token.split('.');
  return `${head}.${b64url(payload)}.${sig}`;
}

export const expiredAgo = (secs) => ({ exp: now() - secs });
export const notBefore = (secs) => ({ nbf: now() + secs });
