//! Larger binary captures for the import benchmarks (scripts/bench-binary-import.sh), made from the
//! shared ones: a trace-cmd `.dat` whose CPUs' pages are repeated N times (each copy's page timestamps
//! shifted past the previous copy's); CTF traces N times as long (`-xN`: each stream's packets
//! repeated, clocks shifted, see `socscope_formats::ctf::repeat`).
//!
//! `cargo run --release -p socscope-formats --example larger_inputs -- SHARED_TRACES OUT N`

use std::path::Path;

use socscope_formats::ctf::repeat::repeat;
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
        // Long: the same streams, each with its packets repeated N times. (Copying stream files
        // side by side is no wider trace: babeltrace2 takes copies of one stream instance for one
        // stream and reads their packets once.)
        repeat(&from, &out.join(format!("{name}-x{n}")), n)?;
    }
    Ok(())
}
