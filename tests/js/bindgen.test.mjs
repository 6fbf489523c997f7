// `npm run build` makes the module's JS with tools/bindgen (the
// workspace's own binary over wasm-bindgen's library) instead of the
// wasm-bindgen CLI, so that a fresh machine's first `npm run demo` does
// not compile the whole CLI. That is only sound while both write the
// same files: this runs both on the module the build left in target/
// and compares every file byte for byte. The CLI is on the machine for
// `wasm-pack test` (scripts/setup.sh wasm-pack).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const target = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
const module = join(target, "wasm32-unknown-unknown/release/taskwire_wasm.wasm");
const tool = join(target, "tools/taskwire-bindgen");

/** Every file under `dir`, by its path relative to `dir`. */
function files(dir) {
  const found = new Map();
  const walk = (at) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.set(relative(dir, path), readFileSync(path));
    }
  };
  walk(dir);
  return found;
}

test("tools/bindgen writes exactly what the wasm-bindgen CLI writes for --target web --no-typescript", (t) => {
  assert.ok(existsSync(module), `no ${module}: run node scripts/build.mjs first`);
  assert.ok(existsSync(tool), `no ${tool}: run node scripts/build.mjs first`);
  const scratch = mkdtempSync(join(tmpdir(), "taskwire-bindgen-"));
  t.after(() => rmSync(scratch, { recursive: true, force: true }));
  const fromCli = join(scratch, "cli");
  const fromTool = join(scratch, "tool");
  try {
    execFileSync("wasm-bindgen", ["--target", "web", "--no-typescript", "--out-dir", fromCli, "--out-name", "taskwire_wasm", module]);
  } catch (error) {
    assert.fail(`the wasm-bindgen CLI did not run (${error.code ?? error.message}): bash scripts/setup.sh wasm-pack installs it`);
  }
  execFileSync(tool, [module, fromTool, "taskwire_wasm"]);

  const expected = files(fromCli);
  const actual = files(fromTool);
  assert.deepEqual([...actual.keys()].sort(), [...expected.keys()].sort());
  assert.ok(expected.has("taskwire_wasm_bg.wasm") && expected.has("taskwire_wasm.js"));
  for (const [path, bytes] of expected) {
    assert.ok(actual.get(path).equals(bytes), `${path} differs from the CLI's`);
  }
});

test("tools/bindgen refuses a missing input with its path, and wrong arguments with its usage", () => {
  const missing = join(tmpdir(), "taskwire-no-such-module.wasm");
  const run = (args) => {
    try {
      execFileSync(tool, args, { stdio: ["ignore", "ignore", "pipe"] });
    } catch (error) {
      return { status: error.status, stderr: String(error.stderr) };
    }
    assert.fail(`taskwire-bindgen ${args.join(" ")} succeeded`);
  };
  const unreadable = run([missing, join(tmpdir(), "taskwire-bindgen-out"), "x"]);
  assert.equal(unreadable.status, 1);
  assert.match(unreadable.stderr, new RegExp(`taskwire-bindgen: ${missing}: failed reading`));
  const usage = run(["only-one-argument"]);
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /usage: taskwire-bindgen INPUT\.wasm OUT_DIR OUT_NAME/);
});
