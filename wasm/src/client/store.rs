//! Persistence, on the Rust side alone: the mirror is read from a
//! `localStorage`-like object when a watch starts and written after every
//! update, in the mirror's own `{taskId, task, epoch?}` form (the epoch
//! is what lets a reload start over when the server's history changed);
//! a batch as a snapshot answer (`{batchId, mode: "snapshot", cursor,
//! size, open, tasks, epoch?}`), one key per batch.

use alloc::string::String;
use js_sys::{Function, Reflect};
use taskwire_core::json::FromJson;
use wasm_bindgen::{JsCast, JsValue};

/// Where the mirror is kept between page loads: a `localStorage`-like
/// object and the key.
pub struct Store {
    pub storage: JsValue,
    pub key: String,
}

impl Store {
    fn call(&self, method: &str, args: &[&JsValue]) -> Option<JsValue> {
        let f: Function = Reflect::get(&self.storage, &JsValue::from_str(method))
            .ok()?
            .dyn_into()
            .ok()?;
        let key = JsValue::from_str(&self.key);
        match args {
            [] => f.call1(&self.storage, &key).ok(),
            [value] => f.call2(&self.storage, &key, value).ok(),
            _ => None,
        }
    }

    /// The persisted value, if there is a sound one.
    pub fn load<T: FromJson>(&self) -> Option<T> {
        self.text()
            .and_then(|text| crate::read::read::<T>(&text, "persisted").ok())
    }

    /// The persisted text.
    pub fn text(&self) -> Option<String> {
        self.call("getItem", &[])?.as_string()
    }

    /// Best effort: a full or disabled storage is not an error.
    pub fn save(&self, text: &str) {
        let _ = self.call("setItem", &[&JsValue::from_str(text)]);
    }
}
