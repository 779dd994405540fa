//! Pajé: self-defining traces. `%EventDef NAME ID` blocks declare, field by field, what the lines that
//! start with `ID` carry; records are then decoded by those field names, never by position (ids are
//! arbitrary, an id may be defined twice and the later definition wins, fields come in any order).

use std::collections::HashMap;

use nom::bytes::complete::{take_till1, take_while1};
use nom::character::complete::space0;
use nom::{IResult, Parser};

use crate::{FormatError, LineReader, ParseError};

/// The registry's entry: a Pajé file is told by its `%EventDef` header.
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "paje",
    title: "Pajé",
    help: "Pajé trace files (header of `%EventDef` definitions, then events)",
    detection: crate::Detection::Text {
        page: None,
        line: |line| {
            if line.starts_with("%EventDef") || line.starts_with("%\t") || line.starts_with("% ") {
                crate::LineVote::Certain
            } else {
                crate::LineVote::No
            }
        },
    },
};

/// The Pajé event kinds socscope interprets (by definition name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `PajeDefineContainerType`.
    DefineContainerType,
    /// `PajeDefineStateType`.
    DefineStateType,
    /// `PajeDefineEventType`.
    DefineEventType,
    /// `PajeDefineVariableType`.
    DefineVariableType,
    /// `PajeDefineLinkType`.
    DefineLinkType,
    /// `PajeDefineEntityValue`.
    DefineEntityValue,
    /// `PajeCreateContainer`.
    CreateContainer,
    /// `PajeDestroyContainer`.
    DestroyContainer,
    /// `PajeSetState`.
    SetState,
    /// `PajePushState`.
    PushState,
    /// `PajePopState`.
    PopState,
    /// `PajeResetState`.
    ResetState,
    /// `PajeNewEvent`.
    NewEvent,
    /// `PajeSetVariable`.
    SetVariable,
    /// `PajeAddVariable`.
    AddVariable,
    /// `PajeSubVariable`.
    SubVariable,
    /// `PajeStartLink`.
    StartLink,
    /// `PajeEndLink`.
    EndLink,
    /// A definition name socscope does not know.
    Other,
}

impl Kind {
    fn from_name(name: &str) -> Self {
        match name {
            "PajeDefineContainerType" => Kind::DefineContainerType,
            "PajeDefineStateType" => Kind::DefineStateType,
            "PajeDefineEventType" => Kind::DefineEventType,
            "PajeDefineVariableType" => Kind::DefineVariableType,
            "PajeDefineLinkType" => Kind::DefineLinkType,
            "PajeDefineEntityValue" => Kind::DefineEntityValue,
            "PajeCreateContainer" => Kind::CreateContainer,
            "PajeDestroyContainer" => Kind::DestroyContainer,
            "PajeSetState" => Kind::SetState,
            "PajePushState" => Kind::PushState,
            "PajePopState" => Kind::PopState,
            "PajeResetState" => Kind::ResetState,
            "PajeNewEvent" => Kind::NewEvent,
            "PajeSetVariable" => Kind::SetVariable,
            "PajeAddVariable" => Kind::AddVariable,
            "PajeSubVariable" => Kind::SubVariable,
            "PajeStartLink" => Kind::StartLink,
            "PajeEndLink" => Kind::EndLink,
            _ => Kind::Other,
        }
    }
}

/// One `%EventDef` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDef {
    /// The definition's name, e.g. `PajeSetState`.
    pub name: String,
    /// What socscope makes of it.
    pub kind: Kind,
    /// Field names in line order, with their declared types (`date`, `string`, `double`, ...).
    pub fields: Vec<(String, String)>,
}

/// One event line, decoded by its definition.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The definition it follows.
    pub def: &'a EventDef,
    line: &'a str,
    spans: &'a [(usize, usize)],
}

impl<'a> Record<'a> {
    /// The value of the field called `name` (quotes removed), if the definition has it.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        let i = self.def.fields.iter().position(|(n, _)| n == name)?;
        let (s, e) = *self.spans.get(i)?;
        Some(&self.line[s..e])
    }

    /// The `Time` field in nanoseconds (Pajé times are seconds).
    pub fn time_ns(&self) -> Option<i64> {
        let t: f64 = self.get("Time")?.parse().ok()?;
        let ns = (t * 1e9).round();
        (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
    }

    /// Fields the definition declares beyond `known`, as (name, value).
    pub fn extra_fields<'k>(
        &self,
        known: &'k [&'k str],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a, 'k> {
        let line = self.line;
        self.def
            .fields
            .iter()
            .zip(self.spans.iter())
            .filter(move |((n, _), _)| !known.contains(&n.as_str()))
            .map(move |((n, _), (s, e))| (n.as_str(), &line[*s..*e]))
    }
}

fn field(i: &str) -> IResult<&str, (usize, usize)> {
    // Offsets are relative to the field start; the caller rebases them.
    if let Some(rest) = i.strip_prefix('"') {
        let end = rest.find('"').ok_or_else(|| {
            nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Char))
        })?;
        Ok((&rest[end + 1..], (1, 1 + end)))
    } else {
        let (r, w) = take_till1(|c: char| c.is_whitespace()).parse(i)?;
        Ok((r, (0, w.len())))
    }
}

/// Reads a Pajé file line by line, applying its `%EventDef` blocks as they come.
pub struct PajeReader<R> {
    lines: LineReader<R>,
    file: String,
    defs: HashMap<String, EventDef>,
    open: Option<(String, EventDef)>,
    spans: Vec<(usize, usize)>,
}

impl<R: std::io::BufRead> PajeReader<R> {
    /// Reads `inner`, which errors call `file`.
    pub fn new(inner: R, file: impl Into<String>) -> Self {
        let file = file.into();
        Self {
            lines: LineReader::new(inner, file.clone()),
            file,
            defs: HashMap::new(),
            open: None,
            spans: Vec::new(),
        }
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.lines.bytes()
    }

    /// Reads one line and applies it if it is a definition; `Some((line, true))` for an event line.
    fn step(&mut self) -> Result<Option<(u64, bool)>, FormatError> {
        let file = &self.file;
        let Some((line_no, line)) = self.lines.next_line()? else {
            if let Some((id, def)) = self.open.take() {
                // A file cut inside its header: what follows the header is missing.
                let line = format!("%EventDef {} {id}", def.name);
                return Err(ParseError::at(
                    file,
                    self.lines.line_no(),
                    &line,
                    line.len(),
                    "`%EndEventDef` before the end of the file (the file is cut inside its header)",
                )
                .into());
            }
            return Ok(None);
        };
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(Some((line_no, false)));
        }
        if let Some(rest) = t.strip_prefix('%') {
            let rest = rest.trim_start();
            if let Some(def) = rest.strip_prefix("EventDef") {
                let mut words = def.split_whitespace();
                let (Some(name), Some(id)) = (words.next(), words.next()) else {
                    let at = crate::offset_in(line, def);
                    return Err(
                        ParseError::at(file, line_no, line, at, "`%EventDef NAME ID`").into(),
                    );
                };
                self.open = Some((
                    id.to_string(),
                    EventDef {
                        name: name.to_string(),
                        kind: Kind::from_name(name),
                        fields: Vec::new(),
                    },
                ));
            } else if rest.starts_with("EndEventDef") {
                if let Some((id, def)) = self.open.take() {
                    self.defs.insert(id, def);
                }
            } else {
                let mut words = rest.split_whitespace();
                match (&mut self.open, words.next()) {
                    (Some((_, def)), Some(name)) => def.fields.push((
                        name.to_string(),
                        words.next().unwrap_or("string").to_string(),
                    )),
                    _ => {
                        let at = crate::offset_in(line, rest);
                        return Err(ParseError::at(
                            file,
                            line_no,
                            line,
                            at,
                            "a field inside `%EventDef`",
                        )
                        .into());
                    }
                }
            }
            return Ok(Some((line_no, false)));
        }
        Ok(Some((line_no, true)))
    }

    /// The next event line; `Ok(None)` at the end; a [`FormatError::Parse`] for a line that follows no
    /// definition (the reader stays usable).
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, FormatError> {
        let line_no = loop {
            match self.step()? {
                None => return Ok(None),
                Some((n, true)) => break n,
                Some((_, false)) => {}
            }
        };
        let file = &self.file;
        let line = self.lines.current();
        let lead = line.len() - line.trim_start().len();
        let Ok((mut rest, id)) =
            take_while1::<_, &str, nom::error::Error<&str>>(|c: char| !c.is_whitespace())
                .parse(&line[lead..])
        else {
            return Err(ParseError::at(file, line_no, line, lead, "an event id").into());
        };
        let Some(def) = self.defs.get(id) else {
            return Err(ParseError::at(
                file,
                line_no,
                line,
                lead,
                "an event id defined by `%EventDef`",
            )
            .into());
        };
        self.spans.clear();
        for _ in 0..def.fields.len() {
            let (r, _) = space0::<&str, nom::error::Error<&str>>(rest).unwrap_or((rest, ""));
            let base = crate::offset_in(line, r);
            match field(r) {
                Ok((r2, (s, e))) => {
                    self.spans.push((base + s, base + e));
                    rest = r2;
                }
                Err(_) => {
                    return Err(ParseError::at(
                        file,
                        line_no,
                        line,
                        base,
                        "one value per field of the definition",
                    )
                    .into());
                }
            }
        }
        if !rest.trim().is_empty() {
            let at = crate::offset_in(line, rest.trim_start());
            return Err(ParseError::at(
                file,
                line_no,
                line,
                at,
                "the end of the line (more values than fields)",
            )
            .into());
        }
        let record = Record {
            def,
            line,
            spans: &self.spans,
        };
        if let Some(i) = def.fields.iter().position(|(n, _)| n == "Time")
            && record.time_ns().is_none()
        {
            let at = self.spans.get(i).map_or(lead, |s| s.0);
            return Err(ParseError::at(
                file,
                line_no,
                line,
                at,
                "a time in seconds in the `Time` field",
            )
            .into());
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_that_is_no_number_and_a_file_cut_in_its_header_are_errors() {
        let text = "%EventDef PajeNewEvent 11\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef\n\
                    11 abc 18 53 22\n11 1.0 E c v\n%EventDef PajeSetState 10\n% Time date\n";
        let mut r = PajeReader::new(text.as_bytes(), "t.trace");
        let e = r.next_record().unwrap_err().to_string();
        assert!(
            e.starts_with("t.trace:7:4: expected a time in seconds"),
            "{e}"
        );
        assert!(r.next_record().unwrap().is_some());
        let e = r.next_record().unwrap_err().to_string();
        assert!(
            e.contains("t.trace:10:") && e.contains("cut inside its header"),
            "{e}"
        );
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn decodes_by_field_name_and_redefinition_wins() {
        let text = "# comment\n%EventDef PajeSetState 10\n%\tTime date\n% Container string\n%  Type string\n%\tValue string\n%EndEventDef\n\
                    10 1.5 c1 \"my type\" v\n%EventDef\tPajeSetState 10\n% Type string\n% Time date\n% Value string\n% Container string\n% Extra string\n%EndEventDef\n\
                    10 ST 2.0 \"a b\"\tc2 x\n";
        let mut r = PajeReader::new(text.as_bytes(), "t.trace");
        let a = r.next_record().unwrap().unwrap();
        assert_eq!(a.def.kind, Kind::SetState);
        assert_eq!(
            (a.get("Type"), a.get("Container"), a.time_ns()),
            (Some("my type"), Some("c1"), Some(1_500_000_000))
        );
        let b = r.next_record().unwrap().unwrap();
        assert_eq!(
            (b.get("Type"), b.get("Value"), b.get("Container")),
            (Some("ST"), Some("a b"), Some("c2"))
        );
        assert_eq!(
            b.extra_fields(&["Time", "Type", "Container", "Value"])
                .collect::<Vec<_>>(),
            vec![("Extra", "x")]
        );
        assert!(r.next_record().unwrap().is_none());
    }

    #[test]
    fn undefined_id_and_wrong_arity_are_errors_with_columns() {
        let text = "%EventDef PajeNewEvent 3\n% Time date\n%EndEventDef\n  7 1.0\n3 1.0 extra\n";
        let mut r = PajeReader::new(text.as_bytes(), "t");
        let FormatError::Parse(e) = r.next_record().unwrap_err() else {
            panic!()
        };
        assert_eq!((e.line, e.column), (4, 3));
        let FormatError::Parse(e) = r.next_record().unwrap_err() else {
            panic!()
        };
        assert_eq!((e.line, e.column, e.text.as_str()), (5, 7, "extra"));
    }
}
