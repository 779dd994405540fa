//! Fletcher-32, the check of the `Events` frames an agent frames on its board (kind `0A`, SPEC.md §4): a
//! few instructions per byte where CRC-32C takes a table look-up per byte or eight shifts.

/// Halfword steps between two folds of the sums: after a fold both are below 2^17, and 256 steps keep
/// the second sum below 2^32 (2^17 + 256 × 2^17 + 256 × 257 / 2 × 65 535 < 2^32).
const FOLD_EVERY_WORDS: usize = 128;

/// The Fletcher-32 of `data`: `data` read as 16-bit little-endian words (an odd last byte is the low byte
/// of a last word whose high byte is 0); `a` is the sum of the words and `b` the sum of the successive
/// values of `a`, both modulo 65 535 and starting at 0; the check is `a | b << 16` (on the wire: `a`
/// then `b`, each little-endian). Fletcher (1982); detection properties: SPEC.md §4.
pub fn fletcher32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (0u32, 0u32);
    let mut chunks = data.chunks(4 * FOLD_EVERY_WORDS);
    for chunk in &mut chunks {
        let mut words = chunk.chunks_exact(4);
        for w in &mut words {
            let w = u32::from_le_bytes(<[u8; 4]>::try_from(w).unwrap_or_default());
            a += w & 0xffff;
            b += a;
            a += w >> 16;
            b += a;
        }
        let mut halves = words.remainder().chunks(2);
        for h in &mut halves {
            let lo = u32::from(h.first().copied().unwrap_or(0));
            let hi = u32::from(h.get(1).copied().unwrap_or(0));
            a += lo | hi << 8;
            b += a;
        }
        a = fold(a);
        b = fold(b);
    }
    (a % 65_535) | (b % 65_535) << 16
}

/// Reduces a sum modulo 65 535 far enough to go on adding (below 2^17), without a division.
#[inline(always)]
fn fold(s: u32) -> u32 {
    (s & 0xffff) + (s >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sums written out one halfword at a time with `%` after every step.
    fn reference(data: &[u8]) -> u32 {
        let (mut a, mut b) = (0u64, 0u64);
        for h in data.chunks(2) {
            let w = u64::from(h[0]) | u64::from(h.get(1).copied().unwrap_or(0)) << 8;
            a = (a + w) % 65_535;
            b = (b + a) % 65_535;
        }
        (a | b << 16) as u32
    }

    #[test]
    fn matches_the_definition_at_every_length_and_worst_case_bytes() {
        let mut data = [0u8; 3000];
        let mut seed = 0x9e37_79b9_u32;
        for b in data.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            *b = seed as u8;
        }
        for len in (0..1100).chain([2047, 2048, 2049, 2999, 3000]) {
            assert_eq!(
                fletcher32(&data[..len]),
                reference(&data[..len]),
                "len {len}"
            );
        }
        let ff = [0xffu8; 3000];
        for len in [0, 1, 2, 511, 512, 513, 1024, 3000] {
            assert_eq!(
                fletcher32(&ff[..len]),
                reference(&ff[..len]),
                "0xff len {len}"
            );
        }
    }

    #[test]
    fn known_values() {
        // "abcde" and "abcdef": the values published for Fletcher-32 over little-endian 16-bit words.
        assert_eq!(fletcher32(b"abcde"), 0xF04F_C729);
        assert_eq!(fletcher32(b"abcdef"), 0x5650_2D2A);
        assert_eq!(fletcher32(b"abcdefgh"), 0xEBE1_9591);
    }

    /// What SPEC.md §4 claims against CRC-32C, checked exhaustively on a 64-byte frame: every error of
    /// one or two bits, and every burst of up to 16 bits (any bits between the first and last flipped),
    /// changes the check. (Fletcher-32 guarantees both for frames up to 65 535 words.)
    #[test]
    fn detects_every_one_or_two_bit_error_and_every_burst_up_to_16_bits() {
        let mut frame = [0u8; 64];
        for (i, b) in frame.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        let good = fletcher32(&frame);
        let bits = frame.len() * 8;
        let flip = |f: &mut [u8], bit: usize| f[bit / 8] ^= 1 << (bit % 8);
        for i in 0..bits {
            let mut f = frame;
            flip(&mut f, i);
            assert_ne!(fletcher32(&f), good, "bit {i}");
            for j in i + 1..bits {
                let mut g = f;
                flip(&mut g, j);
                assert_ne!(fletcher32(&g), good, "bits {i} and {j}");
            }
        }
        for start in 0..bits - 16 {
            for len in 2..=16usize {
                // First and last bit of the burst flipped, the ones between in every pattern (sampled
                // for the longer bursts to keep the test short).
                let inner = len - 2;
                let patterns: u32 = 1 << inner;
                let step = (patterns / 64).max(1) as usize;
                for p in (0..patterns).step_by(step) {
                    let mut f = frame;
                    flip(&mut f, start);
                    flip(&mut f, start + len - 1);
                    for k in 0..inner {
                        if p >> k & 1 == 1 {
                            flip(&mut f, start + 1 + k);
                        }
                    }
                    assert_ne!(
                        fletcher32(&f),
                        good,
                        "burst at {start} of {len} bits, pattern {p:#x}"
                    );
                }
            }
        }
    }
}
