// The client build prints numbers without ryu (the runtime's shortest
// digits in ryu's layout, wasm/src/number.rs): every float it writes, in
// a message or in JSON, must be the very text the full build (ryu, as
// the server) writes, and read back as the same number.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as client from "../../dist/client/node.js";
import * as full from "../../dist/full/node.js";
import { rng } from "./rng.mjs";

const SEED = Number(process.env.SEED ?? 10);
const view = { id: "t", state: "queued", expiresAtMs: 1e12, attempts: 0, maxAttempts: 3, progress: 0, version: 0 };

/** The message a build gives for a view whose `progress` is `x`. */
function progressMessage(tw, x) {
  try {
    tw.TaskMirror.fromSnapshot({ ...view, progress: x });
  } catch (e) {
    return e.message;
  }
  assert.fail(`progress ${x} was accepted`);
}

/** Finite numbers that are not safe integers: every layout ryu has, and random bit patterns. */
function* samples(next) {
  yield* [0.1, -0.1, 0.5, 1.5, 123.456, 1e-5, 1.5e-5, 9.99e-6, 1e-6, 1e-7, 1.2345e-7, 5e-324, 2.2250738585072014e-308];
  yield* [1e15 + 0.5, 1234567890123456.7, 2 ** 53 + 2, 2 ** 60, 1e16, 1e17, 1e21, 1.5e21, 1e22, 1e300, -1e300, 1.7976931348623157e308];
  const bits = new DataView(new ArrayBuffer(8));
  for (let i = 0; i < 20_000; i++) {
    bits.setUint32(0, Math.floor(next() * 2 ** 32));
    bits.setUint32(4, Math.floor(next() * 2 ** 32));
    yield bits.getFloat64(0);
    // Around the layouts' edges, where ryu and JavaScript differ most.
    yield (next() - 0.5) * 10 ** Math.floor(next() * 44 - 22);
  }
}

test(`the client build writes every float as the full build does (SEED=${SEED})`, () => {
  let checked = 0;
  for (const x of samples(rng(SEED))) {
    if (!Number.isFinite(x) || Number.isSafeInteger(x)) continue;
    assert.equal(progressMessage(client, x), progressMessage(full, x), `x = ${x} (SEED=${SEED})`);
    const mirror = client.TaskMirror.fromSnapshot({ ...view, expiresAtMs: Math.abs(x) });
    assert.equal(mirror.toJSON().task.expiresAtMs, Math.abs(x), `x = ${x} read back (SEED=${SEED})`);
    mirror.free();
    checked++;
  }
  assert.ok(checked > 30_000, `${checked} numbers`);
});
