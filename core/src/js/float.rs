//! How numbers that are not safe integers are written (JSON output and
//! messages): ryu's shortest round-trip form, e.g. `0.1`, `1.5e-7`,
//! `1e300`.
//!
//! ryu is the `ryu` feature (on by default). An embedder that already
//! has a shortest-digits printer turns the feature off and registers one
//! with [`set_float_writer`] that writes exactly what ryu writes: the
//! browser build of `taskwire-wasm` does, from the runtime's own
//! `Number#toString`, because ryu's tables and 128-bit arithmetic cost
//! the page 2.5 KB gzip (docs/package.md). Without the feature and before
//! a writer is registered, such a number is written as `null` (what JSON
//! has for a number it cannot represent), never as wrong digits.

use alloc::string::String;

/// Appends a finite `n` (one that is not a safe integer) as ryu writes it.
pub type FloatWriter = fn(&mut String, f64);

/// A spin lock, not a `spin::Once`: the page has the lock already
/// (lol_alloc's), and the `Once` brought its own code and panic messages
/// (0.2 KB of wasm).
#[cfg(not(feature = "ryu"))]
static WRITER: spin::Mutex<Option<FloatWriter>> = spin::Mutex::new(None);

/// Registers the writer used when the `ryu` feature is off (the first
/// registration wins; with the feature on, ryu is always used).
pub fn set_float_writer(writer: FloatWriter) {
    #[cfg(not(feature = "ryu"))]
    {
        let mut registered = WRITER.lock();
        if registered.is_none() {
            *registered = Some(writer);
        }
    }
    #[cfg(feature = "ryu")]
    let _ = writer;
}

/// Appends a finite `n` that is not a safe integer.
pub(crate) fn write(out: &mut String, n: f64) {
    #[cfg(feature = "ryu")]
    out.push_str(ryu::Buffer::new().format_finite(n));
    #[cfg(not(feature = "ryu"))]
    {
        // Copied out: the lock is not held while the writer runs.
        let writer = *WRITER.lock();
        match writer {
            Some(writer) => writer(out, n),
            None => out.push_str("null"),
        }
    }
}
