//! Larger binary captures for the import benchmarks (scripts/bench-binary-import.sh), made from the
//! shared ones: a trace-cmd `.dat` whose CPUs' pages are repeated N times (each copy's page timestamps
//! shifted past the previous copy's), and CTF directories with each stream file copied N times (N
//! times the streams, merged in time like the originals).
//!
//! `cargo run --release -p socscope-formats --example larger_inputs -- SHARED_TRACES OUT N`

use std::path::Path;

use socscope_formats::tracecmd::Compression;
use socscope_formats::tracecmd::rewrite::{Rewrite, rewrite};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, shared, out, n] = args.as_slice() else {
        return Err("usage: larger_inputs SHARED_TRACES OUT N".into());
    };
    let (shared, out, n) = (Path::new(shared), Path::new(out), n.parse::<usize>()?);
    std::fs::create_dir_all(out)?;
    let src = std::fs::read(shared.join("trace-cmd/lisa-example_rtapp-v6.dat"))?;
    let how = Rewrite {
        version: 6,
        compression: Compression::None,
        formats: None,
        symbols: None,
        pages: None,
        cpus: None,
        chunk_pages: 10,
        repeat: n,
    };
    let dat = rewrite(&src, &how).ok_or("the shared .dat is not a version-6 file")?;
    std::fs::write(out.join(format!("lisa-x{n}.dat")), dat)?;
    for name in ["lttng-kernel-arm-bug446190", "lttng-ust-ros2"] {
        let from = shared.join("ctf").join(name);
        let to = out.join(format!("{name}-x{n}"));
        std::fs::create_dir_all(&to)?;
        std::fs::copy(from.join("metadata"), to.join("metadata"))?;
        for e in std::fs::read_dir(&from)? {
            let p = e?.path();
            let Some(file) = p.file_name().map(|f| f.to_string_lossy().into_owned()) else {
                continue;
            };
            if p.is_file() && file != "metadata" {
                for k in 0..n {
                    std::fs::copy(&p, to.join(format!("{file}_copy{k}")))?;
                }
            }
        }
    }
    Ok(())
}
