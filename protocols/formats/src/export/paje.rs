//! Pajé (socscope, PajeNG, ViTE): the producer hierarchy as containers (one container type per level),
//! states as Push/Pop on one state type per nesting depth, events, variables and links with their type
//! as value, so that importing the file back gives the same events per type.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io::Write;

use super::{EventView, ExportError, Index, Kind, Time, TraceView};

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
    let mut declared: HashSet<String> = HashSet::new();
    // Ends to write once the events before them are out: (time, order, line).
    let mut pending: BinaryHeap<Reverse<(Time, u64, String)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut key = 0u64;
    let n = view.for_each_event(&mut |e: &EventView| {
        while let Some(Reverse((t, _, _))) = pending.peek() {
            if *t > e.ts {
                break;
            }
            if let Some(Reverse((_, _, line))) = pending.pop() {
                writeln!(out, "{line}")?;
            }
        }
        let level = index.depth(e.producer);
        let c = format!("p{}", e.producer);
        let value = quoted(&index.type_name(e.type_id));
        let at = time(e.ts);
        let mut declare =
            |out: &mut dyn Write, alias: String, line: String| -> Result<String, ExportError> {
                if declared.insert(alias.clone()) {
                    writeln!(out, "{line}")?;
                }
                Ok(alias)
            };
        match e.kind {
            Kind::State { end, depth } => {
                let a = format!("L{level}s{depth}");
                let ty = declare(
                    out,
                    a.clone(),
                    format!("1 {a} L{level} {}", quoted(&format!("depth {depth}"))),
                )?;
                writeln!(out, "6 {at} {ty} {c} {value}")?;
                seq += 1;
                pending.push(Reverse((end, seq, format!("7 {} {ty} {c}", time(end)))));
            }
            Kind::Punctual => {
                let a = format!("L{level}e");
                let ty = declare(out, a.clone(), format!("2 {a} L{level} \"event\""))?;
                writeln!(out, "8 {at} {ty} {c} {value}")?;
            }
            Kind::Variable { value: v } => {
                let a = format!("L{level}v{}", e.type_id);
                let ty = declare(out, a.clone(), format!("3 {a} L{level} {value}"))?;
                writeln!(out, "9 {at} {ty} {c} {v}")?;
            }
            Kind::Link { end, target } => {
                let tl = index.depth(target);
                let a = format!("link{level}_{tl}");
                let ty = declare(
                    out,
                    a.clone(),
                    format!("4 {a} 0 L{level} L{tl} {}", quoted(&a)),
                )?;
                key += 1;
                writeln!(out, "10 {at} {ty} 0 {c} {value} k{key}")?;
                seq += 1;
                pending.push(Reverse((
                    end,
                    seq,
                    format!("11 {} {ty} 0 p{target} {value} k{key}", time(end)),
                )));
            }
        }
        Ok(())
    })?;
    while let Some(Reverse((_, _, line))) = pending.pop() {
        writeln!(out, "{line}")?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(time(-1_500_000_000), "-1.500000000");
    }
}
