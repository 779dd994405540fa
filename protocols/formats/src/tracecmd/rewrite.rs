//! A writer of `.dat` files from a version-6 one: the same capture as version 6 or 7, its sections and
//! ring-buffer data compressed with zlib or zstd, whole or reduced to a few formats and pages. It makes
//! the files the reader is tested on that `trace-cmd convert` cannot (Debian's trace-cmd offers no
//! zlib) and the fuzzer's small seeds from real captures.

use std::io::Write;

use super::{Compression, read_uint};

/// What to keep of the source.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// File version to write (6 or 7).
    pub version: u32,
    /// Compression of a version-7 file's sections and data.
    pub compression: Compression,
    /// Event formats to keep, by name (`None`: all).
    pub formats: Option<Vec<String>>,
    /// kallsyms lines to keep: those naming one of these symbols (`None`: all).
    pub symbols: Option<Vec<String>>,
    /// Per CPU, the most pages to keep (`None`: all), and which CPUs (`None`: all).
    pub pages: Option<usize>,
    /// CPUs to keep.
    pub cpus: Option<Vec<u32>>,
    /// Pages per compressed chunk.
    pub chunk_pages: usize,
    /// Copies of each CPU's pages, one after the other, each copy's page timestamps shifted past the
    /// previous copy's (a longer capture of the same shape, for benchmarks); 1 keeps the source.
    pub repeat: usize,
}

/// The parts of a version-6 file.
struct Parts {
    big: bool,
    long_size: u8,
    page_size: u32,
    header_page: Vec<u8>,
    header_event: Vec<u8>,
    ftrace: Vec<Vec<u8>>,
    systems: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    kallsyms: Vec<u8>,
    printk: Vec<u8>,
    cmdlines: Vec<u8>,
    clock: Vec<u8>,
    cpus: Vec<Vec<u8>>,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    big: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn uint(&mut self, n: usize) -> Option<u64> {
        read_uint(self.take(n)?, 0, n, self.big)
    }
    fn sized(&mut self, n: usize) -> Option<Vec<u8>> {
        let len = usize::try_from(self.uint(n)?).ok()?;
        Some(self.take(len)?.to_vec())
    }
    fn cstr(&mut self) -> Option<Vec<u8>> {
        let i = self.b.get(self.at..)?.iter().position(|&c| c == 0)?;
        let s = self.b[self.at..self.at + i].to_vec();
        self.at += i + 1;
        Some(s)
    }
}

fn parse_v6(src: &[u8]) -> Option<Parts> {
    if !src.starts_with(super::MAGIC) || src.get(10..12) != Some(b"6\0") {
        return None;
    }
    let big = *src.get(12)? != 0;
    let long_size = *src.get(13)?;
    let page_size = read_uint(src, 14, 4, big)? as u32;
    let mut c = Cursor {
        b: src,
        at: 18,
        big,
    };
    c.take(12)?;
    let header_page = c.sized(8)?;
    c.take(13)?;
    let header_event = c.sized(8)?;
    let n = c.uint(4)?;
    let ftrace = (0..n).map(|_| c.sized(8)).collect::<Option<Vec<_>>>()?;
    let n = c.uint(4)?;
    let mut systems = Vec::new();
    for _ in 0..n {
        let name = c.cstr()?;
        let k = c.uint(4)?;
        let formats = (0..k).map(|_| c.sized(8)).collect::<Option<Vec<_>>>()?;
        systems.push((name, formats));
    }
    let kallsyms = c.sized(4)?;
    let printk = c.sized(4)?;
    let cmdlines = c.sized(8)?;
    let ncpu = c.uint(4)?;
    let mut clock_follows = false;
    loop {
        match c.take(10)? {
            b"options  \0" => loop {
                let id = c.uint(2)?;
                if id == 0 {
                    break;
                }
                let data = c.sized(4)?;
                clock_follows |= id == 4 && data.is_empty();
            },
            b"flyrecord\0" => break,
            _ => return None,
        }
    }
    let mut table = Vec::new();
    for _ in 0..ncpu {
        table.push((c.uint(8)?, c.uint(8)?));
    }
    let clock = if clock_follows {
        c.sized(8)?
    } else {
        Vec::new()
    };
    let cpus = table
        .into_iter()
        .map(|(o, s)| Some(src.get(o as usize..(o + s) as usize)?.to_vec()))
        .collect::<Option<Vec<_>>>()?;
    Some(Parts {
        big,
        long_size,
        page_size,
        header_page,
        header_event,
        ftrace,
        systems,
        kallsyms,
        printk,
        cmdlines,
        clock,
        cpus,
    })
}

fn name_of(format: &[u8]) -> Option<String> {
    let t = String::from_utf8_lossy(format);
    let line = t.lines().find_map(|l| l.strip_prefix("name:"))?;
    Some(line.trim().to_string())
}

struct Out {
    b: Vec<u8>,
    big: bool,
}

impl Out {
    fn uint(&mut self, v: u64, n: usize) {
        let bytes = v.to_be_bytes();
        let mut x = bytes[8 - n..].to_vec();
        if !self.big {
            x.reverse();
        }
        self.b.extend_from_slice(&x);
    }
    fn sized(&mut self, data: &[u8], n: usize) {
        self.uint(data.len() as u64, n);
        self.b.extend_from_slice(data);
    }
    fn pad_to(&mut self, align: usize) {
        while !self.b.len().is_multiple_of(align) {
            self.b.push(0);
        }
    }
}

fn compress(c: Compression, data: &[u8]) -> Vec<u8> {
    match c {
        Compression::None => data.to_vec(),
        Compression::Zstd => zstd::bulk::compress(data, 3).unwrap_or_default(),
        Compression::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            // Writing to memory cannot fail.
            let _ = e.write_all(data);
            e.finish().unwrap_or_default()
        }
    }
}

/// Rewrites the version-6 file `src`; `None` when it is not one this writer reads.
pub fn rewrite(src: &[u8], how: &Rewrite) -> Option<Vec<u8>> {
    let mut p = parse_v6(src)?;
    if let Some(keep) = &how.formats {
        let kept = |f: &Vec<u8>| name_of(f).is_some_and(|n| keep.contains(&n));
        p.ftrace.retain(kept);
        for (_, f) in &mut p.systems {
            f.retain(kept);
        }
        p.systems.retain(|(_, f)| !f.is_empty());
    }
    if let Some(symbols) = &how.symbols {
        let text = String::from_utf8_lossy(&p.kallsyms).into_owned();
        let kept: String = text
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(2)
                    .is_some_and(|n| symbols.iter().any(|s| s == n))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        p.kallsyms = kept.into_bytes();
    }
    let page = p.page_size as usize;
    let mut cpus: Vec<(u32, Vec<u8>)> = p
        .cpus
        .iter()
        .enumerate()
        .filter(|(i, _)| how.cpus.as_ref().is_none_or(|c| c.contains(&(*i as u32))))
        .map(|(i, d)| {
            let n = how.pages.map_or(d.len(), |k| (k * page).min(d.len()));
            (i as u32, d[..n].to_vec())
        })
        .collect();
    if how.repeat > 1 {
        // Page timestamps (the first 8 bytes of each page) shifted by the capture's span per copy.
        let ts = |page: &[u8]| read_uint(page, 0, 8, p.big).unwrap_or(0);
        let all = cpus.iter().flat_map(|(_, d)| d.chunks(page).map(ts));
        let (lo, hi) = all.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
        let span = hi.saturating_sub(lo) + 1_000_000_000;
        for (_, d) in &mut cpus {
            let one = d.clone();
            for k in 1..how.repeat {
                for pg in one.chunks(page) {
                    let mut pg = pg.to_vec();
                    let t = ts(&pg) + span * k as u64;
                    let mut o = Out {
                        b: Vec::new(),
                        big: p.big,
                    };
                    o.uint(t, 8);
                    pg[..8].copy_from_slice(&o.b);
                    d.extend_from_slice(&pg);
                }
            }
        }
    }
    if how.cpus.is_some() {
        // CPUs renumbered from 0 in a version-6 file (its table has no ids).
        for (k, c) in cpus.iter_mut().enumerate() {
            c.0 = k as u32;
        }
    }
    let mut o = Out {
        b: Vec::new(),
        big: p.big,
    };
    o.b.extend_from_slice(super::MAGIC);
    o.b.extend_from_slice(format!("{}\0", how.version).as_bytes());
    o.b.push(u8::from(p.big));
    o.b.push(p.long_size);
    o.uint(u64::from(p.page_size), 4);
    let header_info = {
        let mut s = Out {
            b: Vec::new(),
            big: p.big,
        };
        s.b.extend_from_slice(b"header_page\0");
        s.sized(&p.header_page, 8);
        s.b.extend_from_slice(b"header_event\0");
        s.sized(&p.header_event, 8);
        s.b
    };
    let ftrace = {
        let mut s = Out {
            b: Vec::new(),
            big: p.big,
        };
        s.uint(p.ftrace.len() as u64, 4);
        for f in &p.ftrace {
            s.sized(f, 8);
        }
        s.b
    };
    let events = {
        let mut s = Out {
            b: Vec::new(),
            big: p.big,
        };
        s.uint(p.systems.len() as u64, 4);
        for (name, fs) in &p.systems {
            s.b.extend_from_slice(name);
            s.b.push(0);
            s.uint(fs.len() as u64, 4);
            for f in fs {
                s.sized(f, 8);
            }
        }
        s.b
    };
    let mut kallsyms = Out {
        b: Vec::new(),
        big: p.big,
    };
    kallsyms.sized(&p.kallsyms, 4);
    let mut printk = Out {
        b: Vec::new(),
        big: p.big,
    };
    printk.sized(&p.printk, 4);
    let mut cmdlines = Out {
        b: Vec::new(),
        big: p.big,
    };
    cmdlines.sized(&p.cmdlines, 8);
    if how.version == 6 {
        o.b.extend_from_slice(&header_info);
        o.b.extend_from_slice(&ftrace);
        o.b.extend_from_slice(&events);
        o.b.extend_from_slice(&kallsyms.b);
        o.b.extend_from_slice(&printk.b);
        o.b.extend_from_slice(&cmdlines.b);
        o.uint(cpus.len() as u64, 4);
        o.b.extend_from_slice(b"options  \0");
        if !p.clock.is_empty() {
            o.uint(4, 2);
            o.uint(0, 4);
        }
        o.uint(0, 2);
        o.b.extend_from_slice(b"flyrecord\0");
        let table_at = o.b.len();
        o.b.resize(table_at + 16 * cpus.len(), 0);
        if !p.clock.is_empty() {
            o.sized(&p.clock, 8);
        }
        let mut table = Out {
            b: Vec::new(),
            big: p.big,
        };
        for (_, d) in &cpus {
            o.pad_to(page);
            table.uint(o.b.len() as u64, 8);
            table.uint(d.len() as u64, 8);
            o.b.extend_from_slice(d);
        }
        o.b[table_at..table_at + table.b.len()].copy_from_slice(&table.b);
        return Some(o.b);
    }
    let (name, version) = match how.compression {
        Compression::None => ("none", ""),
        Compression::Zstd => ("zstd", "1.5.4"),
        Compression::Zlib => ("zlib", "1.2.13"),
    };
    o.b.extend_from_slice(name.as_bytes());
    o.b.push(0);
    o.b.extend_from_slice(version.as_bytes());
    o.b.push(0);
    let options_at_field = o.b.len();
    o.uint(0, 8);
    let comp = how.compression;
    // A section: id, flags, description string id (0), size; compressed: sizes, then the data.
    let section = |o: &mut Out, id: u16, data: &[u8]| -> u64 {
        let at = o.b.len() as u64;
        let compressed = comp != Compression::None;
        o.uint(u64::from(id), 2);
        o.uint(u64::from(compressed), 2);
        o.uint(0, 4);
        if compressed {
            let z = compress(comp, data);
            o.uint(z.len() as u64 + 8, 8);
            o.uint(z.len() as u64, 4);
            o.uint(data.len() as u64, 4);
            o.b.extend_from_slice(&z);
        } else {
            o.sized(data, 8);
        }
        at
    };
    let sections = [
        (16u16, header_info),
        (17, ftrace),
        (18, events),
        (19, kallsyms.b),
        (20, printk.b),
        (21, cmdlines.b),
    ];
    let mut pointers = Vec::new();
    for (id, data) in &sections {
        pointers.push((*id, section(&mut o, *id, data)));
    }
    // The flyrecord section: its header, then each CPU's data, page aligned (compressed in chunks).
    let fly_at = o.b.len() as u64;
    o.uint(3, 2);
    o.uint(u64::from(comp != Compression::None), 2);
    o.uint(0, 4);
    let size_at = o.b.len();
    o.uint(0, 8);
    let mut cpu_table = Vec::new();
    for (cpu, d) in &cpus {
        o.pad_to(page);
        let at = o.b.len() as u64;
        if comp == Compression::None {
            o.b.extend_from_slice(d);
        } else {
            let per = how.chunk_pages.max(1) * page;
            let chunks: Vec<&[u8]> = d.chunks(per).collect();
            o.uint(chunks.len() as u64, 4);
            for c in chunks {
                let z = compress(comp, c);
                o.uint(z.len() as u64, 4);
                o.uint(c.len() as u64, 4);
                o.b.extend_from_slice(&z);
            }
        }
        cpu_table.push((*cpu, at, o.b.len() as u64 - at));
    }
    let fly_size = o.b.len() as u64 - (size_at as u64 + 8);
    let mut sz = Out {
        b: Vec::new(),
        big: p.big,
    };
    sz.uint(fly_size, 8);
    o.b[size_at..size_at + 8].copy_from_slice(&sz.b);
    // The options section, pointed to by the header.
    let mut opts = Out {
        b: Vec::new(),
        big: p.big,
    };
    for (id, at) in &pointers {
        opts.uint(u64::from(*id), 2);
        opts.uint(8, 4);
        opts.uint(*at, 8);
    }
    let clock = String::from_utf8_lossy(&p.clock)
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or("local")
        .to_string();
    let mut buffer = Out {
        b: Vec::new(),
        big: p.big,
    };
    buffer.uint(fly_at, 8);
    buffer.b.push(0);
    buffer.b.extend_from_slice(clock.as_bytes());
    buffer.b.push(0);
    buffer.uint(u64::from(p.page_size), 4);
    buffer.uint(cpu_table.len() as u64, 4);
    for (cpu, at, size) in &cpu_table {
        buffer.uint(u64::from(*cpu), 4);
        buffer.uint(*at, 8);
        buffer.uint(*size, 8);
    }
    opts.uint(3, 2);
    opts.sized(&buffer.b, 4);
    opts.uint(8, 2);
    opts.uint(4, 4);
    opts.uint(p.cpus.len() as u64, 4);
    opts.uint(0, 2);
    opts.uint(8, 4);
    opts.uint(0, 8);
    let options_at = o.b.len() as u64;
    o.uint(0, 2);
    o.uint(0, 2);
    o.uint(0, 4);
    o.sized(&opts.b, 8);
    let mut at = Out {
        b: Vec::new(),
        big: p.big,
    };
    at.uint(options_at, 8);
    o.b[options_at_field..options_at_field + 8].copy_from_slice(&at.b);
    Some(o.b)
}
