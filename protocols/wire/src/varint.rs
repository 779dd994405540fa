//! LEB128 variable-length integers (the same encoding postcard uses) and zigzag for signed values.

/// The longest encoding of a `u64`.
pub const MAX_VARINT_LEN: usize = 10;

/// Writes `value` as an unsigned LEB128 varint at the start of `out`; returns the bytes used, or `None`
/// when `out` is too short.
#[inline]
pub fn encode_u64(mut value: u64, out: &mut [u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        let slot = out.get_mut(i)?;
        i += 1;
        if value == 0 {
            *slot = byte;
            return Some(i);
        }
        *slot = byte | 0x80;
    }
}

/// The number of bytes [`encode_u64`] uses for `value`.
#[inline]
pub const fn len_u64(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Maps a signed value onto an unsigned one so that small magnitudes stay small (0, -1, 1, -2 → 0, 1, 2, 3).
#[inline]
pub const fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub const fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        let mut buf = [0u8; MAX_VARINT_LEN];
        assert_eq!(encode_u64(0, &mut buf), Some(1));
        assert_eq!(buf[0], 0);
        assert_eq!(encode_u64(127, &mut buf), Some(1));
        assert_eq!(encode_u64(128, &mut buf), Some(2));
        assert_eq!(&buf[..2], &[0x80, 0x01]);
        assert_eq!(encode_u64(300, &mut buf), Some(2));
        assert_eq!(&buf[..2], &[0xac, 0x02]);
        assert_eq!(encode_u64(u64::MAX, &mut buf), Some(10));
        assert_eq!(buf[9], 0x01);
    }

    #[test]
    fn length_matches_encoding() {
        let mut buf = [0u8; MAX_VARINT_LEN];
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, (1u64 << shift) + 1] {
                assert_eq!(Some(len_u64(v)), encode_u64(v, &mut buf), "{v}");
            }
        }
    }

    #[test]
    fn short_buffer_is_refused() {
        let mut buf = [0u8; 1];
        assert_eq!(encode_u64(128, &mut buf), None);
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, -2, 2, i64::MIN, i64::MAX, 12345, -12345] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}
