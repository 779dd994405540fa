//! Where the spatiotemporal aggregation spends its time: qualities, one DP per p, and how many
//! DPs the bisection runs (`cargo run --release --example ocelotl_profile -- T FANOUT...`).

use std::time::Instant;

use socscope_analysis::bench;
use socscope_analysis::ocelotl::SpatiotemporalAggregation;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let t = args.first().copied().unwrap_or(250);
    let fan: Vec<usize> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        vec![10, 10, 10]
    };
    let model = bench::synthetic_hierarchical_model(t, &fan, 4, 2);
    let h = model.hierarchy().unwrap().clone();
    let started = Instant::now();
    let agg = SpatiotemporalAggregation::new(&model, &h);
    println!("qualities: {:?}", started.elapsed());
    let mut evals = Vec::new();
    let mut eval = |p: f32| {
        let s = Instant::now();
        let part = agg.best_partition(f64::from(p));
        let d = s.elapsed();
        let q = part.quality();
        evals.push((p, d, part.aggregates().len()));
        println!(
            "  p = {p:<12} {d:>10.2?}  {} areas",
            part.aggregates().len()
        );
        q
    };
    // The DLP bisection rule, sequentially, to count its evaluations.
    let q0 = eval(0.0);
    let q1 = eval(1.0);
    let mut stack = vec![(0.0f32, 1.0f32, q0, q1)];
    while let Some((p1, p2, qa, qb)) = stack.pop() {
        let w = p2 - p1;
        if qa.gain != qb.gain && qa.loss != qb.loss && w > 0.001 {
            let pm = p1 + w / 2.0;
            let qm = eval(pm);
            stack.push((p1, pm, qa, qm));
            stack.push((pm, p2, qm, qb));
        }
    }
    let total: std::time::Duration = evals.iter().map(|e| e.1).sum();
    println!("{} evaluations, {:?} in all", evals.len(), total);
}
