//! Persistence, on the Rust side alone: the mirror is read from a
//! `localStorage`-like object when a watch starts and written after every
//! update, in the mirror's own `{taskId, task, epoch?}` form (the epoch
//! is what lets a reload start over when the server's history changed).

use alloc::string::String;
use js_sys::{Function, Reflect};
use taskwire_core as tw;
use tw::json::write;
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

    /// The persisted mirror of `task_id`, if there is a sound one.
    pub fn load(&self, task_id: &str) -> Option<tw::Mirror> {
        let text = self.call("getItem", &[])?.as_string()?;
        crate::read::read::<tw::Mirror>(&text, "persisted")
            .ok()
            .filter(|m| m.task_id() == task_id)
    }

    /// Best effort: a full or disabled storage is not an error.
    pub fn save(&self, mirror: &tw::Mirror) {
        let text = write(mirror);
        let _ = self.call("setItem", &[&JsValue::from_str(&text)]);
    }
}
