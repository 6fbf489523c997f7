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
 * `JSON.parse(text)` for the client build's reader (`Reader` in
 * wasm/src/read.rs), as one string: `n`, `t`, `f`; `i<digits>;` for a
 * safe integer ≥ 0, `d<hex>;` for any other number (its IEEE 754 bits,
 * exact); `s<length>:<text>` for a string (its length in UTF-16 units);
 * `[…]`; `{` then `<length>:<key>` and the value for each field in
 * `Object.keys` order, `}`. `!` and the message when `text` is not JSON;
 * `~` when a value is nested deeper than 64 (the core parser's limit) or
 * a number is not finite (`1e400`).
 */
export function jsonTree(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const message = e?.message;
    return "!" + (typeof message === "string" ? message : "");
  }
  let out = "";
  const bits = new DataView(new ArrayBuffer(8));
  const walk = (v, depth) => {
    if (depth > 64) return false;
    if (v === null) out += "n";
    else if (typeof v === "boolean") out += v ? "t" : "f";
    else if (typeof v === "number") {
      if (!Number.isFinite(v)) return false;
      bits.setFloat64(0, v);
      out += "d" + bits.getBigUint64(0).toString(16) + ";";
    } else if (typeof v === "string") out += "s" + v.length + ":" + v;
    else if (Array.isArray(v)) {
      out += "[";
      for (let i = 0; i < v.length; i++) if (!walk(v[i], depth + 1)) return false;
      out += "]";
    } else {
      out += "{";
      for (const key of Object.keys(v)) {
        out += key.length + ":" + key;
        if (!walk(v[key], depth + 1)) return false;
      }
      out += "}";
    }
    return true;
  };
  return walk(value, 0) ? out : "~";
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
