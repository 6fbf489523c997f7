// The conformance suite as node:test tests, for any runner:
//
//   import { registerConformance } from './tests/conformance/suite.mjs';
//   registerConformance({ baseUrl, token, tenant, tokenB, secret, secretB, retention });
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
import lifecycle from './checks/lifecycle.mjs';
import continuations from './checks/continuations.mjs';
import output from './checks/output.mjs';
import steps from './checks/steps.mjs';
import budgets from './checks/budgets.mjs';
import timeline from './checks/timeline.mjs';
import vectors from './checks/vectors.mjs';
import cors from './checks/cors.mjs';
import precedence from './checks/precedence.mjs';
import parameters from './checks/parameters.mjs';
import judgement from './checks/judgement.mjs';
import expiry from './checks/expiry.mjs';
import corsHeaders from './checks/cors-headers.mjs';
import transitions from './checks/transitions.mjs';
import browserTokens from './checks/browser-tokens.mjs';
import epoch from './checks/epoch.mjs';
import batches from './checks/batches.mjs';
import batchWatch from './checks/batch-watch.mjs';
import batchCancel from './checks/batch-cancel.mjs';
import work from './checks/work.mjs';
import reports from './checks/reports.mjs';
import leases from './checks/leases.mjs';
import sweeper from './checks/sweeper.mjs';
import timeRules from './checks/time-rules.mjs';
import tokenRules from './checks/token-rules.mjs';
import fencing from './checks/fencing.mjs';

/**
 * Every section, in PROTOCOL.md order. `protocol` is the PROTOCOL.md
 * heading it enforces ("Heading" or "Heading › Subheading");
 * self.test.mjs checks that each one exists.
 */
export const SECTIONS = [
  seed,
  errors,
  precedence,
  parameters,
  resume,
  longPoll,
  sse,
  epoch,
  batches,
  batchWatch,
  batchCancel,
  create,
  callbacks,
  judgement,
  timeRules,
  expiry,
  signatures,
  binding,
  delivery,
  notifications,
  isolation,
  browserTokens,
  tokenRules,
  ttl,
  lifecycle,
  fencing,
  leases,
  sweeper,
  continuations,
  output,
  steps,
  budgets,
  timeline,
  work,
  reports,
  cors,
  corsHeaders,
  vectors,
  transitions,
];

const DEFAULT_TIMEOUT_MS = 30_000;
/** node:test's own timeout: a check may wait for a slot first (its own timeout starts with the slot). */
const QUEUED_TIMEOUT_MS = 30 * 60_000;

/**
 * At most `n` holders at once, served in arrival order. The checks share
 * one: all of them at once would hold hundreds of connections and slow
 * every request, failing the timing checks of a backend that is only busy.
 */
export class Slots {
  constructor(n) {
    this.free = n;
    this.waiting = [];
  }

  async acquire() {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise((resolve) => this.waiting.push(resolve));
  }

  release() {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}

/**
 * Registers the checks. `feedStart` is what `checkBackend` returned, when
 * the caller ran it first; otherwise a `before` hook finds it.
 */
export function registerConformance(options, { feedStart } = {}) {
  const config = checkConfig(options);
  const shared = { feedStart, slots: new Slots(config.concurrency) };
  return describe(`taskwire conformance: ${config.baseUrl}`, { concurrency: true }, () => {
    before(async () => {
      shared.feedStart ??= await checkBackend(config);
    });
    for (const section of SECTIONS) {
      // --only: the checks whose "section: name" matches, and nothing else registered.
      const checks = section.checks.filter((c) => !config.only || config.only.test(`${section.section}: ${c.name}`));
      if (checks.length === 0) continue;
      // A section may run fewer checks at once (`concurrency`), so that
      // its many small checks do not crowd the timing checks of the others.
      describe(`${section.section} (PROTOCOL.md §${section.protocol})`, { concurrency: section.concurrency ?? true }, () => {
        for (const check of checks) {
          const skip = skipReason(check, config);
          // A known deviation of the reference server runs and reports,
          // but fails the run only with --strict (README.md).
          const todo = check.knownDeviation && !config.strict ? `known deviation: ${check.knownDeviation}` : undefined;
          test(check.name, { timeout: QUEUED_TIMEOUT_MS, skip, todo }, () =>
            runCheck(check, section.protocol, config, shared),
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
  if (check.needsOutput && config.noOutput) return '--no-output: the backend offers no live output (no POST /v1/tasks/{id}/output/{stream})';
  if (check.needsWorkers && config.noWorkers) return '--no-workers: the backend offers no workers (no POST /v1/work/claim)';
  if (check.needsSharedSecret && !config.sharedSecret) {
    return "needs to know that the callback secret is the backend's one shared by every tenant, B's too (--shared-secret); " +
      'with a secret per tenant, a claim always names its tenant and there is no shared fleet to share fairly';
  }
  return false;
}

async function runCheck(check, protocol, config, shared) {
  await shared.slots.acquire();
  const ctx = makeContext(config, shared);
  const timeoutMs = check.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let timer;
  try {
    const timedOut = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the check did not finish within ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([check.run(ctx), timedOut]);
  } catch (err) {
    // The message names the rule broken: its PROTOCOL.md section and the check.
    throw withTranscript(err, ctx.transcript, `PROTOCOL.md §${protocol}: ${check.name}`);
  } finally {
    clearTimeout(timer);
    ctx.transcript.abortAll();
    shared.slots.release();
  }
}

/**
 * Puts `rule` (when given) before the message and the check's HTTP
 * exchanges after it, in the error the reporter prints.
 */
function withTranscript(err, transcript, rule) {
  if (!(err instanceof Error) || (transcript.entries.length === 0 && !rule)) return err;
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  if (rule) err.message = `${rule}\n${err.message}`;
  if (transcript.entries.length > 0) {
    err.message = `${err.message}\n\n── HTTP exchanges (latest last) ──\n${transcript.describe()}\n`;
  }
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
