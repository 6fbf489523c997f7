// Entry point for Node ≥ 20: the module is instantiated on import, so
// `import { TaskBook } from "taskwire"` is ready to use.

import { readFileSync } from "node:fs";
import { initSync as wasmInitSync } from "./taskwire_wasm.js";
import { markReady } from "./api.js";

export * from "./exports.js";

wasmInitSync({ module: readFileSync(new URL("./taskwire_wasm_bg.wasm", import.meta.url)) });
markReady();

/** Already done on import; kept so code written for browsers runs as is. */
export async function init() {}

/** Already done on import. */
export function initSync() {}

export default init;
