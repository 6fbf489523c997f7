// `npm run build`: builds the npm package into dist/ from a clean
// checkout: the wasm module (release profile, wasm-bindgen, wasm-opt),
// the JavaScript layer and the types. Prints the size budget and fails
// above it.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { gzipSync, brotliCompressSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import { dirname, join, resolve } from "node:path";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
// Hard limit from the package's budget: .wasm + JS (glue and API), gzip.
const LIMIT_GZIP = 60 * 1024;

function run(cmd, args, opts = {}) {
  execFileSync(cmd, args, { cwd: root, stdio: "inherit", ...opts });
}

if (!process.argv.includes("--no-setup")) run("bash", ["scripts/setup.sh"]);

run("cargo", ["build", "--locked", "-p", "taskwire-wasm", "--release", "--target", "wasm32-unknown-unknown"]);

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
// Cargo puts its output under CARGO_TARGET_DIR when set (relative to the
// directory cargo runs in, here the root), else under target/.
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
const built = join(targetDir, "wasm32-unknown-unknown/release/taskwire_wasm.wasm");
run("wasm-bindgen", ["--target", "web", "--no-typescript", "--out-dir", dist, "--out-name", "taskwire_wasm", built]);

// The npm `binaryen` package's wasm-opt (Debian's v108 corrupts modules
// that use reference types).
const wasmOpt = join(root, "node_modules/.bin/wasm-opt");
const wasmFile = join(dist, "taskwire_wasm_bg.wasm");
run(wasmOpt, [
  "-Oz",
  "--enable-bulk-memory",
  "--enable-reference-types",
  "--enable-nontrapping-float-to-int",
  "--enable-sign-ext",
  "--enable-mutable-globals",
  "--enable-multivalue",
  "--strip-debug",
  "--strip-producers",
  wasmFile,
  "-o",
  wasmFile,
]);

for (const file of ["api.js", "index.js", "node.js", "index.d.ts"]) {
  copyFileSync(join(root, "js", file), join(dist, file));
}

// The module must import nothing from `env`: everything it needs comes
// through wasm-bindgen's glue.
const module = new WebAssembly.Module(readFileSync(wasmFile));
const envImports = WebAssembly.Module.imports(module).filter((i) => i.module === "env");
if (envImports.length > 0) {
  console.error("build: unexpected env imports:", envImports);
  process.exit(1);
}

const parts = ["taskwire_wasm_bg.wasm", "taskwire_wasm.js", "api.js", "index.js"];
const sizes = {};
let raw = 0, gzip = 0, brotli = 0;
for (const part of parts) {
  const bytes = readFileSync(join(dist, part));
  const s = { raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length, brotli: brotliCompressSync(bytes).length };
  sizes[part] = s;
  raw += s.raw; gzip += s.gzip; brotli += s.brotli;
}
sizes.total = { raw, gzip, brotli };
writeFileSync(join(dist, "size.json"), JSON.stringify(sizes, null, 2) + "\n");
const kb = (n) => (n / 1024).toFixed(1) + " KB";
console.log("\nbundle size (what a browser page loads):");
for (const [name, s] of Object.entries(sizes)) {
  console.log(`  ${name.padEnd(24)} raw ${kb(s.raw).padStart(9)}  gzip ${kb(s.gzip).padStart(8)}  brotli ${kb(s.brotli).padStart(8)}`);
}
if (gzip > LIMIT_GZIP) {
  console.error(`build: ${kb(gzip)} gzipped is over the ${kb(LIMIT_GZIP)} budget`);
  process.exit(1);
}
if (!existsSync(join(dist, "node.js"))) process.exit(1);
