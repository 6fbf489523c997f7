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
