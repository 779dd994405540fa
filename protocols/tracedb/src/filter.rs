//! Event filters: categories, types, producers, CPUs and parameter conditions
//! (`name op value` combined with AND/OR, RT-427 §4.1.3).

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::model::{Cpu, EventCategory, EventType, ParamValue, ProducerId, TypeId};

/// A comparison operator of a parameter condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    fn holds(self, ord: Ordering) -> bool {
        match self {
            CompareOp::Eq => ord == Ordering::Equal,
            CompareOp::Ne => ord != Ordering::Equal,
            CompareOp::Lt => ord == Ordering::Less,
            CompareOp::Le => ord != Ordering::Greater,
            CompareOp::Gt => ord == Ordering::Greater,
            CompareOp::Ge => ord != Ordering::Less,
        }
    }

    /// Parses `=`, `==`, `!=`, `<>`, `<`, `<=`, `>`, `>=`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "=" | "==" => CompareOp::Eq,
            "!=" | "<>" => CompareOp::Ne,
            "<" => CompareOp::Lt,
            "<=" => CompareOp::Le,
            ">" => CompareOp::Gt,
            ">=" => CompareOp::Ge,
            _ => return None,
        })
    }
}

/// A condition on parameter values: simple `name op value` conditions combined with AND/OR.
///
/// An event whose type has no parameter of that name does not satisfy a simple condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `name op value`.
    Param {
        /// Parameter name (as in the event type's parameter list).
        name: String,
        /// Operator.
        op: CompareOp,
        /// Value to compare with; numbers compare numerically whatever their exact type.
        value: ParamValue,
    },
    /// All must hold (true when empty).
    And(Vec<Condition>),
    /// At least one must hold (false when empty).
    Or(Vec<Condition>),
}

impl Condition {
    /// `name op value`.
    pub fn param(name: impl Into<String>, op: CompareOp, value: ParamValue) -> Self {
        Condition::Param {
            name: name.into(),
            op,
            value,
        }
    }

    /// `self AND other`.
    pub fn and(self, other: Condition) -> Self {
        match self {
            Condition::And(mut v) => {
                v.push(other);
                Condition::And(v)
            }
            c => Condition::And(vec![c, other]),
        }
    }

    /// `self OR other`.
    pub fn or(self, other: Condition) -> Self {
        match self {
            Condition::Or(mut v) => {
                v.push(other);
                Condition::Or(v)
            }
            c => Condition::Or(vec![c, other]),
        }
    }
}

/// Compares two parameter values; `None` when they cannot be compared (text with a number).
pub fn compare_values(a: &ParamValue, b: &ParamValue) -> Option<Ordering> {
    use ParamValue::*;
    match (a, b) {
        (String(x), String(y)) => Some(x.cmp(y)),
        (String(_), _) | (_, String(_)) => None,
        (Float(_), _) | (_, Float(_)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        _ => Some(int_of(a).cmp(&int_of(b))),
    }
}

fn int_of(v: &ParamValue) -> i128 {
    match *v {
        ParamValue::Signed(x) => i128::from(x),
        ParamValue::Unsigned(x) | ParamValue::Address(x) => i128::from(x),
        _ => 0,
    }
}

/// Which events a query returns. Empty lists mean "none"; `None` means "any".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Allowed categories.
    pub categories: Option<Vec<EventCategory>>,
    /// Allowed event types.
    pub types: Option<Vec<TypeId>>,
    /// Allowed producers.
    pub producers: Option<Vec<ProducerId>>,
    /// Allowed CPUs (events without a CPU never match a CPU list).
    pub cpus: Option<Vec<Cpu>>,
    /// Parameter condition.
    pub condition: Option<Condition>,
}

impl Filter {
    /// Every event.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only these categories.
    pub fn categories(mut self, c: impl IntoIterator<Item = EventCategory>) -> Self {
        self.categories = Some(c.into_iter().collect());
        self
    }

    /// Only these types.
    pub fn types(mut self, t: impl IntoIterator<Item = TypeId>) -> Self {
        self.types = Some(t.into_iter().collect());
        self
    }

    /// Only these producers.
    pub fn producers(mut self, p: impl IntoIterator<Item = ProducerId>) -> Self {
        self.producers = Some(p.into_iter().collect());
        self
    }

    /// Only these CPUs.
    pub fn cpus(mut self, c: impl IntoIterator<Item = Cpu>) -> Self {
        self.cpus = Some(c.into_iter().collect());
        self
    }

    /// Only events satisfying `c` (ANDed with an existing condition).
    pub fn condition(mut self, c: Condition) -> Self {
        self.condition = Some(match self.condition.take() {
            Some(old) => old.and(c),
            None => c,
        });
        self
    }

    /// Whether the summary tables can answer this filter (no CPU list, no parameter condition).
    pub fn summary_compatible(&self) -> bool {
        self.cpus.is_none() && self.condition.is_none()
    }
}

/// A condition resolved against one event type: parameter names become positions.
#[derive(Debug, Clone)]
pub(crate) enum Compiled {
    Const(bool),
    Param(usize, CompareOp, ParamValue),
    And(Vec<Compiled>),
    Or(Vec<Compiled>),
}

impl Compiled {
    pub(crate) fn compile(c: &Condition, ty: Option<&EventType>) -> Compiled {
        match c {
            Condition::Param { name, op, value } => {
                match ty.and_then(|t| t.params.iter().position(|p| &p.name == name)) {
                    Some(i) => Compiled::Param(i, *op, value.clone()),
                    None => Compiled::Const(false),
                }
            }
            Condition::And(v) => Compiled::And(v.iter().map(|c| Self::compile(c, ty)).collect()),
            Condition::Or(v) => Compiled::Or(v.iter().map(|c| Self::compile(c, ty)).collect()),
        }
    }

    pub(crate) fn eval(&self, params: &[ParamValue]) -> bool {
        match self {
            Compiled::Const(b) => *b,
            Compiled::Param(i, op, v) => match params.get(*i) {
                Some(p) => match compare_values(p, v) {
                    Some(ord) => op.holds(ord),
                    None => *op == CompareOp::Ne,
                },
                None => false,
            },
            Compiled::And(v) => v.iter().all(|c| c.eval(params)),
            Compiled::Or(v) => v.iter().any(|c| c.eval(params)),
        }
    }
}

/// A filter ready to test decoded events.
#[derive(Debug, Clone)]
pub(crate) struct CompiledFilter {
    pub(crate) filter: Filter,
    per_type: HashMap<TypeId, Compiled>,
    unknown_type: Option<Compiled>,
}

impl CompiledFilter {
    pub(crate) fn new(filter: &Filter, types: &HashMap<TypeId, EventType>) -> Self {
        let mut per_type = HashMap::new();
        let mut unknown_type = None;
        if let Some(c) = &filter.condition {
            for (id, t) in types {
                per_type.insert(*id, Compiled::compile(c, Some(t)));
            }
            unknown_type = Some(Compiled::compile(c, None));
        }
        Self {
            filter: filter.clone(),
            per_type,
            unknown_type,
        }
    }

    pub(crate) fn has_condition(&self) -> bool {
        self.filter.condition.is_some()
    }

    /// Whether [`Self::chunk_ok`] looks at a chunk's type and producer lists.
    pub(crate) fn needs_ids(&self) -> bool {
        self.filter.types.is_some() || self.filter.producers.is_some()
    }

    /// The category/CPU part (decided per stream).
    pub(crate) fn stream_ok(&self, category: EventCategory, cpu: Option<Cpu>) -> bool {
        if let Some(c) = &self.filter.categories
            && !c.contains(&category)
        {
            return false;
        }
        if let Some(cpus) = &self.filter.cpus {
            match cpu {
                Some(x) if cpus.contains(&x) => {}
                _ => return false,
            }
        }
        true
    }

    /// Whether a chunk with these type and producer sets may hold a match.
    pub(crate) fn chunk_ok(&self, types: &[u32], producers: &[u32]) -> bool {
        if let Some(t) = &self.filter.types
            && !types.iter().any(|x| t.contains(x))
        {
            return false;
        }
        if let Some(p) = &self.filter.producers
            && !producers.iter().any(|x| p.contains(x))
        {
            return false;
        }
        true
    }

    #[inline]
    pub(crate) fn ids_ok(&self, ty: TypeId, producer: ProducerId) -> bool {
        if let Some(t) = &self.filter.types
            && !t.contains(&ty)
        {
            return false;
        }
        if let Some(p) = &self.filter.producers
            && !p.contains(&producer)
        {
            return false;
        }
        true
    }

    pub(crate) fn params_ok(&self, ty: TypeId, params: &[ParamValue]) -> bool {
        match self.per_type.get(&ty).or(self.unknown_type.as_ref()) {
            Some(c) => c.eval(params),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ParamDef, ParamType};

    #[test]
    fn and_or_conditions() {
        let ty = EventType {
            id: 3,
            name: "CS".into(),
            category: EventCategory::Punctual,
            params: vec![
                ParamDef::new("OLDPID", ParamType::Signed),
                ParamDef::new("NEWPID", ParamType::Unsigned),
            ],
        };
        let c = Condition::param("OLDPID", CompareOp::Eq, ParamValue::Signed(1205)).and(
            Condition::param("NEWPID", CompareOp::Ne, ParamValue::Signed(0)),
        );
        let k = Compiled::compile(&c, Some(&ty));
        assert!(k.eval(&[ParamValue::Signed(1205), ParamValue::Unsigned(3)]));
        assert!(!k.eval(&[ParamValue::Signed(1205), ParamValue::Unsigned(0)]));
        let c = Condition::param("OLDPID", CompareOp::Gt, ParamValue::Float(2000.5)).or(
            Condition::param("MISSING", CompareOp::Eq, ParamValue::Signed(1)),
        );
        let k = Compiled::compile(&c, Some(&ty));
        assert!(k.eval(&[ParamValue::Signed(2001), ParamValue::Unsigned(0)]));
        assert!(!k.eval(&[ParamValue::Signed(2000), ParamValue::Unsigned(0)]));
    }
}
