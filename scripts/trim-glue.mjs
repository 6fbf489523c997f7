// Trims what the page never runs out of the JS glue wasm-bindgen writes,
// after minify-names.mjs (scripts/build.mjs):
//
// - the warnings for "deprecated parameters" of `init` and `initSync`:
//   js/index.js always calls them with one object (`{module_or_path}`,
//   `{module}`), so those branches are never taken;
// - the long text of the warning for a .wasm served without
//   `application/wasm`, said in fewer words (the warning itself stays);
// - the polyfill of `TextEncoder.prototype.encodeInto`, for browsers from
//   before 2020 (Safari 14.1): the package's own classes use private
//   methods (`#post()`), which need Safari 15 and every engine that has
//   them has `encodeInto`.
//
// Each edit must find its text exactly once: a wasm-bindgen whose glue
// reads otherwise fails the build here, instead of shipping the old bytes.
import { readFileSync, writeFileSync } from "node:fs";

const EDITS = [
  [
    /\} else \{\n\s+console\.warn\('using deprecated parameters for `initSync\(\)`; pass a single object instead'\)\n\s+\}/,
    "}",
  ],
  [
    /\} else \{\n\s+console\.warn\('using deprecated parameters for the initialization function; pass a single object instead'\)\n\s+\}/,
    "}",
  ],
  [
    /console\.warn\("`WebAssembly\.instantiateStreaming` failed because your server does not serve Wasm with `application\/wasm` MIME type\. Falling back to `WebAssembly\.instantiate` which is slower\. Original error:\\n", e\);/,
    'console.warn("taskwire: serve the .wasm as application/wasm (loaded the slower way)", e);',
  ],
  [/\nif \(!\('encodeInto' in cachedTextEncoder\)\) \{\n(?:.*\n)*?\}\n/, "\n"],
];

/** Applies EDITS to `glueFile` in place; throws naming an edit that does not match once. */
export function trimGlue(glueFile) {
  let glue = readFileSync(glueFile, "utf8");
  for (const [pattern, replacement] of EDITS) {
    const hits = glue.match(new RegExp(pattern.source, "g"))?.length ?? 0;
    if (hits !== 1) throw new Error(`build: trim-glue: ${pattern.source.slice(0, 60)}… found ${hits} times in ${glueFile} (not the glue wasm-bindgen 0.2.130 writes?)`);
    glue = glue.replace(pattern, replacement);
  }
  writeFileSync(glueFile, glue);
}
