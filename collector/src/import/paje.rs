//! Pajé: containers become producers, and states, events, variables and links are explicit, so they are
//! stored directly (no reconstruction).
//!
//! Types: a state or an event is stored under its value's name (`Executing`), with the Pajé type it
//! belongs to (`Thread State`) in its `paje_type` parameter; each Pajé state type of a container keeps
//! its own stack, so its depth is its own nesting. A link is stored under its Pajé link type's name,
//! with its value and key as parameters. A variable is stored under its Pajé type's name. That is what
//! the Pajé exporter needs to write the file back with the same types (`pj_dump` agrees).

/// The parameter carrying a state's or event's Pajé type.
use socscope_formats::export::ContainerTypeView;
use socscope_formats::export::paje::{
    CONTAINER_TYPES, CONTAINERS, PAJE_TYPE, encode_container_types, encode_containers,
};

use std::collections::HashMap;
use std::path::Path;

use socscope_formats::paje;
use socscope_tracedb::{
    Event, EventCategory, EventKind, IngestStat, ParamDef, ParamType, ParamValue, Producer,
    ProducerId, ProducerKind, TraceWriter, TypeId,
};

use super::dictionary::StoreTypes;
use super::{Lines, display, open, stat};
use crate::Result;

/// Imports the Pajé file `path`.
pub(super) fn run(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    let mut reader = paje::PajeReader::new(open(path)?, display(path));
    let mut importer = PajeImporter::new();
    loop {
        let bytes = reader.bytes();
        let r = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        lines.progress(bytes);
        importer.record(&r, writer)?;
    }
    lines.bytes = reader.bytes();
    importer.finish(writer)
}

/// What a Pajé import keeps from line to line.
struct PajeImporter {
    /// Pajé type alias or name → (kind, name).
    ptypes: HashMap<String, (paje::Kind, String)>,
    /// (type, value alias or name) → value name.
    values: HashMap<(String, String), String>,
    /// Containers by name; `aliases` by alias, looked up first (a name may be another's alias).
    containers: HashMap<String, ProducerId>,
    aliases: HashMap<String, ProducerId>,
    next_producer: ProducerId,
    store: StoreTypes,
    /// Open states per (container, Pajé state type): (start, store type), outermost first.
    stacks: HashMap<(ProducerId, String), Vec<(i64, TypeId)>>,
    vars: HashMap<(ProducerId, TypeId), f64>,
    /// (link type, key) → (time, container, value) of whichever end came first.
    start_links: HashMap<(String, String), (i64, ProducerId, String)>,
    end_links: HashMap<(String, String), (i64, ProducerId, String)>,
    last_ts: i64,
    colours: Vec<(String, String)>,
    unmatched_links: u64,
    unknown_containers: u64,
    unknown_kinds: u64,
    bad_times: u64,
    /// The container types, in definition order (parents first), kept for the export.
    container_types: Vec<ContainerTypeView>,
    /// A container type's alias by its alias or name.
    container_type_alias: HashMap<String, String>,
    /// Each container's type alias.
    container_of: Vec<(u32, String)>,
}

fn paje_type_def() -> ParamDef {
    ParamDef::new(PAJE_TYPE, ParamType::String)
}

/// A state from `start` to `end` (at least `start`) of Pajé type `paje_type`.
fn state(start: i64, end: i64, depth: usize, ty: TypeId, c: ProducerId, paje_type: &str) -> Event {
    let mut e = Event::state(
        start,
        end.max(start),
        u16::try_from(depth).unwrap_or(u16::MAX),
        ty,
        c,
        None,
    );
    e.params.push(ParamValue::String(paje_type.to_string()));
    e
}

/// The fields of a record, `""` for those it lacks.
fn field<'a>(r: &paje::Record<'a>, k: &str) -> &'a str {
    r.get(k).unwrap_or("")
}

impl PajeImporter {
    fn new() -> Self {
        Self {
            ptypes: HashMap::new(),
            values: HashMap::new(),
            containers: HashMap::new(),
            aliases: HashMap::new(),
            next_producer: 1,
            store: StoreTypes::new(),
            stacks: HashMap::new(),
            vars: HashMap::new(),
            start_links: HashMap::new(),
            end_links: HashMap::new(),
            last_ts: i64::MIN,
            colours: Vec::new(),
            unmatched_links: 0,
            unknown_containers: 0,
            unknown_kinds: 0,
            bad_times: 0,
            container_types: Vec::new(),
            container_type_alias: HashMap::new(),
            container_of: Vec::new(),
        }
    }

    /// One event line, handed to the method of its kind (timed ones only when their time is a number).
    fn record(&mut self, r: &paje::Record<'_>, writer: &mut TraceWriter) -> Result<()> {
        use paje::Kind as K;
        let timed = !matches!(
            r.def.kind,
            K::DefineContainerType
                | K::DefineStateType
                | K::DefineEventType
                | K::DefineVariableType
                | K::DefineLinkType
                | K::DefineEntityValue
                | K::Other
        );
        let t = match r.time_ns() {
            Some(t) if timed => {
                self.last_ts = self.last_ts.max(t);
                t
            }
            None if timed => {
                self.bad_times += 1;
                return Ok(());
            }
            _ => 0,
        };
        match r.def.kind {
            K::DefineContainerType
            | K::DefineStateType
            | K::DefineEventType
            | K::DefineVariableType
            | K::DefineLinkType => self.define_type(r),
            K::DefineEntityValue => self.define_value(r),
            K::CreateContainer => self.create_container(r, writer)?,
            K::DestroyContainer => self.destroy_container(r, t, writer)?,
            K::SetState | K::PushState | K::PopState | K::ResetState => {
                self.state(r, t, writer)?;
            }
            K::NewEvent => self.event(r, t, writer)?,
            K::SetVariable | K::AddVariable | K::SubVariable => self.variable(r, t, writer)?,
            K::StartLink | K::EndLink => self.link(r, t, writer)?,
            K::Other => self.unknown_kinds += 1,
        }
        Ok(())
    }

    /// The container of alias or name `key`.
    fn lookup(&self, key: &str) -> Option<ProducerId> {
        self.aliases
            .get(key)
            .or_else(|| self.containers.get(key))
            .copied()
    }

    /// The container of alias or name `key`, counted as unknown when there is none.
    fn container(&mut self, key: &str) -> Option<ProducerId> {
        let c = self.lookup(key);
        if c.is_none() {
            self.unknown_containers += 1;
        }
        c
    }

    /// The name of the value `v` of Pajé type `ty` (its alias resolved).
    fn value_name(&self, ty: &str, v: &str) -> String {
        self.values
            .get(&(ty.to_string(), v.to_string()))
            .cloned()
            .unwrap_or_else(|| v.to_string())
    }

    /// The name of the Pajé type `ty` (its alias resolved).
    fn type_name(&self, ty: &str) -> String {
        self.ptypes
            .get(ty)
            .map_or_else(|| ty.to_string(), |(_, n)| n.clone())
    }

    /// `PajeDefine*Type`.
    fn define_type(&mut self, r: &paje::Record<'_>) {
        let name = r.get("Name").or(r.get("Alias")).unwrap_or("").to_string();
        if r.def.kind == paje::Kind::DefineContainerType {
            let alias = r.get("Alias").unwrap_or(&name).to_string();
            let parent = match field(r, "Type") {
                "0" | "" => None,
                p => Some(
                    self.container_type_alias
                        .get(p)
                        .cloned()
                        .unwrap_or_else(|| p.to_string()),
                ),
            };
            self.container_type_alias
                .insert(alias.clone(), alias.clone());
            self.container_type_alias
                .insert(name.clone(), alias.clone());
            self.container_types.push(ContainerTypeView {
                alias,
                name: name.clone(),
                parent,
            });
        }
        if let Some(a) = r.get("Alias") {
            self.ptypes
                .insert(a.to_string(), (r.def.kind, name.clone()));
        }
        self.ptypes.insert(name.clone(), (r.def.kind, name));
    }

    /// `PajeDefineEntityValue`.
    fn define_value(&mut self, r: &paje::Record<'_>) {
        let ty = field(r, "Type").to_string();
        let name = field(r, "Name").to_string();
        if let Some(a) = r.get("Alias") {
            self.values
                .insert((ty.clone(), a.to_string()), name.clone());
        }
        self.values.insert((ty, name.clone()), name.clone());
        if let Some(c) = r.get("Color") {
            self.colours.push((name, c.to_string()));
        }
    }

    /// `PajeCreateContainer`: a producer, its kind guessed from its container type's name.
    fn create_container(&mut self, r: &paje::Record<'_>, writer: &mut TraceWriter) -> Result<()> {
        let parent = match field(r, "Container") {
            "0" | "" => None,
            p => self.lookup(p),
        };
        let id = self.next_producer;
        self.next_producer += 1;
        let name = r.get("Name").or(r.get("Alias")).unwrap_or("").to_string();
        let kind_name = self.type_name(field(r, "Type")).to_ascii_lowercase();
        let kind = if kind_name.contains("thread") {
            ProducerKind::Thread
        } else if kind_name.contains("process") {
            ProducerKind::Process
        } else if kind_name.contains("cpu") || kind_name.contains("core") {
            ProducerKind::Cpu
        } else {
            ProducerKind::Other
        };
        writer.add_producer(&Producer {
            id,
            parent,
            kind,
            local_id: id as i64,
            name: name.clone(),
        })?;
        if let Some(a) = r.get("Alias") {
            self.aliases.insert(a.to_string(), id);
        }
        self.containers.insert(name, id);
        if let Some(a) = self.container_type_alias.get(field(r, "Type")) {
            self.container_of.push((id, a.clone()));
        }
        Ok(())
    }

    /// `PajeDestroyContainer`: the container's open states end with it.
    fn destroy_container(
        &mut self,
        r: &paje::Record<'_>,
        t: i64,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        let key = match self.lookup(field(r, "Name")) {
            Some(_) => field(r, "Name"),
            None => field(r, "Container"),
        };
        let Some(c) = self.container(key) else {
            return Ok(());
        };
        let mut keys: Vec<(ProducerId, String)> =
            self.stacks.keys().filter(|k| k.0 == c).cloned().collect();
        keys.sort();
        for k in keys {
            let tname = self.type_name(&k.1);
            if let Some(stack) = self.stacks.remove(&k) {
                for (depth, (start, ty)) in stack.into_iter().enumerate().rev() {
                    writer.push(&state(start, t, depth, ty, c, &tname))?;
                }
            }
        }
        Ok(())
    }

    /// `PajeSetState`, `PajePushState`, `PajePopState`, `PajeResetState`.
    fn state(&mut self, r: &paje::Record<'_>, t: i64, writer: &mut TraceWriter) -> Result<()> {
        use paje::Kind as K;
        let Some(c) = self.container(field(r, "Container")) else {
            return Ok(());
        };
        let type_key = field(r, "Type").to_string();
        let key = (c, type_key.clone());
        let tname = self.type_name(&type_key);
        let close =
            |stack: &mut Vec<(i64, TypeId)>, all: bool, writer: &mut TraceWriter| -> Result<()> {
                while let Some((start, ty)) = stack.pop() {
                    let e = state(start, t, stack.len(), ty, c, &tname);
                    writer.push(&e)?;
                    if !all {
                        break;
                    }
                }
                Ok(())
            };
        match r.def.kind {
            K::PopState => close(self.stacks.entry(key).or_default(), false, writer)?,
            K::ResetState => close(self.stacks.entry(key).or_default(), true, writer)?,
            kind => {
                if kind == K::SetState {
                    close(self.stacks.entry(key.clone()).or_default(), true, writer)?;
                }
                let v = self.value_name(&type_key, field(r, "Value"));
                let ty = self
                    .store
                    .id(EventCategory::State, &v, &[paje_type_def()], writer)?;
                self.stacks.entry(key).or_default().push((t, ty));
            }
        }
        Ok(())
    }

    /// `PajeNewEvent`.
    fn event(&mut self, r: &paje::Record<'_>, t: i64, writer: &mut TraceWriter) -> Result<()> {
        let Some(c) = self.container(field(r, "Container")) else {
            return Ok(());
        };
        let v = self.value_name(field(r, "Type"), field(r, "Value"));
        let ty = self
            .store
            .id(EventCategory::Punctual, &v, &[paje_type_def()], writer)?;
        let mut e = Event::punctual(t, ty, c, None);
        e.params
            .push(ParamValue::String(self.type_name(field(r, "Type"))));
        writer.push(&e)?;
        Ok(())
    }

    /// `PajeSetVariable`, `PajeAddVariable`, `PajeSubVariable`.
    fn variable(&mut self, r: &paje::Record<'_>, t: i64, writer: &mut TraceWriter) -> Result<()> {
        use paje::Kind as K;
        let Some(c) = self.container(field(r, "Container")) else {
            return Ok(());
        };
        let name = self.type_name(field(r, "Type"));
        let ty = self.store.id(EventCategory::Variable, &name, &[], writer)?;
        let x: f64 = field(r, "Value").parse().unwrap_or(0.0);
        let slot = self.vars.entry((c, ty)).or_insert(0.0);
        *slot = match r.def.kind {
            K::AddVariable => *slot + x,
            K::SubVariable => *slot - x,
            _ => x,
        };
        writer.push(&Event {
            ts: t,
            type_id: ty,
            producer: c,
            cpu: None,
            kind: EventKind::Variable { value: *slot },
            params: Vec::new(),
        })?;
        Ok(())
    }

    /// `PajeStartLink`, `PajeEndLink`: a link once both ends are read (matched by type and key).
    fn link(&mut self, r: &paje::Record<'_>, t: i64, writer: &mut TraceWriter) -> Result<()> {
        let start = r.def.kind == paje::Kind::StartLink;
        let end_key = if start {
            "StartContainer"
        } else {
            "EndContainer"
        };
        let Some(c) = self.container(field(r, end_key)) else {
            return Ok(());
        };
        let type_key = field(r, "Type").to_string();
        let key = (type_key.clone(), field(r, "Key").to_string());
        // The link's type is its Pajé link type; its value and key are kept as parameters (the value
        // of the end read first when both have one).
        let v = self.value_name(&type_key, field(r, "Value"));
        let ty = self.store.id(
            EventCategory::Link,
            &self.type_name(&type_key),
            &[
                ParamDef::new("value", ParamType::String),
                ParamDef::new("key", ParamType::String),
            ],
            writer,
        )?;
        let link_key = key.1.clone();
        let link = |ts: i64, v: String, producer: ProducerId, end: i64, target: ProducerId| Event {
            ts,
            type_id: ty,
            producer,
            cpu: None,
            kind: EventKind::Link {
                end: end.max(ts),
                target,
            },
            params: vec![ParamValue::String(v), ParamValue::String(link_key.clone())],
        };
        if start {
            match self.end_links.remove(&key) {
                Some((end, target, ev)) => {
                    let v = if v.is_empty() { ev } else { v };
                    writer.push(&link(t, v, c, end, target))?;
                }
                None => {
                    if self.start_links.insert(key, (t, c, v)).is_some() {
                        self.unmatched_links += 1;
                    }
                }
            }
        } else {
            match self.start_links.remove(&key) {
                Some((from, source, sv)) => {
                    let sv = if sv.is_empty() { v } else { sv };
                    writer.push(&link(from, sv, source, t, c))?;
                }
                None => {
                    if self.end_links.insert(key, (t, c, v)).is_some() {
                        self.unmatched_links += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Closes the states still open at the last time; the import's statistics.
    fn finish(mut self, writer: &mut TraceWriter) -> Result<Vec<IngestStat>> {
        let end = self.last_ts.max(0);
        let mut open_states = 0u64;
        let mut keys: Vec<(ProducerId, String)> = self.stacks.keys().cloned().collect();
        keys.sort();
        for k in keys {
            let tname = self.type_name(&k.1);
            if let Some(stack) = self.stacks.remove(&k) {
                for (depth, (start, ty)) in stack.into_iter().enumerate().rev() {
                    open_states += 1;
                    writer.push(&state(start, end, depth, ty, k.0, &tname))?;
                }
            }
        }
        self.unmatched_links += (self.start_links.len() + self.end_links.len()) as u64;
        // The container types and each container's, for an export to write them back.
        if !self.container_types.is_empty() {
            writer.set_param(
                CONTAINER_TYPES,
                &ParamValue::String(encode_container_types(&self.container_types)),
            )?;
            writer.set_param(
                CONTAINERS,
                &ParamValue::String(encode_containers(&self.container_of)),
            )?;
        }
        let mut stats = vec![
            stat(
                "clipped_open_states",
                open_states,
                "states still open at the end, closed at the last time",
            ),
            stat(
                "unmatched_links",
                self.unmatched_links,
                "StartLink or EndLink without its other end (dropped)",
            ),
            stat(
                "unknown_containers",
                self.unknown_containers,
                "events on containers never created (dropped)",
            ),
            stat(
                "unknown_definitions",
                self.unknown_kinds,
                "events of definitions socscope does not interpret",
            ),
            stat(
                "bad_times",
                self.bad_times,
                "events whose Time is not a number (dropped)",
            ),
        ];
        for (name, colour) in self.colours {
            let rgb: Vec<f64> = colour
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let packed = if rgb.len() == 3 {
                rgb.iter().fold(0i64, |acc, c| {
                    (acc << 8) | ((c.clamp(0.0, 1.0) * 255.0).round() as i64)
                })
            } else {
                0
            };
            stats.push(IngestStat {
                name: format!("paje_color.{name}"),
                value: packed,
                description: format!("colour of `{name}` (0xRRGGBB); Pajé gave `{colour}`"),
            });
        }
        Ok(stats)
    }
}
