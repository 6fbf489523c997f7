//! `taskwire-bindgen INPUT.wasm OUT_DIR OUT_NAME`: what
//! `wasm-bindgen --target web --no-typescript --out-dir OUT_DIR
//! --out-name OUT_NAME INPUT.wasm` does, and nothing else.
//!
//! Why a binary of our own: `scripts/build.mjs` needs only this one call
//! of wasm-bindgen's library, and compiling the whole CLI with
//! `cargo install` was the longest step of a fresh machine's first
//! `npm run demo` (148 s of 448 s). The settings below are the CLI's own
//! for those flags, so the output is the same byte for byte
//! (`tests/js/bindgen.test.mjs` compares it with the installed CLI's).

use std::process::ExitCode;

use wasm_bindgen_cli_support::Bindgen;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, out_dir, out_name] = args.as_slice() else {
        eprintln!("usage: taskwire-bindgen INPUT.wasm OUT_DIR OUT_NAME");
        return ExitCode::from(2);
    };
    match generate(input, out_dir, out_name) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("taskwire-bindgen: {input}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The CLI's `rmain` for `--target web --no-typescript`, with every other
/// flag at the CLI's default (some differ from `Bindgen::new()`'s, e.g.
/// `omit_default_module_path`, so each is set as the CLI sets it).
fn generate(input: &str, out_dir: &str, out_name: &str) -> Result<(), String> {
    // The library's errors are `anyhow` chains; `{:#}` prints the causes.
    let text = |error: &dyn std::fmt::Display| format!("{error:#}");
    let mut bindgen = Bindgen::new();
    bindgen.web(true).map_err(|e| text(&e))?;
    // Deprecated (the module's target features decide), but the CLI
    // still calls it with its default, `false`, so we do too.
    #[allow(deprecated)]
    bindgen
        .input_path(input)
        .debug(false)
        .demangle(true)
        .keep_lld_exports(false)
        .keep_debug(false)
        .split_debug_info(false)
        .remove_name_section(false)
        .remove_producers_section(false)
        .typescript(false)
        .omit_imports(false)
        .omit_default_module_path(false)
        .split_linked_modules(false)
        .js_string_builtins(false)
        .ts_typed_array_buffers(false)
        .reference_types(false)
        .reset_state_function(false)
        .force_enable_abort_handler(false)
        .out_name(out_name);
    bindgen.generate(out_dir).map_err(|e| text(&e))
}
