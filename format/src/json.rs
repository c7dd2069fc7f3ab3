//! A small JSON reader (RFC 8259, <https://www.rfc-editor.org/rfc/rfc8259>) for the bundle's
//! own JSON: the manifest / entry file (`manifest.json`, `jikji.json`) and the chunk records.
//! It replaces serde_json on the engine's reading path, so the browser's engine wasm carries
//! no serde_json (sizes: `docs/design/wasm-size.md`).
//!
//! [`parse`] reads a whole document into a tree of [`Json`] nodes, each with its byte offset
//! in the input; the typed readers ([`FromJson`], implemented next to each type) take fields
//! from it with serde's rules as the types' `#[derive(Deserialize)]` states them: unknown
//! keys ignored, a known key twice is an error, a missing key is an error unless the field
//! has a default (an `Option` field reads missing or `null` as `None`). Errors are
//! [`FormatError::DataCorruption`] naming the file, the byte offset and the field.
//!
//! Hostile input: the input must be UTF-8 (checked first), nesting is limited to
//! [`MAX_DEPTH`] (no stack overflow), and the tree is at most a few times the input's size
//! (every node consumes at least one input byte). No panics.
//!
//! Numbers are read exactly as serde_json 1.0 reads them without its `float_roundtrip`
//! feature (`serde_json::de::Deserializer::parse_integer` and what follows; the build's
//! configuration): an unsigned integer that fits a `u64` is a `u64`, a negative one that
//! fits an `i64` an `i64`, anything else (fraction, exponent, `-0`, too many digits) the
//! `f64` that serde_json computes (the significand's first 19–20 digits times or divided by
//! a power of ten from the same table), so a field reads the same value with either.

use std::collections::BTreeMap;

use crate::error::{FormatError, Result};

/// Deepest nesting of arrays and objects accepted: 127 levels, as serde_json (its recursion
/// limit of 128 counts the level that fails).
pub const MAX_DEPTH: usize = 127;

/// A JSON value with the byte offset of its first byte in the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Json {
    /// Byte offset of the value in the document.
    pub at: usize,
    /// The value.
    pub v: Value,
}

/// A JSON value; numbers as serde_json classifies them (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A non-negative integer that fits a `u64`.
    U64(u64),
    /// A negative integer that fits an `i64`.
    I64(i64),
    /// Any other number.
    F64(f64),
    /// A string, escapes decoded.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object's members in document order (duplicates kept; [`Obj`] refuses a known
    /// key given twice).
    Obj(Vec<(String, Json)>),
}

/// Parses the JSON document `bytes` (of the file named `file`, for errors): one value,
/// whitespace around it allowed, nothing else after it. Errors:
/// [`FormatError::DataCorruption`] with the byte offset of the fault.
pub fn parse(bytes: &[u8], file: &str) -> Result<Json> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(corrupt(file, e.valid_up_to(), "invalid JSON: not UTF-8"));
    }
    let mut p = Parser {
        b: bytes,
        i: 0,
        file,
    };
    let v = p.value(0)?;
    p.ws();
    if p.i < bytes.len() {
        return Err(p.err(p.i, "trailing characters after the JSON value"));
    }
    Ok(v)
}

fn corrupt(file: &str, at: usize, message: impl Into<String>) -> FormatError {
    FormatError::corrupt(file, at as u64, message)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    file: &'a str,
}

// serde_json's `overflow!`: would `a * 10 + b` exceed `c`?
fn overflows_u64(a: u64, b: u64) -> bool {
    a >= u64::MAX / 10 && (a > u64::MAX / 10 || b > u64::MAX % 10)
}

impl Parser<'_> {
    fn err(&self, at: usize, what: &str) -> FormatError {
        corrupt(self.file, at, format!("invalid JSON: {what}"))
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.err(self.i, "expected a value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json> {
        self.ws();
        let at = self.i;
        let v = match self.peek() {
            None => return Err(self.err(at, "unexpected end of input, expected a value")),
            Some(b'n') => {
                self.literal(b"null")?;
                Value::Null
            }
            Some(b't') => {
                self.literal(b"true")?;
                Value::Bool(true)
            }
            Some(b'f') => {
                self.literal(b"false")?;
                Value::Bool(false)
            }
            Some(b'"') => Value::Str(self.string()?),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(open @ (b'[' | b'{')) => {
                if depth >= MAX_DEPTH {
                    return Err(self.err(at, &format!("nested deeper than {MAX_DEPTH} levels")));
                }
                self.i += 1;
                let close = if open == b'[' { b']' } else { b'}' };
                let mut items = Vec::new();
                let mut members = Vec::new();
                self.ws();
                if self.peek() == Some(close) {
                    self.i += 1;
                } else {
                    loop {
                        if open == b'[' {
                            items.push(self.value(depth + 1)?);
                        } else {
                            self.ws();
                            if self.peek() != Some(b'"') {
                                return Err(self.err(self.i, "expected a key (a string)"));
                            }
                            let key = self.string()?;
                            self.ws();
                            if self.peek() != Some(b':') {
                                return Err(self.err(self.i, "expected `:` after a key"));
                            }
                            self.i += 1;
                            members.push((key, self.value(depth + 1)?));
                        }
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(c) if c == close => {
                                self.i += 1;
                                break;
                            }
                            _ => {
                                let want = if open == b'[' {
                                    "`,` or `]`"
                                } else {
                                    "`,` or `}`"
                                };
                                return Err(self.err(self.i, &format!("expected {want}")));
                            }
                        }
                    }
                }
                if open == b'[' {
                    Value::Arr(items)
                } else {
                    Value::Obj(members)
                }
            }
            Some(_) => return Err(self.err(at, "expected a value")),
        };
        Ok(Json { at, v })
    }

    /// A string at `self.i` (its opening quote); the input is valid UTF-8, and runs are cut
    /// only at ASCII bytes, so every run is valid UTF-8 too.
    fn string(&mut self) -> Result<String> {
        let open = self.i;
        self.i += 1;
        let mut out = String::new();
        let mut run = self.i;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err(open, "unterminated string"));
            };
            match c {
                b'"' | b'\\' => {
                    out.push_str(std::str::from_utf8(&self.b[run..self.i]).unwrap_or_default());
                    self.i += 1;
                    if c == b'"' {
                        return Ok(out);
                    }
                    let esc = self.i - 1;
                    let Some(e) = self.peek() else {
                        return Err(self.err(open, "unterminated string"));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4(esc)?;
                            let c = match hi {
                                0xD800..=0xDBFF => {
                                    if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                                        return Err(
                                            self.err(esc, "lone leading surrogate in a \\u escape")
                                        );
                                    }
                                    self.i += 2;
                                    let lo = self.hex4(esc)?;
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return Err(
                                            self.err(esc, "lone leading surrogate in a \\u escape")
                                        );
                                    }
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                }
                                0xDC00..=0xDFFF => {
                                    return Err(
                                        self.err(esc, "lone trailing surrogate in a \\u escape")
                                    )
                                }
                                c => c,
                            };
                            match char::from_u32(c) {
                                Some(c) => out.push(c),
                                None => return Err(self.err(esc, "invalid \\u escape")),
                            }
                        }
                        _ => return Err(self.err(esc, "invalid escape")),
                    }
                    run = self.i;
                }
                0..=0x1F => return Err(self.err(self.i, "control character in a string")),
                _ => self.i += 1,
            }
        }
    }

    fn hex4(&mut self, esc: usize) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err(esc, "invalid \\u escape (4 hex digits expected)")),
            };
            self.i += 1;
            v = v * 16 + d as u32;
        }
        Ok(v)
    }

    fn digit(&self) -> Option<u64> {
        match self.peek() {
            Some(c @ b'0'..=b'9') => Some((c - b'0') as u64),
            _ => None,
        }
    }

    /// serde_json's `parse_integer` and `parse_number` (see the module doc).
    fn number(&mut self) -> Result<Value> {
        let at = self.i;
        let positive = self.peek() != Some(b'-');
        if !positive {
            self.i += 1;
        }
        let mut sig = match self.digit() {
            Some(0) => {
                self.i += 1;
                if self.digit().is_some() {
                    return Err(self.err(self.i, "invalid number (leading zero)"));
                }
                0
            }
            Some(d) => {
                self.i += 1;
                d
            }
            None => return Err(self.err(self.i, "invalid number")),
        };
        let mut exponent = 0i32;
        let mut long = false;
        while let Some(d) = self.digit() {
            self.i += 1;
            if long || overflows_u64(sig, d) {
                // parse_long_integer: later digits only scale.
                long = true;
                exponent = exponent.saturating_add(1);
            } else {
                sig = sig * 10 + d;
            }
        }
        match self.peek() {
            Some(b'.') => return self.decimal(at, positive, sig, exponent).map(Value::F64),
            Some(b'e' | b'E') => return self.exponent(positive, sig, exponent).map(Value::F64),
            _ => {}
        }
        if long {
            return self
                .f64_from_parts(at, positive, sig, exponent)
                .map(Value::F64);
        }
        Ok(if positive {
            Value::U64(sig)
        } else {
            let neg = (sig as i64).wrapping_neg();
            if neg >= 0 {
                Value::F64(-(sig as f64))
            } else {
                Value::I64(neg)
            }
        })
    }

    /// serde_json's `parse_decimal` (and `parse_decimal_overflow`), at the `.`.
    fn decimal(&mut self, at: usize, positive: bool, mut sig: u64, before: i32) -> Result<f64> {
        self.i += 1;
        let mut after = 0i32;
        let mut digits = false;
        let mut overflowed = false;
        while let Some(d) = self.digit() {
            self.i += 1;
            digits = true;
            if overflowed || overflows_u64(sig, d) {
                overflowed = true; // further digits are ignored
            } else {
                sig = sig * 10 + d;
                after -= 1;
            }
        }
        if !digits {
            return Err(self.err(self.i, "invalid number (no digit after `.`)"));
        }
        let exponent = before + after;
        match self.peek() {
            Some(b'e' | b'E') => self.exponent(positive, sig, exponent),
            _ => self.f64_from_parts(at, positive, sig, exponent),
        }
    }

    /// serde_json's `parse_exponent` (and `parse_exponent_overflow`), at the `e`.
    fn exponent(&mut self, positive: bool, sig: u64, start: i32) -> Result<f64> {
        let at = self.i;
        self.i += 1;
        let positive_exp = match self.peek() {
            Some(b'+') => {
                self.i += 1;
                true
            }
            Some(b'-') => {
                self.i += 1;
                false
            }
            _ => true,
        };
        let Some(first) = self.digit() else {
            return Err(self.err(self.i, "invalid number (no digit in the exponent)"));
        };
        self.i += 1;
        let mut exp = first as i32;
        let mut overflowed = false;
        while let Some(d) = self.digit() {
            self.i += 1;
            let d = d as i32;
            if overflowed || (exp >= i32::MAX / 10 && (exp > i32::MAX / 10 || d > i32::MAX % 10)) {
                overflowed = true;
            } else {
                exp = exp * 10 + d;
            }
        }
        if overflowed {
            if sig != 0 && positive_exp {
                return Err(self.err(at, "number out of range"));
            }
            return Ok(if positive { 0.0 } else { -0.0 });
        }
        let e = if positive_exp {
            start.saturating_add(exp)
        } else {
            start.saturating_sub(exp)
        };
        self.f64_from_parts(at, positive, sig, e)
    }

    /// serde_json's `f64_from_parts` without `float_roundtrip`.
    fn f64_from_parts(
        &self,
        at: usize,
        positive: bool,
        sig: u64,
        mut exponent: i32,
    ) -> Result<f64> {
        let mut f = sig as f64;
        loop {
            match POW10.get(exponent.unsigned_abs() as usize) {
                Some(&pow) => {
                    if exponent >= 0 {
                        f *= pow;
                        if f.is_infinite() {
                            return Err(self.err(at, "number out of range"));
                        }
                    } else {
                        f /= pow;
                    }
                    break;
                }
                None => {
                    if f == 0.0 {
                        break;
                    }
                    if exponent >= 0 {
                        return Err(self.err(at, "number out of range"));
                    }
                    f /= 1e308;
                    exponent += 308;
                }
            }
        }
        Ok(if positive { f } else { -f })
    }
}

/// 10⁰ … 10³⁰⁸ as f64 literals (serde_json's `POW10`).
#[rustfmt::skip]
static POW10: [f64; 309] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23,
    1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35,
    1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47,
    1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59,
    1e60, 1e61, 1e62, 1e63, 1e64, 1e65, 1e66, 1e67, 1e68, 1e69, 1e70, 1e71,
    1e72, 1e73, 1e74, 1e75, 1e76, 1e77, 1e78, 1e79, 1e80, 1e81, 1e82, 1e83,
    1e84, 1e85, 1e86, 1e87, 1e88, 1e89, 1e90, 1e91, 1e92, 1e93, 1e94, 1e95,
    1e96, 1e97, 1e98, 1e99, 1e100, 1e101, 1e102, 1e103, 1e104, 1e105, 1e106, 1e107,
    1e108, 1e109, 1e110, 1e111, 1e112, 1e113, 1e114, 1e115, 1e116, 1e117, 1e118, 1e119,
    1e120, 1e121, 1e122, 1e123, 1e124, 1e125, 1e126, 1e127, 1e128, 1e129, 1e130, 1e131,
    1e132, 1e133, 1e134, 1e135, 1e136, 1e137, 1e138, 1e139, 1e140, 1e141, 1e142, 1e143,
    1e144, 1e145, 1e146, 1e147, 1e148, 1e149, 1e150, 1e151, 1e152, 1e153, 1e154, 1e155,
    1e156, 1e157, 1e158, 1e159, 1e160, 1e161, 1e162, 1e163, 1e164, 1e165, 1e166, 1e167,
    1e168, 1e169, 1e170, 1e171, 1e172, 1e173, 1e174, 1e175, 1e176, 1e177, 1e178, 1e179,
    1e180, 1e181, 1e182, 1e183, 1e184, 1e185, 1e186, 1e187, 1e188, 1e189, 1e190, 1e191,
    1e192, 1e193, 1e194, 1e195, 1e196, 1e197, 1e198, 1e199, 1e200, 1e201, 1e202, 1e203,
    1e204, 1e205, 1e206, 1e207, 1e208, 1e209, 1e210, 1e211, 1e212, 1e213, 1e214, 1e215,
    1e216, 1e217, 1e218, 1e219, 1e220, 1e221, 1e222, 1e223, 1e224, 1e225, 1e226, 1e227,
    1e228, 1e229, 1e230, 1e231, 1e232, 1e233, 1e234, 1e235, 1e236, 1e237, 1e238, 1e239,
    1e240, 1e241, 1e242, 1e243, 1e244, 1e245, 1e246, 1e247, 1e248, 1e249, 1e250, 1e251,
    1e252, 1e253, 1e254, 1e255, 1e256, 1e257, 1e258, 1e259, 1e260, 1e261, 1e262, 1e263,
    1e264, 1e265, 1e266, 1e267, 1e268, 1e269, 1e270, 1e271, 1e272, 1e273, 1e274, 1e275,
    1e276, 1e277, 1e278, 1e279, 1e280, 1e281, 1e282, 1e283, 1e284, 1e285, 1e286, 1e287,
    1e288, 1e289, 1e290, 1e291, 1e292, 1e293, 1e294, 1e295, 1e296, 1e297, 1e298, 1e299,
    1e300, 1e301, 1e302, 1e303, 1e304, 1e305, 1e306, 1e307, 1e308,
];

/// A type read from a JSON value with serde's rules for it (see the module doc).
pub trait FromJson: Sized {
    /// What the value must be, for errors ("an unsigned integer", "an object", …).
    const WHAT: &'static str;
    /// Reads `j` of the file `file`. Errors: DataCorruption at `j.at`.
    fn from_json(j: &Json, file: &str) -> Result<Self>;
    /// Whether a missing field of this type reads as its empty value (`Option`: `None`).
    const OPTIONAL: bool = false;
    /// How a [`Fields`] entry of this type reads it: `from_json`, written over the field; a
    /// [`Record`] (`record_json!`) fills the field in place instead.
    const READ: ReadFn = read_at::<Self>;
    /// The same for a field of type `Option<Self>`.
    const READ_OPTION: ReadFn = read_at::<Option<Self>>;
    /// The value of a missing field, if the type has one (`Option`: `None`).
    fn missing() -> Option<Self> {
        None
    }
}

impl Json {
    /// A type error: the value is not `what`.
    pub fn expected(&self, file: &str, what: &str) -> FormatError {
        let found = match &self.v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::U64(_) | Value::I64(_) | Value::F64(_) => "a number",
            Value::Str(_) => "a string",
            Value::Arr(_) => "an array",
            Value::Obj(_) => "an object",
        };
        corrupt(file, self.at, format!("expected {what}, found {found}"))
    }

    /// This value as an object. Errors: not an object.
    pub fn obj<'a>(&'a self, file: &'a str) -> Result<Obj<'a>> {
        match &self.v {
            Value::Obj(members) => Ok(Obj {
                file,
                at: self.at,
                members,
            }),
            _ => Err(self.expected(file, "an object")),
        }
    }
}

/// An object's members, read field by field.
pub struct Obj<'a> {
    file: &'a str,
    at: usize,
    members: &'a [(String, Json)],
}

impl<'a> Obj<'a> {
    /// The value of `key`, if present. Errors: the key given twice.
    ///
    /// Not inlined, nor are the errors of [`Obj::req`] / [`Obj::or`]: those are generic
    /// (one copy per field type, 26 in the browser's engine), so what they share stays out
    /// of each copy (sixth round of `docs/design/wasm-size.md`).
    #[inline(never)]
    pub fn get(&self, key: &str) -> Result<Option<&'a Json>> {
        let mut found = self.members.iter().filter(|(k, _)| k == key);
        let first = found.next().map(|(_, v)| v);
        if let Some((_, dup)) = found.next() {
            return Err(corrupt(
                self.file,
                dup.at,
                format!("duplicate field `{key}`"),
            ));
        }
        Ok(first)
    }

    /// Field `key` of a type without a default. Errors: missing (unless `T` is an
    /// `Option`), of the wrong type, given twice.
    pub fn req<T: FromJson>(&self, key: &str) -> Result<T> {
        match self.get(key)? {
            Some(v) => T::from_json(v, self.file).map_err(|e| in_field(e, key)),
            None => T::missing().ok_or_else(|| self.missing_field(key)),
        }
    }

    /// Reads the fields of `fields` into `out`, in the table's order: for each the value
    /// of its key, or, when the key is absent, an error for [`Missing::Error`] unless the
    /// field is an `Option` (left as it is: `None` in a default value), nothing for
    /// [`Missing::Keep`] (the field keeps the default `out` had: serde's
    /// `#[serde(default)]`). The same rules and errors as [`Obj::req`] / [`Obj::or`] field
    /// by field (the first error in table order), but one loop for every field of every
    /// type: a type's reader is a static table (data) rather than a call and an error path
    /// per field (issue 12; ninth round of `docs/design/wasm-size.md`).
    pub fn fill<S>(&self, fields: &Fields<S>, out: &mut S) -> Result<()> {
        self.fill_raw(fields.list, (out as *mut S).cast())
    }

    fn fill_raw(&self, fields: &[Field], out: *mut u8) -> Result<()> {
        for f in fields {
            match self.get(f.key)? {
                // SAFETY: `fields` is the table of `out`'s type (`Fields<S>` ties them), so
                // `f.offset` is the offset of a field of the type `f.read` writes.
                Some(v) => unsafe { (f.read)(out.add(f.offset), v, self.file) }
                    .map_err(|e| in_field(e, f.key))?,
                None if matches!(f.missing, Missing::Error) && !f.optional => {
                    return Err(self.missing_field(f.key))
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The error for a required field `key` that is missing.
    #[cold]
    #[inline(never)]
    fn missing_field(&self, key: &str) -> FormatError {
        corrupt(self.file, self.at, format!("missing field `{key}`"))
    }

    /// Field `key` with a default (`#[serde(default)]`): `default()` when missing. A
    /// present value (`null` included, unless `T` is an `Option`) must be a `T`.
    pub fn or<T: FromJson>(&self, key: &str, default: impl FnOnce() -> T) -> Result<T> {
        match self.get(key)? {
            Some(v) => T::from_json(v, self.file).map_err(|e| in_field(e, key)),
            None => Ok(default()),
        }
    }
}

/// What [`Obj::read`] does when a field is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// An error (`missing field`), unless the field is an `Option` (then `None`).
    Error,
    /// Nothing: the field keeps the value it had (its default).
    Keep,
}

/// The reader of a [`Fields`] entry: reads `j` (of the file named by the `&str`) into the
/// initialised value of the entry's type at the pointer.
pub type ReadFn = unsafe fn(*mut u8, &Json, &str) -> Result<()>;

/// One field of a [`Fields`] table.
pub struct Field {
    key: &'static str,
    missing: Missing,
    optional: bool,
    offset: usize,
    read: ReadFn,
}

/// The JSON fields of the type `S`, for [`Obj::fill`]: made by the `json_fields!` macro of
/// this crate, which takes each field's offset and type from the field itself.
pub struct Fields<S> {
    list: &'static [Field],
    _s: std::marker::PhantomData<fn(&mut S)>,
}

impl<S> Fields<S> {
    /// The table `list` of `S`.
    ///
    /// # Safety
    /// Every entry of `list` must come from [`field`] for `S` (the offset of a field of `S`
    /// whose type is that entry's `F`).
    #[doc(hidden)]
    pub const unsafe fn new(list: &'static [Field]) -> Self {
        Fields {
            list,
            _s: std::marker::PhantomData,
        }
    }
}

/// Writes `F::from_json(j)` over the `F` at `p`.
///
/// # Safety
/// `p` must point to an initialised, writable `F`.
unsafe fn read_at<F: FromJson>(p: *mut u8, j: &Json, file: &str) -> Result<()> {
    *p.cast::<F>() = F::from_json(j, file)?;
    Ok(())
}

/// A [`Fields`] entry: key `key` read into the field of type `F` at byte `offset` of `S`
/// (`_field` names that field, so that `F` is its type).
///
/// # Safety
/// `offset` must be the offset in `S` of the field `_field` returns.
#[doc(hidden)]
pub const unsafe fn field<S, F: FromJson>(
    key: &'static str,
    missing: Missing,
    offset: usize,
    _field: fn(&mut S) -> &mut F,
) -> Field {
    Field {
        key,
        missing,
        optional: F::OPTIONAL,
        offset,
        read: F::READ,
    }
}

/// A JSON object read field by field through its [`Fields`] table: the structs of the
/// entry and of the chunk records. `record_json!(Type)` then implements [`FromJson`] for it
/// so that a field of that type (or of `Option` of it) is filled in place through the same
/// table: one reader per type rather than one per type and per `Option` of it, each moving
/// the whole value (issue 12; ninth round of `docs/design/wasm-size.md`).
pub trait Record: Sized {
    /// The fields, in the order they are read (the first error in this order is reported).
    const FIELDS: Fields<Self>;
    /// The value before reading: every field with a default ([`Missing::Keep`]) holds it.
    fn init() -> Self;
}

/// Reads the record `j` into `S::init()`.
pub fn record_from_json<S: Record>(j: &Json, file: &str) -> Result<S> {
    let o = j.obj(file)?;
    let mut r = S::init();
    o.fill(&S::FIELDS, &mut r)?;
    Ok(r)
}

/// [`FromJson::READ`] of a [`Record`]: resets the `S` at `p` to `S::init()` and fills it.
///
/// # Safety
/// `p` must point to an initialised, writable `S`.
#[doc(hidden)]
pub unsafe fn record_at<S: Record>(p: *mut u8, j: &Json, file: &str) -> Result<()> {
    let o = j.obj(file)?;
    let r = &mut *p.cast::<S>();
    *r = S::init();
    o.fill(&S::FIELDS, r)
}

/// [`FromJson::READ_OPTION`] of a [`Record`]: `null` is `None`, anything else must be the
/// record's object (the errors of `Option<S>::from_json`).
///
/// # Safety
/// `p` must point to an initialised, writable `Option<S>`.
#[doc(hidden)]
pub unsafe fn record_option_at<S: Record>(p: *mut u8, j: &Json, file: &str) -> Result<()> {
    let slot = &mut *p.cast::<Option<S>>();
    if let Value::Null = j.v {
        *slot = None;
        return Ok(());
    }
    let o = j.obj(file)?;
    o.fill(&S::FIELDS, slot.insert(S::init()))
}

/// `impl FromJson` for a [`Record`] type: an object read through its table, filled in place
/// when it is a field.
macro_rules! record_json {
    ($s:ty) => {
        impl $crate::json::FromJson for $s {
            const WHAT: &'static str = "an object";
            fn from_json(j: &$crate::json::Json, f: &str) -> $crate::Result<Self> {
                $crate::json::record_from_json(j, f)
            }
            const READ: $crate::json::ReadFn = $crate::json::record_at::<$s>;
            const READ_OPTION: $crate::json::ReadFn = $crate::json::record_option_at::<$s>;
        }
    };
}
pub(crate) use record_json;

/// The [`Fields`] table of a struct: `json_fields!(Type { "key" Error field, "key2" Keep
/// field2, … })`, `Error` / `Keep` being the [`Missing`] rule of that field.
macro_rules! json_fields {
    ($s:ty { $($key:literal $missing:ident $field:ident),* $(,)? }) => {
        // SAFETY: each offset is `offset_of!` of the very field the closure returns.
        unsafe {
            $crate::json::Fields::<$s>::new(&[$(
                $crate::json::field::<$s, _>(
                    $key,
                    $crate::json::Missing::$missing,
                    ::core::mem::offset_of!($s, $field),
                    |s: &mut $s| &mut s.$field,
                )
            ),*])
        }
    };
}
pub(crate) use json_fields;

/// `e` with the field's name added to its message.
#[cold]
#[inline(never)]
fn in_field(e: FormatError, key: &str) -> FormatError {
    match e {
        FormatError::DataCorruption {
            file,
            offset,
            message,
        } if !message.starts_with("field `") => FormatError::DataCorruption {
            file,
            offset,
            message: format!("field `{key}`: {message}"),
        },
        FormatError::DataCorruption {
            file,
            offset,
            message,
        } => FormatError::DataCorruption {
            file,
            offset,
            message: format!("field `{key}`.{}", &message[6..]),
        },
        e => e,
    }
}

impl FromJson for u64 {
    const WHAT: &'static str = "an unsigned integer";
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match j.v {
            Value::U64(n) => Ok(n),
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

macro_rules! narrow_uint {
    ($($t:ty),*) => {$(
        impl FromJson for $t {
            const WHAT: &'static str = concat!("an unsigned integer (", stringify!($t), ")");
            fn from_json(j: &Json, file: &str) -> Result<Self> {
                let n = u64::from_json(j, file).map_err(|_| j.expected(file, Self::WHAT))?;
                <$t>::try_from(n).map_err(|_| {
                    corrupt(file, j.at, format!("{n} is out of range for {}", stringify!($t)))
                })
            }
        }
    )*};
}
narrow_uint!(u32, usize);

impl FromJson for f32 {
    const WHAT: &'static str = "a number";
    /// serde's `f32` from serde_json's number: `as f32` from the u64, i64 or f64.
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match j.v {
            Value::U64(n) => Ok(n as f32),
            Value::I64(n) => Ok(n as f32),
            Value::F64(f) => Ok(f as f32),
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

impl FromJson for bool {
    const WHAT: &'static str = "a boolean";
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match j.v {
            Value::Bool(b) => Ok(b),
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

impl FromJson for String {
    const WHAT: &'static str = "a string";
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match &j.v {
            Value::Str(s) => Ok(s.clone()),
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

impl<T: FromJson> FromJson for Option<T> {
    const WHAT: &'static str = T::WHAT;
    const OPTIONAL: bool = true;
    const READ: ReadFn = T::READ_OPTION;
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match j.v {
            Value::Null => Ok(None),
            _ => T::from_json(j, file).map(Some),
        }
    }
    fn missing() -> Option<Self> {
        Some(None)
    }
}

impl<T: FromJson> FromJson for Vec<T> {
    const WHAT: &'static str = "an array";
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match &j.v {
            // A loop rather than `collect` into a `Result` (its `GenericShunt` adapters were
            // ~0.8 kB of wasm per element type).
            Value::Arr(items) => {
                let mut out = Vec::with_capacity(items.len());
                for v in items {
                    out.push(T::from_json(v, file)?);
                }
                Ok(out)
            }
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

impl<T: FromJson> FromJson for BTreeMap<String, T> {
    const WHAT: &'static str = "an object";
    /// serde's map: a later duplicate key replaces the earlier value. (Inserted one by one:
    /// `collect` into a `BTreeMap` sorts with core's stable sort, several kB of wasm per
    /// value type.)
    fn from_json(j: &Json, file: &str) -> Result<Self> {
        match &j.v {
            Value::Obj(members) => {
                let mut map = BTreeMap::new();
                for (k, v) in members {
                    map.insert(k.clone(), T::from_json(v, file)?);
                }
                Ok(map)
            }
            _ => Err(j.expected(file, Self::WHAT)),
        }
    }
}

/// Reads a whole document as a `T` (see [`parse`] and [`FromJson`]).
pub fn from_slice<T: FromJson>(bytes: &[u8], file: &str) -> Result<T> {
    T::from_json(&parse(bytes, file)?, file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;
    use crate::ChunkRecord;
    use proptest::prelude::*;

    /// serde_json's reading of `text` in our terms (numbers as serde_json classifies them).
    fn theirs(text: &str) -> Option<Value> {
        fn conv(v: &serde_json::Value) -> Value {
            match v {
                serde_json::Value::Null => Value::Null,
                serde_json::Value::Bool(b) => Value::Bool(*b),
                serde_json::Value::Number(n) => {
                    if let Some(u) = n.as_u64() {
                        Value::U64(u)
                    } else if let Some(i) = n.as_i64() {
                        Value::I64(i)
                    } else {
                        Value::F64(n.as_f64().unwrap())
                    }
                }
                serde_json::Value::String(s) => Value::Str(s.clone()),
                serde_json::Value::Array(a) => {
                    Value::Arr(a.iter().map(|v| Json { at: 0, v: conv(v) }).collect())
                }
                serde_json::Value::Object(o) => Value::Obj(
                    o.iter()
                        .map(|(k, v)| (k.clone(), Json { at: 0, v: conv(v) }))
                        .collect(),
                ),
            }
        }
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .map(|v| conv(&v))
    }

    /// Ours with offsets zeroed and objects' keys sorted (serde_json's `Value` sorts them;
    /// the generated documents have no duplicate keys), f64 compared by bits.
    fn ours(text: &str) -> Option<Value> {
        fn norm(j: Json) -> Value {
            match j.v {
                Value::Arr(a) => {
                    Value::Arr(a.into_iter().map(|v| Json { at: 0, v: norm(v) }).collect())
                }
                Value::Obj(o) => {
                    let mut o: Vec<_> = o
                        .into_iter()
                        .map(|(k, v)| (k, Json { at: 0, v: norm(v) }))
                        .collect();
                    o.sort_by(|a, b| a.0.cmp(&b.0));
                    Value::Obj(o)
                }
                v => v,
            }
        }
        parse(text.as_bytes(), "t.json").ok().map(norm)
    }

    fn same(a: &Option<Value>, b: &Option<Value>) -> bool {
        fn eq(a: &Value, b: &Value) -> bool {
            match (a, b) {
                (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
                (Value::Arr(x), Value::Arr(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| eq(&p.v, &q.v))
                }
                (Value::Obj(x), Value::Obj(y)) => {
                    x.len() == y.len()
                        && x.iter()
                            .zip(y)
                            .all(|(p, q)| p.0 == q.0 && eq(&p.1.v, &q.1.v))
                }
                _ => a == b,
            }
        }
        match (a, b) {
            (Some(a), Some(b)) => eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    fn number_text() -> impl Strategy<Value = String> {
        (
            prop::bool::ANY,
            prop_oneof![Just("0".to_string()), "[1-9][0-9]{0,24}"],
            prop::option::of("[0-9]{0,24}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{0,4}")),
        )
            .prop_map(|(neg, int, frac, exp)| {
                let mut s = String::new();
                if neg {
                    s.push('-');
                }
                s.push_str(&int);
                if let Some(f) = frac {
                    s.push('.');
                    s.push_str(&f);
                }
                if let Some((e, sign, d)) = exp {
                    s.push_str(&e);
                    s.push_str(&sign);
                    s.push_str(&d);
                }
                s
            })
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            any::<f32>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::String),
            "[\\x00-\\x7f\u{80}-\u{7ff}\u{10000}-\u{10ffff}]{0,8}"
                .prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn numbers_read_as_serde_json_reads_them(text in number_text()) {
            let (a, b) = (ours(&text), theirs(&text));
            prop_assert!(same(&a, &b), "{text}: ours {a:?}, serde_json {b:?}");
        }

        #[test]
        fn documents_read_as_serde_json_reads_them(v in value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            let (a, b) = (ours(&text), theirs(&text));
            prop_assert!(b.is_some());
            prop_assert!(same(&a, &b), "{text}: ours {a:?}, serde_json {b:?}");
        }

        #[test]
        fn damaged_documents_are_refused_or_read_as_serde_json_reads_them(
            v in value(),
            cuts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = serde_json::to_vec(&v).unwrap();
            for (at, byte) in cuts {
                let i = at.index(bytes.len() + 1);
                match byte % 3 {
                    0 => bytes.truncate(i),
                    1 if i < bytes.len() => bytes[i] = byte,
                    _ => bytes.insert(i.min(bytes.len()), byte),
                }
            }
            let ok_ours = parse(&bytes, "t.json");
            let text = std::str::from_utf8(&bytes);
            match text {
                Ok(text) => {
                    let (a, b) = (ours(text), theirs(text));
                    prop_assert_eq!(a.is_some(), b.is_some(), "{}", text);
                }
                Err(_) => prop_assert!(ok_ours.is_err()),
            }
        }

        #[test]
        fn chunk_records_read_back(
            text in ".{0,40}",
            heading in prop::collection::vec(".{0,8}", 0..3),
            tier in prop::option::of(any::<u32>()),
            start in any::<u32>(),
            title in prop::option::of(".{0,8}"),
            archived in any::<bool>(),
            parent_doc in prop::option::of(any::<u32>()),
        ) {
            let r = ChunkRecord {
                id: "0123456789abcdef".into(),
                source: "a/b.md".into(),
                source_url: title.clone(),
                tier,
                heading_path: heading,
                lang: "en".into(),
                section: 3,
                start: start as usize,
                end: start as usize + 1,
                text,
                title,
                archived,
                parent_doc,
                ..ChunkRecord::default()
            };
            let bytes = serde_json::to_vec(&r).unwrap();
            prop_assert_eq!(from_slice::<ChunkRecord>(&bytes, "c").unwrap(), r);
        }
    }

    #[test]
    fn the_fixture_entries_read_as_serde_json_reads_them() {
        for dir in ["bundle", "bundle-bm25"] {
            let path = format!(
                "{}/tests/compat/v2/{dir}/jikji.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let bytes = std::fs::read(&path).unwrap();
            let theirs: Manifest = serde_json::from_slice(&bytes).unwrap();
            let ours: Manifest = from_slice(&bytes, "jikji.json").unwrap();
            assert_eq!(ours, theirs, "{path}");
            assert!(ours.pages.is_some() && ours.calibration.is_some(), "{path}");
        }
        let path = format!(
            "{}/tests/compat/v1/bundle/manifest.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        let theirs: Manifest = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            from_slice::<Manifest>(&bytes, "manifest.json").unwrap(),
            theirs
        );
    }

    #[test]
    fn manifest_defaults_follow_the_serde_attributes() {
        let entry = std::fs::read(format!(
            "{}/tests/compat/v2/bundle-bm25/jikji.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&entry).unwrap();
        let o = v.as_object_mut().unwrap();
        for k in [
            "analyzer",
            "calibration",
            "chunking",
            "hanja",
            "allow_ai_draft",
            "sources",
        ] {
            o.remove(k);
        }
        o["pages"].as_object_mut().unwrap().remove("hanja_keys");
        let bytes = serde_json::to_vec(&v).unwrap();
        let theirs: Manifest = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            from_slice::<Manifest>(&bytes, "jikji.json").unwrap(),
            theirs
        );
        assert!(theirs.hanja && theirs.analyzer == crate::analyzer::AnalyzerOptions::default());
        // An `analyzer` object without `korean_particle_bigrams` reads it as true.
        let mut v: serde_json::Value = serde_json::from_slice(&entry).unwrap();
        v["analyzer"] = serde_json::json!({"stem": false});
        let bytes = serde_json::to_vec(&v).unwrap();
        let theirs: Manifest = serde_json::from_slice(&bytes).unwrap();
        let ours: Manifest = from_slice(&bytes, "jikji.json").unwrap();
        assert_eq!(ours, theirs);
        assert!(ours.analyzer.korean_particle_bigrams && !ours.analyzer.stem);
    }

    #[test]
    fn errors_name_the_file_the_offset_and_the_field() {
        let e = from_slice::<ChunkRecord>(br#"{"id": 5}"#, "p/c-x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("p/c-x") && e.contains("byte 7") && e.contains("`id`"),
            "{e}"
        );
        let e = from_slice::<ChunkRecord>(br#"{"id": "a", "id": "b"}"#, "c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate field `id`"), "{e}");
        let e = from_slice::<ChunkRecord>(br#"{"id": "a"}"#, "c")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing field `source`") && e.contains("byte 0"),
            "{e}"
        );
        let e = parse(b"[1, 2,]", "c").unwrap_err().to_string();
        assert!(e.contains("byte 6"), "{e}");
        let e = parse(b"{\"a\": \"\xff\"}", "c").unwrap_err().to_string();
        assert!(e.contains("byte 7") && e.contains("UTF-8"), "{e}");
        let e = from_slice::<u32>(b"4294967296", "c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let deep = "[".repeat(100_000);
        let e = parse(deep.as_bytes(), "c").unwrap_err().to_string();
        assert!(e.contains("nested deeper than 127"), "{e}");
        for (n, ok) in [(127, true), (128, false)] {
            let doc = format!("{}{}", "[".repeat(n), "]".repeat(n));
            assert_eq!(parse(doc.as_bytes(), "c").is_ok(), ok, "{n} levels");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&doc).is_ok(),
                ok,
                "{n} levels, serde_json"
            );
        }
    }
}
