//! The dictionary: producer kinds, event categories, parameter types, and the built-in event types that
//! follow KPTrace's record mnemonics so that a board needs no declarations for them.
//!
//! Event type ids below [`FIRST_CUSTOM_TYPE`] are reserved for the built-in dictionary; boards declare
//! their own types (and producers) at run time in `Dictionary` frames.

use serde::Serialize;

/// The first event type id a board may declare for its own types.
pub const FIRST_CUSTOM_TYPE: u16 = 64;

/// How a parameter value is encoded in a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum ParamType {
    /// A signed integer: zigzag, then LEB128.
    Signed = 0,
    /// An unsigned integer: LEB128.
    Unsigned = 1,
    /// A 64-bit IEEE 754 float, little-endian, 8 bytes.
    Float = 2,
    /// UTF-8 text: LEB128 length, then the bytes.
    String = 3,
    /// A code or data address: zigzag delta from the previous address in the same `Events` frame.
    Address = 4,
}

impl ParamType {
    /// The parameter type for a wire tag, if it is one.
    pub const fn from_tag(tag: u64) -> Option<Self> {
        Some(match tag {
            0 => Self::Signed,
            1 => Self::Unsigned,
            2 => Self::Float,
            3 => Self::String,
            4 => Self::Address,
            _ => return None,
        })
    }

    /// A lower-case name for messages and tables.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Signed => "signed",
            Self::Unsigned => "unsigned",
            Self::Float => "float",
            Self::String => "string",
            Self::Address => "address",
        }
    }
}

/// What the collector makes of a record of this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Category {
    /// A punctual event.
    Punctual,
    /// Opens a state (named after the type) on the thread running on the record's CPU; states nest.
    StateEnter,
    /// Closes the innermost open state opened by the event type `enter`.
    StateExit {
        /// The type id of the matching entry.
        enter: u16,
    },
    /// Sets a variable of the running thread: the first parameter is the value.
    Variable,
    /// A built-in type the collector interprets specially (context switch, wake-up, thread life cycle,
    /// memory). Only the built-in dictionary uses it.
    Special,
}

/// What a producer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum ProducerKind {
    /// A process; its local id is the pid.
    Process = 0,
    /// A thread; its local id is the tid (the pid of KPTrace records).
    Thread = 1,
    /// A hardware interrupt line; its local id is the IRQ number.
    Irq = 2,
    /// A soft IRQ vector.
    SoftIrq = 3,
    /// A CPU; its local id is the CPU number.
    Cpu = 4,
}

impl ProducerKind {
    /// The producer kind for a wire tag, if it is one.
    pub const fn from_tag(tag: u64) -> Option<Self> {
        Some(match tag {
            0 => Self::Process,
            1 => Self::Thread,
            2 => Self::Irq,
            3 => Self::SoftIrq,
            4 => Self::Cpu,
            _ => return None,
        })
    }

    /// A lower-case name for messages and tables.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Process => "process",
            Self::Thread => "thread",
            Self::Irq => "irq",
            Self::SoftIrq => "softirq",
            Self::Cpu => "cpu",
        }
    }
}

/// A named, typed parameter of an event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ParamDef<'a> {
    /// The parameter's name, e.g. `prev_pid`.
    pub name: &'a str,
    /// How its value is encoded.
    pub ty: ParamType,
}

/// An event type: the self-defining pattern on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct EventTypeDef<'a> {
    /// The id records use.
    pub id: u16,
    /// The type's name (the KPTrace mnemonic for built-ins is in [`Builtin::mnemonic`]).
    pub name: &'a str,
    /// What the collector makes of it.
    pub category: Category,
    /// The parameters, in record order (at most [`crate::MAX_PARAMS`]).
    pub params: &'a [ParamDef<'a>],
}

/// A producer declared by the board: a process, thread, IRQ line, soft IRQ or CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ProducerDef<'a> {
    /// The board's id for this producer, unique within the session.
    pub id: u32,
    /// The parent producer's id (a thread's process), if any.
    pub parent: Option<u32>,
    /// What it is.
    pub kind: ProducerKind,
    /// Its id on the board: pid, tid, IRQ number, CPU number.
    pub local_id: u64,
    /// Its name.
    pub name: &'a str,
}

const fn p(name: &'static str, ty: ParamType) -> ParamDef<'static> {
    ParamDef { name, ty }
}

use ParamType::{Address as A, Signed as I, String as S, Unsigned as U};

/// The built-in event types, after KPTrace's record mnemonics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Builtin {
    /// `C`: context switch on the record's CPU.
    ContextSwitch = 1,
    /// `I`: hardware interrupt entry.
    IrqEntry = 2,
    /// `i`: hardware interrupt exit.
    IrqExit = 3,
    /// `S`: soft IRQ entry.
    SoftIrqEntry = 4,
    /// `s`: soft IRQ exit.
    SoftIrqExit = 5,
    /// `E`: system call entry.
    SyscallEntry = 6,
    /// `X`: system call exit.
    SyscallExit = 7,
    /// `W`: wake-up of a thread by the running one.
    Wakeup = 8,
    /// `K`: a text marker.
    Marker = 9,
    /// `KM`: a numbered mark.
    Mark = 10,
    /// `U`: user function entry.
    UserEntry = 11,
    /// `u`: user function exit.
    UserExit = 12,
    /// `Kc`: thread created.
    ThreadCreate = 13,
    /// `KX`: thread exit.
    ThreadExit = 14,
    /// `MM`: kmalloc.
    Kmalloc = 15,
    /// `MF`: kfree.
    Kfree = 16,
}

/// Every built-in type, in id order.
pub const BUILTINS: [Builtin; 16] = [
    Builtin::ContextSwitch,
    Builtin::IrqEntry,
    Builtin::IrqExit,
    Builtin::SoftIrqEntry,
    Builtin::SoftIrqExit,
    Builtin::SyscallEntry,
    Builtin::SyscallExit,
    Builtin::Wakeup,
    Builtin::Marker,
    Builtin::Mark,
    Builtin::UserEntry,
    Builtin::UserExit,
    Builtin::ThreadCreate,
    Builtin::ThreadExit,
    Builtin::Kmalloc,
    Builtin::Kfree,
];

const CONTEXT_SWITCH: &[ParamDef<'static>] = &[p("prev_pid", U), p("next_pid", U)];
const IRQ: &[ParamDef<'static>] = &[p("irq", U)];
const SOFTIRQ: &[ParamDef<'static>] = &[p("handler", A)];
const SYSCALL_ENTRY: &[ParamDef<'static>] =
    &[p("nr", U), p("a0", U), p("a1", U), p("a2", U), p("a3", U)];
const SYSCALL_EXIT: &[ParamDef<'static>] = &[p("nr", U), p("ret", I)];
const PID: &[ParamDef<'static>] = &[p("pid", U)];
const TEXT: &[ParamDef<'static>] = &[p("text", S)];
const MARK: &[ParamDef<'static>] = &[p("id", U)];
const ADDRESS: &[ParamDef<'static>] = &[p("address", A)];
const THREAD_CREATE: &[ParamDef<'static>] = &[p("pid", U), p("name", S)];
const KMALLOC: &[ParamDef<'static>] = &[p("size", U), p("ptr", A)];
const KFREE: &[ParamDef<'static>] = &[p("ptr", A)];

impl Builtin {
    /// The built-in type with this id, if any.
    pub const fn from_id(id: u16) -> Option<Self> {
        if id >= 1 && id as usize <= BUILTINS.len() {
            Some(BUILTINS[id as usize - 1])
        } else {
            None
        }
    }

    /// The type id records use.
    pub const fn id(self) -> u16 {
        self as u16
    }

    /// The KPTrace mnemonic.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Self::ContextSwitch => "C",
            Self::IrqEntry => "I",
            Self::IrqExit => "i",
            Self::SoftIrqEntry => "S",
            Self::SoftIrqExit => "s",
            Self::SyscallEntry => "E",
            Self::SyscallExit => "X",
            Self::Wakeup => "W",
            Self::Marker => "K",
            Self::Mark => "KM",
            Self::UserEntry => "U",
            Self::UserExit => "u",
            Self::ThreadCreate => "Kc",
            Self::ThreadExit => "KX",
            Self::Kmalloc => "MM",
            Self::Kfree => "MF",
        }
    }

    /// The full definition: name, category and parameters.
    pub const fn def(self) -> EventTypeDef<'static> {
        let (name, category, params): (&str, Category, &[ParamDef<'static>]) = match self {
            Self::ContextSwitch => ("context_switch", Category::Special, CONTEXT_SWITCH),
            Self::IrqEntry => ("irq", Category::StateEnter, IRQ),
            Self::IrqExit => (
                "irq_exit",
                Category::StateExit {
                    enter: Self::IrqEntry as u16,
                },
                &[],
            ),
            Self::SoftIrqEntry => ("softirq", Category::StateEnter, SOFTIRQ),
            Self::SoftIrqExit => (
                "softirq_exit",
                Category::StateExit {
                    enter: Self::SoftIrqEntry as u16,
                },
                &[],
            ),
            Self::SyscallEntry => ("syscall", Category::StateEnter, SYSCALL_ENTRY),
            Self::SyscallExit => (
                "syscall_exit",
                Category::StateExit {
                    enter: Self::SyscallEntry as u16,
                },
                SYSCALL_EXIT,
            ),
            Self::Wakeup => ("wakeup", Category::Special, PID),
            Self::Marker => ("marker", Category::Punctual, TEXT),
            Self::Mark => ("mark", Category::Punctual, MARK),
            Self::UserEntry => ("user_function", Category::StateEnter, ADDRESS),
            Self::UserExit => (
                "user_function_exit",
                Category::StateExit {
                    enter: Self::UserEntry as u16,
                },
                &[],
            ),
            Self::ThreadCreate => ("thread_create", Category::Special, THREAD_CREATE),
            Self::ThreadExit => ("thread_exit", Category::Special, PID),
            Self::Kmalloc => ("kmalloc", Category::Special, KMALLOC),
            Self::Kfree => ("kfree", Category::Special, KFREE),
        };
        EventTypeDef {
            id: self as u16,
            name,
            category,
            params,
        }
    }
}

/// The length of [`dictionary_image`]`(producers, types)`.
pub const fn dictionary_image_len(
    producers: &[ProducerDef<'_>],
    types: &[EventTypeDef<'_>],
) -> usize {
    write_dictionary_image(producers, types, &mut [])
}

/// A board's dictionary as the body of one `Dictionary` frame — the entry count, the producers, then the
/// event types, each as `encode::encode_dictionary` writes it — computed at compile time:
///
/// ```
/// use socscope_wire::dict::{dictionary_image, dictionary_image_len, ProducerDef, ProducerKind};
/// const PRODUCERS: [ProducerDef<'static>; 1] = [ProducerDef {
///     id: 1, parent: None, kind: ProducerKind::Thread, local_id: 1, name: "main",
/// }];
/// static IMAGE: [u8; dictionary_image_len(&PRODUCERS, &[])] = dictionary_image(&PRODUCERS, &[]);
/// assert_eq!(IMAGE[0], 1);
/// ```
///
/// A board whose drain runs on the host (the agent's probe mode) keeps this image in flash for the
/// host to read, so that it carries no dictionary encoder. `N` must be [`dictionary_image_len`]: a
/// shorter array holds the image's first `N` bytes only.
pub const fn dictionary_image<const N: usize>(
    producers: &[ProducerDef<'_>],
    types: &[EventTypeDef<'_>],
) -> [u8; N] {
    let mut out = [0u8; N];
    write_dictionary_image(producers, types, &mut out);
    out
}

/// Writes the image into `out` (as much as fits) and returns its whole length.
const fn write_dictionary_image(
    producers: &[ProducerDef<'_>],
    types: &[EventTypeDef<'_>],
    out: &mut [u8],
) -> usize {
    let mut at = put_varint(out, 0, (producers.len() + types.len()) as u64);
    let mut i = 0;
    while i < producers.len() {
        let p = &producers[i];
        at = put_byte(out, at, 0);
        at = put_varint(out, at, p.id as u64);
        at = match p.parent {
            None => put_byte(out, at, 0),
            Some(parent) => {
                let at = put_byte(out, at, 1);
                put_varint(out, at, parent as u64)
            }
        };
        at = put_varint(out, at, p.kind as u64);
        at = put_varint(out, at, p.local_id);
        at = put_str(out, at, p.name);
        i += 1;
    }
    let mut i = 0;
    while i < types.len() {
        let t = &types[i];
        at = put_byte(out, at, 1);
        at = put_varint(out, at, t.id as u64);
        at = put_str(out, at, t.name);
        at = match t.category {
            Category::Punctual => put_byte(out, at, 0),
            Category::StateEnter => put_byte(out, at, 1),
            Category::StateExit { enter } => {
                let at = put_byte(out, at, 2);
                put_varint(out, at, enter as u64)
            }
            Category::Variable => put_byte(out, at, 3),
            Category::Special => put_byte(out, at, 4),
        };
        at = put_varint(out, at, t.params.len() as u64);
        let mut j = 0;
        while j < t.params.len() {
            at = put_str(out, at, t.params[j].name);
            at = put_varint(out, at, t.params[j].ty as u64);
            j += 1;
        }
        i += 1;
    }
    at
}

const fn put_byte(out: &mut [u8], at: usize, b: u8) -> usize {
    if at < out.len() {
        out[at] = b;
    }
    at + 1
}

const fn put_varint(out: &mut [u8], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        at = put_byte(out, at, (v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    put_byte(out, at, v as u8)
}

const fn put_str(out: &mut [u8], at: usize, s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut at = put_varint(out, at, bytes.len() as u64);
    let mut i = 0;
    while i < bytes.len() {
        at = put_byte(out, at, bytes[i]);
        i += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ids_are_dense_and_reserved() {
        for (i, b) in BUILTINS.iter().enumerate() {
            assert_eq!(b.id() as usize, i + 1);
            assert_eq!(Builtin::from_id(b.id()), Some(*b));
            assert_eq!(b.def().id, b.id());
            assert!(b.def().params.len() <= crate::MAX_PARAMS);
            assert!(b.id() < FIRST_CUSTOM_TYPE);
        }
        assert_eq!(Builtin::from_id(0), None);
        assert_eq!(Builtin::from_id(17), None);
    }

    #[test]
    fn exits_point_at_their_entries() {
        for b in BUILTINS {
            if let Category::StateExit { enter } = b.def().category {
                let entry = Builtin::from_id(enter).expect("entry is a builtin");
                assert_eq!(entry.def().category, Category::StateEnter);
            }
        }
    }
}
