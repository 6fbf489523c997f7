//! JSON text in, wire types out.
//!
//! The client build lets the runtime's `JSON.parse` build the tree and
//! walks it into the core's readers (`taskwire_core::wire::from_value`),
//! so the page carries no JSON text parser and no float parsing (2.4 KB
//! gzip less; docs/package.md). Field errors are the core's, word for
//! word; only a syntax error reads differently (`JSON.parse`'s message).
//! The full build keeps the core's own parser, which is faster for
//! `TaskBook`'s many small calls.

#[cfg(not(feature = "book"))]
use alloc::string::String;
use taskwire_core as tw;
use tw::json::FromJson;

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(feature = "book")]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    tw::wire::from_json(text, what)
}

/// Parses `text` as a wire type; `what` names it in errors.
#[cfg(not(feature = "book"))]
pub fn read<T: FromJson>(text: &str, what: &str) -> Result<T, tw::Error> {
    tw::wire::from_value(&parse(text, what)?, what)
}

/// `JSON.parse(text)` as the core's tree. Not generic: one copy for
/// every type read (a copy per type cost the page 0.2 KB gzip).
#[cfg(not(feature = "book"))]
fn parse(text: &str, what: &str) -> Result<tw::json::Value<'static>, tw::Error> {
    let value = js_sys::JSON::parse(text).map_err(|e| {
        let mut message = String::from(what);
        message.push_str(": invalid JSON (");
        message.push_str(
            &js_sys::Error::from(e)
                .message()
                .as_string()
                .unwrap_or_default(),
        );
        message.push(')');
        tw::Error::invalid(message)
    })?;
    walk::tree(&value, 0).ok_or_else(|| {
        let mut message = String::from(what);
        message.push_str(": nested too deeply, or a number out of range");
        tw::Error::invalid(message)
    })
}

#[cfg(not(feature = "book"))]
mod walk {
    use alloc::borrow::Cow;
    use alloc::vec::Vec;

    use js_sys::{Array, Object, Reflect};
    use taskwire_core::json::Value;
    use wasm_bindgen::{JsCast, JsValue};

    /// As deep as the core's parser goes.
    const MAX_DEPTH: usize = 64;

    /// What `JSON.parse` built, as the core's tree (`None`: deeper than
    /// the core allows, or a number `JSON.parse` rounded to infinity).
    pub fn tree(v: &JsValue, depth: usize) -> Option<Value<'static>> {
        if depth > MAX_DEPTH {
            return None;
        }
        if v.is_null() {
            return Some(Value::Null);
        }
        if let Some(b) = v.as_bool() {
            return Some(Value::Bool(b));
        }
        if let Some(n) = v.as_f64() {
            return n.is_finite().then_some(Value::Number(n));
        }
        if let Some(s) = v.as_string() {
            return Some(Value::String(Cow::Owned(s)));
        }
        if let Some(items) = v.dyn_ref::<Array>() {
            let mut out = Vec::with_capacity(items.length() as usize);
            for item in items.iter() {
                out.push(tree(&item, depth + 1)?);
            }
            return Some(Value::Array(out));
        }
        // JSON.parse makes plain objects only; their keys are strings.
        let keys = Object::keys(v.unchecked_ref::<Object>());
        let mut out = Vec::with_capacity(keys.length() as usize);
        for key in keys.iter() {
            let field = Reflect::get(v, &key).ok()?;
            out.push((Cow::Owned(key.as_string()?), tree(&field, depth + 1)?));
        }
        Some(Value::Object(out))
    }
}
