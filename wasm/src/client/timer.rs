//! One-shot timers that clear themselves on drop: gloo's `Timeout`, in
//! the few lines the client needs (gloo-timers links std, and the client
//! build is `no_std`, `src/lib.rs`).

use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &JsValue, ms: u32) -> JsValue;

    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
}

/// A scheduled callback; dropping it before it fires cancels it.
#[must_use = "a timeout is cancelled when dropped"]
pub struct Timeout {
    /// What `setTimeout` returned (a number, or Node's `Timeout` object).
    id: JsValue,
    /// Kept alive until the timer fires or is cancelled.
    _callback: Closure<dyn FnMut()>,
}

impl Timeout {
    /// Runs `callback` once after `ms` milliseconds (at most 2^31 - 1).
    pub fn new(ms: u32, callback: impl FnOnce() + 'static) -> Timeout {
        let callback = Closure::once(callback);
        let id = set_timeout(callback.as_ref(), ms);
        Timeout {
            id,
            _callback: callback,
        }
    }
}

impl Drop for Timeout {
    fn drop(&mut self) {
        clear_timeout(&self.id);
    }
}
