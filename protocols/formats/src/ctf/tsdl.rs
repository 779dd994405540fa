//! TSDL, the metadata language of CTF 1.8: the packetized form unwrapped, the text tokenized and parsed
//! into the trace's types (integers of any size, alignment and byte order, floats, strings, enums,
//! structs, variants, arrays and sequences), its clocks, streams and event classes. Errors name the
//! metadata's line and column.

use std::collections::HashMap;
use std::rc::Rc;

use crate::ParseError;

/// Magic of a metadata packet.
pub const METADATA_MAGIC: u32 = 0x75D1_1D57;

/// A byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// The trace's (`native`, or not given).
    Native,
    /// Little-endian.
    Little,
    /// Big-endian (`be`, `network`).
    Big,
}

/// An integer type.
#[derive(Debug, Clone, PartialEq)]
pub struct IntType {
    /// Size in bits.
    pub size: u32,
    /// Alignment in bits.
    pub align: u32,
    /// Whether signed.
    pub signed: bool,
    /// Byte order.
    pub order: ByteOrder,
    /// Display base (10, 16, 8, 2).
    pub base: u8,
    /// Whether it holds text (`encoding = UTF8/ASCII`).
    pub text: bool,
    /// The clock whose value it holds (`map = clock.NAME.value`).
    pub clock: Option<String>,
}

/// An enumeration: its container integer and its labels with their value ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumType {
    /// The container.
    pub int: IntType,
    /// Label and inclusive range.
    pub labels: Vec<(Rc<str>, i128, i128)>,
}

/// A struct or a variant's options.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    /// Name and type, in order.
    pub fields: Vec<(Rc<str>, Type)>,
    /// Alignment in bits (declared with `align(N)`, or that of the fields).
    pub align: u32,
}

/// A path to a field decoded earlier (a sequence's length, a variant's tag).
pub type FieldPath = Rc<[String]>;

/// A type.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// An integer.
    Int(IntType),
    /// A floating-point number.
    Float {
        /// Exponent digits.
        exp: u32,
        /// Mantissa digits (with the implicit one).
        mant: u32,
        /// Alignment in bits.
        align: u32,
        /// Byte order.
        order: ByteOrder,
    },
    /// A NUL-terminated string.
    Str,
    /// An enumeration.
    Enum(Rc<EnumType>),
    /// A struct.
    Struct(Rc<Fields>),
    /// A variant, selected by the enum at `tag`.
    Variant {
        /// The tag's path (none until the field that uses the variant gives it).
        tag: Option<FieldPath>,
        /// The options.
        options: Rc<Fields>,
    },
    /// A fixed array.
    Array(Rc<Type>, usize),
    /// A sequence whose length is the integer at a path.
    Sequence(Rc<Type>, FieldPath),
}

impl Type {
    /// Its alignment in bits.
    pub fn align(&self) -> u32 {
        match self {
            Type::Int(i) => i.align,
            Type::Float { align, .. } => *align,
            Type::Str => 8,
            Type::Enum(e) => e.int.align,
            Type::Struct(s) => s.align,
            Type::Variant { .. } => 1,
            Type::Array(t, _) | Type::Sequence(t, _) => t.align(),
        }
    }
}

/// A clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    /// Its name.
    pub name: String,
    /// Frequency, Hz.
    pub freq: u64,
    /// Offset from the epoch: seconds, then cycles.
    pub offset_s: i64,
    /// Offset in cycles.
    pub offset: i64,
}

impl Clock {
    /// `cycles` of this clock as nanoseconds since the epoch (or since its origin, when its offset is
    /// zero): `(offset_s·freq + offset + cycles)·1e9 / freq`.
    pub fn ns(&self, cycles: u64) -> i64 {
        let freq = i128::from(self.freq.max(1));
        let total = i128::from(self.offset_s) * freq + i128::from(self.offset) + i128::from(cycles);
        let ns = if freq == 1_000_000_000 {
            total
        } else {
            total * 1_000_000_000 / freq
        };
        ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// An event class.
#[derive(Debug, Clone, PartialEq)]
pub struct EventClass {
    /// Its name.
    pub name: Rc<str>,
    /// Its id in its stream.
    pub id: u64,
    /// Its context, if any.
    pub context: Option<Type>,
    /// Its payload, if any.
    pub fields: Option<Type>,
}

/// A stream class.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamClass {
    /// Its id.
    pub id: u64,
    /// Packet context.
    pub packet_context: Option<Type>,
    /// Event header.
    pub event_header: Option<Type>,
    /// Event context common to its events.
    pub event_context: Option<Type>,
    /// Its event classes by id.
    pub events: HashMap<u64, EventClass>,
}

/// A trace's metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata {
    /// The trace's byte order.
    pub big_endian: bool,
    /// The packet header.
    pub packet_header: Option<Type>,
    /// `env` entries.
    pub env: Vec<(String, String)>,
    /// Clocks.
    pub clocks: Vec<Clock>,
    /// Stream classes by id.
    pub streams: HashMap<u64, StreamClass>,
}

impl Metadata {
    /// The `env` value `key`.
    pub fn env(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The metadata text of a `metadata` file, unwrapped from its packets when it is packetized; a
/// message saying what is wrong otherwise.
pub fn metadata_text(bytes: &[u8]) -> Result<String, (u64, String)> {
    let magic_le = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let magic_be = bytes
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let big = if magic_le == Some(METADATA_MAGIC) {
        false
    } else if magic_be == Some(METADATA_MAGIC) {
        true
    } else {
        return Ok(String::from_utf8_lossy(bytes).into_owned());
    };
    let u32_at = |at: usize| -> Option<u32> {
        let b = bytes.get(at..at + 4)?;
        let a = [b[0], b[1], b[2], b[3]];
        Some(if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        if u32_at(at) != Some(METADATA_MAGIC) {
            return Err((
                at as u64,
                "expected a metadata packet's magic 0x75D11D57".into(),
            ));
        }
        let (Some(content), Some(size)) = (u32_at(at + 24), u32_at(at + 28)) else {
            return Err((at as u64, "a metadata packet header cut short".into()));
        };
        let compression = bytes.get(at + 32).copied().unwrap_or(0);
        let encryption = bytes.get(at + 33).copied().unwrap_or(0);
        if compression != 0 || encryption != 0 {
            return Err((
                at as u64 + 32,
                "a compressed or encrypted metadata packet (not supported)".into(),
            ));
        }
        let (content, size) = (content as usize / 8, size as usize / 8);
        if content < 37 || size < content {
            return Err((
                at as u64 + 24,
                format!("a metadata packet of content {content} and size {size} bytes"),
            ));
        }
        let Some(text) = bytes.get(at + 37..at + content) else {
            return Err((
                at as u64,
                format!("a metadata packet of {content} bytes cut by the end of the file"),
            ));
        };
        out.extend_from_slice(text);
        at += size;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Int(i128),
    Str(String),
    Punct(&'static str),
}

struct Token {
    tok: Tok,
    line: u64,
    col: usize,
}

const PUNCT: [&str; 16] = [
    ":=", "...", "->", "{", "}", "[", "]", "(", ")", ";", ":", "=", ",", "<", ">", ".",
];

fn tokenize(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut i, mut line, mut line_start) = (0usize, 1u64, 0usize);
    let err = |i: usize, line: u64, line_start: usize, what: &'static str| {
        let line_text = text[line_start..].lines().next().unwrap_or("");
        ParseError::at("metadata", line, line_text, i - line_start, what)
    };
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            i += 1;
            line += 1;
            line_start = i;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if text[i..].starts_with("/*") {
            let end = text[i + 2..]
                .find("*/")
                .map(|e| i + 2 + e + 2)
                .ok_or_else(|| err(i, line, line_start, "the end of a comment `*/`"))?;
            for (k, &ch) in b[i..end].iter().enumerate() {
                if ch == b'\n' {
                    line += 1;
                    line_start = i + k + 1;
                }
            }
            i = end;
            continue;
        }
        if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(b.len(), |e| i + e);
            continue;
        }
        let col = i - line_start + 1;
        let tok = if c == b'"' {
            let mut j = i + 1;
            let mut s = String::new();
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' && j + 1 < b.len() {
                    j += 1;
                    let ch = text[j..].chars().next().unwrap_or('\\');
                    s.push(match ch {
                        'n' => '\n',
                        't' => '\t',
                        o => o,
                    });
                    j += ch.len_utf8();
                    continue;
                }
                if b[j] == b'\n' {
                    return Err(err(i, line, line_start, "a string's closing quote"));
                }
                let ch_len = text[j..].chars().next().map_or(1, char::len_utf8);
                s.push_str(&text[j..j + ch_len]);
                j += ch_len;
            }
            if j >= b.len() {
                return Err(err(i, line, line_start, "a string's closing quote"));
            }
            i = j + 1;
            Tok::Str(s)
        } else if c.is_ascii_digit()
            || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            || (c == b'+' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            let neg = c == b'-';
            if c == b'-' || c == b'+' {
                i += 1;
            }
            let mut j = i;
            while j < b.len() && b[j].is_ascii_alphanumeric() {
                j += 1;
            }
            let t = text[i..j].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                i128::from_str_radix(h, 16)
            } else if t.len() > 1 && t.starts_with('0') {
                i128::from_str_radix(&t[1..], 8)
            } else {
                t.parse::<i128>()
            }
            .map_err(|_| err(start, line, line_start, "a number"))?;
            i = j;
            Tok::Int(if neg { -v } else { v })
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let s = text[i..j].to_string();
            i = j;
            Tok::Ident(s)
        } else if let Some(p) = PUNCT.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            Tok::Punct(p)
        } else {
            return Err(err(
                i,
                line,
                line_start,
                "TSDL (an identifier, a number, a string or punctuation)",
            ));
        };
        out.push(Token { tok, line, col });
    }
    Ok(out)
}

/// The parser: tokens, and the named types declared so far.
struct Parser<'t> {
    text: &'t str,
    toks: Vec<Token>,
    at: usize,
    aliases: HashMap<String, Type>,
    structs: HashMap<String, Type>,
    variants: HashMap<String, Type>,
    enums: HashMap<String, Type>,
}

type R<T> = Result<T, ParseError>;

impl Parser<'_> {
    fn err(&self, what: &'static str) -> ParseError {
        let (line, col) = match self.toks.get(self.at).or(self.toks.last()) {
            Some(t) => (t.line, t.col),
            None => (1, 1),
        };
        let line_text = self.text.lines().nth(line as usize - 1).unwrap_or("");
        // `col` counts bytes; ParseError wants a byte offset too.
        let mut e = ParseError::at("metadata", line, line_text, col - 1, what);
        if self.at >= self.toks.len() {
            e.text = "the end of the metadata".into();
        }
        e
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.tok)
    }
    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.at + k).map(|t| &t.tok)
    }
    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: &'static str, what: &'static str) -> R<()> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(self.err(what))
        }
    }
    fn ident(&mut self, what: &'static str) -> R<String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.err(what)),
        }
    }
    fn int(&mut self, what: &'static str) -> R<i128> {
        match self.peek() {
            Some(Tok::Int(v)) => {
                let v = *v;
                self.at += 1;
                Ok(v)
            }
            _ => Err(self.err(what)),
        }
    }

    /// `a.b.c` (also `a->b`).
    fn path(&mut self, what: &'static str) -> R<Vec<String>> {
        let mut p = vec![self.ident(what)?];
        while self.eat(".") || self.eat("->") {
            p.push(self.ident(what)?);
        }
        Ok(p)
    }

    fn top(&mut self, m: &mut Metadata) -> R<()> {
        while self.at < self.toks.len() {
            if self.eat(";") {
                continue;
            }
            let Some(Tok::Ident(kw)) = self.peek().cloned() else {
                return Err(
                    self.err("a declaration (trace, env, clock, stream, event, typealias...)")
                );
            };
            match kw.as_str() {
                "typealias" => {
                    self.at += 1;
                    let t = self.type_spec()?;
                    self.expect(":=", "`:=` in a typealias")?;
                    let mut name = Vec::new();
                    while let Some(Tok::Ident(w)) = self.peek().cloned() {
                        name.push(w);
                        self.at += 1;
                    }
                    if name.is_empty() {
                        return Err(self.err("the alias's name"));
                    }
                    // `:= name *` (pointers) are integers of the long size already declared.
                    self.aliases.insert(name.join(" "), t);
                }
                "typedef" => {
                    self.at += 1;
                    let t = self.type_spec()?;
                    let name = self.ident("the typedef's name")?;
                    let t = self.dims(t)?;
                    self.aliases.insert(name, t);
                }
                "trace" | "env" | "clock" | "stream" | "event" | "callsite"
                    if matches!(self.peek_at(1), Some(Tok::Punct("{"))) =>
                {
                    self.at += 2;
                    self.block(&kw, m)?;
                }
                "struct" | "variant" | "enum" | "integer" | "floating_point" | "string" => {
                    // A named type declared on its own.
                    self.type_spec()?;
                }
                _ => {
                    return Err(
                        self.err("a declaration (trace, env, clock, stream, event, typealias...)")
                    );
                }
            }
            self.expect(";", "`;` after a declaration")?;
        }
        Ok(())
    }

    /// The entries of a `trace`, `env`, `clock`, `stream`, `event` block, up to its `}`.
    fn block(&mut self, kind: &str, m: &mut Metadata) -> R<()> {
        let mut values: Vec<(String, Tok)> = Vec::new();
        let mut types: Vec<(String, Type)> = Vec::new();
        while !self.eat("}") {
            if self.at >= self.toks.len() {
                return Err(self.err("`}` closing the block"));
            }
            if self.eat(";") {
                continue;
            }
            let key = self.path("an entry's name")?.join(".");
            if self.eat(":=") {
                let t = self.type_spec()?;
                types.push((key, t));
            } else {
                self.expect("=", "`=` or `:=` after an entry's name")?;
                let v = match self.peek().cloned() {
                    Some(t @ (Tok::Int(_) | Tok::Str(_))) => {
                        self.at += 1;
                        t
                    }
                    Some(Tok::Ident(_)) => {
                        let p = self.path("a value")?;
                        Tok::Ident(p.join("."))
                    }
                    _ => return Err(self.err("a value (a number, a string or a name)")),
                };
                values.push((key, v));
            }
            self.expect(";", "`;` after an entry")?;
        }
        let get = |k: &str| values.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let int_of = |k: &str| match get(k) {
            Some(Tok::Int(v)) => Some(v),
            _ => None,
        };
        let text = |t: &Tok| match t {
            Tok::Str(s) | Tok::Ident(s) => s.clone(),
            Tok::Int(v) => v.to_string(),
            Tok::Punct(p) => p.to_string(),
        };
        let ty = |k: &str| types.iter().find(|(n, _)| n == k).map(|(_, t)| t.clone());
        match kind {
            "trace" => {
                if let Some(Tok::Ident(o)) = get("byte_order") {
                    m.big_endian = matches!(o.as_str(), "be" | "network");
                }
                m.packet_header = ty("packet.header");
            }
            "env" => m.env = values.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
            "clock" => m.clocks.push(Clock {
                name: get("name").map(|t| text(&t)).unwrap_or_default(),
                freq: int_of("freq")
                    .map_or(1_000_000_000, |f| f.clamp(1, i128::from(u64::MAX)) as u64),
                offset_s: int_of("offset_s").unwrap_or(0) as i64,
                offset: int_of("offset").unwrap_or(0) as i64,
            }),
            "stream" => {
                let id = int_of("id").unwrap_or(0) as u64;
                let s = m.streams.entry(id).or_default();
                s.id = id;
                s.packet_context = ty("packet.context");
                s.event_header = ty("event.header");
                s.event_context = ty("event.context");
            }
            "event" => {
                let stream = int_of("stream_id").unwrap_or(0) as u64;
                let id = int_of("id").unwrap_or(0) as u64;
                let name: Rc<str> = get("name").map(|t| text(&t)).unwrap_or_default().into();
                let s = m.streams.entry(stream).or_default();
                s.id = stream;
                s.events.insert(
                    id,
                    EventClass {
                        name,
                        id,
                        context: ty("context"),
                        fields: ty("fields"),
                    },
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// `[N]` and `[path]` after a field's name.
    fn dims(&mut self, mut t: Type) -> R<Type> {
        let mut dims = Vec::new();
        while self.eat("[") {
            match self.peek().cloned() {
                Some(Tok::Int(n)) => {
                    self.at += 1;
                    dims.push(Ok(
                        usize::try_from(n).map_err(|_| self.err("an array length"))?
                    ));
                }
                Some(Tok::Ident(_)) => dims.push(Err(self.path("a sequence's length field")?)),
                _ => return Err(self.err("an array length or a sequence's length field")),
            }
            self.expect("]", "`]`")?;
        }
        // `x[2][3]` is two arrays of three.
        for d in dims.into_iter().rev() {
            t = match d {
                Ok(n) => Type::Array(Rc::new(t), n),
                Err(p) => Type::Sequence(Rc::new(t), p.into()),
            };
        }
        Ok(t)
    }

    /// `{ type name; ... }` of a struct or variant: its fields.
    fn fields(&mut self) -> R<Vec<(Rc<str>, Type)>> {
        let mut out = Vec::new();
        while !self.eat("}") {
            if self.at >= self.toks.len() {
                return Err(self.err("`}` closing the fields"));
            }
            if self.eat(";") {
                continue;
            }
            if matches!(self.peek(), Some(Tok::Ident(k)) if k == "typealias" || k == "typedef") {
                // Scoped aliases: kept in the one table (names rarely clash).
                let kw = self.ident("typealias")?;
                let t = self.type_spec()?;
                if kw == "typealias" {
                    self.expect(":=", "`:=`")?;
                    let mut name = Vec::new();
                    while let Some(Tok::Ident(w)) = self.peek().cloned() {
                        name.push(w);
                        self.at += 1;
                    }
                    self.aliases.insert(name.join(" "), t);
                } else {
                    let name = self.ident("the typedef's name")?;
                    let t = self.dims(t)?;
                    self.aliases.insert(name, t);
                }
                self.expect(";", "`;`")?;
                continue;
            }
            let t = self.type_spec()?;
            let name = self.ident("a field's name")?;
            let t = self.dims(t)?;
            self.expect(";", "`;` after a field")?;
            out.push((Rc::from(name.as_str()), t));
        }
        Ok(out)
    }

    /// `{ key = value; ... }` of an integer or floating point: the entries.
    fn attributes(&mut self) -> R<Vec<(String, String)>> {
        self.expect("{", "`{`")?;
        let mut out = Vec::new();
        while !self.eat("}") {
            if self.at >= self.toks.len() {
                return Err(self.err("`}`"));
            }
            if self.eat(";") {
                continue;
            }
            let key = self.ident("an attribute's name")?;
            self.expect("=", "`=` after an attribute's name")?;
            let v = match self.peek().cloned() {
                Some(Tok::Int(v)) => {
                    self.at += 1;
                    v.to_string()
                }
                Some(Tok::Str(s)) => {
                    self.at += 1;
                    s
                }
                Some(Tok::Ident(_)) => self.path("a value")?.join("."),
                _ => return Err(self.err("an attribute's value")),
            };
            out.push((key, v));
            self.expect(";", "`;` after an attribute")?;
        }
        Ok(out)
    }

    fn order(v: &str) -> ByteOrder {
        match v {
            "le" => ByteOrder::Little,
            "be" | "network" => ByteOrder::Big,
            _ => ByteOrder::Native,
        }
    }

    fn integer(&mut self) -> R<IntType> {
        let at = self.at;
        let attrs = self.attributes()?;
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let size: u32 = get("size").and_then(|v| v.parse().ok()).unwrap_or(0);
        if !(1..=64).contains(&size) {
            self.at = at;
            return Err(self.err("an integer with a `size` of 1 to 64 bits"));
        }
        let align = get("align")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if size.is_multiple_of(8) { 8 } else { 1 });
        if align == 0 || !u32::is_power_of_two(align) {
            self.at = at;
            return Err(self.err("an alignment that is a power of two"));
        }
        Ok(IntType {
            size,
            align,
            signed: matches!(get("signed"), Some("true" | "1" | "TRUE")),
            order: get("byte_order").map_or(ByteOrder::Native, Self::order),
            base: match get("base") {
                Some("16" | "hex" | "x" | "X" | "p" | "hexadecimal") => 16,
                Some("8" | "oct" | "o" | "octal") => 8,
                Some("2" | "bin" | "b" | "binary") => 2,
                _ => 10,
            },
            text: matches!(get("encoding"), Some("UTF8" | "ASCII" | "utf8" | "ascii")),
            clock: get("map").and_then(|m| {
                m.strip_prefix("clock.")
                    .and_then(|c| c.strip_suffix(".value"))
                    .map(str::to_string)
            }),
        })
    }

    /// `align(N)` after a struct: its alignment in bits.
    fn align_suffix(&mut self) -> R<Option<u32>> {
        if matches!(self.peek(), Some(Tok::Ident(k)) if k == "align")
            && matches!(self.peek_at(1), Some(Tok::Punct("(")))
        {
            self.at += 2;
            let n = self.int("an alignment in bytes")?;
            self.expect(")", "`)`")?;
            let n = u32::try_from(n)
                .ok()
                .filter(|n| n.is_power_of_two())
                .ok_or_else(|| self.err("an alignment that is a power of two"))?;
            return Ok(Some(n));
        }
        Ok(None)
    }

    fn type_spec(&mut self) -> R<Type> {
        let Some(Tok::Ident(kw)) = self.peek().cloned() else {
            return Err(self.err("a type"));
        };
        match kw.as_str() {
            "integer" => {
                self.at += 1;
                Ok(Type::Int(self.integer()?))
            }
            "floating_point" => {
                self.at += 1;
                let attrs = self.attributes()?;
                let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                let exp: u32 = get("exp_dig").and_then(|v| v.parse().ok()).unwrap_or(8);
                let mant: u32 = get("mant_dig").and_then(|v| v.parse().ok()).unwrap_or(24);
                if exp + mant != 32 && exp + mant != 64 {
                    return Err(self.err("a floating point of 32 or 64 bits"));
                }
                Ok(Type::Float {
                    exp,
                    mant,
                    align: get("align").and_then(|v| v.parse().ok()).unwrap_or(8),
                    order: get("byte_order").map_or(ByteOrder::Native, Self::order),
                })
            }
            "string" => {
                self.at += 1;
                if self.is("{") {
                    self.attributes()?;
                }
                Ok(Type::Str)
            }
            "struct" => {
                self.at += 1;
                let name = match self.peek() {
                    Some(Tok::Ident(n)) => {
                        let n = n.clone();
                        self.at += 1;
                        Some(n)
                    }
                    _ => None,
                };
                if self.eat("{") {
                    let fields = self.fields()?;
                    let declared = self.align_suffix()?;
                    let natural = fields.iter().map(|(_, t)| t.align()).max().unwrap_or(1);
                    let t = Type::Struct(Rc::new(Fields {
                        fields,
                        align: declared.unwrap_or(1).max(natural),
                    }));
                    if let Some(n) = name {
                        self.structs.insert(n, t.clone());
                    }
                    return Ok(t);
                }
                let n = name.ok_or_else(|| self.err("a struct's name or its fields"))?;
                let t = self
                    .structs
                    .get(&n)
                    .cloned()
                    .ok_or_else(|| self.err("a struct declared before"))?;
                self.align_suffix()?;
                Ok(t)
            }
            "variant" => {
                self.at += 1;
                let name = match self.peek() {
                    Some(Tok::Ident(n)) => {
                        let n = n.clone();
                        self.at += 1;
                        Some(n)
                    }
                    _ => None,
                };
                let tag = if self.eat("<") {
                    let p = self.path("a variant's tag")?;
                    self.expect(">", "`>` after a variant's tag")?;
                    Some(FieldPath::from(p))
                } else {
                    None
                };
                if self.eat("{") {
                    let fields = self.fields()?;
                    let t = Type::Variant {
                        tag: tag.clone(),
                        options: Rc::new(Fields { fields, align: 1 }),
                    };
                    if let Some(n) = name {
                        self.variants.insert(n, t.clone());
                    }
                    return Ok(t);
                }
                let n = name.ok_or_else(|| self.err("a variant's name or its options"))?;
                match self.variants.get(&n).cloned() {
                    Some(Type::Variant { options, tag: t0 }) => Ok(Type::Variant {
                        tag: tag.or(t0),
                        options,
                    }),
                    _ => Err(self.err("a variant declared before")),
                }
            }
            "enum" => {
                self.at += 1;
                let name = match self.peek() {
                    Some(Tok::Ident(n)) => {
                        let n = n.clone();
                        self.at += 1;
                        Some(n)
                    }
                    _ => None,
                };
                let container = if self.eat(":") {
                    match self.type_spec()? {
                        Type::Int(i) => i,
                        Type::Enum(e) => e.int.clone(),
                        _ => return Err(self.err("an integer container type")),
                    }
                } else if let Some(Type::Int(i)) = self.aliases.get("int").cloned() {
                    i
                } else if !self.is("{") {
                    let n = name.clone().unwrap_or_default();
                    return self
                        .enums
                        .get(&n)
                        .cloned()
                        .ok_or_else(|| self.err("an enum declared before"));
                } else {
                    return Err(self.err("an enum's container type (`: uint8_t`)"));
                };
                self.expect("{", "`{` opening an enum's labels")?;
                let mut labels = Vec::new();
                let mut next: i128 = 0;
                while !self.eat("}") {
                    let label = match self.peek().cloned() {
                        Some(Tok::Ident(s) | Tok::Str(s)) => {
                            self.at += 1;
                            s
                        }
                        _ => return Err(self.err("an enum label")),
                    };
                    let (lo, hi) = if self.eat("=") {
                        let lo = self.int("a label's value")?;
                        let hi = if self.eat("...") {
                            self.int("a range's end")?
                        } else {
                            lo
                        };
                        (lo, hi)
                    } else {
                        (next, next)
                    };
                    next = hi + 1;
                    labels.push((Rc::from(label.as_str()), lo, hi));
                    if !self.eat(",") {
                        self.expect("}", "`,` or `}` after a label")?;
                        break;
                    }
                }
                let t = Type::Enum(Rc::new(EnumType {
                    int: container,
                    labels,
                }));
                if let Some(n) = name {
                    self.enums.insert(n, t.clone());
                }
                Ok(t)
            }
            _ => {
                // A type name: the longest run of identifiers that names an alias.
                let mut words = Vec::new();
                let mut k = 0;
                while let Some(Tok::Ident(w)) = self.peek_at(k) {
                    words.push(w.clone());
                    k += 1;
                }
                for n in (1..=words.len()).rev() {
                    if let Some(t) = self.aliases.get(&words[..n].join(" ")) {
                        let t = t.clone();
                        self.at += n;
                        return Ok(t);
                    }
                }
                Err(self.err(
                    "a type (integer, string, struct, enum, variant, floating_point or an alias)",
                ))
            }
        }
    }
}

/// Parses metadata text.
pub fn parse(text: &str) -> Result<Metadata, ParseError> {
    let toks = tokenize(text)?;
    let mut p = Parser {
        text,
        toks,
        at: 0,
        aliases: HashMap::new(),
        structs: HashMap::new(),
        variants: HashMap::new(),
        enums: HashMap::new(),
    };
    let mut m = Metadata::default();
    p.top(&mut m)?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_blocks() {
        let m = parse(
            r#"/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 32; align = 32; signed = false; } := unsigned long;
trace { major = 1; minor = 8; byte_order = be; packet.header := struct { uint8_t magic[4]; unsigned long stream_id; }; };
clock { name = monotonic; freq = 1000; offset_s = 2; offset = 5; };
enum e : uint8_t { A, B = 5, C = 7 ... 9, "d e", };
stream { event.header := struct { enum e id; variant <id> { uint8_t A; unsigned long C; } v; } align(8); };
event { name = "x"; id = 3; fields := struct { string s; uint8_t n; uint8_t seq[n]; uint8_t m[2][3]; }; };
"#,
        )
        .unwrap();
        assert!(m.big_endian);
        assert_eq!(m.clocks[0].ns(10), 2_015_000_000);
        let s = &m.streams[&0];
        let Some(Type::Struct(h)) = &s.event_header else {
            panic!()
        };
        let Type::Enum(e) = &h.fields[0].1 else {
            panic!()
        };
        assert_eq!(
            e.labels.iter().map(|l| (l.1, l.2)).collect::<Vec<_>>(),
            [(0, 0), (5, 5), (7, 9), (10, 10)]
        );
        assert_eq!(h.align, 8);
        let Some(Type::Struct(f)) = &s.events[&3].fields else {
            panic!()
        };
        assert!(matches!(&f.fields[2].1, Type::Sequence(_, p) if p[0] == "n"));
        assert!(matches!(&f.fields[3].1, Type::Array(t, 2) if matches!(**t, Type::Array(_, 3))));
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("trace {\n  major = 1;\n  byte_order = le\n};\n").unwrap_err();
        assert_eq!((e.line, e.column), (4, 1), "{e}");
        let e = parse("typealias integer { size = 8; } := u8;\nstream { event.header := struct { u9 id; }; };").unwrap_err();
        assert_eq!((e.line, e.column), (2, 35), "{e}");
        assert!(e.to_string().contains("expected a type"), "{e}");
        let e = parse("trace { x = \"open; };").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn packetized_metadata_is_unwrapped() {
        let mut bytes = Vec::new();
        for text in ["/* CTF 1.8 */ trace ", "{ major = 1; };"] {
            let content = 37 + text.len();
            let size = content + 3;
            bytes.extend_from_slice(&METADATA_MAGIC.to_le_bytes());
            bytes.extend_from_slice(&[0; 20]);
            bytes.extend_from_slice(&((content * 8) as u32).to_le_bytes());
            bytes.extend_from_slice(&((size * 8) as u32).to_le_bytes());
            bytes.extend_from_slice(&[0, 0, 0, 1, 8]);
            bytes.extend_from_slice(text.as_bytes());
            bytes.extend_from_slice(&[0; 3]);
        }
        assert_eq!(
            metadata_text(&bytes).unwrap(),
            "/* CTF 1.8 */ trace { major = 1; };"
        );
        assert!(metadata_text(&bytes[..50]).is_err());
    }
}
