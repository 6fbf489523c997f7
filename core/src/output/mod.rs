//! Live output (issue 27): the text a task is writing, appended by its
//! executor in chunks and followed by the page as it grows.
//!
//! A task may have a few named streams (`draft`, `log`). Each chunk is
//! addressed by `(attempt, offset)`: the attempt that wrote it, and where
//! it starts in that attempt's text, counted in UTF-16 code units, the
//! units a page's strings are indexed in. Two sides apply the rules:
//!
//! - [`OutputLog`], the server's: judges an append against the stream and
//!   the task's attempt. A chunk resent at its offset is a duplicate, a
//!   different chunk at a written offset a conflict, a chunk past the end
//!   a gap; a zombie attempt's chunks are fenced off, a new attempt's
//!   first chunk supersedes the old text, and a finished task's output is
//!   closed.
//! - [`OutputMirror`], the page's: assembles what the server sends, in
//!   any order and with any repeats, into the text of the newest attempt,
//!   and says what changed (the delta, or that the text was replaced).
//!
//! Output is not history: appends make no task version. Who stores the
//! chunks and how they travel is the server's and the client's business;
//! these rules are the same for all of them.

mod log;
mod mirror;
#[cfg(test)]
mod tests;

use alloc::string::String;

use crate::error::{join, Error};
use crate::text::decimal;

pub use log::{AppendReason, Appended, Catchup, OutputLog};
pub use mirror::{OutputMirror, OutputUpdate};

/// The most UTF-16 code units one stream holds in one attempt (about
/// 1 MiB of ASCII): a task's output is a draft, not a file.
pub const MAX_STREAM_UNITS: u64 = 1 << 20;
/// The most UTF-16 code units one chunk carries.
pub const MAX_CHUNK_UNITS: u64 = 64 * 1024;
/// The longest stream name, in bytes.
pub const MAX_STREAM_NAME_BYTES: usize = 64;

/// A stream's name: 1 to [`MAX_STREAM_NAME_BYTES`] bytes of `a-z`, `0-9`,
/// `-` and `_`, so that it can name a URL segment and a storage key as
/// it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamName(String);

impl StreamName {
    /// Checks `name`; the error names `field`.
    pub fn new(name: &str, field: &str) -> Result<StreamName, Error> {
        let ok = !name.is_empty()
            && name.len() <= MAX_STREAM_NAME_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if ok {
            Ok(StreamName(name.into()))
        } else {
            Err(Error::invalid(join(&[
                field,
                ": must be 1 to 64 characters of a-z, 0-9, - and _",
            ])))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One chunk as an executor sends it: the attempt that wrote it, where it
/// starts, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The attempt that wrote it (the `attempt` of the executor's events).
    pub attempt: u64,
    /// Where it starts in the attempt's text, in UTF-16 code units.
    pub offset: u64,
    /// The text (never empty).
    pub text: String,
}

impl Chunk {
    /// Checks a chunk's values; the errors name the field under `field`
    /// (`chunk`).
    pub fn new(attempt: u64, offset: u64, text: String, field: &str) -> Result<Chunk, Error> {
        if attempt == 0 {
            return Err(Error::invalid(join(&[
                field,
                ".attempt: must be at least 1",
            ])));
        }
        let units = utf16_len(&text);
        if units == 0 || units > MAX_CHUNK_UNITS {
            return Err(Error::invalid(join(&[
                field,
                ".text: must be 1 to ",
                &decimal(MAX_CHUNK_UNITS),
                " UTF-16 code units, got ",
                &decimal(units),
            ])));
        }
        if offset.saturating_add(units) > MAX_STREAM_UNITS {
            return Err(Error::invalid(join(&[
                field,
                ".offset: the stream would pass its limit of ",
                &decimal(MAX_STREAM_UNITS),
                " UTF-16 code units",
            ])));
        }
        Ok(Chunk {
            attempt,
            offset,
            text,
        })
    }

    /// Where the chunk ends (its offset plus its length).
    pub fn end(&self) -> u64 {
        self.offset + utf16_len(&self.text)
    }
}

/// The length of `text` in UTF-16 code units.
pub fn utf16_len(text: &str) -> u64 {
    text.chars().map(|c| c.len_utf16() as u64).sum()
}

/// The byte index in `text` of UTF-16 offset `units`, or `None` when the
/// offset is past the end or falls inside a surrogate pair.
pub fn byte_index(text: &str, units: u64) -> Option<usize> {
    let mut at = 0u64;
    for (i, c) in text.char_indices() {
        if at == units {
            return Some(i);
        }
        if at > units {
            return None;
        }
        at += c.len_utf16() as u64;
    }
    (at == units).then_some(text.len())
}
