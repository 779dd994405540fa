//! An owned model of every frame kind, its encoding through the crate's encoder, and the conversion of
//! decoded frames back into the model, shared by the integration tests.
#![allow(dead_code)]

use socscope_wire::decode::{
    DecodeError, Decoded, EventBatch, Frame, HelloInfo, OwnedDictEntry, StreamDecoder,
};
use socscope_wire::dict::{EventTypeDef, ParamDef, ParamType, ProducerDef};
use socscope_wire::encode::{self, RecordEncoder, max_encoded_len};
use socscope_wire::frame::{
    Bye, CpuTotal, DictEntry, EVENTS_FLAG_ZSTD, EventsHeader, FrameKind, Heartbeat, Hello, Loss,
    ParamValue, Window,
};
use socscope_wire::varint;

/// A parameter value; floats are kept as bits so that NaNs compare equal to themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Signed(i64),
    Unsigned(u64),
    Float(u64),
    Str(String),
    Address(u64),
}

impl Val {
    pub fn as_value(&self) -> ParamValue<'_> {
        match self {
            Self::Signed(v) => ParamValue::Signed(*v),
            Self::Unsigned(v) => ParamValue::Unsigned(*v),
            Self::Float(bits) => ParamValue::Float(f64::from_bits(*bits)),
            Self::Str(s) => ParamValue::Str(s),
            Self::Address(a) => ParamValue::Address(*a),
        }
    }

    fn from_value(v: ParamValue<'_>) -> Self {
        match v {
            ParamValue::Signed(v) => Self::Signed(v),
            ParamValue::Unsigned(v) => Self::Unsigned(v),
            ParamValue::Float(v) => Self::Float(v.to_bits()),
            ParamValue::Str(s) => Self::Str(s.to_string()),
            ParamValue::Address(a) => Self::Address(a),
        }
    }
}

/// One record with its absolute timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub ticks: u64,
    pub type_id: u16,
    pub values: Vec<Val>,
}

/// An `Events` frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Events {
    pub compressed: bool,
    pub cpu: u16,
    pub first_seq: u64,
    pub base_ticks: u64,
    pub records: Vec<Rec>,
}

/// Any frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Model {
    Hello(HelloInfo),
    Dictionary(Vec<OwnedDictEntry>),
    Events(Events),
    Loss(Loss),
    Heartbeat(Heartbeat),
    Bye(Bye),
    CpuTotal(CpuTotal),
    Window(Window),
}

/// The records section of `events` as [`RecordEncoder`] packs it (uncompressed).
pub fn raw_records(events: &Events) -> Vec<u8> {
    let mut enc = RecordEncoder::new(events.base_ticks);
    let mut out = Vec::new();
    for rec in &events.records {
        let values: Vec<ParamValue<'_>> = rec.values.iter().map(Val::as_value).collect();
        let strings: usize = rec
            .values
            .iter()
            .map(|v| match v {
                Val::Str(s) => s.len(),
                _ => 0,
            })
            .sum();
        let mut buf = vec![0u8; 2 * varint::MAX_VARINT_LEN * (values.len() + 1) + strings];
        let n = enc
            .encode(&mut buf, rec.ticks, rec.type_id, &values)
            .expect("record buffer is large enough");
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// The zstd records section: the raw length as a varint, then the zstd frame.
pub fn zstd_section(raw: &[u8]) -> Vec<u8> {
    let mut len = [0u8; varint::MAX_VARINT_LEN];
    let n = varint::encode_u64(raw.len() as u64, &mut len).unwrap();
    let mut section = len[..n].to_vec();
    section.extend(zstd::bulk::compress(raw, 3).expect("zstd compresses"));
    section
}

pub fn events_header(events: &Events) -> EventsHeader {
    EventsHeader {
        flags: if events.compressed {
            EVENTS_FLAG_ZSTD
        } else {
            0
        },
        cpu: events.cpu,
        first_seq: events.first_seq,
        base_ticks: events.base_ticks,
        count: events.records.len() as u32,
    }
}

/// Encodes an `Events` frame from an already built records section.
pub fn encode_events_section(header: &EventsHeader, section: &[u8]) -> Vec<u8> {
    encode_events_section_as(header, section, FrameKind::Events)
}

/// An `Events` frame of the given kind (`Events`: CRC-32C, `EventsFletcher`: Fletcher-32).
pub fn encode_events_section_as(header: &EventsHeader, section: &[u8], kind: FrameKind) -> Vec<u8> {
    let mut out =
        vec![0u8; max_encoded_len(1 + 1 + 4 * varint::MAX_VARINT_LEN + section.len() + 4)];
    let n = encode::encode_events_as(&mut out, header, section, kind).expect("frame fits");
    out.truncate(n);
    out
}

fn strings_len(items: &[OwnedDictEntry]) -> usize {
    items
        .iter()
        .map(|i| match i {
            OwnedDictEntry::Producer(p) => p.name.len(),
            OwnedDictEntry::EventType(t) => {
                t.name.len() + t.params.iter().map(|p| p.name.len()).sum::<usize>()
            }
        })
        .sum()
}

/// Encodes one frame with the crate's encoder.
pub fn encode(model: &Model) -> Vec<u8> {
    let mut out;
    let n = match model {
        Model::Hello(h) => {
            out = vec![
                0u8;
                256 + h.agent_version.len()
                    + h.board.len()
                    + h.soc.len()
                    + h.os.len()
                    + h.application.len()
            ];
            let hello = Hello {
                wire_version: h.wire_version,
                agent_version: &h.agent_version,
                board: &h.board,
                soc: &h.soc,
                os: &h.os,
                application: &h.application,
                cpu_count: h.cpu_count,
                tick_rate_hz: h.tick_rate_hz,
                session_id: h.session_id,
                start_ticks: h.start_ticks,
                token: &h.token,
            };
            encode::encode_hello(&mut out, &hello)
        }
        Model::Dictionary(items) => {
            out = vec![0u8; 64 + items.len() * 256 + 2 * strings_len(items)];
            let params: Vec<Vec<ParamDef<'_>>> = items
                .iter()
                .map(|i| match i {
                    OwnedDictEntry::EventType(t) => t
                        .params
                        .iter()
                        .map(|p| ParamDef {
                            name: &p.name,
                            ty: p.ty,
                        })
                        .collect(),
                    OwnedDictEntry::Producer(_) => Vec::new(),
                })
                .collect();
            let entries: Vec<DictEntry<'_>> = items
                .iter()
                .zip(&params)
                .map(|(i, params)| match i {
                    OwnedDictEntry::Producer(p) => DictEntry::Producer(ProducerDef {
                        id: p.id,
                        parent: p.parent,
                        kind: p.kind,
                        local_id: p.local_id,
                        name: &p.name,
                    }),
                    OwnedDictEntry::EventType(t) => DictEntry::EventType(EventTypeDef {
                        id: t.id,
                        name: &t.name,
                        category: t.category,
                        params,
                    }),
                })
                .collect();
            encode::encode_dictionary(&mut out, &entries)
        }
        Model::Events(events) => {
            let raw = raw_records(events);
            let section = if events.compressed {
                zstd_section(&raw)
            } else {
                raw
            };
            // Batches with an odd first sequence number go out as kind 0A (Fletcher-32, what the agent
            // writes), the others as kind 03 (CRC-32C, what version-2 agents wrote): every test over
            // encoded streams (round trip, corruption, errors) covers both checks.
            let kind = if events.first_seq % 2 == 1 {
                FrameKind::EventsFletcher
            } else {
                FrameKind::Events
            };
            return encode_events_section_as(&events_header(events), &section, kind);
        }
        Model::Loss(l) => {
            out = vec![0u8; 64];
            encode::encode_loss(&mut out, l)
        }
        Model::Heartbeat(h) => {
            out = vec![0u8; 64];
            encode::encode_heartbeat(&mut out, h)
        }
        Model::Bye(b) => {
            out = vec![0u8; 64];
            encode::encode_bye(&mut out, b)
        }
        Model::CpuTotal(t) => {
            out = vec![0u8; 64];
            encode::encode_cpu_total(&mut out, t)
        }
        Model::Window(w) => {
            out = vec![0u8; 64];
            encode::encode_window(&mut out, w)
        }
    };
    let n = n.expect("frame fits its buffer");
    out.truncate(n);
    out
}

/// Encodes every frame into one stream; also returns where each frame starts and ends (delimiter included).
pub fn encode_stream(models: &[Model]) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
    let mut stream = Vec::new();
    let mut ranges = Vec::new();
    for m in models {
        let start = stream.len();
        stream.extend(encode(m));
        ranges.push(start..stream.len());
    }
    (stream, ranges)
}

pub fn events_model(batch: &EventBatch) -> Events {
    Events {
        compressed: batch.compressed,
        cpu: batch.cpu,
        first_seq: batch.first_seq,
        base_ticks: batch.base_ticks,
        records: batch
            .iter()
            .enumerate()
            .map(|(i, r)| {
                assert_eq!(r.seq, batch.first_seq + i as u64);
                Rec {
                    ticks: r.ticks(),
                    type_id: r.type_id(),
                    values: (0..r.fields().len())
                        .map(|i| Val::from_value(r.value(i).unwrap()))
                        .collect(),
                }
            })
            .collect(),
    }
}

/// The model of a decoded frame.
pub fn model_of(frame: &Frame) -> Model {
    match frame {
        Frame::Hello(h) => Model::Hello(h.clone()),
        Frame::Dictionary(items) => Model::Dictionary(items.clone()),
        Frame::Events(b) => Model::Events(events_model(b)),
        Frame::Loss(l) => Model::Loss(*l),
        Frame::Heartbeat(h) => Model::Heartbeat(*h),
        Frame::Bye(b) => Model::Bye(*b),
        Frame::CpuTotal(t) => Model::CpuTotal(*t),
        Frame::Window(w) => Model::Window(*w),
    }
}

/// Everything a decoder produced, in order.
#[derive(Debug, Default)]
pub struct Output {
    pub frames: Vec<Decoded>,
    pub errors: Vec<DecodeError>,
    /// Everything, in order: `Ok` frames and `Err` reports.
    pub all: Vec<Result<Decoded, DecodeError>>,
}

impl Output {
    pub fn drain(&mut self, decoder: &mut StreamDecoder) {
        while let Some(item) = decoder.next_frame() {
            self.push(item);
        }
    }

    pub fn push(&mut self, item: Result<Decoded, DecodeError>) {
        match &item {
            Ok(d) => self.frames.push(d.clone()),
            Err(e) => self.errors.push(e.clone()),
        }
        self.all.push(item);
    }

    pub fn models(&self) -> Vec<Model> {
        self.frames.iter().map(|d| model_of(&d.frame)).collect()
    }
}

/// Feeds `stream` in slices whose sizes cycle through `sizes` (all at once when empty), draining after each,
/// then calls `finish`.
pub fn decode_split(decoder: &mut StreamDecoder, stream: &[u8], sizes: &[usize]) -> Output {
    let mut out = Output::default();
    let mut at = 0;
    let mut i = 0;
    while at < stream.len() {
        let size = if sizes.is_empty() {
            stream.len()
        } else {
            sizes[i % sizes.len()].max(1)
        };
        i += 1;
        let end = (at + size).min(stream.len());
        decoder.feed(&stream[at..end]);
        out.drain(decoder);
        at = end;
    }
    out.drain(decoder);
    if let Some(e) = decoder.finish() {
        out.push(Err(e));
    }
    out
}

pub fn decode_all(stream: &[u8]) -> Output {
    decode_split(&mut StreamDecoder::default(), stream, &[])
}

/// Bytes as lower-case hex pairs separated by spaces, as SPEC.md writes them.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses [`hex`] output (any whitespace between pairs).
pub fn unhex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|pair| u8::from_str_radix(pair, 16).expect("hex pair"))
        .collect()
}

pub fn param_types(values: &[Val]) -> Vec<ParamType> {
    values.iter().map(|v| v.as_value().param_type()).collect()
}
