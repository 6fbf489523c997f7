//! # taskwire-wasm
//!
//! Thin wasm-bindgen bindings over `taskwire-core`, consumed by the npm
//! package's JavaScript layer (`js/`), which is the public API.
//!
//! ## The boundary: JSON text, one crossing per call
//! Every value crosses as JSON text: JavaScript's native `JSON.stringify`
//! and `JSON.parse` are faster than walking an object field by field
//! across the boundary (serde-wasm-bindgen measured ~2.5 µs just to read
//! one small event), and a resume answer fetched from a server is already
//! text, so the client hands it over without ever parsing it in
//! JavaScript. The numbers are in the package README.
//!
//! ## Errors
//! A failed call throws a `TaskwireError` (an `Error` with `.code`),
//! constructed here through the JS class itself (`error.rs`), whose codes
//! are one Rust enum that the TypeScript union is checked against. No
//! export can panic: every input is read by core's readers (`taskwire_core::json`), and
//! release builds abort on panic, so a panic path would be a trap.

//!
//! ## `no_std` in the page
//! The client build (without `book`) is `no_std` on wasm32, and so are
//! the core and every dependency it links: a panic then reaches the
//! handler below, which traps at once, where std's would have formatted
//! its message first. That keeps std's panic machinery and `core::fmt`
//! out of the page (2.5 KB gzip; `scripts/build.mjs` fails if `core::fmt`
//! comes back). It changes nothing a caller sees: release builds abort
//! on panic (a trap) either way, and no input panics
//! (`tests/js/bad-input.test.mjs`).

#![cfg_attr(all(target_arch = "wasm32", not(feature = "book")), no_std)]
#![forbid(unsafe_code)]
// ASCII is appended as `&str`, not as a `char` (see taskwire-core).
#![allow(clippy::single_char_add_str)]

extern crate alloc;

use taskwire_core as tw;
use wasm_bindgen::JsValue;

#[cfg(feature = "book")]
mod book;
#[cfg(feature = "client")]
mod client;
pub mod error;
#[cfg(feature = "book")]
mod functions;
mod mirror;
#[cfg(all(target_arch = "wasm32", not(feature = "book")))]
mod number;
#[cfg(feature = "book")]
mod output;
mod read;

#[cfg(feature = "book")]
pub use book::BookHandle;
#[cfg(feature = "client")]
pub use client::{ClientCore, WatchHandle};
#[cfg(feature = "book")]
pub use functions::{apply_event, create_task, expire_task, plan_batch, worth_holding};
pub use mirror::MirrorHandle;
#[cfg(feature = "book")]
pub use output::{output_stream_name, OutputLogHandle};

use error::throw;

/// The page's allocator: lol_alloc's free list (with a lock: its safe
/// constructor) is 3.2 KB gzip smaller than dlmalloc. The client build
/// holds few live allocations (a mirror, an answer, a request), so a
/// linear free list costs nothing measurable there; the full build keeps
/// std's dlmalloc for TaskBook's many tasks. (The `no_std` client build
/// must name one: std's is not linked.)
#[cfg(all(target_arch = "wasm32", not(feature = "book")))]
#[global_allocator]
static ALLOCATOR: lol_alloc::LockedAllocator<lol_alloc::FreeListAllocator> =
    lol_alloc::LockedAllocator::new(lol_alloc::FreeListAllocator::new());

/// Reads a JavaScript number that must be a safe integer ≥ 0.
fn safe_int(value: f64, field: &str) -> Result<u64> {
    tw::value::to_safe_u64(value).ok_or_else(|| {
        let max = tw::text::decimal(tw::MAX_SAFE_INTEGER);
        let got = tw::value::number(value);
        throw(tw::Error::invalid(tw::error::join(&[
            field,
            ": must be an integer from 0 to ",
            &max,
            ", got ",
            &got,
        ])))
    })
}

type Result<T> = core::result::Result<T, JsValue>;

/// Text for JavaScript, as a JS string made from it: exports return
/// these, not a `String` (whose return path shrinks it to a boxed slice:
/// that code and its panic message cost the page bytes).
fn text(s: alloc::string::String) -> JsValue {
    JsValue::from_str(&s)
}

/// The client build's panic handler: a trap, without reading the message
/// (see "`no_std` in the page" above).
#[cfg(all(target_arch = "wasm32", not(feature = "book"), not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
