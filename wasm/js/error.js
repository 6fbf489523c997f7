// The error every taskwire call throws. It lives here, in the crate, so
// that the Rust side constructs it itself (wasm-bindgen imports this file
// into its glue) and the JS API re-exports the same class.

/**
 * An `Error` with a stable `code` and a message that names the field;
 * HTTP errors also carry `status`.
 */
export class TaskwireError extends Error {
  constructor(code, message, status) {
    super(message);
    this.name = "TaskwireError";
    this.code = code;
    if (status) this.status = status;
  }
}
