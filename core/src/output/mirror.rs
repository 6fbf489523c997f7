//! The page's side of one output stream: the text of the newest attempt,
//! assembled from what the server sends in any order, with repeats.

use alloc::string::String;

use super::{byte_index, utf16_len};

/// What one piece of output changed, for the page to render.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputUpdate {
    /// The text appended (empty when nothing was).
    pub delta: String,
    /// The text shown so far was an older attempt's and was dropped: the
    /// page replaces its text with the new attempt's instead of adding.
    pub replaced: bool,
    /// The piece started past the end of the text: the page must fetch
    /// the stream again from this offset of [`OutputMirror::attempt`]
    /// (nothing it has is lost or doubled meanwhile).
    pub gap: Option<u64>,
}

impl OutputUpdate {
    /// Whether the text shown changed.
    pub fn changed(&self) -> bool {
        self.replaced || !self.delta.is_empty()
    }
}

/// One stream as a page knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputMirror {
    attempt: u64,
    text: String,
    units: u64,
    closed: bool,
}

impl OutputMirror {
    /// A stream not seen yet.
    pub fn new() -> OutputMirror {
        OutputMirror::default()
    }

    /// The attempt whose text is shown (0 before any).
    pub fn attempt(&self) -> u64 {
        self.attempt
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where a resume asks the server to start: the attempt, and the
    /// offset of the first unit not held.
    pub fn resume_from(&self) -> (u64, u64) {
        (self.attempt, self.units)
    }

    /// Whether the server said the stream is complete (the task ended).
    /// A cut connection never closes it.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Applies `text` written by `attempt` at `offset`. An older attempt's
    /// piece is ignored; a newer attempt's replaces the text; a piece
    /// already held is ignored; one past the end is a gap; one that
    /// overlaps the end adds only what is new.
    pub fn apply(&mut self, attempt: u64, offset: u64, text: &str) -> OutputUpdate {
        let mut update = OutputUpdate::default();
        if attempt < self.attempt || text.is_empty() {
            return update;
        }
        update.replaced = self.move_to(attempt);
        let end = offset.saturating_add(utf16_len(text));
        if end <= self.units {
            return update;
        }
        if offset > self.units {
            update.gap = Some(self.units);
            return update;
        }
        match byte_index(text, self.units - offset) {
            Some(from) => {
                update.delta = String::from(&text[from..]);
                self.units = end;
                self.text.push_str(&update.delta);
            }
            // The end falls inside a character of the piece: not ours to
            // split; ask for the stream from the end instead.
            None => update.gap = Some(self.units),
        }
        update
    }

    /// The server closed the stream, at `attempt` (the task ended). A
    /// close of an older attempt changes nothing; one of a newer attempt
    /// than the text shown drops that text (its attempt wrote nothing).
    pub fn close(&mut self, attempt: u64) -> OutputUpdate {
        let mut update = OutputUpdate::default();
        if attempt < self.attempt {
            return update;
        }
        update.replaced = self.move_to(attempt);
        self.closed = true;
        update
    }

    /// Shows `attempt` from now on: a newer attempt than the one shown
    /// starts from empty text, open. Returns whether text was dropped.
    fn move_to(&mut self, attempt: u64) -> bool {
        if attempt <= self.attempt {
            return false;
        }
        let dropped = self.units > 0;
        *self = OutputMirror {
            attempt,
            ..OutputMirror::default()
        };
        dropped
    }
}
