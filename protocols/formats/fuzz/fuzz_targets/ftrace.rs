#![no_main]
use libfuzzer_sys::fuzz_target;
use socscope_formats::ftrace::{Body, FtraceReader, Line, Record};

fuzz_target!(|data: &[u8]| {
    let mut r = FtraceReader::new(data, "fuzz");
    for _ in 0..100_000 {
        match r.next_line() {
            Ok(Some(Line::Record(rec))) => {
                if let Body::Event { args, .. } = rec.body {
                    let _ = Record::pairs(args).count();
                }
            }
            Ok(Some(Line::Header | Line::StackFrame(_))) | Err(_) => {}
            Ok(None) => break,
        }
    }
});
