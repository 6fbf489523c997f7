// Configuration of a conformance run: flags first, then environment.

import { parseArgs } from 'node:util';
import { secretKey } from './sign.mjs';
import { parseBrowserKey } from './tokens.mjs';

export const USAGE = `usage: node tests/conformance/run.mjs <baseUrl> [options]

  --token TOKEN            tenant A's bearer token        (TASKWIRE_TOKEN)
  --token-b TOKEN          a second tenant's token, for   (TASKWIRE_TOKEN_B)
                           the isolation checks (skipped without it)
  --callback-secret whsec_…  tenant A's executor callback secret (TASKWIRE_CALLBACK_SECRET)
  --callback-secret-b whsec_… tenant B's, when it has its own (TASKWIRE_CALLBACK_SECRET_B;
                           the per-tenant secret checks are skipped without it)
  --browser-key KID=BASE64 an HS256 browser-token key of  (TASKWIRE_BROWSER_KEY, comma-separated)
                           tenant A the backend accepts; repeat it for a
                           rotation (the token checks are skipped without it)
  --browser-key-b KID=BASE64 one of tenant B's             (TASKWIRE_BROWSER_KEY_B)
  --browser-audience AUD   the aud the backend expects    (TASKWIRE_BROWSER_AUDIENCE, default taskwire)
  --retention N            the server's resume window     (TASKWIRE_RETENTION, default 8, at least 2)
  --cors-origin ORIGIN     an origin the backend allows   (TASKWIRE_CORS_ORIGIN)
                           by CORS (the CORS checks are skipped without it)
  --concurrency N          checks run at once             (TASKWIRE_CONCURRENCY, default 32;
                           each holds one to three connections)
  --tenant NAME            tenant A's name, as the backend (TASKWIRE_TENANT)
                           knows it: the taskwire-tenant header of a
                           worker's claim (required unless --no-workers)
  --no-workers             the backend offers no workers  (TASKWIRE_NO_WORKERS=1)
                           (no POST /v1/work/claim): skips the claim checks;
                           without it they are required
  --no-output              the backend offers no live output (TASKWIRE_NO_OUTPUT=1)
                           (no POST /v1/tasks/{id}/output/{stream}):
                           skips the output checks
  --shared-secret          the callback secret is the     (TASKWIRE_SHARED_SECRET=1)
                           backend's one secret shared by every tenant, B's
                           too (needs --token-b, not --callback-secret-b):
                           runs the shared fleet's fairness check
  --token-skew-secs N      the clock skew the backend     (TASKWIRE_TOKEN_SKEW_SECS, default 30)
                           allows on a browser token's exp and nbf
  --token-max-lifetime-secs N the longest a browser token (TASKWIRE_TOKEN_MAX_LIFETIME_SECS,
                           may still be valid when used   default 3600)
  --only REGEX             run only the checks whose      (TASKWIRE_ONLY)
                           "section: name" matches
  --strict                 checks marked as a known       (TASKWIRE_STRICT=1)
                           deviation of the reference server fail the run
                           too (without it they run and report, as todo)

The base URL may also come from TASKWIRE_BASE_URL.`;

/** Parses argv and env into a config, or throws an Error with the usage. */
export function configFrom(argv, env = process.env) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      token: { type: 'string' },
      'token-b': { type: 'string' },
      'callback-secret': { type: 'string' },
      'callback-secret-b': { type: 'string' },
      retention: { type: 'string' },
      'browser-key': { type: 'string', multiple: true },
      'browser-key-b': { type: 'string' },
      'browser-audience': { type: 'string' },
      'cors-origin': { type: 'string' },
      concurrency: { type: 'string' },
      tenant: { type: 'string' },
      'no-workers': { type: 'boolean' },
      'no-output': { type: 'boolean' },
      'shared-secret': { type: 'boolean' },
      'token-skew-secs': { type: 'string' },
      'token-max-lifetime-secs': { type: 'string' },
      strict: { type: 'boolean' },
      only: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) throw new UsageError('');
  return checkConfig({
    baseUrl: positionals[0] ?? env.TASKWIRE_BASE_URL,
    token: values.token ?? env.TASKWIRE_TOKEN,
    tokenB: values['token-b'] ?? env.TASKWIRE_TOKEN_B,
    secret: values['callback-secret'] ?? env.TASKWIRE_CALLBACK_SECRET,
    secretB: values['callback-secret-b'] ?? env.TASKWIRE_CALLBACK_SECRET_B,
    retention: values.retention ?? env.TASKWIRE_RETENTION,
    corsOrigin: values['cors-origin'] ?? env.TASKWIRE_CORS_ORIGIN,
    concurrency: values.concurrency ?? env.TASKWIRE_CONCURRENCY,
    browserKeys: values['browser-key'] ?? (env.TASKWIRE_BROWSER_KEY ? env.TASKWIRE_BROWSER_KEY.split(',') : []),
    browserKeyB: values['browser-key-b'] ?? env.TASKWIRE_BROWSER_KEY_B,
    browserAudience: values['browser-audience'] ?? env.TASKWIRE_BROWSER_AUDIENCE,
    tenant: values.tenant ?? env.TASKWIRE_TENANT,
    noWorkers: values['no-workers'] ?? flag(env.TASKWIRE_NO_WORKERS, 'TASKWIRE_NO_WORKERS'),
    noOutput: values['no-output'] ?? flag(env.TASKWIRE_NO_OUTPUT, 'TASKWIRE_NO_OUTPUT'),
    sharedSecret: values['shared-secret'] ?? flag(env.TASKWIRE_SHARED_SECRET, 'TASKWIRE_SHARED_SECRET'),
    tokenSkewSecs: values['token-skew-secs'] ?? env.TASKWIRE_TOKEN_SKEW_SECS,
    tokenMaxLifetimeSecs: values['token-max-lifetime-secs'] ?? env.TASKWIRE_TOKEN_MAX_LIFETIME_SECS,
    strict: values.strict ?? flag(env.TASKWIRE_STRICT, 'TASKWIRE_STRICT'),
    only: values.only ?? env.TASKWIRE_ONLY,
  });
}

export class UsageError extends Error {}

/** A boolean from the environment: unset, empty, `0` or `false` is false; `1` or `true` true. */
function flag(value, name) {
  if (value === undefined || value === '' || value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return true;
  throw new UsageError(`${name} must be 1, true, 0 or false, got ${value}`);
}

/** How many checks run at once unless told: enough to keep a backend busy, few enough for a small one. */
export const DEFAULT_CONCURRENCY = 32;

/**
 * Validates and normalizes `{baseUrl, token, tokenB, secret, secretB,
 * retention, corsOrigin, concurrency, browserKeys, browserKeyB,
 * browserAudience, tenant, noWorkers, sharedSecret, tokenSkewSecs,
 * tokenMaxLifetimeSecs, strict, only}`.
 */
export function checkConfig({ baseUrl, token, tokenB, secret, secretB, retention, corsOrigin, concurrency, browserKeys = [], browserKeyB, browserAudience, tenant, noWorkers = false, noOutput = false, sharedSecret = false, tokenSkewSecs, tokenMaxLifetimeSecs, strict = false, only }) {
  if (!baseUrl) throw new UsageError('a base URL is required');
  let url;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new UsageError(`not a URL: ${baseUrl}`);
  }
  if (!['http:', 'https:'].includes(url.protocol)) throw new UsageError(`not an http(s) URL: ${baseUrl}`);
  if (!token) throw new UsageError('a bearer token is required (--token or TASKWIRE_TOKEN)');
  if (tokenB && tokenB === token) throw new UsageError('--token-b must be another tenant\'s token');
  if (!secret) {
    throw new UsageError('the callback secret is required (--callback-secret or TASKWIRE_CALLBACK_SECRET)');
  }
  try {
    secretKey(secret);
    if (secretB) secretKey(secretB);
  } catch (err) {
    throw new UsageError(err.message);
  }
  if (secretB && !tokenB) throw new UsageError('--callback-secret-b needs --token-b (the tenant it belongs to)');
  if (secretB && secretB === secret) throw new UsageError('--callback-secret-b must be another secret than tenant A\'s');
  const r = retention === undefined || retention === '' ? 8 : Number(retention);
  // The seed's client at version 3 resumes with versions 4 and 5 as a
  // delta, so the checks need a window of at least 2.
  if (!Number.isInteger(r) || r < 2 || r > 10_000) {
    throw new UsageError(`--retention must be an integer from 2 to 10000, got ${retention}`);
  }
  const c = concurrency === undefined || concurrency === '' ? DEFAULT_CONCURRENCY : Number(concurrency);
  if (!Number.isInteger(c) || c < 1 || c > 1000) {
    throw new UsageError(`--concurrency must be an integer from 1 to 1000, got ${concurrency}`);
  }
  let keys;
  let keyB;
  try {
    keys = browserKeys.filter((k) => k !== '').map((k) => (typeof k === 'string' ? parseBrowserKey(k) : k));
    keyB = browserKeyB ? (typeof browserKeyB === 'string' ? parseBrowserKey(browserKeyB) : browserKeyB) : null;
  } catch (err) {
    throw new UsageError(err.message);
  }
  if (keyB && !tokenB) throw new UsageError('--browser-key-b needs --token-b (the tenant it belongs to)');
  // PROTOCOL.md §Workers: the claim checks are required. A backend that
  // offers no workers says so (--no-workers); a 404 on the route alone
  // never skips them.
  if (!noWorkers && !tenant) {
    throw new UsageError(
      "tenant A's name is required for the worker checks (--tenant or TASKWIRE_TENANT: a claim names its tenant in taskwire-tenant); " +
        'for a backend that offers no workers (no POST /v1/work/claim), pass --no-workers',
    );
  }
  if (tenant && (tenant.trim() === '' || Buffer.byteLength(tenant) > 255)) {
    throw new UsageError(`--tenant must be a non-blank name of at most 255 bytes, got ${JSON.stringify(tenant)}`);
  }
  if (sharedSecret && (!tokenB || secretB)) {
    throw new UsageError("--shared-secret says tenant B is signed for with A's secret: it needs --token-b and no --callback-secret-b");
  }
  const skew = seconds(tokenSkewSecs, 30, 0, 300, '--token-skew-secs');
  const lifetime = seconds(tokenMaxLifetimeSecs, 3600, 1, 604_800, '--token-max-lifetime-secs');
  let onlyRegex = null;
  if (only instanceof RegExp) onlyRegex = only;
  else if (only) {
    try {
      onlyRegex = new RegExp(only);
    } catch (err) {
      throw new UsageError(`--only: not a regular expression: ${err.message}`);
    }
  }
  return {
    baseUrl: url.href.replace(/\/+$/, ''),
    browserKeys: keys,
    browserKeyB: keyB,
    browserAudience: browserAudience || 'taskwire',
    token,
    tokenB: tokenB || null,
    secret,
    secretB: secretB || null,
    retention: r,
    corsOrigin: corsOrigin || null,
    concurrency: c,
    tenant: tenant || null,
    noWorkers: Boolean(noWorkers),
    noOutput: Boolean(noOutput),
    sharedSecret: Boolean(sharedSecret),
    tokenSkewSecs: skew,
    tokenMaxLifetimeSecs: lifetime,
    strict: Boolean(strict),
    only: onlyRegex,
  };
}

/** A whole number of seconds from a flag, `fallback` when not given. */
function seconds(value, fallback, min, max, name) {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  return n;
}
