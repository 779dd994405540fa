//! An event's `print fmt` (a C format string and C expressions over `REC->field`), parsed once and
//! applied to each record the way libtraceevent (so `trace-cmd report`) does: `__print_symbolic`,
//! `__print_flags`, `__get_str`, dynamic arrays, ternaries and arithmetic, casts, `%ps` symbols; and the
//! binary arguments of `bprint` records (`trace_printk`), packed as the kernel's `vbin_printf` packs them.

use std::fmt::Write;

use super::{DatMeta, EventFormat, FieldValue, field_value, read_uint, sign_extend};

/// What a print format is applied to.
pub(crate) struct Ctx<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) format: &'a EventFormat,
    pub(crate) meta: &'a DatMeta,
}

/// A parsed `print fmt`.
#[derive(Debug, Clone)]
pub struct PrintFmt {
    format: String,
    args: Vec<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(i64),
    Ident(String),
    Op(&'static str),
}

/// The C operators a print format uses, longest first.
const OPS: [&str; 30] = [
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", "?",
    ":", "+", "-", "*", "/", "%", "<", ">", "&", "|", "^", "!", "~",
];

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' {
            let mut j = i + 1;
            let mut lit = Vec::new();
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' && j + 1 < b.len() {
                    lit.push(b[j]);
                    j += 1;
                }
                lit.push(b[j]);
                j += 1;
            }
            if j >= b.len() {
                return Err("a string literal without its closing quote".into());
            }
            out.push(Tok::Str(unescape(&String::from_utf8_lossy(&lit))));
            i = j + 1;
        } else if c == b'\'' {
            let rest = &s[i + 1..];
            let end = rest
                .find('\'')
                .ok_or("a character literal without its closing quote")?;
            let ch = unescape(&rest[..end]);
            out.push(Tok::Num(ch.bytes().next().map_or(0, i64::from)));
            i += end + 2;
        } else if c.is_ascii_digit() {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric()) {
                j += 1;
            }
            let t = s[i..j].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).map(|v| v as i64)
            } else if t.len() > 1 && t.starts_with('0') {
                u64::from_str_radix(&t[1..], 8).map(|v| v as i64)
            } else {
                t.parse::<u64>().map(|v| v as i64)
            }
            .map_err(|_| format!("a number `{t}`"))?;
            out.push(Tok::Num(v));
            i = j;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push(Tok::Ident(s[i..j].to_string()));
            i = j;
        } else if let Some(op) = OPS.iter().find(|op| s[i..].starts_with(**op)) {
            out.push(Tok::Op(op));
            i += op.len();
        } else {
            return Err(format!("an unexpected character `{}`", c as char));
        }
    }
    Ok(out)
}

/// C escapes (`\n`, `\t`, `\"`, `\\`, octal) of a literal, resolved.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('0'..='7') => {
                // Up to three octal digits; the first was consumed.
                out.push('?');
                while it.peek().is_some_and(|d| ('0'..='7').contains(d)) {
                    it.next();
                }
            }
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

/// A C integer type of a cast.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cast {
    /// Truncated to `bytes` and sign-extended when `signed`.
    Int { bytes: u8, signed: bool },
    /// A pointer (kept whole).
    Pointer,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Num(i64),
    Str(String),
    Field(String),
    Index(Box<Expr>, Box<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(Cast, Box<Expr>),
    Call(String, Vec<Expr>),
    List(Vec<Expr>),
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if *o == op)
    }
    fn eat(&mut self, op: &str) -> bool {
        if self.op(op) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected `{op}`, found {:?}", self.peek()))
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn binary(&mut self, min: u8) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some(Tok::Op(op)) = self.peek().cloned() {
            let prec = match op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "^" => 4,
                "&" => 5,
                "==" | "!=" => 6,
                "<" | ">" | "<=" | ">=" => 7,
                "<<" | ">>" => 8,
                "+" | "-" => 9,
                "*" | "/" | "%" => 10,
                _ => break,
            };
            if prec < min {
                break;
            }
            self.at += 1;
            let right = self.binary(prec + 1)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// A cast `(type words [*])` at the cursor, if it is one.
    fn cast(&mut self) -> Option<Cast> {
        let mut j = self.at + 1;
        let mut words = Vec::new();
        let mut pointer = false;
        loop {
            match self.toks.get(j)? {
                Tok::Ident(w) => words.push(w.as_str()),
                Tok::Op("*") => pointer = true,
                Tok::Op(")") => break,
                _ => return None,
            }
            j += 1;
        }
        let first = *words.first()?;
        let typeish = matches!(
            first,
            "unsigned"
                | "signed"
                | "int"
                | "long"
                | "char"
                | "short"
                | "void"
                | "const"
                | "struct"
                | "bool"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "s8"
                | "s16"
                | "s32"
                | "s64"
                | "__u8"
                | "__u16"
                | "__u32"
                | "__u64"
                | "__s8"
                | "__s16"
                | "__s32"
                | "__s64"
        ) || first.ends_with("_t");
        if !typeish || (words.len() > 1 && !pointer && words.iter().any(|w| w.starts_with("REC"))) {
            return None;
        }
        self.at = j + 1;
        if pointer {
            return Some(Cast::Pointer);
        }
        let unsigned = words.contains(&"unsigned")
            || words
                .iter()
                .any(|w| w.starts_with('u') || w.starts_with("__u"));
        let longs = words.iter().filter(|w| **w == "long").count();
        let bytes = if words.contains(&"char")
            || words.iter().any(|w| w.ends_with('8'))
            || *words.last()? == "bool"
        {
            1
        } else if words.contains(&"short") || words.iter().any(|w| w.ends_with("16")) {
            2
        } else if longs >= 2 || words.iter().any(|w| w.ends_with("64")) {
            8
        } else if longs == 1 || words.iter().any(|w| *w == "size_t" || *w == "uintptr_t") {
            // A `long`: the pointer size is what matters for printing; 8 keeps every bit.
            8
        } else {
            4
        };
        Some(Cast::Int {
            bytes,
            signed: !unsigned,
        })
    }

    fn unary(&mut self) -> Result<Expr, String> {
        for op in ["-", "!", "~"] {
            if self.eat(op) {
                return Ok(Expr::Unary(op, Box::new(self.unary()?)));
            }
        }
        if self.eat("&") {
            // An address of a field: its value is what is printed.
            return self.unary();
        }
        if self.op("(")
            && let Some(c) = self.cast()
        {
            return Ok(Expr::Cast(c, Box::new(self.unary()?)));
        }
        let mut e = self.primary()?;
        loop {
            if self.eat("[") {
                let i = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else {
                break;
            }
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let t = self.peek().cloned().ok_or("an expression, found the end")?;
        self.at += 1;
        match t {
            Tok::Num(v) => Ok(Expr::Num(v)),
            Tok::Str(s) => {
                let mut s = s;
                while let Some(Tok::Str(more)) = self.peek().cloned() {
                    self.at += 1;
                    s.push_str(&more);
                }
                Ok(Expr::Str(s))
            }
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op("{") => {
                let mut items = Vec::new();
                while !self.eat("}") {
                    items.push(self.expr()?);
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(Expr::List(items))
            }
            Tok::Ident(name) if name == "REC" => {
                if !(self.eat("->") || self.eat(".")) {
                    return Err("`REC->field`".into());
                }
                match self.peek().cloned() {
                    Some(Tok::Ident(f)) => {
                        self.at += 1;
                        Ok(Expr::Field(f))
                    }
                    _ => Err("a field name after `REC->`".into()),
                }
            }
            Tok::Ident(name) => {
                if self.eat("(") {
                    let mut args = Vec::new();
                    while !self.eat(")") {
                        args.push(self.expr()?);
                        if !self.eat(",") {
                            self.expect(")")?;
                            break;
                        }
                    }
                    Ok(Expr::Call(name, args))
                } else {
                    match name.as_str() {
                        "true" => Ok(Expr::Num(1)),
                        "false" | "NULL" => Ok(Expr::Num(0)),
                        // A bare field name, as in `__get_str(name)`.
                        _ => Ok(Expr::Field(name)),
                    }
                }
            }
            Tok::Op(o) => Err(format!("an expression, found `{o}`")),
        }
    }
}

impl PrintFmt {
    /// Parses the text after `print fmt: `.
    pub fn parse(text: &str) -> Result<Self, String> {
        let toks = tokens(text)?;
        let mut p = Parser { toks, at: 0 };
        let format = match p.primary()? {
            Expr::Str(s) => s,
            _ => return Err("a format string first".into()),
        };
        let mut args = Vec::new();
        while p.eat(",") {
            args.push(p.expr()?);
        }
        if p.at != p.toks.len() {
            return Err(format!("unexpected {:?} after the arguments", p.peek()));
        }
        Ok(Self { format, args })
    }

    /// Appends the record's text; `false` when an argument could not be evaluated.
    pub(crate) fn apply(&self, ctx: &Ctx<'_>, out: &mut String) -> bool {
        let mut values = Vec::with_capacity(self.args.len());
        for a in &self.args {
            match eval(a, ctx) {
                Some(v) => values.push(v),
                None => return false,
            }
        }
        printf(&self.format, &mut values.into_iter(), ctx, out)
    }
}

/// A value while evaluating.
#[derive(Debug, Clone)]
enum Val<'a> {
    Int(i64),
    /// An integer from an unsigned field or cast.
    Uint(u64),
    Str(std::borrow::Cow<'a, str>),
    Arr(FieldValue<'a>),
}

impl Val<'_> {
    fn int(&self) -> Option<i64> {
        match self {
            Val::Int(v) => Some(*v),
            Val::Uint(v) => Some(*v as i64),
            _ => None,
        }
    }
}

fn eval<'a>(e: &Expr, ctx: &Ctx<'a>) -> Option<Val<'a>> {
    let big = ctx.meta.info.big_endian;
    Some(match e {
        Expr::Num(v) => Val::Int(*v),
        Expr::Str(s) => Val::Str(std::borrow::Cow::Owned(s.clone())),
        Expr::Field(name) => {
            let f = ctx.format.field(name)?;
            match field_value(ctx.data, f, big)? {
                FieldValue::Int(v) => Val::Int(v),
                FieldValue::Uint(v) => Val::Uint(v),
                FieldValue::Str(s) => Val::Str(String::from_utf8_lossy(s)),
                a @ FieldValue::Array { .. } => Val::Arr(a),
            }
        }
        Expr::Index(a, i) => {
            let i = usize::try_from(eval(i, ctx)?.int()?).ok()?;
            match eval(a, ctx)? {
                Val::Arr(FieldValue::Array {
                    bytes,
                    elem,
                    signed,
                }) => {
                    let e = elem as usize;
                    let v = read_uint(bytes, i.checked_mul(e)?, e, big)?;
                    if signed {
                        Val::Int(sign_extend(v, e))
                    } else {
                        Val::Uint(v)
                    }
                }
                Val::Str(s) => Val::Int(i64::from(*s.as_bytes().get(i)?)),
                _ => return None,
            }
        }
        Expr::Unary(op, x) => {
            let v = eval(x, ctx)?.int()?;
            Val::Int(match *op {
                "-" => v.wrapping_neg(),
                "!" => i64::from(v == 0),
                _ => !v,
            })
        }
        Expr::Binary(op, a, b) => {
            let x = eval(a, ctx)?;
            let unsigned = matches!(x, Val::Uint(_));
            let x = x.int()?;
            if *op == "&&" && x == 0 {
                return Some(Val::Int(0));
            }
            if *op == "||" && x != 0 {
                return Some(Val::Int(1));
            }
            let y = eval(b, ctx)?.int()?;
            let r = match *op {
                "+" => x.wrapping_add(y),
                "-" => x.wrapping_sub(y),
                "*" => x.wrapping_mul(y),
                "/" => x.checked_div(y)?,
                "%" => x.checked_rem(y)?,
                "<<" => x.wrapping_shl(y as u32),
                ">>" if unsigned => ((x as u64) >> (y as u32 & 63)) as i64,
                ">>" => x.wrapping_shr(y as u32),
                "&" => x & y,
                "|" => x | y,
                "^" => x ^ y,
                "==" => i64::from(x == y),
                "!=" => i64::from(x != y),
                "<" => i64::from(x < y),
                ">" => i64::from(x > y),
                "<=" => i64::from(x <= y),
                ">=" => i64::from(x >= y),
                "&&" | "||" => i64::from(y != 0),
                _ => return None,
            };
            if unsigned {
                Val::Uint(r as u64)
            } else {
                Val::Int(r)
            }
        }
        Expr::Cond(c, a, b) => {
            if eval(c, ctx)?.int()? != 0 {
                eval(a, ctx)?
            } else {
                eval(b, ctx)?
            }
        }
        Expr::Cast(c, x) => {
            let v = eval(x, ctx)?;
            match (c, v) {
                (Cast::Pointer, v) => v,
                (Cast::Int { bytes, signed }, v) => {
                    let raw = v.int()? as u64;
                    let n = usize::from(*bytes);
                    let masked = if n >= 8 {
                        raw
                    } else {
                        raw & ((1u64 << (8 * n)) - 1)
                    };
                    if *signed {
                        Val::Int(sign_extend(masked, n))
                    } else {
                        Val::Uint(masked)
                    }
                }
            }
        }
        Expr::Call(name, args) => call(name, args, ctx)?,
        Expr::List(_) => return None,
    })
}

fn call<'a>(name: &str, args: &[Expr], ctx: &Ctx<'a>) -> Option<Val<'a>> {
    let field_of = |e: &Expr| match e {
        Expr::Field(f) => Some(f.clone()),
        _ => None,
    };
    match name {
        "__get_str" | "__get_rel_str" | "__get_dynamic_array" | "__get_rel_dynamic_array" => {
            eval(&Expr::Field(field_of(args.first()?)?), ctx)
        }
        "__get_dynamic_array_len" | "__get_rel_dynamic_array_len" => {
            let f = ctx.format.field(&field_of(args.first()?)?)?;
            match field_value(ctx.data, f, ctx.meta.info.big_endian)? {
                FieldValue::Array { bytes, .. } => Some(Val::Uint(bytes.len() as u64)),
                FieldValue::Str(s) => Some(Val::Uint(s.len() as u64 + 1)),
                v => Some(Val::Uint(v.as_u64())),
            }
        }
        "__print_symbolic" | "__print_symbolic_u64" => {
            let v = eval(args.first()?, ctx)?.int()?;
            for item in &args[1..] {
                let Expr::List(pair) = item else { return None };
                let (Some(k), Some(Expr::Str(s))) = (pair.first(), pair.get(1)) else {
                    return None;
                };
                if eval(k, ctx)?.int()? == v {
                    return Some(Val::Str(std::borrow::Cow::Owned(s.clone())));
                }
            }
            Some(Val::Str(std::borrow::Cow::Owned(format!(
                "0x{:x}",
                v as u64
            ))))
        }
        "__print_flags" | "__print_flags_u64" => {
            let mut v = eval(args.first()?, ctx)?.int()? as u64;
            let delim = match eval(args.get(1)?, ctx)? {
                Val::Str(s) => s.into_owned(),
                _ => return None,
            };
            let mut out = String::new();
            let mut printed = false;
            for item in &args[2..] {
                let Expr::List(pair) = item else { return None };
                let (Some(k), Some(Expr::Str(s))) = (pair.first(), pair.get(1)) else {
                    return None;
                };
                let f = eval(k, ctx)?.int()? as u64;
                if v == 0 && f == 0 {
                    out.push_str(s);
                    break;
                }
                if f != 0 && v & f == f {
                    if printed {
                        out.push_str(&delim);
                    }
                    out.push_str(s);
                    printed = true;
                    v &= !f;
                }
            }
            if v != 0 {
                if printed {
                    out.push_str(&delim);
                }
                let _ = write!(out, "0x{v:x}");
            }
            Some(Val::Str(std::borrow::Cow::Owned(out)))
        }
        "__print_hex" | "__print_hex_str" => {
            let bytes = match eval(args.first()?, ctx)? {
                Val::Arr(FieldValue::Array { bytes, .. }) => bytes.to_vec(),
                Val::Str(s) => s.as_bytes().to_vec(),
                _ => return None,
            };
            let len = usize::try_from(eval(args.get(1)?, ctx)?.int()?).ok()?;
            let mut out = String::new();
            for (i, b) in bytes.iter().take(len).enumerate() {
                if i > 0 && name == "__print_hex" {
                    out.push(' ');
                }
                let _ = write!(out, "{b:02x}");
            }
            Some(Val::Str(std::borrow::Cow::Owned(out)))
        }
        "__print_array" => {
            let Val::Arr(FieldValue::Array { bytes, .. }) = eval(args.first()?, ctx)? else {
                return None;
            };
            let count = usize::try_from(eval(args.get(1)?, ctx)?.int()?).ok()?;
            let el = usize::try_from(eval(args.get(2)?, ctx)?.int()?).ok()?;
            if el == 0 {
                return None;
            }
            let mut out = String::from("{");
            for i in 0..count {
                let v = read_uint(bytes, i * el, el, ctx.meta.info.big_endian)?;
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "0x{v:x}");
            }
            out.push('}');
            Some(Val::Str(std::borrow::Cow::Owned(out)))
        }
        _ => None,
    }
}

/// One `%` directive of a format.
#[derive(Debug, Default)]
struct Spec {
    minus: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
    /// `l` count, or -1 for `h`, -2 for `hh`.
    length: i8,
    conv: u8,
    /// The letters after `%p` (`S`, `s`, `F`...).
    ptr_ext: String,
}

/// Parses a directive after its `%`: the spec and how many bytes it took (`*` widths read by `star`).
fn directive(b: &[u8], star: &mut dyn FnMut() -> Option<i64>) -> Option<(Spec, usize)> {
    let mut s = Spec::default();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'-' => s.minus = true,
            b'+' => s.plus = true,
            b' ' => s.space = true,
            b'#' => s.alt = true,
            b'0' => s.zero = true,
            _ => break,
        }
        i += 1;
    }
    if b.get(i) == Some(&b'*') {
        let w = star()?;
        if w < 0 {
            s.minus = true;
        }
        s.width = Some(w.unsigned_abs() as usize);
        i += 1;
    } else {
        let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            s.width = std::str::from_utf8(&b[i..i + n]).ok()?.parse().ok();
            i += n;
        }
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if b.get(i) == Some(&b'*') {
            s.precision = Some(star()?.max(0) as usize);
            i += 1;
        } else {
            let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            s.precision = Some(std::str::from_utf8(&b[i..i + n]).ok()?.parse().unwrap_or(0));
            i += n;
        }
    }
    loop {
        match b.get(i)? {
            b'l' | b'L' | b'q' => s.length = s.length.max(0) + 1,
            b'h' => s.length = if s.length == -1 { -2 } else { -1 },
            b'z' | b'Z' | b't' | b'j' => s.length = 1,
            _ => break,
        }
        i += 1;
    }
    s.conv = *b.get(i)?;
    i += 1;
    if s.conv == b'p' {
        let n = b[i..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        // Only the extensions libtraceevent reads; other letters are text after a plain `%p`.
        let ext = std::str::from_utf8(&b[i..i + n]).ok()?;
        let ext = ["SR", "sR", "S", "s", "F", "f", "B", "K", "x"]
            .iter()
            .find(|e| ext.starts_with(**e))
            .copied()
            .unwrap_or("");
        s.ptr_ext = ext.to_string();
        i += ext.len();
    }
    Some((s, i))
}

/// Pads `body` (its sign and prefix in `prefix`) to the spec's width.
fn pad(out: &mut String, s: &Spec, prefix: &str, body: &str, numeric: bool) {
    let len = prefix.chars().count() + body.chars().count();
    let w = s.width.unwrap_or(0);
    if len >= w {
        out.push_str(prefix);
        out.push_str(body);
    } else if s.minus {
        out.push_str(prefix);
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', w - len));
    } else if s.zero && numeric && s.precision.is_none() {
        out.push_str(prefix);
        out.extend(std::iter::repeat_n('0', w - len));
        out.push_str(body);
    } else {
        out.extend(std::iter::repeat_n(' ', w - len));
        out.push_str(prefix);
        out.push_str(body);
    }
}

/// An integer of a directive, truncated to its length's size (`long` of the target's size).
fn sized(v: i64, s: &Spec, long_size: u8, signed: bool) -> i128 {
    let bytes = match s.length {
        -2 => 1,
        -1 => 2,
        0 => 4,
        1 => u32::from(long_size),
        _ => 8,
    };
    let raw = v as u64;
    let masked = if bytes >= 8 {
        raw
    } else {
        raw & ((1u64 << (8 * bytes)) - 1)
    };
    if signed {
        i128::from(sign_extend(masked, bytes as usize))
    } else {
        i128::from(masked)
    }
}

/// Applies C format `fmt` to `args`; `false` when an argument is missing or of the wrong kind.
fn printf<'a>(
    fmt: &str,
    args: &mut dyn Iterator<Item = Val<'a>>,
    ctx: &Ctx<'_>,
    out: &mut String,
) -> bool {
    let b = fmt.as_bytes();
    let long_size = ctx.meta.info.long_size;
    let mut i = 0;
    let mut lit = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        out.push_str(&fmt[lit..i]);
        if b.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            lit = i;
            continue;
        }
        let mut star = || args.next().and_then(|v| v.int());
        let Some((spec, n)) = directive(&b[i + 1..], &mut star) else {
            return false;
        };
        i += 1 + n;
        lit = i;
        let Some(v) = args.next() else {
            return false;
        };
        if !directive_out(&spec, v, long_size, ctx, out) {
            return false;
        }
    }
    out.push_str(&fmt[lit..]);
    true
}

fn directive_out(spec: &Spec, v: Val<'_>, long_size: u8, ctx: &Ctx<'_>, out: &mut String) -> bool {
    match spec.conv {
        b'd' | b'i' => {
            let Some(x) = v.int() else { return false };
            let x = sized(x, spec, long_size, true);
            let mut digits = x.unsigned_abs().to_string();
            if let Some(p) = spec.precision
                && digits.len() < p
            {
                digits = format!("{}{digits}", "0".repeat(p - digits.len()));
            }
            let sign = if x < 0 {
                "-"
            } else if spec.plus {
                "+"
            } else if spec.space {
                " "
            } else {
                ""
            };
            pad(out, spec, sign, &digits, true);
        }
        b'u' | b'x' | b'X' | b'o' => {
            let Some(x) = v.int() else { return false };
            let x = sized(x, spec, long_size, false) as u128;
            let mut digits = match spec.conv {
                b'u' => x.to_string(),
                b'x' => format!("{x:x}"),
                b'X' => format!("{x:X}"),
                _ => format!("{x:o}"),
            };
            if let Some(p) = spec.precision
                && digits.len() < p
            {
                digits = format!("{}{digits}", "0".repeat(p - digits.len()));
            }
            let prefix = match (spec.alt && x != 0, spec.conv) {
                (true, b'x') => "0x",
                (true, b'X') => "0X",
                (true, b'o') => "0",
                _ => "",
            };
            pad(out, spec, prefix, &digits, true);
        }
        b'c' => {
            let Some(x) = v.int() else { return false };
            let c = char::from(x as u8);
            pad(out, spec, "", c.encode_utf8(&mut [0; 4]), false);
        }
        b's' => {
            let s: std::borrow::Cow<'_, str> = match &v {
                Val::Str(s) => s.clone(),
                Val::Arr(FieldValue::Array { bytes, .. }) => {
                    String::from_utf8_lossy(super::until_nul(bytes))
                }
                Val::Int(_) | Val::Uint(_) | Val::Arr(_) => return false,
            };
            let s = match spec.precision {
                Some(p) => s.chars().take(p).collect::<String>().into(),
                None => s,
            };
            pad(out, spec, "", &s, false);
        }
        b'p' => {
            let Some(x) = v.int() else { return false };
            let x = sized(
                x,
                &Spec {
                    length: 1,
                    ..Spec::default()
                },
                long_size,
                false,
            ) as u64;
            let text = match spec.ptr_ext.as_str() {
                "S" | "SR" | "F" | "B" => match ctx.meta.kallsyms.lookup(x) {
                    Some((name, off)) => format!("{name}+0x{off:x}"),
                    None => format!("0x{x:x}"),
                },
                "s" | "sR" | "f" => match ctx.meta.kallsyms.lookup(x) {
                    Some((name, _)) => name.to_string(),
                    None => format!("0x{x:x}"),
                },
                _ if x == 0 => "(nil)".to_string(),
                _ => format!("0x{x:x}"),
            };
            pad(out, spec, "", &text, false);
        }
        _ => return false,
    }
    true
}

/// `bprint`: `%ps: ` of its `ip`, then its trace_printk format applied to the arguments packed in `buf`.
pub(crate) fn bprint(ctx: &Ctx<'_>, out: &mut String) -> bool {
    let big = ctx.meta.info.big_endian;
    let field = |n: &str| {
        ctx.format
            .field(n)
            .and_then(|f| field_value(ctx.data, f, big))
    };
    let (Some(ip), Some(fmt_addr), Some(FieldValue::Array { bytes: buf, .. })) =
        (field("ip"), field("fmt"), field("buf"))
    else {
        return false;
    };
    let Some(fmt) = ctx.meta.printk.get(&fmt_addr.as_u64()) else {
        return false;
    };
    let start = out.len();
    match ctx.meta.kallsyms.lookup(ip.as_u64()) {
        Some((name, _)) => out.push_str(name),
        None => {
            let _ = write!(out, "0x{:x}", ip.as_u64());
        }
    }
    out.push_str(": ");
    let Some(args) = vbin_args(fmt, buf, ctx) else {
        out.truncate(start);
        return false;
    };
    if !printf(fmt, &mut args.into_iter(), ctx, out) {
        out.truncate(start);
        return false;
    }
    while out.len() > start && out.ends_with('\n') {
        out.pop();
    }
    true
}

/// The arguments of format `fmt` as the kernel's `vbin_printf` packed them in `buf`: each integer at
/// its size's alignment (4 at most), strings inline and NUL-terminated.
fn vbin_args<'a>(fmt: &str, buf: &'a [u8], ctx: &Ctx<'_>) -> Option<Vec<Val<'a>>> {
    let big = ctx.meta.info.big_endian;
    let long_size = usize::from(ctx.meta.info.long_size);
    let b = fmt.as_bytes();
    let mut at = 0usize;
    let mut vals = Vec::new();
    let int = |at: &mut usize, size: usize, signed: bool| -> Option<Val<'a>> {
        // The kernel's `save_arg` aligns 8-byte values to 4 bytes only.
        let align = size.min(4);
        *at = (*at + align - 1) & !(align - 1);
        let v = read_uint(buf, *at, size, big)?;
        *at += size;
        Some(if signed {
            Val::Int(sign_extend(v, size))
        } else {
            Val::Uint(v)
        })
    };
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        // `*` widths are ints packed before the value.
        let mut stars = Vec::new();
        let mut star = || {
            let v = int(&mut at, 4, true)?;
            stars.push(v.clone());
            v.int()
        };
        let (spec, n) = directive(&b[i + 1..], &mut star)?;
        vals.append(&mut stars);
        i += 1 + n;
        let v = match spec.conv {
            b's' => {
                let rest = buf.get(at..)?;
                let s = super::until_nul(rest);
                at += s.len() + 1;
                Val::Str(String::from_utf8_lossy(s))
            }
            b'p' => int(&mut at, long_size, false)?,
            conv => {
                let size = match spec.length {
                    -2 => 1,
                    -1 => 2,
                    0 => 4,
                    1 => long_size,
                    _ => 8,
                };
                let size = if conv == b'c' { 1 } else { size };
                int(&mut at, size, matches!(conv, b'd' | b'i'))?
            }
        };
        vals.push(v);
    }
    Some(vals)
}

/// The return addresses of a `kernel_stack` record (up to its `size` entries, stopping at the end
/// marker).
pub(crate) fn stack_addresses(ctx: &Ctx<'_>) -> Vec<u64> {
    let big = ctx.meta.info.big_endian;
    let count = ctx
        .format
        .field("size")
        .and_then(|f| field_value(ctx.data, f, big))
        .map(|v| v.as_u64());
    let Some(FieldValue::Array { bytes, .. }) = ctx
        .format
        .field("caller")
        .and_then(|f| field_value(ctx.data, f, big))
    else {
        return Vec::new();
    };
    let ls = usize::from(ctx.meta.info.long_size);
    let end_marker = if ls == 4 {
        u64::from(u32::MAX)
    } else {
        u64::MAX
    };
    let mut out = Vec::new();
    for i in 0..bytes.len() / ls {
        if count.is_some_and(|c| i as u64 >= c) {
            break;
        }
        let Some(a) = read_uint(bytes, i * ls, ls, big) else {
            break;
        };
        if a == end_marker || a == 0 {
            break;
        }
        out.push(a);
    }
    out
}

/// A `kernel_stack` record as `trace-cmd report` prints it: `<stack trace >` and one `=> func (addr)`
/// line per return address.
pub(crate) fn kernel_stack(ctx: &Ctx<'_>, out: &mut String) {
    out.push_str("<stack trace >");
    for a in stack_addresses(ctx) {
        out.push_str("\n=> ");
        match ctx.meta.kallsyms.lookup(a) {
            Some((name, _)) => out.push_str(name),
            None => {
                let _ = write!(out, "0x{a:x}");
            }
        }
        let _ = write!(out, " ({a:x})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_switch_print_fmt_parses() {
        let p = PrintFmt::parse(r#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->prev_state & (2048-1) ? __print_flags(REC->prev_state & (2048-1), "|", { 1, "S"} , { 2, "D" }, { 4, "T" }, { 8, "t" }, { 16, "Z" }, { 32, "X" }, { 64, "x" }, { 128, "K" }, { 256, "W" }, { 512, "P" }, { 1024, "N" }) : "R", REC->prev_state & 2048 ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#).unwrap();
        assert_eq!(p.args.len(), 8);
        let p = PrintFmt::parse(r#""\t=> (" "%016lx" ")\n", REC->caller[0]"#).unwrap();
        assert_eq!(p.format, "\t=> (%016lx)\n");
        let p = PrintFmt::parse(r#""%ps: %s", (void *)REC->ip, REC->buf"#).unwrap();
        assert!(matches!(p.args[0], Expr::Cast(Cast::Pointer, _)));
        let p =
            PrintFmt::parse(r#""%lx %d", (unsigned long)REC->phys, (int)(REC->a - 1)"#).unwrap();
        assert!(matches!(
            p.args[1],
            Expr::Cast(
                Cast::Int {
                    bytes: 4,
                    signed: true
                },
                _
            )
        ));
        assert!(PrintFmt::parse(r#""%d", REC->a ? "#).is_err());
    }

    #[test]
    fn directives() {
        let mut none = || None;
        let (s, n) = directive(b"-08.3llx rest", &mut none).unwrap();
        assert_eq!(
            (s.minus, s.zero, s.width, s.precision, s.length, s.conv, n),
            (true, true, Some(8), Some(3), 2, b'x', 8)
        );
        let (s, n) = directive(b"pS end", &mut none).unwrap();
        assert_eq!((s.conv, s.ptr_ext.as_str(), n), (b'p', "S", 2));
        let (s, n) = directive(b"pxyz", &mut none).unwrap();
        assert_eq!((s.ptr_ext.as_str(), n), ("x", 2));
    }
}
