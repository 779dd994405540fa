//! What the importers share: the types of a reconstructing import ([`ImportTypes`]: the built-in
//! dictionary plus one type per unknown event name), the record buffer handed to the [`Reconstructor`]
//! ([`ImportRecord`]), and the store types of the direct importers ([`StoreTypes`]: Pajé, GStreamer).

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use socscope_tracedb::{EventCategory, EventType, ParamDef, ParamValue, TraceWriter, TypeId};
use socscope_wire::decode::{OwnedEventTypeDef, OwnedParamDef};
use socscope_wire::dict::{self as wdict, BUILTINS, Builtin, Category, FIRST_CUSTOM_TYPE};

use crate::Result;
use crate::reconstruct::{RawRecord, Reconstructor, TypeTable, assign_params};

/// The types of an import: the built-in dictionary, adjusted to what text captures carry, plus one
/// custom type per unknown event name.
pub struct ImportTypes {
    types: Vec<Option<OwnedEventTypeDef>>,
    exits: FxHashMap<u16, u16>,
    by_name: FxHashMap<String, u16>,
    next: u16,
}

/// A parameter definition.
pub(crate) fn pinfo(name: &str, ty: wdict::ParamType) -> OwnedParamDef {
    OwnedParamDef {
        name: name.into(),
        ty,
    }
}

impl ImportTypes {
    /// The built-in types, with syscalls and user functions carrying their text captures' extra fields.
    pub fn new() -> Self {
        let mut t = Self {
            types: Vec::new(),
            exits: FxHashMap::default(),
            by_name: FxHashMap::default(),
            next: FIRST_CUSTOM_TYPE,
        };
        use wdict::ParamType::{Address as A, Signed as I, String as S, Unsigned as U};
        for b in BUILTINS {
            let d = b.def();
            let mut params: Vec<OwnedParamDef> =
                d.params.iter().map(|p| pinfo(p.name, p.ty)).collect();
            match b {
                Builtin::SyscallEntry => {
                    params.push(pinfo("name", S));
                    params.push(pinfo("text", S));
                }
                Builtin::UserEntry => {
                    for a in ["a0", "a1", "a2", "a3"] {
                        params.push(pinfo(a, U));
                    }
                }
                Builtin::SyscallExit => {
                    // Text captures name the call at its exit too: what names a state whose entry
                    // preceded the capture.
                    params.push(pinfo("exit_name", S));
                }
                Builtin::UserExit => {
                    params = vec![pinfo("ret", I), pinfo("exit_address", A)];
                }
                _ => {}
            }
            t.insert(OwnedEventTypeDef {
                id: d.id,
                name: d.name.into(),
                category: d.category,
                params,
            });
        }
        t
    }

    fn insert(&mut self, info: OwnedEventTypeDef) {
        let i = usize::from(info.id);
        if self.types.len() <= i {
            self.types.resize(i + 1, None);
        }
        if let Category::StateExit { enter } = info.category {
            self.exits.insert(enter, info.id);
        }
        self.by_name.insert(info.name.clone(), info.id);
        self.types[i] = Some(info);
    }

    /// The id of the custom type `name`, declaring it (and its store type) on first use; `None` when the
    /// id space is exhausted.
    pub fn custom(
        &mut self,
        name: &str,
        category: Category,
        params: impl FnOnce() -> Vec<OwnedParamDef>,
        recon: &mut Reconstructor,
        sink: &mut TraceWriter,
    ) -> Result<Option<u16>> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(Some(id));
        }
        if self.next == u16::MAX {
            return Ok(None);
        }
        let id = self.next;
        self.next += 1;
        self.insert(OwnedEventTypeDef {
            id,
            name: name.into(),
            category,
            params: params(),
        });
        recon.declare_type(id, self, sink)?;
        if let Category::StateExit { enter } = category {
            recon.declare_type(enter, self, sink)?;
        }
        Ok(Some(id))
    }

    /// The id of the type named `name`, once declared.
    pub fn id_of(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    /// How many custom types were declared.
    pub fn custom_count(&self) -> usize {
        usize::from(self.next - FIRST_CUSTOM_TYPE)
    }
}

impl Default for ImportTypes {
    fn default() -> Self {
        Self::new()
    }
}

impl TypeTable for ImportTypes {
    fn get(&self, id: u16) -> Option<&OwnedEventTypeDef> {
        self.types.get(usize::from(id))?.as_ref()
    }
    fn exit_of(&self, enter: u16) -> Option<&OwnedEventTypeDef> {
        self.get(*self.exits.get(&enter)?)
    }
}

/// One record of an importer, reused from line to line.
#[derive(Debug, Default, Clone)]
pub struct ImportRecord {
    /// Type id in the [`ImportTypes`].
    pub type_id: u16,
    /// Values in the type's parameter order.
    pub params: Vec<ParamValue>,
    /// String buffers of earlier records, reused (no allocation per string parameter).
    spare: Vec<String>,
}

impl ImportRecord {
    pub(crate) fn set(&mut self, b: Builtin) -> &mut Self {
        self.set_id(b.id())
    }
    /// Starts a record of type `id` (the previous record's strings kept for reuse).
    pub(crate) fn set_id(&mut self, id: u16) -> &mut Self {
        self.type_id = id;
        for p in self.params.drain(..) {
            if let ParamValue::String(s) = p
                && self.spare.len() < 16
            {
                self.spare.push(s);
            }
        }
        self
    }
    pub(crate) fn u(&mut self, v: u64) -> &mut Self {
        self.params.push(ParamValue::Unsigned(v));
        self
    }
    pub(crate) fn i(&mut self, v: i64) -> &mut Self {
        self.params.push(ParamValue::Signed(v));
        self
    }
    pub(crate) fn a(&mut self, v: u64) -> &mut Self {
        self.params.push(ParamValue::Address(v));
        self
    }
    pub(crate) fn s(&mut self, v: &str) -> &mut Self {
        let mut s = self.spare.pop().unwrap_or_default();
        s.clear();
        s.push_str(v);
        self.params.push(ParamValue::String(s));
        self
    }
}

impl RawRecord for ImportRecord {
    fn type_id(&self) -> u16 {
        self.type_id
    }
    fn param_count(&self) -> usize {
        self.params.len()
    }
    fn param(&self, i: usize) -> Option<ParamValue> {
        self.params.get(i).cloned()
    }
    fn unsigned(&self, i: usize) -> Option<u64> {
        match *self.params.get(i)? {
            ParamValue::Unsigned(v) | ParamValue::Address(v) => Some(v),
            ParamValue::Signed(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
    fn text(&self, i: usize) -> Option<&str> {
        match self.params.get(i)? {
            ParamValue::String(s) => Some(s),
            _ => None,
        }
    }
    fn write_params(&self, out: &mut Vec<ParamValue>, at: usize) {
        assign_params(out, at, &self.params);
    }
}

/// Store types by category and name, declared on first use.
pub(crate) struct StoreTypes {
    ids: HashMap<(EventCategory, String), TypeId>,
    next: TypeId,
}

impl StoreTypes {
    pub(crate) fn new() -> Self {
        Self::starting_at(1)
    }
    /// Types numbered from `first` on (the ids below are the caller's).
    pub(crate) fn starting_at(first: TypeId) -> Self {
        Self {
            ids: HashMap::new(),
            next: first,
        }
    }
    /// The id of the store type `name` of `category`, declared on first use.
    pub(crate) fn id(
        &mut self,
        category: EventCategory,
        name: &str,
        params: &[ParamDef],
        writer: &mut TraceWriter,
    ) -> Result<TypeId> {
        if let Some(&id) = self.ids.get(&(category, name.to_string())) {
            return Ok(id);
        }
        let id = self.next;
        self.next += 1;
        self.ids.insert((category, name.to_string()), id);
        writer.add_event_type(&EventType {
            id,
            name: name.into(),
            category,
            params: params.to_vec(),
        })?;
        Ok(id)
    }
}
