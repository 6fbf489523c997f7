//! A Server-Sent Events parser over raw bytes.
//!
//! Bytes arrive in arbitrary chunks (a multi-byte character or a line can
//! be split between two reads), so the parser buffers bytes and decodes
//! only whole lines; lines end with `\n`, `\r\n` or `\r`, as the SSE spec
//! says. Comments (`: heartbeat`) are counted but carry no message.

use alloc::{string::String, string::ToString, vec::Vec};

/// One dispatched message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The `event:` field (`message` when absent).
    pub event: String,
    /// The `id:` field of this message, if it had one.
    pub id: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct Parser {
    buffer: Vec<u8>,
    event: String,
    id: Option<String>,
    data: String,
    has_data: bool,
    /// A `\r` ended the previous chunk; a `\n` starting the next one
    /// belongs to it.
    pending_cr: bool,
}

impl Parser {
    /// Feeds a chunk; returns the messages it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Message> {
        let mut out = Vec::new();
        let mut bytes = chunk;
        if self.pending_cr {
            self.pending_cr = false;
            if bytes.first() == Some(&b'\n') {
                bytes = bytes.get(1..).unwrap_or_default();
            }
        }
        let mut start = 0;
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if b == b'\n' || b == b'\r' {
                self.buffer
                    .extend_from_slice(bytes.get(start..i).unwrap_or_default());
                let line = core::mem::take(&mut self.buffer);
                self.line(&line, &mut out);
                if b == b'\r' {
                    match bytes.get(i + 1) {
                        Some(b'\n') => i += 1,
                        None => self.pending_cr = true,
                        Some(_) => {}
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        self.buffer
            .extend_from_slice(bytes.get(start..).unwrap_or_default());
        out
    }

    fn line(&mut self, raw: &[u8], out: &mut Vec<Message>) {
        // A line that is not UTF-8 cannot be a valid field: skip it (the
        // server's answers are JSON, always UTF-8).
        let Ok(line) = core::str::from_utf8(raw) else {
            return;
        };
        if line.is_empty() {
            if self.has_data {
                out.push(Message {
                    event: if self.event.is_empty() {
                        String::from("message")
                    } else {
                        core::mem::take(&mut self.event)
                    },
                    id: self.id.take(),
                    data: core::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.id = None;
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(":") {
            return; // a comment: heartbeat
        }
        // Bytes, not `str::find` and `contains`: their char searcher
        // (memchr) cost the page 0.8 KB of wasm; ':' and NUL are ASCII,
        // so their bytes are never inside another character.
        let (field, value) = match line.bytes().position(|b| b == b':') {
            Some(colon) => {
                let value = line.get(colon + 1..).unwrap_or_default();
                (
                    line.get(..colon).unwrap_or_default(),
                    value.strip_prefix(" ").unwrap_or(value),
                )
            }
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push_str("\n");
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.bytes().any(|b| b == 0) => self.id = Some(value.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(event: &str, id: Option<&str>, data: &str) -> Message {
        Message {
            event: event.into(),
            id: id.map(Into::into),
            data: data.into(),
        }
    }

    #[test]
    fn parses_messages_comments_and_multiline_data() {
        let mut p = Parser::default();
        let out = p.push(b": hb\n\nevent: resume\nid: 5\ndata: {\"a\":1}\n\ndata: x\ndata: y\n\n");
        assert_eq!(
            out,
            vec![
                msg("resume", Some("5"), "{\"a\":1}"),
                msg("message", None, "x\ny")
            ]
        );
    }

    #[test]
    fn survives_any_split_including_inside_a_character() {
        let text = "event: resume\r\nid: 7\r\ndata: caf\u{e9} \u{1F600}\r\n\r\n: hb\r\rdata: z\n\n";
        let whole = Parser::default().push(text.as_bytes());
        for cut in 0..text.len() {
            let mut p = Parser::default();
            let mut out = p.push(&text.as_bytes()[..cut]);
            out.extend(p.push(&text.as_bytes()[cut..]));
            assert_eq!(out, whole, "cut at {cut}");
        }
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].data, "caf\u{e9} \u{1F600}");
    }

    #[test]
    fn an_unfinished_message_is_not_dispatched() {
        let mut p = Parser::default();
        assert!(p.push(b"event: resume\ndata: {}\n").is_empty());
        assert_eq!(p.push(b"\n").len(), 1);
    }
}
