//! The client build's float printer. That build leaves ryu out of the
//! core (its tables and 128-bit arithmetic cost the page 2.5 KB gzip) and
//! registers this instead (`json::set_float_writer`): the runtime's own
//! shortest digits, laid out as ryu lays them out (`ryuText` in
//! `wasm/js/runtime.js`).
//!
//! Both print the shortest digits that read back as the same number, the
//! closest to it, so only the layout differs: JavaScript writes `1e+300`
//! and `0.000001`, ryu `1e300` and `1e-6`. With ryu's layout every JSON
//! text and message is byte for byte what the full build and the server
//! write; `tests/js/numbers.test.mjs` checks the two builds agree.

use alloc::string::String;
use wasm_bindgen::prelude::wasm_bindgen;

#[wasm_bindgen(module = "/js/runtime.js")]
extern "C" {
    /// `n` (finite) as ryu writes it.
    #[wasm_bindgen(js_name = ryuText)]
    fn ryu_text(n: f64) -> String;
}

fn write(out: &mut String, n: f64) {
    out.push_str(&ryu_text(n));
}

/// Registers the printer when the module starts.
#[wasm_bindgen(start)]
fn start() {
    taskwire_core::js::set_float_writer(write);
}
