//! Where a value sits in a JSON document, for errors that name the field.

use alloc::string::String;
use core::fmt;

/// Where a value sits in the document (`history[3].event.atMs`).
#[derive(Debug, Clone, Copy)]
pub enum Path<'p> {
    /// The document itself.
    Root,
    /// A field of an object.
    Key(&'p Path<'p>, &'p str),
    /// An element of an array.
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// The path as text (`history[3].event.atMs`; empty at the root),
    /// written without `core::fmt`: error paths reach the page, and
    /// formatting machinery there costs ~2 KB gzip (docs/package.md).
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.push_to(&mut out);
        out
    }

    fn push_to(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Key(parent, key) => {
                parent.push_to(out);
                if !matches!(parent, Path::Root) {
                    out.push_str(".");
                }
                out.push_str(key);
            }
            Path::Index(parent, i) => {
                parent.push_to(out);
                out.push_str("[");
                crate::text::push_u64(out, *i as u64);
                out.push_str("]");
            }
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}
