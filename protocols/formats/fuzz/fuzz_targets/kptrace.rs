#![no_main]
//! Raw relay bytes (padding words included) through the per-CPU merge, raw and post-processed.
use libfuzzer_sys::fuzz_target;
use socscope_formats::kptrace::{FormatDescription, KptraceMerge, RelayReader};
use std::io::BufReader;

fuzz_target!(|data: &[u8]| {
    let half = data.len() / 2;
    let files = vec![
        (0u16, BufReader::new(RelayReader::new(&data[..half])), "trace0".to_string()),
        (1u16, BufReader::new(RelayReader::new(&data[half..])), "trace1".to_string()),
    ];
    let desc = FormatDescription::read(&b"CS : OLDPID INTEGER, NEWPID INTEGER\nMK : T STRING\n"[..], "f").ok();
    for post in [None, desc] {
        let files = files.iter().map(|(c, _, n)| (*c, BufReader::new(RelayReader::new(if *c == 0 { &data[..half] } else { &data[half..] })), n.clone())).collect();
        let mut m = KptraceMerge::new(files, post);
        for _ in 0..100_000 {
            match m.next_record() {
                Ok(Some(_)) | Err(_) => {}
                Ok(None) => break,
            }
        }
    }
    let _ = FormatDescription::read(data, "fmt");
});
