// JSON kept exactly as it was sent: the create body's `input`.
//
// `JSON.parse` reads every number as a double, so `{"n": 9007199254740993}`
// would come back as 9007199254740992, and two bodies differing only beyond
// double precision would look equal under one Idempotency-Key. The backend
// therefore keeps `input` as its text (answered byte for byte) and compares
// create bodies in the canonical form below, numbers by exact decimal value
// (PROTOCOL.md, "Create a task"). The reference server follows the same
// rules (server/src/exact_json.rs); each backend only ever compares its own
// canonical texts, so the two need not be byte-identical.
//
// Both functions run on text `JSON.parse` has already accepted; they still
// throw a RangeError on anything unexpected rather than guess.

/** Exponents with more digits than this are refused, as the reference server does. */
const MAX_EXPONENT_DIGITS = 18;

/**
 * The members of a top-level JSON object, in document order: [key, exact
 * text of the value]. Duplicate keys are all listed (the last is what
 * `JSON.parse` reads).
 */
export function members(text) {
  const s = new Scanner(text);
  s.ws();
  s.expect("{");
  const out = [];
  s.ws();
  if (s.peek() === "}") {
    s.pos++;
    return out;
  }
  for (;;) {
    s.ws();
    const key = s.string();
    s.ws();
    s.expect(":");
    s.ws();
    const start = s.pos;
    s.value(null);
    out.push([key, text.slice(start, s.pos)]);
    s.ws();
    if (s.peek() === ",") {
      s.pos++;
      continue;
    }
    s.expect("}");
    return out;
  }
}

/**
 * The elements of a JSON array, in order, each as its exact text (a
 * batch's `items`: each is a create body whose `input` is kept exactly).
 */
export function elements(text) {
  const s = new Scanner(text);
  s.ws();
  s.expect("[");
  const out = [];
  s.ws();
  if (s.peek() === "]") {
    s.pos++;
    return out;
  }
  for (;;) {
    s.ws();
    const start = s.pos;
    s.value(null);
    out.push(text.slice(start, s.pos));
    s.ws();
    if (s.peek() === ",") {
      s.pos++;
      continue;
    }
    s.expect("]");
    return out;
  }
}

/**
 * The canonical form of one JSON value (for comparing only: numbers are
 * `<digits>e<exponent>`, which is not JSON): keys sorted, the last of
 * duplicates kept, strings unescaped and written one way, numbers by exact
 * value (`1.0` is `1`, `-0` is `0`), no whitespace.
 */
export function canonical(text) {
  const s = new Scanner(text);
  s.ws();
  const out = [];
  s.value(out);
  s.ws();
  if (s.pos !== text.length) throw new RangeError("trailing characters after the JSON value");
  return out.join("");
}

class Scanner {
  constructor(text) {
    this.text = text;
    this.pos = 0;
  }

  peek() {
    return this.text[this.pos];
  }

  ws() {
    while (/[ \t\n\r]/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  expect(c) {
    if (this.text[this.pos] !== c) throw new RangeError(`expected '${c}' at character ${this.pos + 1}`);
    this.pos++;
  }

  /** Scans one value; appends its canonical form to `out` unless null. */
  value(out) {
    const c = this.peek();
    if (c === "{") return this.object(out);
    if (c === "[") return this.array(out);
    if (c === '"') {
      const str = this.string();
      out?.push(JSON.stringify(str));
      return;
    }
    if (c === "-" || (c >= "0" && c <= "9")) return this.number(out);
    for (const word of ["null", "true", "false"]) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        out?.push(word);
        return;
      }
    }
    throw new RangeError(`unexpected character at ${this.pos + 1}`);
  }

  array(out) {
    this.pos++;
    out?.push("[");
    this.ws();
    if (this.peek() === "]") {
      this.pos++;
      out?.push("]");
      return;
    }
    for (let first = true; ; first = false) {
      this.ws();
      if (!first) out?.push(",");
      this.value(out);
      this.ws();
      if (this.peek() === ",") {
        this.pos++;
        continue;
      }
      this.expect("]");
      out?.push("]");
      return;
    }
  }

  object(out) {
    this.pos++;
    const entries = new Map();
    this.ws();
    if (this.peek() === "}") {
      this.pos++;
    } else {
      for (;;) {
        this.ws();
        const key = this.string();
        this.ws();
        this.expect(":");
        this.ws();
        const value = out ? [] : null;
        this.value(value);
        // The last of duplicate keys counts, as in JSON.parse.
        entries.delete(key);
        entries.set(key, value?.join(""));
        this.ws();
        if (this.peek() === ",") {
          this.pos++;
          continue;
        }
        this.expect("}");
        break;
      }
    }
    if (!out) return;
    // Sorted by UTF-8 bytes, as the reference server sorts.
    const keys = [...entries.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    out.push(`{${keys.map((k) => `${JSON.stringify(k)}:${entries.get(k)}`).join(",")}}`);
  }

  /** A string literal, unescaped (JSON.parse reads a lone surrogate as itself; it is kept). */
  string() {
    const start = this.pos;
    this.expect('"');
    for (;;) {
      const c = this.text[this.pos];
      if (c === undefined) throw new RangeError("unterminated string");
      if (c === "\\") this.pos += 2;
      else if (c === '"') break;
      else this.pos++;
    }
    this.pos++;
    return JSON.parse(this.text.slice(start, this.pos));
  }

  number(out) {
    const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?/.exec(this.text.slice(this.pos, this.pos + 70_000));
    if (!m) throw new RangeError(`invalid number at character ${this.pos + 1}`);
    this.pos += m[0].length;
    const [, sign, int, frac = "", expSign, expDigits = "0"] = m;
    const expText = expDigits.replace(/^0+/, "");
    if (expText.length > MAX_EXPONENT_DIGITS) throw new RangeError("number exponent has too many digits");
    if (!out) return;
    const all = int + frac;
    const digits = all.replace(/^0+/, "").replace(/0+$/, "");
    if (digits === "") {
      out.push("0");
      return;
    }
    const trailing = all.length - all.replace(/0+$/, "").length;
    const exponent = BigInt(expSign === "-" ? `-${expText || "0"}` : expText || "0") + BigInt(trailing - frac.length);
    out.push(`${sign}${digits}e${exponent}`);
  }
}
