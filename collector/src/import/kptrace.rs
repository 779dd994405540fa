//! KPTrace (STLinux): per-CPU files merged in time order, named by a `System.map` and typed by an
//! optional format description, through the [`Reconstructor`] as live capture.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use socscope_formats::kptrace;
use socscope_tracedb::{IngestStat, ParamValue, TraceWriter};
use socscope_wire::dict::{self as wdict, Builtin, Category};

use super::dictionary::{ImportRecord, ImportTypes, pinfo};
use super::{Lines, display, format_err, head_of, io_err, open, recon_stats, stat};
use crate::reconstruct::Reconstructor;
use crate::{CollectorError, Result};

/// Imports the KPTrace `files` (per-CPU trace files, a `System.map`, a format description).
pub(super) fn run(
    files: &[PathBuf],
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    let mut symbols: HashMap<u64, String> = HashMap::new();
    let mut description = None;
    let mut traces = Vec::new();
    let mut next_cpu = 0u16;
    for f in files {
        let head = head_of(f, 4096)?;
        let head_text = String::from_utf8_lossy(&head);
        let is_map = f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("System.map"))
            || kptrace::sniff_system_map(&head_text);
        if is_map {
            symbols.extend(kptrace::read_system_map(open(f)?, &display(f)).map_err(format_err)?);
        } else if kptrace::FormatDescription::sniff(&head_text) {
            description =
                Some(kptrace::FormatDescription::read(open(f)?, &display(f)).map_err(format_err)?);
        } else {
            let cpu = kptrace::cpu_of_file(&display(f)).unwrap_or(next_cpu);
            next_cpu = next_cpu.max(cpu.saturating_add(1));
            let file = File::open(f).map_err(|e| io_err(f, e))?;
            let reader: Box<dyn BufRead> = Box::new(BufReader::with_capacity(
                256 * 1024,
                kptrace::RelayReader::new(file),
            ));
            traces.push((cpu, reader, display(f)));
        }
    }
    if traces.is_empty() {
        return Err(CollectorError::Invalid("no KPTrace trace file among the files given (only a System.map or a format description)".into()));
    }
    let cpus = traces.iter().map(|t| t.0).max().unwrap_or(0) + 1;
    let mut merge = kptrace::KptraceMerge::new(traces, description);
    let mut importer = KptraceImporter::new(symbols, cpus, writer)?;
    let mut timed = 0u64;
    loop {
        let r = match merge.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        lines.progress(merge.bytes());
        let described = merge
            .description()
            .and_then(|d| d.types.get(&r.mnemonic))
            .cloned();
        // A user-space marker line has no mnemonic: alone, such lines do not make a KPTrace file.
        timed += u64::from(!r.mnemonic.is_empty());
        importer.record(&r, described.as_ref(), writer)?;
        merge.recycle(r);
    }
    lines.bytes = merge.bytes();
    if timed == 0 {
        return Err(CollectorError::Invalid(format!(
            "{}: no KPTrace record (a line `SEC.USEC PID MNEMONIC …`) in {} bytes: not a KPTrace capture",
            files
                .iter()
                .map(|f| super::escaped(&display(f)))
                .collect::<Vec<_>>()
                .join(", "),
            merge.bytes()
        )));
    }
    importer.finish(&merge.stats(), writer)
}

/// What a KPTrace import keeps from record to record.
struct KptraceImporter {
    types: ImportTypes,
    recon: Reconstructor,
    symbols: HashMap<u64, String>,
    rec: ImportRecord,
    unknown: u64,
}

impl KptraceImporter {
    fn new(symbols: HashMap<u64, String>, cpus: u16, writer: &mut TraceWriter) -> Result<Self> {
        let types = ImportTypes::new();
        let mut recon = Reconstructor::new(1_000_000_000, 0, cpus);
        recon.start(&types, writer)?;
        for (addr, name) in &symbols {
            recon.name_hint(true, *addr, name.clone());
        }
        Ok(Self {
            types,
            recon,
            symbols,
            rec: ImportRecord::default(),
            unknown: 0,
        })
    }

    /// One record, typed by the format description when it has `described` (and KPTrace gives its
    /// mnemonic no meaning), else by its mnemonic.
    fn record(
        &mut self,
        r: &kptrace::Record,
        described: Option<&kptrace::TypeDescription>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        let mnemonic = if r.mnemonic == "CS" {
            "C"
        } else {
            r.mnemonic.as_str()
        };
        let mut cpu = r.cpu;
        match (kptrace::lookup(mnemonic), described) {
            (None, Some(td)) => match self.described(r, td, writer)? {
                Some(c) => cpu = c,
                None => return Ok(()),
            },
            (Some(m), _) => self.builtin(m, r, writer)?,
            (None, None) if r.mnemonic.is_empty() => {
                self.rec.set(Builtin::Marker).s(&r.args);
            }
            (None, None) => self.unknown(r, writer)?,
        }
        self.recon
            .record_at(cpu, r.ts.max(0) as u64, &self.rec, &self.types, writer)?;
        Ok(())
    }

    /// A type of the post-processed form with no KPTrace meaning, typed by its description; the CPU
    /// its `cpu` parameter names, if any. `None` when the type id space is exhausted (not stored).
    fn described(
        &mut self,
        r: &kptrace::Record,
        td: &kptrace::TypeDescription,
        writer: &mut TraceWriter,
    ) -> Result<Option<u16>> {
        let id = self.types.custom(
            &td.name,
            Category::Punctual,
            || {
                td.params
                    .iter()
                    .map(|(n, k)| {
                        pinfo(
                            n,
                            match k {
                                kptrace::ParamKind::Integer => wdict::ParamType::Signed,
                                kptrace::ParamKind::Hex => wdict::ParamType::Address,
                                kptrace::ParamKind::Float => wdict::ParamType::Float,
                                kptrace::ParamKind::String => wdict::ParamType::String,
                            },
                        )
                    })
                    .collect()
            },
            &mut self.recon,
            writer,
        )?;
        let Some(id) = id else { return Ok(None) };
        let rec = &mut self.rec;
        rec.type_id = id;
        rec.params.clear();
        let mut cpu = r.cpu;
        let mut words = r.args.split_whitespace();
        let n = td.params.len();
        for (i, (pname, kind)) in td.params.iter().enumerate() {
            let v = match kind {
                kptrace::ParamKind::String if i + 1 == n => {
                    let rest: Vec<&str> = words.by_ref().collect();
                    ParamValue::String(rest.join(" "))
                }
                kptrace::ParamKind::String => ParamValue::String(words.next().unwrap_or("").into()),
                kptrace::ParamKind::Integer => {
                    ParamValue::Signed(words.next().and_then(|w| w.parse().ok()).unwrap_or(0))
                }
                kptrace::ParamKind::Hex => {
                    ParamValue::Address(words.next().and_then(kptrace::hex).unwrap_or(0))
                }
                kptrace::ParamKind::Float => {
                    ParamValue::Float(words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0))
                }
            };
            if pname.eq_ignore_ascii_case("cpu")
                && let Some(c) = v.as_f64()
            {
                cpu = c as u16;
            }
            rec.params.push(v);
        }
        Ok(Some(cpu))
    }

    /// A mnemonic socscope does not know: a punctual event of its own type.
    fn unknown(&mut self, r: &kptrace::Record, writer: &mut TraceWriter) -> Result<()> {
        self.unknown += 1;
        let id = self.types.custom(
            &r.mnemonic,
            Category::Punctual,
            || vec![pinfo("args", wdict::ParamType::String)],
            &mut self.recon,
            writer,
        )?;
        match id {
            Some(id) => {
                self.rec.type_id = id;
                self.rec.params.clear();
                self.rec.s(&r.args);
            }
            None => {
                self.rec
                    .set(Builtin::Marker)
                    .s(&format!("{} {}", r.mnemonic, r.args));
            }
        }
        Ok(())
    }

    /// Closes what is still open; the import's statistics.
    fn finish(
        mut self,
        ms: &kptrace::MergeStats,
        writer: &mut TraceWriter,
    ) -> Result<Vec<IngestStat>> {
        self.recon.finish(writer)?;
        let mut stats = recon_stats(&self.recon, &self.types);
        stats.extend([
            stat(
                "unknown_mnemonics",
                self.unknown,
                "records whose mnemonic socscope does not know, stored as punctual events of their own type",
            ),
            stat(
                "callstack_lines",
                ms.callstack_lines,
                "callstack lines (skipped)",
            ),
            stat("blank_lines", ms.blank_lines, "blank lines"),
            stat(
                "neighbour_times",
                ms.neighbour_times,
                "wake-ups with time 0.000000 and user-space markers, timed by their neighbour",
            ),
            stat(
                "symbols",
                self.symbols.len() as u64,
                "System.map symbols",
            ),
        ]);
        Ok(stats)
    }
    /// A record of a mnemonic KPTrace defines.
    fn builtin(
        &mut self,
        m: kptrace::Mnemonic,
        r: &kptrace::Record,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        let Self {
            types,
            recon,
            symbols,
            rec,
            ..
        } = self;
        use kptrace::Semantics as S;
        let mut w = r.args.split_whitespace();
        let dec = |w: &mut std::str::SplitWhitespace<'_>| {
            w.next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
        };
        match m.semantics {
            S::ContextSwitch => {
                let prev = dec(&mut w);
                let next = dec(&mut w);
                rec.set(Builtin::ContextSwitch).u(prev).u(next);
            }
            S::IrqEntry => {
                let irq = dec(&mut w);
                rec.set(Builtin::IrqEntry).u(irq);
            }
            S::IrqExit => {
                rec.set(Builtin::IrqExit);
            }
            S::SoftIrqEntry => {
                let a = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.set(Builtin::SoftIrqEntry).a(a);
            }
            S::SoftIrqExit => {
                rec.set(Builtin::SoftIrqExit);
            }
            S::SyscallEntry => {
                let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.set(Builtin::SyscallEntry).u(addr);
                for _ in 0..4 {
                    let v = w.next().and_then(kptrace::hex).unwrap_or(0);
                    rec.u(v);
                }
                let name = symbols.get(&addr).map_or("", String::as_str);
                let text: Vec<&str> = w.collect();
                let text = text.join(" ");
                rec.s(name).s(&text);
            }
            S::SyscallExit => {
                let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
                let ret = w.next().and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
                let name = symbols.get(&addr).map_or("", String::as_str);
                rec.set(Builtin::SyscallExit).u(addr).i(ret).s(name);
            }
            S::Wakeup => {
                let pid = dec(&mut w);
                rec.set(Builtin::Wakeup).u(pid);
            }
            S::ThreadCreate => {
                let pid = dec(&mut w);
                let name: Vec<&str> = w.collect();
                rec.set(Builtin::ThreadCreate).u(pid).s(&name.join(" "));
            }
            S::ThreadExit => {
                let pid = w.next().and_then(|x| x.parse().ok()).unwrap_or(r.pid);
                rec.set(Builtin::ThreadExit).u(pid);
            }
            S::Marker => {
                rec.set(Builtin::Marker).s(&r.args);
            }
            S::Mark => {
                let id = dec(&mut w);
                rec.set(Builtin::Mark).u(id);
            }
            S::UserEntry => {
                let pc = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.set(Builtin::UserEntry).a(pc);
                for _ in 0..4 {
                    let v = w.next().and_then(kptrace::hex).unwrap_or(0);
                    rec.u(v);
                }
            }
            S::UserExit => {
                let ret = w.next().and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
                let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.set(Builtin::UserExit).i(ret).a(addr);
            }
            S::Kmalloc => {
                let ptr = w.next().and_then(kptrace::hex).unwrap_or(0);
                let size = dec(&mut w);
                rec.set(Builtin::Kmalloc).u(size).a(ptr);
            }
            S::Kfree => {
                let ptr = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.set(Builtin::Kfree).a(ptr);
            }
            S::Punctual => {
                let id = types.custom(
                    m.name,
                    Category::Punctual,
                    || vec![pinfo("args", wdict::ParamType::String)],
                    recon,
                    writer,
                )?;
                match id {
                    Some(id) => {
                        rec.type_id = id;
                        rec.params.clear();
                        rec.s(&r.args);
                    }
                    None => {
                        rec.set(Builtin::Marker).s(&r.args);
                    }
                }
            }
        }
        Ok(())
    }
}
