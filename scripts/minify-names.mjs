// Shortens the names the .wasm and its wasm-bindgen glue use for each
// other: wasm-bindgen names every import after the item and a 16-digit
// hash (`__wbg_status_cb85b6c8d1769fa1`) and every export after the Rust
// path (`mirrorhandle_from_snapshot`); in the client build that is ~4 KB
// of names in the .wasm, which gzip cannot squeeze (the hashes), and the
// same names again in the glue. binaryen's
// `--minify-imports-and-exports-and-modules` renames them all (`a`, `b`,
// …; every import from module `a`) and prints the mapping, which this
// applies to the glue. 1.4 KB gzip off the page (docs/package.md).
//
// The glue is read as wasm-bindgen 0.2.130 writes it (the version is
// pinned, scripts/setup.sh); every rename is checked to apply exactly
// once, so a glue of another shape fails the build instead of loading a
// module that cannot link.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const escape = (s) => s.replace(/[$]/g, "\\$");

/**
 * Minifies the import and export names of `wasmFile` (in place) with
 * `wasmOpt` (given `features`, the wasm-opt feature flags), strips its
 * debug names, its `producers` section and its `target_features` section
 * (a hint for linkers, which no runtime reads: 0.1 KB gzip), and
 * rewrites `glueFile` (the wasm-bindgen JS) to match.
 */
export function minifyNames(wasmOpt, features, wasmFile, glueFile) {
  const mapping = JSON.parse(
    execFileSync(wasmOpt, [...features, "--minify-imports-and-exports-and-modules", "--strip-debug", "--strip-producers", "--strip-target-features", wasmFile, "-o", wasmFile], {
      encoding: "utf8",
    }),
  );
  let glue = readFileSync(glueFile, "utf8");
  const fail = (what) => {
    throw new Error(`build: minify-names: ${what} (${glueFile}: not the glue wasm-bindgen 0.2.130 writes?)`);
  };

  // The import object: `{"./taskwire_wasm_bg.js": import0, "<snippet>": import1}`,
  // where import0 is an object literal of the glue's own functions and
  // the others are namespace imports of the crate's JS snippets.
  const returned = /return \{\n\s+__proto__: null,\n((?:\s+"[^"]+": \w+,\n)+)\s+\};/.exec(glue);
  if (!returned) fail("no import object");
  const modules = new Map([...returned[1].matchAll(/"([^"]+)": (\w+),/g)].map((m) => [m[1], m[2]]));
  const literal = /const (\w+) = \{\n\s+__proto__: null,\n/.exec(glue)?.[1];
  if (!literal) fail("no import literal");
  const added = [];
  for (const [module, name, short] of mapping.imports) {
    const binding = modules.get(module) ?? fail(`import module ${module}`);
    if (binding === literal) {
      // Rename the key in the literal (`        __wbg_now_…: function`).
      const key = new RegExp(`^(\\s+)${escape(name)}:`, "gm");
      const hits = glue.match(key)?.length ?? 0;
      if (hits !== 1) fail(`import ${name} found ${hits} times`);
      glue = glue.replace(key, (_, indent) => `${indent}${short}:`);
    } else {
      added.push(`${short}: ${binding}.${name}`);
    }
  }
  const imports = `return { a: Object.assign(${literal}, { ${added.join(", ")} }) };`;
  glue = glue.replace(returned[0], imports);

  // Exports: always read as `wasm.<name>`.
  const exports = new Map(mapping.exports);
  glue = glue.replace(/\bwasm\.([A-Za-z_$][\w$]*)/g, (whole, name) => {
    const short = exports.get(name);
    if (short === undefined) fail(`export ${name} not in the mapping`);
    return `wasm.${short}`;
  });
  writeFileSync(glueFile, glue);
}
