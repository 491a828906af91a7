//! Previews: a short, repr-like text of a stored value for an operator (the dashboard, D-046),
//! built from the stored bytes without decoding the value.
//!
//! A preview reads at most [`PREVIEW_BYTES`] of the payload, so a 5 MB value costs what a
//! 4 KiB one does. It never runs code: a pickle is shown as `<pickle, N bytes>`, and a
//! registered type by its name and the value its encoder returned (`<Point: registered type,
//! (1, 2)>`), whether or not this process knows the type. The safe format (CBOR, D-002) is
//! walked item by item as far as the width needs, so a prefix cut anywhere renders what it
//! holds and ends with `…`; bytes that cannot be read as the format end the text with
//! `<damaged: …>`. A preview is not a check: it verifies the checksum only when it has the whole
//! payload, and it does not refuse every field `decode` would (a date's day, say). `get` and
//! `check()` do.
//!
//! ```
//! use diskcache_oxide_engine::value::{encode, preview, Value};
//! use diskcache_oxide_engine::Kind;
//!
//! let v = Value::Dict(vec![(Value::Str("a".into()), Value::Int(1))]);
//! assert_eq!(preview(Kind::Encoded, &encode(&v), 7, 60), "{'a': 1}");
//! assert_eq!(preview(Kind::Str, b"hello world", 5_000_000, 8), "'hello…'");
//! let long = Value::Dict(vec![(Value::Str("a".into()), Value::Int(1)), (Value::Str("b".into()), Value::Int(2))]);
//! assert_eq!(preview(Kind::Encoded, &encode(&long)[..4], 9, 60), "{'a': 1, …}");
//! assert_eq!(preview(Kind::Pickled, b"\x80\x05", 1234, 60), "<pickle, 1234 bytes>");
//! ```
//!
//! The code is in three files: this one holds the entry points and the text being built (`Out`:
//! its width, and the containers a cut text closes); `repr.rs` writes Python's repr of the
//! plain kinds and of the scalars inside the safe format; `reader.rs` walks a prefix of the
//! safe format (CBOR) item by item, writing each item through `repr.rs`.

use self::reader::Reader;
use self::repr::{bytes_literal, number, text_payload};
use crate::format::kind::Kind;

mod reader;
mod repr;

/// The most bytes of a payload a preview looks at.
pub const PREVIEW_BYTES: usize = 4096;
/// The widest preview, in characters; a wider request gets this.
pub const PREVIEW_MAX_WIDTH: usize = 1000;

const ELLIPSIS: char = '…';

/// The preview of a payload of `kind` whose first bytes are `prefix` and whose whole length is
/// `total` bytes: at most `width` characters (1 to [`PREVIEW_MAX_WIDTH`]), ending with `…` when
/// the value goes on past them or past the prefix. Only the first [`PREVIEW_BYTES`] of
/// `prefix` are read. Any input gives a text; nothing panics.
pub fn preview(kind: Kind, prefix: &[u8], total: u64, width: usize) -> String {
    let width = width.clamp(1, PREVIEW_MAX_WIDTH);
    let prefix = &prefix[..prefix.len().min(PREVIEW_BYTES)];
    // A prefix as long as the payload is the whole payload (a caller's total may be short).
    let total = total.max(prefix.len() as u64);
    let whole = prefix.len() as u64 == total;
    let mut out = Out::new(width);
    let ended = match kind {
        Kind::Int | Kind::Float => number(&mut out, kind, prefix, total),
        Kind::Str => text_payload(&mut out, prefix, whole),
        Kind::Bytes => bytes_literal(&mut out, prefix, whole),
        Kind::Pickled => out.push(&format!("<pickle, {total} bytes>")),
        Kind::Encoded => {
            let mut r = Reader {
                buf: prefix,
                pos: 0,
                whole,
            };
            match r.item(&mut out, 0) {
                Ok(()) if whole && r.pos < prefix.len() => Err(Stop::Damaged(format!(
                    "trailing bytes after the value at byte {}",
                    r.pos
                ))),
                other => other,
            }
        }
    };
    out.finish(ended)
}

/// `text` in at most `width` characters, ending with `…` if it was cut: for what a preview
/// says instead of a value (a missing value file, say).
pub(crate) fn fit(text: &str, width: usize) -> String {
    let width = width.clamp(1, PREVIEW_MAX_WIDTH);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut t: String = text.chars().take(width - 1).collect();
    t.push(ELLIPSIS);
    t
}

/// Why rendering stopped before the value's end.
enum Stop {
    /// The text reached its width.
    Full,
    /// The prefix ended; the payload goes on.
    Cut,
    /// The bytes cannot be read as what they claim to be.
    Damaged(String),
}

type Step = Result<(), Stop>;

/// The text so far, never more than `width` characters, and the containers (and quotes) open
/// at its end, so that a cut text can still close them: `{'a': 1, …}`, `'hello…'`.
struct Out {
    text: String,
    chars: usize,
    width: usize,
    /// Each open container: the length of the text just after its opening, and its closing.
    open: Vec<(usize, &'static str)>,
}

impl Out {
    fn new(width: usize) -> Out {
        Out {
            text: String::new(),
            chars: 0,
            width,
            open: Vec::new(),
        }
    }

    fn push(&mut self, s: &str) -> Step {
        for c in s.chars() {
            self.char(c)?;
        }
        Ok(())
    }

    fn char(&mut self, c: char) -> Step {
        if self.chars == self.width {
            return Err(Stop::Full);
        }
        self.text.push(c);
        self.chars += 1;
        Ok(())
    }

    /// Write `opening`; a cut text after it ends with `closing`.
    fn open(&mut self, opening: &str, closing: &'static str) -> Step {
        self.push(opening)?;
        self.open.push((self.chars, closing));
        Ok(())
    }

    /// Close the innermost open container.
    fn close(&mut self) -> Step {
        let closing = self.open.last().map_or("", |(_, c)| *c);
        self.push(closing)?;
        self.open.pop();
        Ok(())
    }

    /// The first `n` characters of the text.
    fn head(&self, n: usize) -> &str {
        match self.text.char_indices().nth(n) {
            Some((at, _)) => &self.text[..at],
            None => &self.text,
        }
    }

    fn finish(self, ended: Step) -> String {
        match ended {
            Ok(()) => self.text,
            Err(Stop::Full | Stop::Cut) => self.cut(),
            Err(Stop::Damaged(what)) => {
                // The damage is the news: it keeps its place at the end, the text before it
                // gives way.
                let marker = format!("<damaged: {what}>");
                let room = self.width.saturating_sub(marker.chars().count());
                if room == 0 {
                    let mut t: String = marker.chars().take(self.width - 1).collect();
                    t.push(ELLIPSIS);
                    return t;
                }
                if self.chars <= room {
                    return self.text + &marker;
                }
                let mut t: String = self.head(room - 1).to_owned();
                t.push(ELLIPSIS);
                t + &marker
            }
        }
    }

    /// The text as long as it can stay with `…` and the closings of what is open before the
    /// cut (a container opened after it is cut away with its closing).
    fn cut(&self) -> String {
        let closings = |keep: usize| -> usize {
            self.open
                .iter()
                .filter(|(at, _)| *at <= keep)
                .map(|(_, c)| c.chars().count())
                .sum()
        };
        let mut keep = self.chars.min(self.width);
        while keep > 0 && keep + 1 + closings(keep) > self.width {
            keep -= 1;
        }
        let mut t = self.head(keep).to_owned();
        t.push(ELLIPSIS);
        for (at, closing) in self.open.iter().rev() {
            if *at <= keep {
                t.push_str(closing);
            }
        }
        t
    }
}
