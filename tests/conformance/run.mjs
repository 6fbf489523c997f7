#!/usr/bin/env node
// Checks a taskwire backend against PROTOCOL.md:
//
//   node tests/conformance/run.mjs http://127.0.0.1:8080 --token demo \
//     --tenant demo --token-b other --callback-secret whsec_… [--retention 8]
//
// (--no-workers instead of --tenant for a backend without POST /v1/work/claim)
//
// Exit code 0 when every check passed. See README.md.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { configFrom, USAGE, UsageError } from './lib/config.mjs';

let config;
try {
  config = configFrom(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof UsageError) && err.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw err;
  if (err.message) console.error(`error: ${err.message}\n`);
  console.error(USAGE);
  process.exit(2);
}

// node:test picks the TAP reporter when stdout is not a terminal (CI logs,
// pipes). The spec reporter is far easier to read there too, so run again
// with it unless a reporter was chosen on the command line.
if (!process.execArgv.some((a) => a.startsWith('--test-reporter'))) {
  const self = fileURLToPath(import.meta.url);
  const child = spawnSync(
    process.execPath,
    ['--test-reporter=spec', ...process.execArgv, self, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  process.exit(child.status ?? 1);
}

const { checkBackend, registerConformance } = await import('./suite.mjs');
let feedStart;
try {
  feedStart = await checkBackend(config);
} catch (err) {
  // One clear message instead of every check cancelled.
  console.error(err.message);
  process.exit(1);
}
registerConformance(config, { feedStart });
