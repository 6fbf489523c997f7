// What each check receives: clients for both tenants and the executor,
// sharing one transcript so that a failure prints the whole exchange.

import { Client, Executor, Worker } from './client.mjs';
import { Http, Transcript } from './http.mjs';

/**
 * `shared.feedStart` ({a, b}) holds each tenant's notification seq before
 * any check ran; every notification a check causes comes after it.
 */
export function makeContext(config, shared) {
  const transcript = new Transcript({
    [config.token]: '<token A>',
    ...(config.tokenB ? { [config.tokenB]: '<token B>' } : {}),
  });
  const http = (token) => new Http(config.baseUrl, { token, transcript });
  return {
    config,
    retention: config.retention,
    transcript,
    a: new Client(http(config.token)),
    b: config.tokenB ? new Client(http(config.tokenB)) : null,
    anon: new Client(http(null)),
    exec: new Executor(http(null), config.secret),
    // Tenant B's executor, when B has a secret of its own.
    execB: config.secretB ? new Executor(http(null), config.secretB) : null,
    // Tenant A's worker (PROTOCOL.md §Workers), when its name is known.
    worker: config.tenant ? new Worker(http(null), config.secret, config.tenant) : null,
    feedStart: shared.feedStart,
  };
}
