//! Exporters: a trace, seen through the read-only [`TraceView`], written as Chrome trace-event JSON
//! ([`chrome_json`]), Pajé ([`paje`]) or CSV ([`csv`]), event by event (constant memory whatever the
//! trace size, apart from what a format must hold back: Pajé's pending state and link ends).
//!
//! The view is this crate's own description of a trace (types, producers, events), so that the
//! exporters need no store: the caller (the `socscope export` command) adapts its trace reader to it.

pub mod chrome_json;
pub mod csv;
pub mod paje;

use std::collections::HashMap;
use std::fmt;

/// Nanoseconds.
pub type Time = i64;

/// What kind of events a type holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// At one instant.
    Punctual,
    /// From a start to an end, nested by depth.
    State,
    /// From one producer to another.
    Link,
    /// A numeric value from its time on.
    Variable,
}

impl Category {
    /// Lower-case name (`punctual`, `state`, `link`, `variable`).
    pub const fn name(self) -> &'static str {
        match self {
            Category::Punctual => "punctual",
            Category::State => "state",
            Category::Link => "link",
            Category::Variable => "variable",
        }
    }
}

/// An event type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeView {
    /// Its id in the trace.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// What its events are.
    pub category: Category,
    /// Its parameters' names, in the order of the events' values.
    pub params: Vec<String>,
}

/// A producer (process, thread, CPU, container...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerView {
    /// Its id in the trace.
    pub id: u32,
    /// The producer it belongs to.
    pub parent: Option<u32>,
    /// Its name.
    pub name: String,
    /// For the producer of a CPU (`cpu0`...), that CPU's number: its states are the CPU's track.
    pub cpu: Option<u32>,
}

/// A Pajé container type an import kept: its alias, its name and its parent type's alias (`None`: the
/// root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerTypeView {
    /// Its alias.
    pub alias: String,
    /// Its name.
    pub name: String,
    /// Its parent type's alias.
    pub parent: Option<String>,
}

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A signed integer.
    Signed(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// A float.
    Float(f64),
    /// A string.
    String(String),
    /// An address (written in hex).
    Address(u64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Signed(v) => write!(f, "{v}"),
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::String(v) => f.write_str(v),
            Value::Address(v) => write!(f, "{v:#x}"),
        }
    }
}

/// What an event is, beyond its time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// At one instant.
    Punctual,
    /// Until `end`, at nesting `depth` (0 outermost).
    State {
        /// End time.
        end: Time,
        /// Nesting depth.
        depth: u16,
    },
    /// To producer `target`, arriving at `end`.
    Link {
        /// Arrival time.
        end: Time,
        /// The producer it goes to.
        target: u32,
    },
    /// A variable's new value.
    Variable {
        /// The value.
        value: f64,
    },
}

/// One event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventView {
    /// Start time.
    pub ts: Time,
    /// Its type's id.
    pub type_id: u32,
    /// Its producer's id.
    pub producer: u32,
    /// The CPU it happened on, if known.
    pub cpu: Option<u16>,
    /// What it is.
    pub kind: Kind,
    /// Its values, in its type's parameter order.
    pub params: Vec<Value>,
}

impl EventView {
    /// Its end (its time for punctual events and variables).
    pub fn end(&self) -> Time {
        match self.kind {
            Kind::State { end, .. } | Kind::Link { end, .. } => end,
            Kind::Punctual | Kind::Variable { .. } => self.ts,
        }
    }
}

/// What can stop an export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The output could not be written.
    #[error("writing the export: {0}")]
    Write(#[from] std::io::Error),
    /// The trace could not be read.
    #[error("reading the trace: {0}")]
    Read(String),
}

/// A trace, read-only, as the exporters see it.
pub trait TraceView {
    /// What the trace is (a path, for the exports' comments).
    fn source(&self) -> String;
    /// The time of its first event (Pajé containers are created then).
    fn t_min(&self) -> Time;
    /// Its event types.
    fn types(&self) -> &[TypeView];
    /// Its producers.
    fn producers(&self) -> &[ProducerView];
    /// The Pajé container types the trace keeps (those of an imported Pajé file), parents first.
    fn container_types(&self) -> &[ContainerTypeView] {
        &[]
    }
    /// The alias of producer `id`'s container type, when the trace keeps one.
    fn container_type(&self, id: u32) -> Option<&str> {
        let _ = id;
        None
    }
    /// Calls `each` with every event to export, by start time; the number of events.
    fn for_each_event(
        &self,
        each: &mut dyn FnMut(&EventView) -> Result<(), ExportError>,
    ) -> Result<u64, ExportError>;
}

/// The view's types and producers by id, with the producer hierarchy.
pub(crate) struct Index<'v> {
    types: HashMap<u32, &'v TypeView>,
    producers: HashMap<u32, &'v ProducerView>,
    /// Per producer: (root, depth).
    places: HashMap<u32, (u32, usize)>,
}

impl<'v> Index<'v> {
    pub(crate) fn new(view: &'v dyn TraceView) -> Self {
        let mut index = Self {
            types: view.types().iter().map(|t| (t.id, t)).collect(),
            producers: view.producers().iter().map(|p| (p.id, p)).collect(),
            places: HashMap::new(),
        };
        index.places = view
            .producers()
            .iter()
            .map(|p| {
                let up = index.ancestors(p.id);
                (p.id, (up.last().copied().unwrap_or(p.id), up.len()))
            })
            .collect();
        index
    }

    pub(crate) fn type_of(&self, id: u32) -> Option<&'v TypeView> {
        self.types.get(&id).copied()
    }

    pub(crate) fn type_name(&self, id: u32) -> String {
        self.type_of(id)
            .map_or_else(|| format!("type {id}"), |t| t.name.clone())
    }

    pub(crate) fn param_names(&self, id: u32) -> &'v [String] {
        self.type_of(id).map_or(&[], |t| t.params.as_slice())
    }

    pub(crate) fn producer(&self, id: u32) -> Option<&'v ProducerView> {
        self.producers.get(&id).copied()
    }

    pub(crate) fn producer_name(&self, id: u32) -> String {
        self.producer(id)
            .map_or_else(|| format!("producer {id}"), |p| p.name.clone())
    }

    /// The known parent of `id` (a parent the view lacks counts as none, and so does one that would
    /// close a cycle).
    pub(crate) fn parent(&self, id: u32) -> Option<u32> {
        let p = self
            .producer(id)?
            .parent
            .filter(|p| self.producers.contains_key(p))?;
        (!self.ancestors_of(p).contains(&id)).then_some(p)
    }

    /// The ancestors of `id` by raw parents, nearest first, stopping where one repeats.
    fn ancestors_of(&self, id: u32) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        let mut cur = id;
        while let Some(p) = self
            .producer(cur)
            .and_then(|q| q.parent)
            .filter(|p| self.producers.contains_key(p))
        {
            if p == id || out.contains(&p) {
                break;
            }
            out.push(p);
            cur = p;
        }
        out
    }

    /// The ancestors of `id`, nearest first (a cycle is cut where it closes).
    fn ancestors(&self, id: u32) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        let mut cur = id;
        while let Some(p) = self.parent(cur) {
            if p == id || out.contains(&p) {
                break;
            }
            out.push(p);
            cur = p;
        }
        out
    }

    /// The nearest producer that holds both `a` and `b` (each excluded), if any.
    pub(crate) fn common_ancestor(&self, a: u32, b: u32) -> Option<u32> {
        let of_b = self.ancestors(b);
        self.ancestors(a).into_iter().find(|p| of_b.contains(p))
    }

    /// The root of `id`'s hierarchy.
    pub(crate) fn root(&self, id: u32) -> u32 {
        self.places.get(&id).map_or(id, |p| p.0)
    }

    /// How many ancestors `id` has.
    pub(crate) fn depth(&self, id: u32) -> usize {
        self.places.get(&id).map_or(0, |p| p.1)
    }
}
