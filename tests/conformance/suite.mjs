// The conformance suite as node:test tests, for any runner:
//
//   import { registerConformance } from './tests/conformance/suite.mjs';
//   registerConformance({ baseUrl, token, tokenB, secret, secretB, retention });
//
// registers one suite per PROTOCOL.md section (run concurrently: every
// check works on its own tasks) and returns a promise that settles when
// they have run. Failures are node:test failures: the process exit code
// and the reporter say what failed, with the HTTP exchanges behind it.

import { before, describe, test } from 'node:test';
import { checkConfig } from './lib/config.mjs';
import { makeContext } from './lib/context.mjs';
import { Client } from './lib/client.mjs';
import { Http, Transcript } from './lib/http.mjs';

import seed from './checks/seed.mjs';
import resume from './checks/resume.mjs';
import longPoll from './checks/long-poll.mjs';
import sse from './checks/sse.mjs';
import create from './checks/create.mjs';
import callbacks from './checks/callbacks.mjs';
import signatures from './checks/signatures.mjs';
import binding from './checks/binding.mjs';
import delivery from './checks/delivery.mjs';
import notifications from './checks/notifications.mjs';
import isolation from './checks/isolation.mjs';
import errors from './checks/errors.mjs';
import ttl from './checks/ttl.mjs';
import vectors from './checks/vectors.mjs';
import cors from './checks/cors.mjs';
import browserTokens from './checks/browser-tokens.mjs';

/** Every section, in PROTOCOL.md order. */
export const SECTIONS = [
  seed,
  errors,
  resume,
  longPoll,
  sse,
  create,
  callbacks,
  signatures,
  binding,
  delivery,
  notifications,
  isolation,
  browserTokens,
  ttl,
  cors,
  vectors,
];

const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Registers the checks. `feedStart` is what `checkBackend` returned, when
 * the caller ran it first; otherwise a `before` hook finds it.
 */
export function registerConformance(options, { feedStart } = {}) {
  const config = checkConfig(options);
  const shared = { feedStart };
  return describe(`taskwire conformance: ${config.baseUrl}`, { concurrency: true }, () => {
    before(async () => {
      shared.feedStart ??= await checkBackend(config);
    });
    for (const section of SECTIONS) {
      describe(section.section, { concurrency: true }, () => {
        for (const check of section.checks) {
          const skip = skipReason(check, config);
          test(check.name, { timeout: check.timeoutMs ?? DEFAULT_TIMEOUT_MS, skip }, () =>
            runCheck(check, config, shared),
          );
        }
      });
    }
  });
}

function skipReason(check, config) {
  if (check.needsTokenB && !config.tokenB) return 'needs a second tenant (--token-b)';
  if (check.needsSecretB && !config.secretB) return "needs tenant B's own callback secret (--callback-secret-b)";
  if (check.needsCorsOrigin && !config.corsOrigin) return 'needs an origin the backend allows (--cors-origin)';
  if (check.needsBrowserKey && config.browserKeys.length === 0) return 'needs a browser-token key of tenant A (--browser-key)';
  if (check.needsBrowserKeys && config.browserKeys.length < 2) return 'needs two browser-token keys of tenant A, a rotation (--browser-key twice)';
  if (check.needsBrowserKeyB && !config.browserKeyB) return "needs a browser-token key of tenant B (--browser-key-b)";
  return false;
}

async function runCheck(check, config, shared) {
  const ctx = makeContext(config, shared);
  try {
    await check.run(ctx);
  } catch (err) {
    throw withTranscript(err, ctx.transcript);
  } finally {
    ctx.transcript.abortAll();
  }
}

/** Appends the check's HTTP exchanges to the error the reporter prints. */
function withTranscript(err, transcript) {
  if (!(err instanceof Error) || transcript.entries.length === 0) return err;
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  err.message = `${err.message}\n\n── HTTP exchanges (latest last) ──\n${transcript.describe()}\n`;
  err.stack = [`${err.name}: ${err.message}`, ...frames].join('\n');
  return err;
}

/**
 * Before any check: the backend answers and accepts the tokens. Returns
 * each tenant's feed position ({a, b}); checks look only at what follows
 * it. Throws an Error that says what is wrong, with the exchanges.
 */
export async function checkBackend(options) {
  const config = checkConfig(options);
  const transcript = new Transcript({ [config.token]: '<token A>', [config.tokenB ?? '']: '<token B>' });
  const client = (token) => new Client(new Http(config.baseUrl, { token, transcript }));
  try {
    return {
      a: await client(config.token).feedTail(),
      b: config.tokenB ? await client(config.tokenB).feedTail() : 0,
    };
  } catch (err) {
    err.message = `preflight: GET /v1/notifications must answer 200 to the configured tokens ` +
      `(is ${config.baseUrl} a taskwire backend, and are the tokens right?)\n${err.message}`;
    throw withTranscript(err, transcript);
  }
}
