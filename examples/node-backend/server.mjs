#!/usr/bin/env node
// A taskwire backend in plain Node: node:http and the `taskwire` package's
// TaskBook (the Rust core, as WebAssembly). See README.md beside this file.
//
//   node examples/node-backend/server.mjs --data ./data-node --token demo=demo

import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { BrowserKeys } from "./credentials.mjs";
import { createApp } from "./routes.mjs";
import { Keyring } from "./sign.mjs";
import { Journal } from "./journal.mjs";
import { StorageError, Store } from "./store.mjs";
import { MISREAD, MISREADINGS } from "./misread.mjs";

const USAGE = `usage: node examples/node-backend/server.mjs [options]

A taskwire backend (PROTOCOL.md) on node:http and the taskwire npm package.

  --listen HOST:PORT         address to listen on (default 127.0.0.1:8081)
  --data DIR                 keep the journal in DIR/journal.jsonl and replay it
                             on start (default: memory only, lost on exit)
  --mark-restored            with --data: mark the journal as restored from a
                             backup (a new epoch, PROTOCOL.md §Epoch), then exit
                             without serving; run it with the server stopped
  --token TOKEN=TENANT       a bearer token and its tenant; repeatable
                             (default demo=demo)
  --callback-secret [TENANT=]whsec_…
                             Standard Webhooks secret executors sign callbacks
                             with: TENANT=… for that tenant's tasks, bare for
                             every tenant without its own; repeatable (a
                             rotation lists two; both are accepted)
                             (default: the public development secret, shared)
  --browser-token-key TENANT:KID=ALG:KEY
                             a key browser tokens (JWTs minted by the tenant's
                             backend) are verified with: ALG HS256 with a base64
                             secret of 32+ bytes, or EdDSA / ES256 with a base64
                             SPKI DER public key; repeatable (a rotation lists
                             two; both are accepted) (default: none)
  --browser-token-audience AUD
                             the aud browser tokens must carry (default taskwire)
  --browser-token-leeway-secs N
                             clock skew allowed on exp and nbf (default 30)
  --browser-token-max-ttl-secs N
                             longest a browser token may still be valid
                             (default 3600)
  --callback-body-timeout-ms N
                             how long a callback body may take (default 10000)
  --retention N              resume window in versions (default 8)
  --cors-origin ORIGIN       a browser origin allowed by CORS; repeatable; * for any
  --lease-ms N               lease of a start that carries attempt but no leaseMs,
                             in ms: a silent attempt is unknown after it
                             (default 30000)
  --unknown-grace-ms N       how long an unknown task waits for its attempt before
                             it is re-queued, for a task created without
                             unknownGraceMs (default 60000)
  --heartbeat-ms N           SSE heartbeat interval (default 15000)
  --sweep-ms N               how often the sweeper runs: TTLs, then leases, grace
                             periods and deadlines (default 250)
  -h, --help                 this help`;

/** The configuration from the command line; exits with the usage on a mistake. */
function configure(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        listen: { type: "string", default: "127.0.0.1:8081" },
        data: { type: "string" },
        "mark-restored": { type: "boolean", default: false },
        token: { type: "string", multiple: true, default: ["demo=demo"] },
        "callback-secret": { type: "string", multiple: true, default: [] },
        "browser-token-key": { type: "string", multiple: true, default: [] },
        "browser-token-audience": { type: "string", default: "taskwire" },
        "browser-token-leeway-secs": { type: "string", default: "30" },
        "browser-token-max-ttl-secs": { type: "string", default: "3600" },
        "callback-body-timeout-ms": { type: "string", default: "10000" },
        retention: { type: "string", default: "8" },
        "cors-origin": { type: "string", multiple: true, default: [] },
        "lease-ms": { type: "string", default: "30000" },
        "unknown-grace-ms": { type: "string", default: "60000" },
        "heartbeat-ms": { type: "string", default: "15000" },
        "sweep-ms": { type: "string", default: "250" },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    const tokens = new Map();
    for (const pair of values.token) {
      const eq = pair.indexOf("=");
      if (eq <= 0 || eq === pair.length - 1) throw new Error(`--token: expected TOKEN=TENANT, got ${JSON.stringify(pair)}`);
      tokens.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return {
      listen: address(values.listen),
      dataDir: values.data,
      markRestored: values["mark-restored"],
      tokens,
      keyring: new Keyring(values["callback-secret"], tokens.values()),
      browserKeys: new BrowserKeys(values["browser-token-key"], tokens.values(), {
        audience: values["browser-token-audience"],
        leewaySecs: Math.min(300, count("--browser-token-leeway-secs", values["browser-token-leeway-secs"])),
        maxTtlSecs: Math.max(1, count("--browser-token-max-ttl-secs", values["browser-token-max-ttl-secs"])),
      }),
      callbackBodyTimeoutMs: Math.max(1, count("--callback-body-timeout-ms", values["callback-body-timeout-ms"])),
      retention: count("--retention", values.retention),
      corsOrigins: values["cors-origin"],
      leaseMs: Math.max(1, count("--lease-ms", values["lease-ms"])),
      unknownGraceMs: count("--unknown-grace-ms", values["unknown-grace-ms"]),
      heartbeatMs: Math.max(1, count("--heartbeat-ms", values["heartbeat-ms"])),
      sweepMs: Math.max(1, count("--sweep-ms", values["sweep-ms"])),
    };
  } catch (err) {
    console.error(`error: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }
}

function count(flag, text) {
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new Error(`${flag}: expected an integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

/** "127.0.0.1:8081", "[::1]:8081" or ":8081" → {host, port}. */
function address(text) {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):([0-9]{1,5})$/.exec(text);
  if (!m || Number(m[3]) > 65535) throw new Error(`--listen: expected HOST:PORT, got ${JSON.stringify(text)}`);
  return { host: m[1] ?? (m[2] || "0.0.0.0"), port: Number(m[3]) };
}

async function main() {
  const config = configure(process.argv.slice(2));
  if (config.markRestored) {
    try {
      if (config.dataDir === undefined) throw new Error("--mark-restored needs --data (a memory-only store has nothing to restore)");
      const { before, after } = Journal.markRestored(config.dataDir);
      console.log(`${config.dataDir} marked restored: epoch ${before} -> ${after}`);
      process.exit(0);
    } catch (err) {
      console.error(`error: --mark-restored: ${err.message}`);
      process.exit(2);
    }
  }
  let opened;
  try {
    opened = Store.open({ retention: config.retention, dataDir: config.dataDir });
  } catch (err) {
    console.error(`error: ${err.message}`);
    process.exit(2);
  }
  const { store, replayed, dropped } = opened;
  if (dropped > 0) console.log(`journal: ignored a torn last line (${dropped} bytes, never acknowledged)`);
  if (MISREAD) console.error(`TEST ONLY: TASKWIRE_MISREAD=${MISREAD}: this backend deliberately breaks ${MISREADINGS[MISREAD]} (misread.mjs)`);

  let stopping = false;
  let sweeper;
  const server = createServer();
  const stop = (code) => {
    if (stopping) return;
    stopping = true;
    clearInterval(sweeper);
    server.close();
    server.closeAllConnections(); // held requests and event streams too
    store.close();
    process.exit(code);
  };
  // A journal write failed: the book in memory is ahead of the disk and
  // cannot take the change back. Stop at once, before anything else can
  // read that state (the request is not answered: like a crash, it was
  // never acknowledged). A restart replays what is on disk.
  config.onFatal = (err) => {
    console.error(`fatal: ${err.message}; stopping`);
    stop(1);
  };

  server.on("request", createApp(store, config));
  // Requests node:http cannot parse (bad framing, huge headers) get its own
  // 400/431 answer and a closed connection: no handler of ours runs.

  // Expiry by time: a task nobody calls back for still ends; then the
  // lifecycle's timers (a lapsed lease, a grace period, a deadline).
  sweeper = setInterval(() => {
    try {
      store.sweep(Date.now());
    } catch (err) {
      console.error("sweeper:", err);
      if (err instanceof StorageError) config.onFatal(err);
    }
  }, config.sweepMs);

  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => stop(0));

  server.listen(config.listen.port, config.listen.host, () => {
    const { address: host, port } = server.address();
    const shown = host.includes(":") ? `[${host}]` : host;
    const lines = [
      `taskwire node backend listening on http://${shown}:${port}`,
      `  data:      ${config.dataDir ? `${config.dataDir} (${replayed} records replayed)` : "memory only"}`,
      `  tenants:   ${[...new Set(config.tokens.values())].join(", ")}`,
      `  retention: ${config.retention} versions`,
      `  browser tokens: ${config.browserKeys.size > 0 ? `${config.browserKeys.size} key(s)` : "none (no --browser-token-key)"}`,
    ];
    if (config.corsOrigins.length > 0) lines.push(`  cors:      ${config.corsOrigins.join(", ")}`);
    if (config.keyring.development) lines.push("  callback secret: the public development secret (set --callback-secret)");
    console.log(lines.join("\n")); // one write: whoever waits for the banner gets all of it
  });
  server.on("error", (err) => {
    console.error(`error: ${err.message}`);
    process.exit(2);
  });
}

await main();
