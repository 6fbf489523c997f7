//! Text without `core::fmt`: messages and numbers built by appending.
//! The client build carries no `core::fmt`, and its integer formatting
//! and `format!` would come back into the page with the first use. A
//! leaf: it uses nothing else of the crate.
//!
//! What only the page's paths use stays `pub(crate)`: an item another
//! crate can call is compiled to be called from outside, which inlines
//! less, and the page paid up to 0.5 KB gzip for it (docs/package.md).

use alloc::string::String;

/// `parts` joined: how messages on the page's paths are built, without
/// `format!` or `concat`'s generic join (0.2 KB more in the page).
pub fn join(parts: &[&str]) -> String {
    let mut out = String::new();
    for part in parts {
        out.push_str(part);
    }
    out
}

/// Quotes a user-supplied string for a message, cut to a readable length so
/// that a megabyte id does not become a megabyte error message.
pub fn quoted(s: &str) -> String {
    const MAX_CHARS: usize = 64;
    match s.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => join(&["\"", s.get(..cut).unwrap_or(s), "…\""]),
        None => join(&["\"", s, "\""]),
    }
}

/// `n` in decimal.
pub fn decimal(n: u64) -> String {
    let mut s = String::new();
    push_u64(&mut s, n);
    s
}

/// Appends `n` in decimal.
pub(crate) fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    push_ascii(out, digits.get(i..).unwrap_or_default());
}

/// Appends ASCII bytes. `push_str`, never `String::push` of a `char`,
/// on the page's paths: a `char` is encoded as UTF-8 at each push, and
/// that code cost the page 0.3 KB of wasm.
pub(crate) fn push_ascii(out: &mut String, bytes: &[u8]) {
    out.push_str(core::str::from_utf8(bytes).unwrap_or_default());
}
