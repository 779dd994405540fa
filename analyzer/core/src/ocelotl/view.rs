//! What Ocelotl's views draw from a partition: stacked type proportions and the mode of each
//! temporal part, the mode colour of each spatiotemporal area, and the visual aggregation of
//! areas too thin to draw.

use super::model::{MicroscopicModel, SpatialHierarchy};
use super::spatiotemporal::{Area, SpatiotemporalPartition};

/// One temporal part of the stacked view (overview paper eq. 4).
#[derive(Debug, Clone, PartialEq)]
pub struct StackedPart {
    /// Inclusive slice range.
    pub range: (usize, usize),
    /// Per type: `Σ_{t∈part} Σ_s v(s,t,u) / (slice duration · |part|)`, a rate per slice.
    pub values: Vec<f64>,
    pub total: f64,
    /// The type with the strictly largest share (first on ties), `None` ("void") if all are 0.
    pub mode: Option<usize>,
    /// The mode's value relative to the largest part total.
    pub mode_amplitude: f64,
}

/// The stacked ("temporal proportion") view of a temporal partition.
#[derive(Debug, Clone, PartialEq)]
pub struct StackedProportions {
    /// Heights are drawn relative to this: the largest part total.
    pub max_total: f64,
    pub parts: Vec<StackedPart>,
}

/// The first index with the strictly largest value, if that value is positive: Ocelotl's
/// mode rule (a type must beat every earlier one, and "void" wins over nothing).
fn first_strict_max(values: impl Iterator<Item = f64>) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (u, v) in values.enumerate() {
        if v > best.map_or(0.0, |(_, b)| b) {
            best = Some((u, v));
        }
    }
    best
}

/// Stacked proportions and temporal mode of every part, as Ocelotl's "Temporal Proportion"
/// and "Temporal Mode" views compute them.
pub fn stacked_proportions(
    model: &MicroscopicModel,
    ranges: &[(usize, usize)],
) -> StackedProportions {
    let types = model.types();
    let mut parts: Vec<StackedPart> = ranges
        .iter()
        .map(|&(start, end)| {
            let mut values = vec![0.0; types];
            for t in start..=end {
                for s in 0..model.producers() {
                    for (u, acc) in values.iter_mut().enumerate() {
                        *acc += model.value(t, s, u);
                    }
                }
            }
            // Ocelotl skips the division when the duration is 0 rather than producing inf.
            let duration = model.rate_divisor() * (end - start + 1) as f64;
            if duration != 0.0 {
                for v in &mut values {
                    *v /= duration;
                }
            }
            let total = values.iter().sum();
            StackedPart {
                range: (start, end),
                values,
                total,
                mode: None,
                mode_amplitude: 0.0,
            }
        })
        .collect();
    let max_total = parts.iter().map(|p| p.total).fold(0.0, f64::max);
    for part in &mut parts {
        if let Some((u, amp)) = first_strict_max(part.values.iter().map(|v| v / max_total)) {
            part.mode = Some(u);
            part.mode_amplitude = amp;
        }
    }
    StackedProportions { max_total, parts }
}

/// The colour of one spatiotemporal area (overview paper eq. 5): its mode type and how
/// strongly it dominates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AreaMode {
    pub area: Area,
    /// `None` is Ocelotl's "void": drawn transparent.
    pub mode: Option<usize>,
    /// Mean rate of the mode type over the area (1 = busy all the time for state durations).
    pub amplitude: f64,
    /// Opacity 30..=255 of the type colour, `(int)(30 + min(amplitude, 1)·225)`.
    pub alpha: u8,
}

/// Mode of every area, as Ocelotl's "Spatiotemporal Mode (states)" view computes it.
///
/// Unlike eq. 5 of the paper (a mean over all leaves), a node's rate is the unweighted mean of
/// its children's: the two agree on balanced hierarchies, and the tool does the latter.
pub fn spatiotemporal_modes(
    model: &MicroscopicModel,
    hierarchy: &SpatialHierarchy,
    areas: &[Area],
) -> Vec<AreaMode> {
    let (n, types) = (model.slices(), model.types());
    let mut rate: Vec<Vec<f64>> = vec![Vec::new(); hierarchy.len()];
    for &node in hierarchy.post_order() {
        let mut r = vec![0.0; n * types];
        match hierarchy.leaf_producer(node) {
            Some(s) => {
                let d = model.rate_divisor();
                for t in 0..n {
                    for u in 0..types {
                        let v = model.value(t, s, u);
                        r[t * types + u] = if d != 0.0 { v / d } else { v };
                    }
                }
            }
            None => {
                let kids = hierarchy.children(node);
                for &c in kids {
                    for (acc, v) in r.iter_mut().zip(&rate[c]) {
                        *acc += v;
                    }
                }
                for acc in &mut r {
                    *acc /= kids.len() as f64;
                }
            }
        }
        rate[node] = r;
    }
    areas
        .iter()
        .map(|&area| {
            let len = (area.end - area.start + 1) as f64;
            let amps = (0..types).map(|u| {
                let sum: f64 = (area.start..=area.end)
                    .map(|t| rate[area.node][t * types + u])
                    .sum();
                sum / len
            });
            match first_strict_max(amps) {
                Some((u, amp)) => AreaMode {
                    area,
                    mode: Some(u),
                    amplitude: amp,
                    alpha: (30.0 + amp.min(1.0) * 225.0) as u8,
                },
                None => AreaMode {
                    area,
                    mode: None,
                    amplitude: 0.0,
                    alpha: 0,
                },
            }
        })
        .collect()
}

/// How an area of the spatiotemporal view is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawnKind {
    /// A real area of the partition, with its part id.
    Aggregate { id: i32 },
    /// A node drawn in place of children too thin to see. `same_partition_below` is true when
    /// all of them cut this time span identically (drawn with a diagonal line), false when
    /// their partitions differ (drawn with a cross).
    Visual { same_partition_below: bool },
}

/// One rectangle to draw: `node` × slices `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrawnArea {
    pub node: usize,
    pub start: usize,
    pub end: usize,
    pub kind: DrawnKind,
}

/// A time span of a node while finding common cuts; `dirty` means the children below it are
/// not cut identically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    /// Exclusive.
    end: usize,
    dirty: bool,
}

struct VisualPass<'a> {
    hierarchy: &'a SpatialHierarchy,
    parts: &'a [Vec<i32>],
    leaf_height_px: f64,
    min_height_px: f64,
    out: Vec<DrawnArea>,
}

impl VisualPass<'_> {
    /// Maximal runs of equal part ids of `node` within `start..end`.
    fn runs(&self, node: usize, start: usize, end: usize) -> Vec<(Span, i32)> {
        let ids = &self.parts[node];
        let mut out: Vec<(Span, i32)> = Vec::new();
        for (t, &here) in ids.iter().enumerate().take(end).skip(start) {
            match out.last_mut() {
                Some((span, id)) if *id == here => span.end = t + 1,
                _ => out.push((
                    Span {
                        start: t,
                        end: t + 1,
                        dirty: false,
                    },
                    here,
                )),
            }
        }
        out
    }

    fn draw(&mut self, node: usize, start: usize, end: usize) {
        for (span, id) in self.runs(node, start, end) {
            if id != -1 {
                self.out.push(DrawnArea {
                    node,
                    start: span.start,
                    end: span.end - 1,
                    kind: DrawnKind::Aggregate { id },
                });
                continue;
            }
            let kids = self.hierarchy.children(node);
            let too_thin = kids.iter().any(|&c| {
                (self.hierarchy.leaf_count(c) as f64) * self.leaf_height_px < self.min_height_px
            });
            if too_thin {
                for piece in self.common_cuts(node, span.start, span.end) {
                    self.out.push(DrawnArea {
                        node,
                        start: piece.start,
                        end: piece.end - 1,
                        kind: DrawnKind::Visual {
                            same_partition_below: !piece.dirty,
                        },
                    });
                }
            } else {
                for &c in kids {
                    self.draw(c, span.start, span.end);
                }
            }
        }
    }

    /// The time spans on which every child of `node` has a boundary-for-boundary identical
    /// cut; whatever lies between them is marked dirty.
    fn common_cuts(&self, node: usize, start: usize, end: usize) -> Vec<Span> {
        let below: Vec<Vec<Span>> = self
            .hierarchy
            .children(node)
            .iter()
            .map(|&c| {
                // A child aggregated everywhere is read directly; otherwise its own children's
                // common cuts stand for it (Ocelotl decides this on the whole time axis).
                if self.parts[c].iter().all(|&id| id != -1) {
                    self.runs(c, start, end)
                        .into_iter()
                        .map(|(s, _)| s)
                        .collect()
                } else {
                    self.common_cuts(c, start, end)
                }
            })
            .collect();
        let mut common = Vec::new();
        if let Some(first) = below.first() {
            for span in first {
                let matches: Option<Vec<&Span>> = below
                    .iter()
                    .map(|spans| {
                        spans
                            .iter()
                            .find(|s| s.start == span.start && s.end == span.end)
                    })
                    .collect();
                if let Some(matches) = matches {
                    common.push(Span {
                        dirty: matches.iter().any(|s| s.dirty),
                        ..*span
                    });
                }
            }
        }
        let mut out = Vec::new();
        let mut cursor = start;
        for span in common {
            if span.start > cursor {
                out.push(Span {
                    start: cursor,
                    end: span.start,
                    dirty: true,
                });
            }
            cursor = span.end;
            out.push(span);
        }
        if cursor < end {
            out.push(Span {
                start: cursor,
                end,
                dirty: true,
            });
        }
        out
    }
}

/// Decides how the spatiotemporal view draws a partition when leaves are `leaf_height_px`
/// pixels high: wherever a node is split into children and one of them would be thinner
/// than `min_height_px`, the node is drawn instead, marked by whether the children below share
/// the same time cuts. Areas are returned in drawing order (depth first, time within a node).
pub fn visual_aggregation(
    hierarchy: &SpatialHierarchy,
    partition: &SpatiotemporalPartition,
    leaf_height_px: f64,
    min_height_px: f64,
) -> Vec<DrawnArea> {
    let parts = partition.node_parts();
    let slices = parts.first().map_or(0, Vec::len);
    let mut pass = VisualPass {
        hierarchy,
        parts,
        leaf_height_px,
        min_height_px,
        out: Vec::new(),
    };
    if slices > 0 {
        pass.draw(hierarchy.root(), 0, slices);
    }
    pass.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocelotl::SpatiotemporalAggregation;

    #[test]
    fn stacked_values_are_rates_and_mode_is_the_first_strict_max() {
        // Two producers, two types, slices of duration 2.
        let v = vec![1.0, 3.0, 1.0, 1.0, /* t1 */ 2.0, 2.0, 2.0, 2.0];
        let m = MicroscopicModel::new(2, 2, 2, v)
            .unwrap()
            .with_rate_divisor(2.0);
        let s = stacked_proportions(&m, &[(0, 0), (1, 1)]);
        assert_eq!(s.parts[0].values, vec![1.0, 2.0]);
        assert_eq!(s.parts[1].values, vec![2.0, 2.0]);
        assert_eq!(s.max_total, 4.0);
        assert_eq!(s.parts[0].mode, Some(1));
        assert_eq!(s.parts[0].mode_amplitude, 0.5);
        // A tie keeps the first type.
        assert_eq!(s.parts[1].mode, Some(0));
    }

    #[test]
    fn an_all_zero_part_is_void() {
        let m = MicroscopicModel::new(2, 1, 2, vec![0.0, 0.0, 1.0, 0.0]).unwrap();
        let s = stacked_proportions(&m, &[(0, 0), (1, 1)]);
        assert_eq!(s.parts[0].mode, None);
        assert_eq!(s.parts[1].mode, Some(0));
    }

    fn two_groups() -> (MicroscopicModel, SpatialHierarchy) {
        // root 0 → groups 1 (leaves 2, 3) and 4 (leaves 5, 6, 7).
        let h = SpatialHierarchy::new(
            vec![
                vec![1, 4],
                vec![2, 3],
                vec![],
                vec![],
                vec![5, 6, 7],
                vec![],
                vec![],
                vec![],
            ],
            vec![
                None,
                None,
                Some(0),
                Some(1),
                None,
                Some(2),
                Some(3),
                Some(4),
            ],
            5,
        )
        .unwrap();
        // One type; group 1 busy (1.0), group 4 idle except producer 4.
        let values: Vec<f64> = (0..4).flat_map(|_| [1.0, 1.0, 0.0, 0.0, 0.6]).collect();
        let m = MicroscopicModel::new(4, 5, 1, values)
            .unwrap()
            .with_hierarchy(h.clone())
            .unwrap();
        (m, h)
    }

    #[test]
    fn node_rate_is_the_unweighted_mean_of_children() {
        let (m, h) = two_groups();
        let modes = spatiotemporal_modes(
            &m,
            &h,
            &[
                Area {
                    node: 0,
                    start: 0,
                    end: 3,
                },
                Area {
                    node: 5,
                    start: 0,
                    end: 0,
                },
            ],
        );
        // (1 + (0 + 0 + 0.6)/3) / 2 = 0.6, not the leaf mean 2.6/5 = 0.52.
        assert!((modes[0].amplitude - 0.6).abs() < 1e-15);
        assert_eq!(modes[0].alpha, (30.0 + 0.6 * 225.0) as u8);
        assert_eq!(modes[1].mode, None);
    }

    #[test]
    fn thin_children_are_drawn_as_their_parent() {
        let (m, h) = two_groups();
        let part = SpatiotemporalAggregation::new(&m, &h).best_partition(0.2);
        let tall = visual_aggregation(&h, &part, 100.0, 5.0);
        assert!(
            tall.iter()
                .all(|a| matches!(a.kind, DrawnKind::Aggregate { .. }))
        );
        // Every cell is drawn exactly once.
        let cells: usize = tall
            .iter()
            .map(|a| h.leaf_count(a.node) * (a.end - a.start + 1))
            .sum();
        assert_eq!(cells, 5 * 4);
        // With 1-pixel leaves, both groups (2 and 3 px) are thinner than 5 px: whatever the
        // partition, everything is drawn at the root, once per time span.
        let flat = visual_aggregation(&h, &part, 1.0, 5.0);
        assert!(flat.iter().all(|a| a.node == 0), "{flat:?}");
        let covered: usize = flat.iter().map(|a| a.end - a.start + 1).sum();
        assert_eq!(covered, 4);
    }

    #[test]
    fn common_cuts_decide_the_mark() {
        // Hand-made parts: root split everywhere; group 1 aggregated as [0,1],[2,3]; group 4
        // has leaves cut differently on [0,1] and identically on [2,3].
        let h = SpatialHierarchy::new(
            vec![
                vec![1, 4],
                vec![2, 3],
                vec![],
                vec![],
                vec![5, 6],
                vec![],
                vec![],
            ],
            vec![None, None, Some(0), Some(1), None, Some(2), Some(3)],
            4,
        )
        .unwrap();
        let parts = vec![
            vec![-1, -1, -1, -1],
            vec![5, 5, 4, 4],
            vec![5, 5, 4, 4],
            vec![5, 5, 4, 4],
            vec![-1, -1, -1, -1],
            vec![3, 2, 0, 0],
            vec![1, 1, 0, 0],
        ];
        let partition = SpatiotemporalPartition::from_parts_for_tests(parts);
        let drawn = visual_aggregation(&h, &partition, 1.0, 3.0);
        let marks: Vec<(usize, usize, usize, bool)> = drawn
            .iter()
            .map(|a| match a.kind {
                DrawnKind::Visual {
                    same_partition_below,
                } => (a.node, a.start, a.end, same_partition_below),
                DrawnKind::Aggregate { .. } => panic!("nothing is tall enough here: {a:?}"),
            })
            .collect();
        assert_eq!(marks, vec![(0, 0, 1, false), (0, 2, 3, true)]);
    }
}
