//! Invariants that hold in the original algorithms, on small random models.
//!
//! The original is exact only up to rounding (a ±1e-15 loss residue can decide p = 0), so the
//! properties are stated with a tolerance relative to the whole-trace quality wherever they
//! compare optima, and exactly wherever they describe structure.

use proptest::prelude::*;
use socscope_analysis::ocelotl::{
    MicroscopicModel, Quality, SpatialHierarchy, SpatiotemporalAggregation, TemporalAggregation,
};

/// Values with many zeros and repeats, which is where the tie rules matter.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), Just(2.0), 0.0..10.0f64]
}

fn model(max_t: usize, max_s: usize, max_u: usize) -> impl Strategy<Value = MicroscopicModel> {
    (1..=max_t, 1..=max_s, 1..=max_u).prop_flat_map(|(t, s, u)| {
        prop::collection::vec(value(), t * s * u)
            .prop_map(move |v| MicroscopicModel::new(t, s, u, v).unwrap())
    })
}

/// A complete tree with fan-outs 1..=3 per level (1 gives single-child chains) and its model.
fn hierarchical_model() -> impl Strategy<Value = MicroscopicModel> {
    (
        prop::collection::vec(1usize..=3, 1..=2),
        1usize..=7,
        1usize..=2,
    )
        .prop_flat_map(|(fan_out, t, u)| {
            let h = SpatialHierarchy::balanced(&fan_out);
            let s = h.leaf_count(h.root());
            prop::collection::vec(value(), t * s * u).prop_map(move |v| {
                MicroscopicModel::new(t, s, u, v)
                    .unwrap()
                    .with_hierarchy(h.clone())
                    .unwrap()
            })
        })
}

fn tolerance(whole: Quality) -> f64 {
    1e-9 * whole.gain.abs().max(whole.loss.abs()).max(1.0)
}

fn pic(p: f64, q: Quality) -> f64 {
    p * q.gain - (1.0 - p) * q.loss
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn temporal_partitions_tile_time_and_are_optimal(m in model(12, 4, 3), p in 0.0..=1.0f64, cuts in prop::collection::vec(any::<bool>(), 11)) {
        let agg = TemporalAggregation::new(&m, false);
        let q = agg.qualities();
        let n = m.slices();
        let best = agg.best_partition(p);
        // Consecutive inclusive ranges from 0 to T−1, ids 0, 1, 2… in time order.
        let mut next = 0;
        for &(s, e) in best.ranges() {
            prop_assert_eq!(s, next);
            prop_assert!(e >= s);
            next = e + 1;
        }
        prop_assert_eq!(next, n);
        let parts = best.parts();
        prop_assert_eq!(parts.len(), n);
        prop_assert!(parts.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
        // Its quality is the sum of its parts'.
        let sum = best.ranges().iter().fold(Quality::ZERO, |a, &(s, e)| {
            let x = q.quality(s, e);
            Quality { gain: a.gain + x.gain, loss: a.loss + x.loss }
        });
        prop_assert_eq!(sum, best.quality());
        // No partition does better, e.g. an arbitrary one drawn from `cuts`.
        let pf = f64::from(p as f32);
        let mut other = Quality::ZERO;
        let mut start = 0;
        for (t, &cut_after) in cuts.iter().chain(std::iter::once(&true)).enumerate().take(n) {
            if t == n - 1 || cut_after {
                let x = q.quality(start, t);
                other = Quality { gain: other.gain + x.gain, loss: other.loss + x.loss };
                start = t + 1;
            }
        }
        let tol = tolerance(q.quality(0, n - 1));
        prop_assert!(pic(pf, best.quality()) >= pic(pf, other) - tol);
    }

    #[test]
    fn temporal_extremes_lose_nothing_at_zero_and_gain_everything_at_one(m in model(10, 3, 2)) {
        let agg = TemporalAggregation::new(&m, false);
        let whole = agg.qualities().quality(0, m.slices() - 1);
        let tol = tolerance(whole);
        // p = 0: only loss counts, and singletons lose nothing.
        prop_assert!(agg.best_partition(0.0).quality().loss.abs() <= tol);
        // p = 1: only gain counts, and the whole trace gains most (S log S is superadditive).
        let one = agg.best_partition(1.0);
        prop_assert!((one.quality().gain - whole.gain).abs() <= tol);
    }

    #[test]
    fn positive_data_merge_into_one_part_at_p_one(m in model(10, 3, 2).prop_map(|m| {
        let (t, s, u) = (m.slices(), m.producers(), m.types());
        let v = (0..t).flat_map(|ti| (0..s).flat_map(move |si| (0..u).map(move |ui| (ti, si, ui))))
            .map(|(ti, si, ui)| 1.0 + m.value(ti, si, ui)).collect();
        MicroscopicModel::new(t, s, u, v).unwrap()
    })) {
        prop_assert_eq!(TemporalAggregation::new(&m, false).best_partition(1.0).n_parts(), 1);
    }

    #[test]
    fn temporal_p_list_is_a_monotone_grid(m in model(12, 3, 2), normalize in any::<bool>()) {
        // Normalising by a zero whole-trace quality gives NaN in the original too.
        let raw = TemporalAggregation::new(&m, false).qualities().quality(0, m.slices() - 1);
        prop_assume!(!normalize || (raw.gain > 1e-9 && raw.loss > 1e-9));
        let agg = TemporalAggregation::new(&m, normalize);
        let whole = agg.qualities().quality(0, m.slices() - 1);
        let list = agg.significant_ps(0.001);
        let e = list.entries();
        prop_assert_eq!(e[0].p, 0.0);
        let tol = tolerance(Quality { gain: 1.0, loss: 1.0 }).max(tolerance(whole));
        for w in e.windows(2) {
            prop_assert!(w[0].p < w[1].p);
            // Consecutive entries differ (duplicates are removed) …
            prop_assert!(w[0].quality != w[1].quality);
            // … and the optimum's gain and loss can only grow with p.
            prop_assert!(w[1].quality.gain >= w[0].quality.gain - tol);
            prop_assert!(w[1].quality.loss >= w[0].quality.loss - tol);
        }
        for x in e {
            // Every p is on the 1/1024 grid the float bisection lands on.
            prop_assert_eq!((x.p * 1024.0).fract(), 0.0);
            prop_assert_eq!(&agg.best_partition(f64::from(x.p)), &x.partition);
        }
        let d = list.default_p();
        prop_assert!(e.iter().any(|x| f64::from(x.p) == d));
    }

    #[test]
    fn spatiotemporal_areas_tile_leaves_by_slices(m in hierarchical_model(), p in 0.0..=1.0f64) {
        let h = m.hierarchy().unwrap();
        let agg = SpatiotemporalAggregation::new(&m, h);
        let part = agg.best_partition(p);
        let n = m.slices();
        let mut covered = vec![vec![0u32; n]; m.producers()];
        fn leaves(h: &SpatialHierarchy, node: usize, out: &mut Vec<usize>) {
            match h.leaf_producer(node) {
                Some(s) => out.push(s),
                None => h.children(node).iter().for_each(|&c| leaves(h, c, out)),
            }
        }
        for a in part.aggregates() {
            let mut ls = Vec::new();
            leaves(h, a.node, &mut ls);
            let id = part.node_parts()[a.node][a.start];
            prop_assert!(id >= 0);
            for &s in &ls {
                for row in covered[s].iter_mut().take(a.end + 1).skip(a.start) {
                    *row += 1;
                }
            }
            // The area's id is carried by the node on exactly its slices.
            for t in 0..n {
                prop_assert_eq!(part.node_parts()[a.node][t] == id, (a.start..=a.end).contains(&t));
            }
        }
        prop_assert!(covered.iter().flatten().all(|&c| c == 1));
        // Canonical areas cover the same cells.
        let cells = |areas: &[socscope_analysis::ocelotl::Area]| -> usize {
            areas.iter().map(|a| h.leaf_count(a.node) * (a.end - a.start + 1)).sum()
        };
        prop_assert_eq!(cells(part.canonical_aggregates()), m.producers() * n);
        // Better than (or as good as) the two trivial partitions.
        let whole = agg.qualities().quality(h.root(), 0, n - 1);
        let tol = tolerance(whole);
        prop_assert!(pic(p, part.quality()) >= pic(p, whole) - tol);
        prop_assert!(pic(p, part.quality()) >= -tol, "leaf singletons score 0");
    }

    #[test]
    fn spatiotemporal_p_list_is_monotone(m in hierarchical_model()) {
        let h = m.hierarchy().unwrap();
        let agg = SpatiotemporalAggregation::new(&m, h);
        let whole = agg.qualities().quality(h.root(), 0, m.slices() - 1);
        let tol = tolerance(whole);
        let list = agg.significant_ps(0.001);
        for w in list.entries().windows(2) {
            prop_assert!(w[0].p < w[1].p);
            prop_assert!(w[1].quality.gain >= w[0].quality.gain - tol);
            prop_assert!(w[1].quality.loss >= w[0].quality.loss - tol);
        }
        let last = list.entries().last().unwrap();
        prop_assert_eq!(last.p, 1.0f32.min(last.p));
        let one = agg.best_partition(1.0);
        prop_assert!((one.quality().gain - whole.gain).abs() <= tol);
    }
}
