//! The information-theoretic building blocks of gain and loss (RR-8524 eqs. 4-5), written in
//! exactly the operation order of lpaggreg's `Complexity.cpp` so that sums of thousands of them
//! round the same way as the original.

/// `log(2.0)`; lpaggreg divides by it instead of multiplying by its inverse, and so do we.
pub(crate) const LN2: f64 = std::f64::consts::LN_2;

/// `x·log2(x)` as lpaggreg evaluates it: `(x * ln x) / ln 2`.
#[inline]
pub(crate) fn entropy(x: f64) -> f64 {
    (x * x.ln()) / LN2
}

/// Gain of one aggregated series: `S log2 S − Σ v log2 v`, given `S` and `Σ v log2 v`.
///
/// Non-positive sums give exactly 0, which is how the original avoids `0·log 0` (and how
/// negative values drop out of the entropy term).
#[inline]
pub(crate) fn entropy_reduction(sum: f64, micro_entropy: f64) -> f64 {
    if sum > 0.0 {
        entropy(sum) - micro_entropy
    } else {
        0.0
    }
}

/// Loss of one aggregated series of `|A|` elements: `S log2|A| − gain`, with `ln |A|`
/// precomputed by the caller (the same `log` call on the same integer, so the same bits).
#[inline]
pub(crate) fn divergence(ln_size: f64, sum: f64, reduction: f64) -> f64 {
    (sum * ln_size) / LN2 - reduction
}

/// `ln k` for `k = 0..=max`, looked up instead of recomputed in the quadratic loops.
pub(crate) fn ln_table(max: usize) -> Vec<f64> {
    (0..=max).map(|k| (k as f64).ln()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln2_constant_is_the_libm_value() {
        // lpaggreg computes log(2.0) at run time; the constant must be the same double.
        assert_eq!(LN2.to_bits(), 2.0f64.ln().to_bits());
    }

    #[test]
    fn entropy_of_powers_of_two_is_exact() {
        assert_eq!(entropy(1.0), 0.0);
        assert_eq!(entropy(2.0), 2.0);
        assert_eq!(entropy(4.0), 8.0);
    }

    #[test]
    fn zero_and_negative_sums_carry_no_information() {
        assert_eq!(entropy_reduction(0.0, 5.0), 0.0);
        assert_eq!(entropy_reduction(-3.0, 0.0), 0.0);
        // A zero-sum aggregate therefore has zero loss too, never NaN.
        assert_eq!(divergence(4f64.ln(), 0.0, 0.0), 0.0);
    }

    #[test]
    fn two_equal_values_gain_two_bits_and_lose_nothing() {
        // v = (1, 1): S = 2, gain = 2 log2 2 − 0 = 2, loss = 2 log2 2 − 2 = 0.
        let gain = entropy_reduction(2.0, entropy(1.0) + entropy(1.0));
        assert_eq!(gain, 2.0);
        assert_eq!(divergence(2f64.ln(), 2.0, gain), 0.0);
    }

    #[test]
    fn unequal_values_lose_the_kullback_leibler_divergence() {
        // v = (1, 3): loss = Σ v log2(v·|A|/S) = 1·log2(0.5) + 3·log2(1.5).
        let micro = entropy(1.0) + entropy(3.0);
        let gain = entropy_reduction(4.0, micro);
        let loss = divergence(2f64.ln(), 4.0, gain);
        let expected = (0.5f64).log2() + 3.0 * (1.5f64).log2();
        assert!((loss - expected).abs() < 1e-12, "{loss} vs {expected}");
        assert!((gain - (8.0 - 3.0 * 3f64.log2())).abs() < 1e-12);
    }
}
