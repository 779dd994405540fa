//! Pajé (socscope, PajeNG, ViTE): the producer hierarchy as containers (one container type per level),
//! states as Push/Pop, events, variables and links with their type as value, so that importing the
//! file back gives the same events per type. States and events that carry their Pajé type
//! ([`PAJE_TYPE`]) are written under it (a state type's stack then gives back their nesting), and links
//! under their own type with the value and key they were read with: `pj_dump` reads the export of an
//! imported Pajé file as it reads the source.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io::Write;

use super::{EventView, ExportError, Index, Kind, Time, TraceView, Value};

/// The parameter in which an import keeps a state's or an event's Pajé type (the Pajé importer of
/// `socscope-collector` writes it): states and events that have it are written under that type.
pub const PAJE_TYPE: &str = "paje_type";

/// `ns` as Pajé seconds.
pub fn time(ns: Time) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace(['"', '\n', '\r'], "'"))
}

const HEADER: &str = "\
%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineStateType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineEventType 2\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineVariableType 3\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineLinkType 4\n% Alias string\n% Type string\n% StartContainerType string\n% EndContainerType string\n% Name string\n%EndEventDef
%EventDef PajeCreateContainer 5\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef
%EventDef PajePushState 6\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajePopState 7\n% Time date\n% Type string\n% Container string\n%EndEventDef
%EventDef PajeNewEvent 8\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajeSetVariable 9\n% Time date\n% Type string\n% Container string\n% Value double\n%EndEventDef
%EventDef PajeStartLink 10\n% Time date\n% Type string\n% Container string\n% StartContainer string\n% Value string\n% Key string\n%EndEventDef
%EventDef PajeEndLink 11\n% Time date\n% Type string\n% Container string\n% EndContainer string\n% Value string\n% Key string\n%EndEventDef
";

/// Writes `view` to `out`; the number of events written.
pub fn write(view: &dyn TraceView, out: &mut dyn Write) -> Result<u64, ExportError> {
    let index = Index::new(view);
    writeln!(out, "# socscope export of {}", view.source())?;
    out.write_all(HEADER.as_bytes())?;
    let t0 = view.t_min();
    let mut producers: Vec<_> = view.producers().iter().collect();
    producers.sort_by_key(|p| (index.depth(p.id), p.id));
    let mut levels = 0;
    for p in &producers {
        let d = index.depth(p.id);
        while levels <= d {
            let parent = if levels == 0 {
                "0".to_string()
            } else {
                format!("L{}", levels - 1)
            };
            writeln!(
                out,
                "0 L{levels} {parent} {}",
                quoted(&format!("level {levels}"))
            )?;
            levels += 1;
        }
        let parent = index
            .parent(p.id)
            .map_or_else(|| "0".to_string(), |q| format!("p{q}"));
        writeln!(
            out,
            "5 {} p{} L{d} {parent} {}",
            time(t0),
            p.id,
            quoted(&p.name)
        )?;
    }
    let mut w = Writer {
        index: &index,
        declared: HashSet::new(),
        pending: BinaryHeap::new(),
        seq: 0,
        key: 0,
    };
    // Events of one time, held to be written outermost state first (a store may give nested states
    // of the same start in any order; a stack must see them pushed in order).
    let mut same_time: Vec<EventView> = Vec::new();
    let n = view.for_each_event(&mut |e: &EventView| {
        if same_time.first().is_some_and(|f| f.ts != e.ts) {
            w.flush(&mut same_time, out)?;
        }
        same_time.push(e.clone());
        Ok(())
    })?;
    w.flush(&mut same_time, out)?;
    while let Some(Reverse((_, _, _, line))) = w.pending.pop() {
        writeln!(out, "{line}")?;
    }
    Ok(n)
}

/// The string value of parameter `name` of `e`, if its type has it.
fn param<'e>(index: &Index<'_>, e: &'e EventView, name: &str) -> Option<&'e str> {
    let i = index
        .param_names(e.type_id)
        .iter()
        .position(|p| p == name)?;
    match e.params.get(i)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// What the event loop keeps.
struct Writer<'i, 'v> {
    index: &'i Index<'v>,
    declared: HashSet<String>,
    /// Ends to write once the events before them are out: (time, inner first, order, line).
    pending: BinaryHeap<Reverse<(Time, u32, u64, String)>>,
    seq: u64,
    key: u64,
}

impl Writer<'_, '_> {
    /// Writes `line` the first time `alias` is seen; `alias`.
    fn declare(
        &mut self,
        out: &mut dyn Write,
        alias: String,
        line: impl FnOnce() -> String,
    ) -> Result<String, ExportError> {
        if self.declared.insert(alias.clone()) {
            writeln!(out, "{}", line())?;
        }
        Ok(alias)
    }

    /// Writes the events of one time (and the ends due before it).
    fn flush(
        &mut self,
        events: &mut Vec<EventView>,
        out: &mut dyn Write,
    ) -> Result<(), ExportError> {
        let Some(ts) = events.first().map(|e| e.ts) else {
            return Ok(());
        };
        while let Some(Reverse((t, _, _, _))) = self.pending.peek() {
            if *t > ts {
                break;
            }
            if let Some(Reverse((_, _, _, line))) = self.pending.pop() {
                writeln!(out, "{line}")?;
            }
        }
        events.sort_by_key(|e| match e.kind {
            Kind::State { depth, .. } => depth,
            _ => 0,
        });
        for e in events.drain(..) {
            self.event(&e, out)?;
        }
        Ok(())
    }

    fn event(&mut self, e: &EventView, out: &mut dyn Write) -> Result<(), ExportError> {
        let index = self.index;
        let level = index.depth(e.producer);
        let c = format!("p{}", e.producer);
        let type_name = index.type_name(e.type_id);
        let value = quoted(&type_name);
        let at = time(e.ts);
        let paje_type = param(index, e, PAJE_TYPE);
        match e.kind {
            Kind::State { end, depth } => {
                // A Pajé state type of the import: one stack, its depth the imbrication. Otherwise
                // one state type per depth (states of different types may share a depth).
                let ty = match paje_type {
                    Some(name) => {
                        let a = format!("L{level}S{}", alias_of(name));
                        self.declare(out, a.clone(), || {
                            format!("1 {a} L{level} {}", quoted(name))
                        })?
                    }
                    None => {
                        let a = format!("L{level}s{depth}");
                        self.declare(out, a.clone(), || {
                            format!("1 {a} L{level} {}", quoted(&format!("depth {depth}")))
                        })?
                    }
                };
                writeln!(out, "6 {at} {ty} {c} {value}")?;
                self.seq += 1;
                self.pending.push(Reverse((
                    end,
                    u32::from(u16::MAX - depth),
                    self.seq,
                    format!("7 {} {ty} {c}", time(end)),
                )));
            }
            Kind::Punctual => {
                let name = paje_type.unwrap_or("event");
                let a = format!("L{level}E{}", alias_of(name));
                let ty = self.declare(out, a.clone(), || {
                    format!("2 {a} L{level} {}", quoted(name))
                })?;
                writeln!(out, "8 {at} {ty} {c} {value}")?;
            }
            Kind::Variable { value: v } => {
                let a = format!("L{level}v{}", e.type_id);
                let ty = self.declare(out, a.clone(), || format!("3 {a} L{level} {value}"))?;
                writeln!(out, "9 {at} {ty} {c} {v}")?;
            }
            Kind::Link { end, target } => {
                // One Pajé link type per stored link type (and pair of container levels), its value
                // and key those the import kept, if any.
                let tl = index.depth(target);
                let a = format!("link{level}_{tl}_{}", e.type_id);
                let ty =
                    self.declare(out, a.clone(), || format!("4 {a} 0 L{level} L{tl} {value}"))?;
                let v = param(index, e, "value").map_or_else(|| value.clone(), quoted);
                self.key += 1;
                let key = param(index, e, "key")
                    .filter(|k| !k.is_empty())
                    .map_or_else(|| format!("k{}", self.key), quoted);
                writeln!(out, "10 {at} {ty} 0 {c} {v} {key}")?;
                self.seq += 1;
                self.pending.push(Reverse((
                    end,
                    0,
                    self.seq,
                    format!("11 {} {ty} 0 p{target} {v} {key}", time(end)),
                )));
            }
        }
        Ok(())
    }
}

/// A Pajé alias from a type name: its characters that need no quoting, and a hash of the name (two
/// names never share an alias by accident of their spelling).
fn alias_of(name: &str) -> String {
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(24)
        .collect();
    // FNV-1a: stable across runs and platforms.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{clean}_{:08x}", hash & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(time(-1_500_000_000), "-1.500000000");
    }
}
