//! JSON text in, wire types out.
//!
//! The client build lets the runtime's `JSON.parse` build the tree and
//! reads it into the core's readers (`taskwire_wire::from_value`),
//! so the page carries no JSON text parser and no float parsing (2.4 KB
//! gzip less; docs/package.md). Field errors are the core's, word for
//! word; only a syntax error reads differently (`JSON.parse`'s message).
//! The full build keeps the core's own parser, which is faster for
//! `TaskBook`'s many small calls.
//!
//! The tree crosses as one string (`jsonTree` in `wasm/js/runtime.js`):
//! a walk of it through an import per value kind (`Reflect.get`,
//! `Object.keys`, `Array.isArray`, …) cost the page 0.6 KB gzip more.

#[cfg(not(feature = "book"))]
use alloc::string::String;
use taskwire_core as tw;
use tw::json::FromJson;

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(feature = "book")]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    taskwire_wire::from_json(text, what)
}

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(not(feature = "book"))]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    tw::json::from_value(&parse(text, what)?, what)
}

/// `JSON.parse(text)` as the core's tree. Not generic: one copy for
/// every type read (a copy per type cost the page 0.2 KB gzip).
#[cfg(not(feature = "book"))]
fn parse(text: &str, what: &str) -> Result<tw::json::Value<'static>, tw::Error> {
    let tree = tree::json_tree(text);
    let failed = |why: &str| {
        let mut message = String::from(what);
        message.push_str(why);
        tw::Error::invalid(message)
    };
    if let Some(error) = tree.strip_prefix("!") {
        let mut why = String::from(": invalid JSON (");
        why.push_str(error);
        why.push_str(")");
        return Err(failed(&why));
    }
    tw::json::host::decode(&tree)
        .ok_or_else(|| failed(": nested too deeply, or a number out of range"))
}

#[cfg(not(feature = "book"))]
mod tree {
    use alloc::string::String;

    use wasm_bindgen::prelude::wasm_bindgen;

    #[wasm_bindgen(module = "/js/runtime.js")]
    extern "C" {
        /// `JSON.parse(text)` encoded for core's `json::host::decode`: `!` and the
        /// runtime's message when `text` is not JSON, `~` when the value
        /// is nested deeper than the core's parser goes (64) or holds a
        /// number `JSON.parse` rounded to infinity.
        #[wasm_bindgen(js_name = jsonTree)]
        pub fn json_tree(text: &str) -> String;
    }
}
