// Built by tests/js/react.test.mjs in a scratch project that installed
// the packed tarball: the page a user of `taskwire/react` builds.
import react from "@vitejs/plugin-react";

// Top-level await (the wasm's init) needs an es2022 target.
export default { plugins: [react()], build: { target: "es2022" }, logLevel: "warn" };
