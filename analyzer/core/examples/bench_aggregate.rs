//! One timed run of each benchmark workload: `cargo run --release --example bench_aggregate`.

use socscope_analysis::bench;

fn main() {
    let t = bench::temporal(1000, 100, 5);
    println!("temporal T=1000 S=100 U=5: {:?} total ({t:?})", t.total());
    let st = bench::spatiotemporal(200, &[4, 4, 4], 4);
    println!(
        "spatiotemporal T=200 4x4x4 U=4: {:?} total ({st:?})",
        st.total()
    );
    let c = bench::spatiotemporal_counts(200, &[4, 4, 4], 4);
    println!(
        "spatiotemporal counts T=200 4x4x4 U=4: {:?} total ({c:?})",
        c.total()
    );
}
