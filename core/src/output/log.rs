//! The server's side of one output stream: the judge of every append.

use alloc::string::String;

use super::{byte_index, utf16_len, Chunk};

/// What the server made of an append. The spelling ([`AppendReason::as_str`])
/// is the answer's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppendReason {
    /// The chunk extended the text (also when part of it was a resend).
    Appended,
    /// The very same chunk at an offset already written: nothing changes.
    DuplicateChunk,
    /// Different text at an offset already written (or an offset inside a
    /// character): refused, nothing changes.
    ChunkConflict,
    /// The chunk starts past the end of the text: refused; `expected` is
    /// where the next chunk must start.
    OutputGap,
    /// The chunk's attempt is older than the task's: a replaced worker's
    /// output, fenced off.
    StaleAttempt,
    /// The chunk's attempt has not started.
    NotStarted,
    /// The task has ended: its output is closed.
    OutputClosed,
}

impl AppendReason {
    /// `appended`, `duplicate-chunk`, `chunk-conflict`, `output-gap`,
    /// `stale-attempt`, `not-started` or `output-closed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AppendReason::Appended => "appended",
            AppendReason::DuplicateChunk => "duplicate-chunk",
            AppendReason::ChunkConflict => "chunk-conflict",
            AppendReason::OutputGap => "output-gap",
            AppendReason::StaleAttempt => "stale-attempt",
            AppendReason::NotStarted => "not-started",
            AppendReason::OutputClosed => "output-closed",
        }
    }

    /// Whether the append was taken or was already there: what an
    /// executor treats as delivered.
    pub const fn accepted(self) -> bool {
        matches!(self, AppendReason::Appended | AppendReason::DuplicateChunk)
    }
}

/// The judgement of one append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Why.
    pub reason: AppendReason,
    /// The text the stream gained (empty unless `appended`): what is
    /// stored and sent to followers, at [`Appended::offset`].
    pub added: String,
    /// Where `added` starts.
    pub offset: u64,
    /// The stream's text was an older attempt's and was dropped first.
    pub superseded: bool,
    /// The attempt the stream holds after the append.
    pub attempt: u64,
    /// Where the next chunk must start (the stream's length).
    pub expected: u64,
}

/// What a follower that holds some of a stream is sent: the text it
/// lacks, where that text starts, and whether the stream is complete. A
/// page feeds it to its [`super::OutputMirror`] as it is: `apply(attempt,
/// offset, text)`, then `close(attempt)` when `complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catchup {
    /// The attempt whose text the stream holds: newer than the follower's
    /// means its text is replaced.
    pub attempt: u64,
    /// Where `text` starts in that attempt's text.
    pub offset: u64,
    /// What the follower lacks (empty when it is up to date).
    pub text: String,
    /// The task ended: nothing will be appended any more.
    pub complete: bool,
}

impl Catchup {
    /// Whether a follower at `attempt` learns anything from it: new text,
    /// a newer attempt, or the end. When not, a long-poll is held.
    pub fn is_news(&self, attempt: u64) -> bool {
        !self.text.is_empty() || self.attempt > attempt || self.complete
    }
}

/// One stream's text, as the server keeps it: the newest attempt's only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputLog {
    attempt: u64,
    text: String,
    units: u64,
    closed: bool,
}

impl OutputLog {
    /// An empty stream.
    pub fn new() -> OutputLog {
        OutputLog::default()
    }

    /// A stream restored from storage: `attempt`'s `text`, and whether it
    /// was closed.
    pub fn restore(attempt: u64, text: String, closed: bool) -> OutputLog {
        let units = utf16_len(&text);
        OutputLog {
            attempt,
            text,
            units,
            closed,
        }
    }

    /// The attempt whose text the stream holds (0 before any).
    pub fn attempt(&self) -> u64 {
        self.attempt
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its length in UTF-16 code units.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Whether the task ended (no append is taken any more).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The task ended: the stream takes no more appends, and its followers
    /// are told it is complete. Returns whether that changed anything.
    pub fn close(&mut self) -> bool {
        !core::mem::replace(&mut self.closed, true)
    }

    /// A new attempt started: an older attempt's text is dropped at once,
    /// so that followers stop showing a draft nobody finishes. Returns
    /// whether text was dropped.
    pub fn begin(&mut self, attempt: u64) -> bool {
        if attempt <= self.attempt || self.closed {
            return false;
        }
        self.move_to(attempt)
    }

    /// Holds `attempt`'s text from now on, starting from empty. Returns
    /// whether an older attempt's text was dropped.
    fn move_to(&mut self, attempt: u64) -> bool {
        let dropped = self.units > 0;
        self.attempt = attempt;
        self.text.clear();
        self.units = 0;
        dropped
    }

    /// Judges `chunk` against the stream, given the task's current
    /// attempt and whether the task is live, in this order:
    ///
    /// 1. an older attempt than the task's is `stale-attempt`, a newer one
    ///    `not-started` (fencing, as for every executor event);
    /// 2. a chunk within the text already written is `duplicate-chunk`
    ///    when it is the same text, `chunk-conflict` when not (so a resend
    ///    is answered the same after the task ended);
    /// 3. a finished task's stream is `output-closed`;
    /// 4. the first chunk of a newer attempt drops the older text
    ///    (`superseded`);
    /// 5. a chunk past the end is `output-gap`; one that overlaps the end
    ///    must agree on the overlap (else `chunk-conflict`) and appends the
    ///    rest.
    ///
    /// Nothing changes unless the reason is `appended`.
    pub fn append(&mut self, chunk: &Chunk, task_attempt: u64, task_live: bool) -> Appended {
        let refuse = |log: &OutputLog, reason| Appended {
            reason,
            added: String::new(),
            offset: chunk.offset,
            superseded: false,
            attempt: log.attempt,
            expected: log.units,
        };
        if chunk.attempt < task_attempt {
            return refuse(self, AppendReason::StaleAttempt);
        }
        if chunk.attempt > task_attempt {
            return refuse(self, AppendReason::NotStarted);
        }
        // A chunk that starts inside the text: the part already written
        // must agree, and what is past the end is the new text.
        let mut known_tail = None;
        if chunk.attempt == self.attempt && chunk.offset < self.units {
            match self.overlap_tail(chunk) {
                None => return refuse(self, AppendReason::ChunkConflict),
                Some("") => return refuse(self, AppendReason::DuplicateChunk),
                tail => known_tail = tail,
            }
        }
        if self.closed || !task_live {
            return refuse(self, AppendReason::OutputClosed);
        }
        let newer = chunk.attempt > self.attempt;
        let base = if newer { 0 } else { self.units };
        if chunk.offset > base {
            let mut gap = refuse(self, AppendReason::OutputGap);
            gap.expected = base;
            return gap;
        }
        let superseded = newer && self.move_to(chunk.attempt);
        let added = match known_tail.or_else(|| self.overlap_tail(chunk)) {
            Some(tail) => String::from(tail),
            None => return refuse(self, AppendReason::ChunkConflict),
        };
        let offset = self.units;
        self.units += utf16_len(&added);
        self.text.push_str(&added);
        Appended {
            reason: AppendReason::Appended,
            added,
            offset,
            superseded,
            attempt: self.attempt,
            expected: self.units,
        }
    }

    /// Brings a stored stream to its task as it now stands, before a
    /// follower is answered (PROTOCOL.md §Live output, "Following"): an
    /// attempt that has started and written nothing yet already replaces
    /// the old text (its followers stop showing a draft nobody finishes),
    /// and an ended task's stream is complete. Both backends call this;
    /// neither decides it.
    pub fn follow_task(&mut self, task_attempt: u64, task_live: bool) {
        self.begin(task_attempt);
        if !task_live {
            self.close();
        }
    }

    /// What a follower holding `attempt`'s text up to `offset` lacks: the
    /// rest of that attempt's text; or, when the stream holds another
    /// attempt's, all of it from offset 0 (the follower's text is
    /// replaced, never mixed). An offset past the end, or inside a
    /// character, is answered from the end, or the start: a follower never
    /// gets a piece that could double or split a character.
    pub fn since(&self, attempt: u64, offset: u64) -> Catchup {
        let from = if attempt == self.attempt {
            if offset >= self.units {
                self.units
            } else if byte_index(&self.text, offset).is_some() {
                offset
            } else {
                0
            }
        } else {
            0
        };
        let at = byte_index(&self.text, from).unwrap_or(self.text.len());
        Catchup {
            attempt: self.attempt,
            offset: from,
            text: String::from(&self.text[at..]),
            complete: self.closed,
        }
    }

    /// For a chunk of the stream's attempt that starts at or before the
    /// end: the part past the end, if the rest agrees with the text
    /// written (`None`: it does not, or its offset falls inside a
    /// character).
    fn overlap_tail<'c>(&self, chunk: &'c Chunk) -> Option<&'c str> {
        let from = byte_index(&self.text, chunk.offset)?;
        let written = &self.text[from..];
        if written.len() >= chunk.text.len() {
            return written.starts_with(chunk.text.as_str()).then_some("");
        }
        chunk.text.strip_prefix(written)
    }
}
