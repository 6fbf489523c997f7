// Entry point for browsers, workers and bundlers (Vite, webpack): call
// `await init()` once, then use the API. The .wasm file is located with
// `new URL(…, import.meta.url)`, which bundlers understand.

import wasmInit, { initSync as wasmInitSync } from "./taskwire_wasm.js";
import { isReady, markReady, markStarting } from "./api.js";

export * from "./exports.js";

/**
 * Instantiates the WebAssembly module. Idempotent; concurrent calls share
 * one instantiation. `source` overrides where the .wasm comes from (a URL,
 * a Response, bytes or a compiled module).
 */
export async function init(source) {
  if (isReady()) return;
  const started = wasmInit(source === undefined ? undefined : { module_or_path: source });
  markStarting(started);
  await started;
  markReady();
}

/** Instantiates synchronously from bytes or a compiled module (workers). */
export function initSync(source) {
  if (isReady()) return;
  wasmInitSync({ module: source });
  markReady();
}

export default init;
