//! Pajé (socscope, PajeNG, ViTE): the producer hierarchy as containers — of the container types an
//! imported Pajé file had ([`CONTAINER_TYPES`], names and hierarchy kept), else one per level —
//! states as Push/Pop, events, variables and links with their type as value, so that importing the
//! file back gives the same events per type. States and events that carry their Pajé type
//! ([`PAJE_TYPE`]) are written under it (a state type's stack then gives back their nesting), and links
//! under their own type with the value and key they were read with: `pj_dump` reads the export of an
//! imported Pajé file as it reads the source.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;

use super::{ContainerTypeView, EventView, ExportError, Index, Kind, Time, TraceView, Value};

/// The parameter in which an import keeps a state's or an event's Pajé type (the Pajé importer of
/// `socscope-collector` writes it): states and events that have it are written under that type.
pub const PAJE_TYPE: &str = "paje_type";

/// The trace parameter in which a Pajé import keeps the file's container types
/// ([`encode_container_types`]).
pub const CONTAINER_TYPES: &str = "paje.container_types";
/// The trace parameter in which a Pajé import keeps each container's type ([`encode_containers`]).
pub const CONTAINERS: &str = "paje.containers";

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// Container types as text: one `alias TAB parent TAB name` line each (`0` for the root), parents
/// first.
pub fn encode_container_types(types: &[ContainerTypeView]) -> String {
    types
        .iter()
        .map(|t| {
            format!(
                "{}\t{}\t{}\n",
                clean(&t.alias),
                clean(t.parent.as_deref().unwrap_or("0")),
                clean(&t.name)
            )
        })
        .collect()
}

/// [`encode_container_types`] read back (lines that do not have three fields are left out).
pub fn decode_container_types(text: &str) -> Vec<ContainerTypeView> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let (alias, parent, name) = (f.next()?, f.next()?, f.next()?);
            Some(ContainerTypeView {
                alias: alias.to_string(),
                name: name.to_string(),
                parent: (parent != "0").then(|| parent.to_string()),
            })
        })
        .collect()
}

/// Each container's type as text: one `producer id TAB type alias` line each.
pub fn encode_containers(of: &[(u32, String)]) -> String {
    of.iter()
        .map(|(p, a)| format!("{p}\t{}\n", clean(a)))
        .collect()
}

/// [`encode_containers`] read back.
pub fn decode_containers(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let (p, a) = l.split_once('\t')?;
            Some((p.parse().ok()?, a.to_string()))
        })
        .collect()
}

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
    // The container types an imported Pajé file had, when every producer has one of them; else one
    // type per level of the producer tree.
    let kept = view.container_types();
    let known: HashSet<&str> = kept.iter().map(|t| t.alias.as_str()).collect();
    let typed = !kept.is_empty()
        && producers
            .iter()
            .all(|p| view.container_type(p.id).is_some_and(|a| known.contains(a)));
    let mut ctype: HashMap<u32, String> = HashMap::new();
    if typed {
        for t in kept {
            let parent = t
                .parent
                .as_deref()
                .filter(|p| known.contains(p))
                .map_or_else(|| "0".to_string(), |p| format!("T{}", alias_of(p)));
            writeln!(
                out,
                "0 T{} {parent} {}",
                alias_of(&t.alias),
                quoted(&t.name)
            )?;
        }
        for p in &producers {
            let a = view.container_type(p.id).unwrap_or_default();
            ctype.insert(p.id, format!("T{}", alias_of(a)));
        }
    } else {
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
            ctype.insert(p.id, format!("L{d}"));
        }
    }
    for p in &producers {
        let parent = index
            .parent(p.id)
            .map_or_else(|| "0".to_string(), |q| format!("p{q}"));
        writeln!(
            out,
            "5 {} p{} {} {parent} {}",
            time(t0),
            p.id,
            ctype[&p.id],
            quoted(&p.name)
        )?;
    }
    let mut w = Writer {
        index: &index,
        ctype: &ctype,
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
    /// Each producer's container type alias.
    ctype: &'i HashMap<u32, String>,
    declared: HashSet<String>,
    /// Ends to write once the events before them are out: (time, inner first, order, line).
    pending: BinaryHeap<Reverse<(Time, u32, u64, String)>>,
    seq: u64,
    key: u64,
}

impl Writer<'_, '_> {
    /// The container type alias of producer `p`.
    fn type_of(&self, p: u32) -> String {
        self.ctype
            .get(&p)
            .cloned()
            .unwrap_or_else(|| format!("L{}", self.index.depth(p)))
    }

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
        let level = self.type_of(e.producer);
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
                        let a = format!("{level}S{}", alias_of(name));
                        self.declare(out, a.clone(), || format!("1 {a} {level} {}", quoted(name)))?
                    }
                    None => {
                        let a = format!("{level}s{depth}");
                        self.declare(out, a.clone(), || {
                            format!("1 {a} {level} {}", quoted(&format!("depth {depth}")))
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
                let a = format!("{level}E{}", alias_of(name));
                let ty =
                    self.declare(out, a.clone(), || format!("2 {a} {level} {}", quoted(name)))?;
                writeln!(out, "8 {at} {ty} {c} {value}")?;
            }
            Kind::Variable { value: v } => {
                let a = format!("{level}v{}", e.type_id);
                let ty = self.declare(out, a.clone(), || format!("3 {a} {level} {value}"))?;
                writeln!(out, "9 {at} {ty} {c} {v}")?;
            }
            Kind::Link { end, target } => {
                // One Pajé link type per stored link type and its containers' types, its value and
                // key those the import kept, if any; in the nearest container holding both ends (a
                // SimGrid zone), or the root.
                let tl = self.type_of(target);
                let (lc, lt) = match index.common_ancestor(e.producer, target) {
                    Some(a) => (format!("p{a}"), self.type_of(a)),
                    None => ("0".to_string(), "0".to_string()),
                };
                let a = format!("link{lt}_{level}_{tl}_{}", e.type_id);
                let ty = self.declare(out, a.clone(), || {
                    format!("4 {a} {lt} {level} {tl} {value}")
                })?;
                let v = param(index, e, "value").map_or_else(|| value.clone(), quoted);
                self.key += 1;
                let key = param(index, e, "key")
                    .filter(|k| !k.is_empty())
                    .map_or_else(|| format!("k{}", self.key), quoted);
                writeln!(out, "10 {at} {ty} {lc} {c} {v} {key}")?;
                self.seq += 1;
                self.pending.push(Reverse((
                    end,
                    0,
                    self.seq,
                    format!("11 {} {ty} {lc} p{target} {v} {key}", time(end)),
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
