// What the Rust side imports from JavaScript (wasm-bindgen copies this
// file into its glue). It lives in the crate so that Rust constructs
// `TaskwireError` itself and the JS API re-exports the very same class.

/**
 * The error every taskwire call throws: an `Error` with a stable `code`
 * and a message that names the field; HTTP errors also carry `status`.
 */
export class TaskwireError extends Error {
  constructor(code, message, status) {
    super(message);
    this.name = "TaskwireError";
    this.code = code;
    if (status) this.status = status;
  }
}

/**
 * Calls `callback(true, value)` or `callback(false, error)` once, when
 * `promise` settles: the executor's one way to wait, so that each Rust
 * callback runs exactly once (and is freed) without an async runtime.
 */
export function settle(promise, callback) {
  Promise.resolve(promise).then(
    (value) => callback(true, value),
    (error) => callback(false, error),
  );
}

/**
 * Starts a request for the client (`Http::fetch`, wasm/src/client/http.rs):
 * `fetch` (the injected one, else the global one) with `headers` (a flat
 * `[name, value, …]` array; a name without a value is left out) and up
 * to two extra headers, the abort `signal`, and `cache: "no-store"` (no
 * intermediary may cache a resume answer, PROTOCOL.md); the promise of
 * the response head. Throws when there is no fetch, or fetch throws.
 */
export function send(fetch, method, url, headers, signal, body, name1, value1, name2, value2) {
  const run = fetch ?? globalThis.fetch;
  if (typeof run !== "function") throw "no fetch in this runtime";
  const init = { method, headers: {}, signal, cache: "no-store" };
  for (let i = 0; i + 1 < headers.length; i += 2) init.headers[headers[i]] = headers[i + 1];
  if (name1 !== undefined) init.headers[name1] = value1;
  if (name2 !== undefined) init.headers[name2] = value2;
  if (body !== undefined) init.body = body;
  return run.call(globalThis, url, init);
}

/** `Reflect.get(target, key)`, or undefined where that throws (a target that is not an object). */
export function property(target, key) {
  try {
    return Reflect.get(target, key);
  } catch {
    return undefined;
  }
}

/** A header of a response, or undefined. */
export function responseHeader(response, name) {
  return response.headers.get(name) ?? undefined;
}

/** `() => reader.read()` on a response's body, or undefined when it has none (or no reader). */
export function bodyReader(response) {
  try {
    const reader = response.body?.getReader();
    return typeof reader?.read === "function" ? () => reader.read() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `n` (finite, not a safe integer) as ryu writes it, for the client
 * build's float printer (wasm/src/number.rs): the runtime's shortest
 * digits (`String(n)`, the same digits ryu finds) laid out as ryu lays
 * them out, e.g. `1e300` for `1e+300` and `1e-6` for `0.000001`.
 */
export function ryuText(n) {
  const [mantissa, exponent = "0"] = String(Math.abs(n)).split("e");
  const [int, fraction = ""] = mantissa.split(".");
  const all = int + fraction;
  const lead = all.length - all.replace(/^0+/, "").length;
  const digits = all.slice(lead).replace(/0+$/, "");
  // The value is 0.<digits> × 10^point.
  const point = int.length + Number(exponent) - lead;
  const sign = n < 0 ? "-" : "";
  if (digits.length <= point && point <= 16) return sign + digits + "0".repeat(point - digits.length) + ".0";
  if (point > 0 && point <= 16) return sign + digits.slice(0, point) + "." + digits.slice(point);
  if (point > -5 && point <= 0) return sign + "0." + "0".repeat(-point) + digits;
  return sign + digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") + "e" + (point - 1);
}
