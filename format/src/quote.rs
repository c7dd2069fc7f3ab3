//! A string quoted for an error message without `<str as Debug>` (issue 12: `{:?}` of a
//! string links core's `escape_debug` with its Unicode printable and grapheme-extend
//! tables into the browser's engine wasm).

use std::fmt;

/// `"text"` as `format!("{:?}", text)` writes it for every string of printable characters
/// (the text between double quotes, `"` and `\` escaped), with `\t`, `\r`, `\n`, `\0`
/// and the invisible characters a reader could not see in an error message escaped as
/// Debug does (`\u{1b}`): control characters (C0, DEL, C1), U+00A0 and U+00AD, and the
/// Unicode spaces, separators and format characters U+1680, U+2000–U+200F, U+2028–U+202F,
/// U+205F–U+206F, U+3000 and U+FEFF. Every character below U+0100 is quoted exactly as
/// Debug quotes it. Unlike Debug, other characters that Unicode does not call printable
/// (unassigned code points, combining marks after the quote, variation selectors) are
/// written as they are, not as `\u{…}` escapes: that needs core's Unicode tables.
#[derive(Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        let mut start = 0;
        for (i, c) in self.0.char_indices() {
            let escaped: Option<&str> = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\t' => Some("\\t"),
                '\r' => Some("\\r"),
                '\n' => Some("\\n"),
                '\0' => Some("\\0"),
                _ => None,
            };
            let control = escaped.is_none() && needs_escape(c);
            if escaped.is_none() && !control {
                continue;
            }
            f.write_str(&self.0[start..i])?;
            match escaped {
                Some(e) => f.write_str(e)?,
                None => {
                    // `\u{X…}`: lowercase hex without leading zeros, as Debug writes it.
                    let mut buf = *b"\\u{00000000}";
                    let v = c as u32;
                    let digits = (8 - v.leading_zeros() as usize / 4).max(1);
                    for k in 0..digits {
                        buf[3 + k] =
                            b"0123456789abcdef"[(v >> (4 * (digits - 1 - k)) & 15) as usize];
                    }
                    buf[3 + digits] = b'}';
                    f.write_str(std::str::from_utf8(&buf[..4 + digits]).unwrap_or("\\u{?}"))?;
                }
            }
            start = i + c.len_utf8();
        }
        f.write_str(&self.0[start..])?;
        f.write_str("\"")
    }
}

/// Bytes quoted for an error message (a magic number read from a file): as [`Quoted`] when
/// they are UTF-8, else between double quotes with printable ASCII as it is and every other
/// byte as `\xNN` (lowercase hex), as a Rust byte string shows it (without
/// `String::from_utf8_lossy`, whose UTF-8 chunking was 1.2 kB of the browser's wasm, and
/// without losing the bytes to U+FFFD).
#[derive(Clone, Copy)]
pub struct QuotedBytes<'a>(pub &'a [u8]);

impl fmt::Display for QuotedBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Ok(s) = std::str::from_utf8(self.0) {
            return Quoted(s).fmt(f);
        }
        f.write_str("\"")?;
        for &b in self.0 {
            if (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\' {
                f.write_str(std::str::from_utf8(&[b]).unwrap_or("?"))?;
            } else {
                let hex = b"0123456789abcdef";
                let esc = [b'\\', b'x', hex[(b >> 4) as usize], hex[(b & 15) as usize]];
                f.write_str(std::str::from_utf8(&esc).unwrap_or("?"))?;
            }
        }
        f.write_str("\"")
    }
}

/// True for the characters [`Quoted`] escapes as `\u{…}` (see its doc).
fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x1f'
            | '\x7f'..='\u{a0}'
            | '\u{ad}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200f}'
            | '\u{2028}'..='\u{202f}'
            | '\u{205f}'..='\u{206f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::{Quoted, QuotedBytes};

    #[test]
    fn bytes_quote_as_text_when_utf8_else_as_escapes() {
        assert_eq!(QuotedBytes(b"JKN1").to_string(), "\"JKN1\"");
        assert_eq!(QuotedBytes("é\n".as_bytes()).to_string(), "\"é\\n\"");
        assert_eq!(
            QuotedBytes(b"J\xff\"\\\x00").to_string(),
            "\"J\\xff\\x22\\x5c\\x00\""
        );
    }
    use proptest::prelude::*;

    #[test]
    fn every_ascii_and_control_character_is_quoted_as_debug_quotes_it() {
        for c in (0u32..0x100).filter_map(char::from_u32) {
            for s in [c.to_string(), format!("a{c}b"), format!("{c}{c}")] {
                assert_eq!(
                    Quoted(&s).to_string(),
                    format!("{s:?}"),
                    "U+{:04X}",
                    c as u32
                );
            }
        }
    }

    #[test]
    fn printable_text_of_any_script_is_quoted_as_debug_quotes_it() {
        for s in [
            "",
            "君子",
            "학이시습지",
            "Ophélia",
            "ΣΟΦΙΑ",
            "a\"b\\c",
            "\u{7f}x\u{9f}",
        ] {
            assert_eq!(Quoted(s).to_string(), format!("{s:?}"));
        }
    }

    #[test]
    fn invisible_spaces_and_format_characters_are_escaped_as_debug_escapes_them() {
        let invisible = [0x1680u32, 0x3000, 0xfeff]
            .into_iter()
            .chain(0x2000..=0x200f)
            .chain(0x2028..=0x202f)
            .chain(0x205f..=0x206f)
            .filter_map(char::from_u32);
        for c in invisible {
            let s = format!("x{c}y");
            assert_eq!(
                Quoted(&s).to_string(),
                format!("{s:?}"),
                "U+{:04X}",
                c as u32
            );
            assert!(
                Quoted(&s).to_string().contains("\\u{"),
                "U+{:04X}",
                c as u32
            );
        }
    }

    proptest! {
        #[test]
        fn random_printable_strings_are_quoted_as_debug_quotes_them(
            s in "[ -~\u{80}-\u{9f}\u{a0}-\u{ac}\u{ae}-\u{2ff}\u{1680}\u{2000}-\u{2071}\u{3000}-\u{3029}\u{feff}\u{4e00}-\u{9fff}\u{ac00}-\u{d7a3}\t\r\n\0]{0,40}"
        ) {
            prop_assert_eq!(Quoted(&s).to_string(), format!("{:?}", s));
        }
    }
}
