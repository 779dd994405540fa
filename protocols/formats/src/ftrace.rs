//! ftrace and `trace-cmd report` text: `COMM-PID [(TGID)] [CPU] [FLAGS] SEC.FRAC: EVENT: ARGS`.
//!
//! Comms may hold spaces and dashes (the pid is after the *last* dash), the TGID column is optional, the
//! flags are 4 or 5 characters or absent (`trace-cmd report`), and the syscall tracer writes
//! `sys_x(arg: v, ...)` and `sys_x -> 0x...` instead of `event: args`.

use nom::bytes::complete::take_while1;
use nom::character::complete::{char, digit1};
use nom::{IResult, Parser};

use crate::{FormatError, LineReader, ParseError, offset_in, seconds_to_ns};

/// What follows the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// `name: args`.
    Event {
        /// Event name, e.g. `sched_switch`.
        name: &'a str,
        /// Everything after `name: `.
        args: &'a str,
    },
    /// `sys_x(arg: v, ...)` from the syscall tracer.
    SyscallEnter {
        /// The function name, e.g. `sys_read`.
        name: &'a str,
        /// The text between the parentheses.
        args: &'a str,
    },
    /// `sys_x -> ret`.
    SyscallExit {
        /// The function name.
        name: &'a str,
        /// The return value text, e.g. `0x24`.
        ret: &'a str,
    },
}

/// One event line, borrowing from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Command name (`<...>` when ftrace did not know it).
    pub comm: &'a str,
    /// Thread id.
    pub pid: u64,
    /// Thread group id, when the TGID column is there and filled.
    pub tgid: Option<u64>,
    /// CPU.
    pub cpu: u16,
    /// Flag characters (irqs-off, need-resched, hardirq/softirq, preempt depth...), if present.
    pub flags: Option<&'a str>,
    /// Timestamp, nanoseconds.
    pub ts: i64,
    /// The event.
    pub body: Body<'a>,
}

impl Record<'_> {
    /// `key=value` pairs of an event's arguments (brackets are separators, as in `[action=TIMER]`).
    pub fn pairs(args: &str) -> impl Iterator<Item = (&str, &str)> {
        let mut rest = args;
        std::iter::from_fn(move || {
            loop {
                let eq = rest.find('=')?;
                let key_start = rest[..eq]
                    .rfind(|c: char| c.is_whitespace() || c == '[' || c == ',')
                    .map_or(0, |i| i + 1);
                let key = &rest[key_start..eq];
                let after = &rest[eq + 1..];
                // A value runs to the next ` key=` (values such as comms may contain spaces).
                let mut end = after.len();
                let mut search = 0;
                while let Some(sp) = after[search..].find(' ') {
                    let at = search + sp;
                    let next = &after[at + 1..];
                    let word_end = next.find([' ', '=']).unwrap_or(next.len());
                    if next[word_end..].starts_with('=') && word_end > 0 || next.starts_with("==>")
                    {
                        end = at;
                        break;
                    }
                    search = at + 1;
                }
                let value = after[..end].trim_end_matches(']').trim();
                rest = &after[end..];
                if !key.is_empty() {
                    return Some((key, value));
                }
            }
        })
    }

    /// The value of `key` in an event's arguments.
    pub fn arg<'b>(args: &'b str, key: &str) -> Option<&'b str> {
        Self::pairs(args).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

fn timestamp(i: &str) -> IResult<&str, (&str, &str)> {
    let (i, (s, _, f, _)) = (digit1, char('.'), digit1, char(':')).parse(i)?;
    Ok((i, (s, f)))
}

fn cpu_column(i: &str) -> IResult<&str, &str> {
    let (i, (_, c, _)) = (char('['), digit1, char(']')).parse(i)?;
    Ok((i, c))
}

fn ident(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.').parse(i)
}

/// `COMM-PID [(TGID)]`, trimmed.
fn task(left: &str) -> Option<(&str, u64, Option<u64>)> {
    let mut left = left.trim();
    let mut tgid = None;
    if left.ends_with(')')
        && let Some(open) = left.rfind('(')
    {
        let inner = left[open + 1..left.len() - 1].trim();
        tgid = inner.parse().ok();
        left = left[..open].trim_end();
    }
    let dash = left.rfind('-')?;
    let pid = left[dash + 1..].parse().ok()?;
    Some((left[..dash].trim_start(), pid, tgid))
}

/// Parses one event line; `Err` carries the byte offset where the grammar broke and what it wanted.
pub fn parse_line(line: &str) -> Result<Record<'_>, (usize, &'static str)> {
    let mut furthest = (0usize, "`COMM-PID [CPU]`");
    let mut search = 0;
    while let Some(p) = line[search..].find('[') {
        let at = search + p;
        search = at + 1;
        let Ok((after_cpu, cpu)) = cpu_column(&line[at..]) else {
            continue;
        };
        let Some((comm, pid, tgid)) = task(&line[..at]) else {
            furthest = furthest.max((at, "`COMM-PID` before the CPU column"));
            continue;
        };
        let Ok(cpu) = cpu.parse::<u16>() else {
            continue;
        };
        let rest = after_cpu.trim_start();
        let (rest, flags) = match timestamp(rest) {
            Ok(_) => (rest, None),
            Err(_) => {
                let end = rest.find(' ').unwrap_or(rest.len());
                (rest[end..].trim_start(), Some(&rest[..end]))
            }
        };
        let Ok((body, (s, f))) = timestamp(rest) else {
            furthest = furthest.max((offset_in(line, rest), "a timestamp `SEC.FRACTION:`"));
            continue;
        };
        let Some(ts) = seconds_to_ns(s, f) else {
            furthest = furthest.max((offset_in(line, rest), "a timestamp that fits in 64 bits"));
            continue;
        };
        let body = body.trim_start();
        let Ok((after, name)) = ident(body) else {
            furthest = furthest.max((offset_in(line, body), "an event name"));
            continue;
        };
        let body = if let Some(args) = after.strip_prefix('(') {
            Body::SyscallEnter {
                name,
                args: args.strip_suffix(')').unwrap_or(args),
            }
        } else if let Some(ret) = after.strip_prefix(" -> ") {
            Body::SyscallExit {
                name,
                ret: ret.trim(),
            }
        } else if let Some(args) = after.strip_prefix(':') {
            Body::Event {
                name,
                args: args.trim(),
            }
        } else {
            Body::Event {
                name,
                args: after.trim(),
            }
        };
        return Ok(Record {
            comm,
            pid,
            tgid,
            cpu,
            flags,
            ts,
            body,
        });
    }
    Err(furthest)
}

/// A line of an ftrace text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A header or comment line (`#...`, `cpus=N`, `version = 6`, `CPU 0 is empty`, blank).
    Header,
    /// An event.
    Record(Record<'a>),
}

/// Reads an ftrace text file line by line.
pub struct FtraceReader<R> {
    lines: LineReader<R>,
    file: String,
    /// CPU count announced by `cpus=N` (trace-cmd) or `#P:N` (ftrace header).
    pub cpus: Option<u16>,
}

impl<R: std::io::BufRead> FtraceReader<R> {
    /// Reads `inner`, which errors call `file`.
    pub fn new(inner: R, file: impl Into<String>) -> Self {
        let file = file.into();
        Self {
            lines: LineReader::new(inner, file.clone()),
            file,
            cpus: None,
        }
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.lines.bytes()
    }

    /// The next line: `Ok(None)` at the end; a [`FormatError::Parse`] for a line that is neither
    /// header nor event (the reader stays usable).
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, FormatError> {
        let Some((line_no, line)) = self.lines.next_line()? else {
            return Ok(None);
        };
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            if let Some(p) = t.find("#P:") {
                self.cpus = t[p + 3..].trim().parse().ok().or(self.cpus);
            }
            return Ok(Some(Line::Header));
        }
        if let Some(n) = t.strip_prefix("cpus=") {
            self.cpus = n.trim().parse().ok();
            return Ok(Some(Line::Header));
        }
        if t.starts_with("version =") || (t.starts_with("CPU ") && t.ends_with("is empty")) {
            return Ok(Some(Line::Header));
        }
        match parse_line(line) {
            Ok(r) => Ok(Some(Line::Record(r))),
            Err((at, expected)) => {
                Err(ParseError::at(&self.file, line_no, line, at, expected).into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn android_line_with_flags() {
        let r = parse_line(
            "   Binder:1579_9-2418  [000] d.h1   108.255707: softirq_raise: vec=1 [action=TIMER]",
        )
        .unwrap();
        assert_eq!(
            (r.comm, r.pid, r.cpu, r.flags),
            ("Binder:1579_9", 2418, 0, Some("d.h1"))
        );
        assert_eq!(r.ts, 108_255_707_000);
        let Body::Event { name, args } = r.body else {
            panic!()
        };
        assert_eq!(name, "softirq_raise");
        let pairs: Vec<_> = Record::pairs(args).collect();
        assert_eq!(pairs, vec![("vec", "1"), ("action", "TIMER")]);
    }

    #[test]
    fn comm_with_spaces_dashes_and_tgid_five_flags() {
        let r = parse_line(
            "  Chrome_IO - thr-77 (   70) [003] d..2. 5.000000001: sched_waking: comm=a b pid=3",
        )
        .unwrap();
        assert_eq!(
            (r.comm, r.pid, r.tgid, r.cpu),
            ("Chrome_IO - thr", 77, Some(70), 3)
        );
        assert_eq!(r.flags, Some("d..2."));
        assert_eq!(r.ts, 5_000_000_001);
        let Body::Event { args, .. } = r.body else {
            panic!()
        };
        assert_eq!(Record::arg(args, "comm"), Some("a b"));
        assert_eq!(Record::arg(args, "pid"), Some("3"));
    }

    #[test]
    fn trace_cmd_without_flags_and_syscalls() {
        let r = parse_line("bash-1234 [001] 1234.567890: sys_read(fd: 3, buf: 7ff)").unwrap();
        assert_eq!(r.flags, None);
        assert_eq!(
            r.body,
            Body::SyscallEnter {
                name: "sys_read",
                args: "fd: 3, buf: 7ff"
            }
        );
        let r =
            parse_line("<...>-4083  [004] ....   395.705673: sys_rt_sigprocmask -> 0x0").unwrap();
        assert_eq!(r.comm, "<...>");
        assert_eq!(
            r.body,
            Body::SyscallExit {
                name: "sys_rt_sigprocmask",
                ret: "0x0"
            }
        );
    }

    #[test]
    fn sched_switch_pairs_stop_at_arrow() {
        let args = "prev_comm=Binder:1579_9 prev_pid=2418 prev_prio=118 prev_state=R+ ==> next_comm=lmkd next_pid=1295 next_prio=98";
        assert_eq!(Record::arg(args, "prev_state"), Some("R+"));
        assert_eq!(Record::arg(args, "next_comm"), Some("lmkd"));
        assert_eq!(Record::arg(args, "next_pid"), Some("1295"));
    }

    #[test]
    fn errors_point_at_the_column() {
        let (at, what) = parse_line("foo-12 [001] d..1 12.x: e: a").unwrap_err();
        assert_eq!(at, 18);
        assert!(what.contains("timestamp"));
    }
}
