// taskwire/worker's rules that need no server: the error table, the
// "outcome unknown" rule of the vendor helper, the signature, and bad
// options refused with the field named.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CancelledError,
  FatalError,
  RetryableError,
  SubmitUnknownError,
  WorkerError,
  classifyError,
  createWorker,
  isOutcomeUnknown,
} from "../../js/worker.js";
import { secretKey, sign } from "../../js/worker/wire.js";

const withStatus = (status, field = "status") => Object.assign(new Error(`HTTP ${status}`), { [field]: status });
const sysError = (code) => Object.assign(new Error(code), { code });
const fetchFailed = (code) => new TypeError("fetch failed", { cause: sysError(code) });

test("classifyError: passing failures are retryable, everything else is final", () => {
  const table = [
    [new RetryableError("vendor busy"), "retryable"],
    [new FatalError("bad input"), "final"],
    [fetchFailed("ECONNRESET"), "retryable"],
    [new TypeError("fetch failed"), "retryable"],
    [sysError("ETIMEDOUT"), "retryable"],
    [new Error("wrapped", { cause: sysError("EPIPE") }), "retryable"],
    [new DOMException("timed out", "TimeoutError"), "retryable"],
    [withStatus(408), "retryable"],
    [withStatus(429), "retryable"],
    [withStatus(500), "retryable"],
    [withStatus(503, "statusCode"), "retryable"],
    [{ response: { status: 502 } }, "retryable"],
    [withStatus(400), "final"],
    [withStatus(401), "final"],
    [withStatus(404, "statusCode"), "final"],
    [withStatus(422), "final"],
    [new TypeError("Cannot read properties of undefined"), "final"],
    [new RangeError("bad"), "final"],
    [new SyntaxError("Unexpected token"), "final"],
    ["a thrown string", "final"],
    [undefined, "final"],
  ];
  for (const [err, expected] of table) assert.equal(classifyError(err), expected, `${err?.name ?? typeof err}: ${err?.message ?? err}`);
});

test("isOutcomeUnknown: only a request that may have arrived is unknown", () => {
  assert.equal(isOutcomeUnknown(fetchFailed("ECONNRESET")), true, "reset after sending");
  assert.equal(isOutcomeUnknown(fetchFailed("UND_ERR_SOCKET")), true, "socket closed mid-answer");
  assert.equal(isOutcomeUnknown(new DOMException("timed out", "TimeoutError")), true, "a timeout");
  assert.equal(isOutcomeUnknown(withStatus(502)), true, "a gateway's 5xx");
  assert.equal(isOutcomeUnknown(fetchFailed("ECONNREFUSED")), false, "never connected");
  assert.equal(isOutcomeUnknown(fetchFailed("ENOTFOUND")), false, "no such host");
  assert.equal(isOutcomeUnknown(withStatus(400)), false, "refused");
  assert.equal(isOutcomeUnknown(withStatus(429)), false, "refused for now");
  assert.equal(isOutcomeUnknown(new TypeError("x is not a function")), false, "a bug before sending");
  assert.equal(isOutcomeUnknown(Object.assign(new Error("custom"), { outcomeUnknown: true })), true, "the error says so");
});

test("errors are real Errors with stable codes", () => {
  const errors = [new RetryableError("r"), new FatalError("f"), new SubmitUnknownError("s", "k"), new CancelledError("cancel"), new WorkerError("protocol", "p")];
  assert.deepEqual(
    errors.map((e) => [e instanceof Error, e.code]),
    [[true, "retryable"], [true, "fatal"], [true, "submit-unknown"], [true, "cancel"], [true, "protocol"]],
  );
  assert.ok(new SubmitUnknownError("s", "k") instanceof FatalError, "an unknown submit is final");
  assert.equal(new CancelledError("shutdown").name, "AbortError");
});

test("reports are signed as Standard Webhooks says (its own test vector)", () => {
  const key = secretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  const headers = sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}');
  assert.equal(headers["webhook-signature"], "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  assert.equal(headers["webhook-timestamp"], "1614265330");
});

test("bad options are refused with the field named", async () => {
  const good = { url: "http://127.0.0.1:1", secret: "whsec_AAAA" };
  const cases = [
    [{ ...good, url: "not a url" }, /url:/],
    [{ ...good, url: "ftp://x" }, /url:/],
    [{ ...good, secret: "hunter2" }, /secret:/],
    [{ ...good, secret: "whsec_***" }, /secret:/],
    [{ ...good, tenant: " " }, /tenant:/],
    [{ ...good, name: "" }, /name:/],
    [{ ...good, concurrency: 0 }, /concurrency:/],
    [{ ...good, concurrency: 1.5 }, /concurrency:/],
    [{ ...good, leaseMs: 999 }, /leaseMs:/],
    [{ ...good, waitMs: 30_001 }, /waitMs:/],
    [{ ...good, now: 5 }, /now:/],
    [null, /options:/],
  ];
  for (const [options, field] of cases) assert.throws(() => createWorker(options), field, JSON.stringify(options));
  const worker = createWorker(good);
  assert.throws(() => worker.handle(5, () => {}), /kind:/);
  assert.throws(() => worker.handle("k", "not a function"), /handler:/);
  worker.handle("k", () => {});
  assert.throws(() => worker.handle("k", () => {}), /kind: "k" already has a handler/);
  assert.throws(() => createWorker(good).run(), /no handler/);
  await assert.rejects(worker.shutdown(-1), /graceMs:/);
});
