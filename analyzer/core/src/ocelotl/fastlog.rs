//! A natural logarithm four lanes at a time that returns the same bits as the host's `log`, for
//! the temporal qualities' Θ(S·U·T²) logarithms (their cost is almost all logarithms).
//!
//! lpaggreg's results depend on the last bit of every `log`, and `f64::ln` is the C library's
//! `log`. On x86-64 glibc ≥ 2.28 with FMA and AVX2, that is `__log_fma`: Szabolcs Nagy's
//! table-driven algorithm (128 subintervals, a degree-5 polynomial) compiled with fused
//! multiply-adds. [`log4`] performs the same operations in the same order, fused where the
//! library's machine code fuses them, on the same constants (read from glibc 2.36's
//! `__log_data`), so each lane rounds exactly as one scalar call does. Inputs the library sends to
//! another path (within 1/16 of 1, subnormal, zero, negative, infinite, NaN) are not handled here:
//! [`needs_scalar`] flags them and the caller asks `f64::ln`.
//!
//! Whether this really is the host's `log` is checked once per process, against `f64::ln` on
//! 2^16 inputs spread over every exponent and every table subinterval ([`available`]). Any other
//! C library, an older glibc, or a CPU without FMA fails that check (or the feature test) and the
//! callers keep their scalar loops: the fast path can make the qualities faster, never different.

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{available, log4, needs_scalar};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// `ln 2` split in a high part with trailing zeros and the rest.
    const LN2_HI: u64 = 0x3fe6_2e42_fefa_3800;
    const LN2_LO: u64 = 0x3d2e_f357_93c7_6730;
    /// Coefficients of `log1p(r) − r` for |r| < 1/256 (the first, 1, is implicit).
    const POLY: [u64; 5] = [
        0xbfe0_0000_0000_0001,
        0x3fd5_5555_5551_305b,
        0xbfcf_ffff_ffeb_4590,
        0x3fc9_99b3_24f1_0111,
        0xbfc5_5575_e506_c89f,
    ];
    /// The reduction subtracts this from the bits of x, so the mantissa lands in [0x1.6p-1, 0x1.6p0).
    const OFF: u64 = 0x3fe6_0000_0000_0000;
    /// `(1/c, ln c)` of the 128 subintervals of [0x1.6p-1, 0x1.6p0), c near each centre.
    #[rustfmt::skip]
    const TABLE: [(u64, u64); 128] = [
        (0x3ff734f0c3e0de9f, 0xbfd7cc7f79e69000),
        (0x3ff713786a2ce91f, 0xbfd76feec20d0000),
        (0x3ff6f26008fab5a0, 0xbfd713e31351e000),
        (0x3ff6d1a61f138c7d, 0xbfd6b85b38287800),
        (0x3ff6b1490bc5b4d1, 0xbfd65d5590807800),
        (0x3ff69147332f0cba, 0xbfd602d076180000),
        (0x3ff6719f18224223, 0xbfd5a8ca86909000),
        (0x3ff6524f99a51ed9, 0xbfd54f4356035000),
        (0x3ff63356aa8f24c4, 0xbfd4f637c36b4000),
        (0x3ff614b36b9ddc14, 0xbfd49da7fda85000),
        (0x3ff5f66452c65c4c, 0xbfd445923989a800),
        (0x3ff5d867b5912c4f, 0xbfd3edf439b0b800),
        (0x3ff5babccb5b90de, 0xbfd396ce448f7000),
        (0x3ff59d61f2d91a78, 0xbfd3401e17bda000),
        (0x3ff5805612465687, 0xbfd2e9e2ef468000),
        (0x3ff56397cee76bd3, 0xbfd2941b3830e000),
        (0x3ff54725e2a77f93, 0xbfd23ec58cda8800),
        (0x3ff52aff42064583, 0xbfd1e9e129279000),
        (0x3ff50f22dbb2bddf, 0xbfd1956d2b48f800),
        (0x3ff4f38f4734ded7, 0xbfd141679ab9f800),
        (0x3ff4d843cfde2840, 0xbfd0edd094ef9800),
        (0x3ff4bd3ec078a3c8, 0xbfd09aa518db1000),
        (0x3ff4a27fc3e0258a, 0xbfd047e65263b800),
        (0x3ff4880524d48434, 0xbfcfeb224586f000),
        (0x3ff46dce1b192d0b, 0xbfcf474a7517b000),
        (0x3ff453d9d3391854, 0xbfcea4443d103000),
        (0x3ff43a2744b4845a, 0xbfce020d44e9b000),
        (0x3ff420b54115f8fb, 0xbfcd60a22977f000),
        (0x3ff40782da3ef4b1, 0xbfccc00104959000),
        (0x3ff3ee8f5d57fe8f, 0xbfcc202956891000),
        (0x3ff3d5d9a00b4ce9, 0xbfcb81178d811000),
        (0x3ff3bd60c010c12b, 0xbfcae2c9ccd3d000),
        (0x3ff3a5242b75dab8, 0xbfca45402e129000),
        (0x3ff38d22cd9fd002, 0xbfc9a877681df000),
        (0x3ff3755bc5847a1c, 0xbfc90c6d69483000),
        (0x3ff35dce49ad36e2, 0xbfc87120a645c000),
        (0x3ff34679984dd440, 0xbfc7d68fb4143000),
        (0x3ff32f5cceffcb24, 0xbfc73cb83c627000),
        (0x3ff3187775a10d49, 0xbfc6a39a9b376000),
        (0x3ff301c8373e3990, 0xbfc60b3154b7a000),
        (0x3ff2eb4ebb95f841, 0xbfc5737d76243000),
        (0x3ff2d50a0219a9d1, 0xbfc4dc7b8fc23000),
        (0x3ff2bef9a8b7fd2a, 0xbfc4462c51d20000),
        (0x3ff2a91c7a0c1bab, 0xbfc3b08abc830000),
        (0x3ff293726014b530, 0xbfc31b996b490000),
        (0x3ff27dfa5757a1f5, 0xbfc2875490a44000),
        (0x3ff268b39b1d3bbf, 0xbfc1f3b9f879a000),
        (0x3ff2539d838ff5bd, 0xbfc160c8252ca000),
        (0x3ff23eb7aac9083b, 0xbfc0ce7f57f72000),
        (0x3ff22a012ba940b6, 0xbfc03cdc49fea000),
        (0x3ff2157996cc4132, 0xbfbf57bdbc4b8000),
        (0x3ff201201dd2fc9b, 0xbfbe370896404000),
        (0x3ff1ecf4494d480b, 0xbfbd17983ef94000),
        (0x3ff1d8f5528f6569, 0xbfbbf9674ed8a000),
        (0x3ff1c52311577e7c, 0xbfbadc79202f6000),
        (0x3ff1b17c74cb26e9, 0xbfb9c0c3e7288000),
        (0x3ff19e010c2c1ab6, 0xbfb8a646b372c000),
        (0x3ff18ab07bb670bd, 0xbfb78d01b3ac0000),
        (0x3ff1778a25efbcb6, 0xbfb674f145380000),
        (0x3ff1648d354c31da, 0xbfb55e0e6d878000),
        (0x3ff151b990275fdd, 0xbfb4485cdea1e000),
        (0x3ff13f0ea432d24c, 0xbfb333d94d6aa000),
        (0x3ff12c8b7210f9da, 0xbfb22079f8c56000),
        (0x3ff11a3028ecb531, 0xbfb10e4698622000),
        (0x3ff107fbda8434af, 0xbfaffa6c6ad20000),
        (0x3ff0f5ee0f4e6bb3, 0xbfadda8d4a774000),
        (0x3ff0e4065d2a9fce, 0xbfabbcece4850000),
        (0x3ff0d244632ca521, 0xbfa9a1894012c000),
        (0x3ff0c0a77ce2981a, 0xbfa788583302c000),
        (0x3ff0af2f83c636d1, 0xbfa5715e67d68000),
        (0x3ff09ddb98a01339, 0xbfa35c8a49658000),
        (0x3ff08cabaf52e7df, 0xbfa149e364154000),
        (0x3ff07b9f2f4e28fb, 0xbf9e72c082eb8000),
        (0x3ff06ab58c358f19, 0xbf9a55f152528000),
        (0x3ff059eea5ecf92c, 0xbf963d62cf818000),
        (0x3ff04949cdd12c90, 0xbf9228fb8caa0000),
        (0x3ff038c6c6f0ada9, 0xbf8c317b20f90000),
        (0x3ff02865137932a9, 0xbf8419355daa0000),
        (0x3ff0182427ea7348, 0xbf781203c2ec0000),
        (0x3ff008040614b195, 0xbf60040979240000),
        (0x3fefe01ff726fa1a, 0x3f6feff384900000),
        (0x3fefa11cc261ea74, 0x3f87dc41353d0000),
        (0x3fef6310b081992e, 0x3f93cea3c4c28000),
        (0x3fef25f63ceeadcd, 0x3f9b9fc114890000),
        (0x3feee9c8039113e7, 0x3fa1b0d8ce110000),
        (0x3feeae8078cbb1ab, 0x3fa58a5bd001c000),
        (0x3fee741aa29d0c9b, 0x3fa95c8340d88000),
        (0x3fee3a91830a99b5, 0x3fad276aef578000),
        (0x3fee01e009609a56, 0x3fb07598e598c000),
        (0x3fedca01e577bb98, 0x3fb253f5e30d2000),
        (0x3fed92f20b7c9103, 0x3fb42edd8b380000),
        (0x3fed5cac66fb5cce, 0x3fb606598757c000),
        (0x3fed272caa5ede9d, 0x3fb7da76356a0000),
        (0x3fecf26e3e6b2ccd, 0x3fb9ab434e1c6000),
        (0x3fecbe6da2a77902, 0x3fbb78c7bb0d6000),
        (0x3fec8b266d37086d, 0x3fbd431332e72000),
        (0x3fec5894bd5d5804, 0x3fbf0a3171de6000),
        (0x3fec26b533bb9f8c, 0x3fc067152b914000),
        (0x3febf583eeece73f, 0x3fc147858292b000),
        (0x3febc4fd75db96c1, 0x3fc2266ecdca3000),
        (0x3feb951e0c864a28, 0x3fc303d7a6c55000),
        (0x3feb65e2c5ef3e2c, 0x3fc3dfc33c331000),
        (0x3feb374867c9888b, 0x3fc4ba366b7a8000),
        (0x3feb094b211d304a, 0x3fc5933928d1f000),
        (0x3feadbe885f2ef7e, 0x3fc66acd2418f000),
        (0x3feaaf1d31603da2, 0x3fc740f8ec669000),
        (0x3fea82e63fd358a7, 0x3fc815c0f51af000),
        (0x3fea5740ef09738b, 0x3fc8e92954f68000),
        (0x3fea2c2a90ab4b27, 0x3fc9bb3602f84000),
        (0x3fea01a01393f2d1, 0x3fca8bed1c2c0000),
        (0x3fe9d79f24db3c1b, 0x3fcb5b515c01d000),
        (0x3fe9ae2505c7b190, 0x3fcc2967ccbcc000),
        (0x3fe9852ef297ce2f, 0x3fccf635d5486000),
        (0x3fe95cbaeea44b75, 0x3fcdc1bd3446c000),
        (0x3fe934c69de74838, 0x3fce8c01b8cfe000),
        (0x3fe90d4f2f6752e6, 0x3fcf5509c0179000),
        (0x3fe8e6528effd79d, 0x3fd00e6c121fb800),
        (0x3fe8bfce9fcc007c, 0x3fd071b80e93d000),
        (0x3fe899c0dabec30e, 0x3fd0d46b9e867000),
        (0x3fe87427aa2317fb, 0x3fd13687334bd000),
        (0x3fe84f00acb39a08, 0x3fd1980d67234800),
        (0x3fe82a49e8653e55, 0x3fd1f8ffe0cc8000),
        (0x3fe8060195f40260, 0x3fd2595fd7636800),
        (0x3fe7e22563e0a329, 0x3fd2b9300914a800),
        (0x3fe7beb377dcb5ad, 0x3fd3187210436000),
        (0x3fe79baa679725c2, 0x3fd377266dec1800),
        (0x3fe77907f2170657, 0x3fd3d54ffbaf3000),
        (0x3fe756cadbd6130c, 0x3fd432eee32fe000),
    ];

    /// The table as two arrays of doubles, the layout the gathers read.
    struct Table {
        inv_c: [f64; 128],
        ln_c: [f64; 128],
    }

    static TABLE_F64: Table = {
        let mut t = Table {
            inv_c: [0.0; 128],
            ln_c: [0.0; 128],
        };
        let mut i = 0;
        while i < 128 {
            t.inv_c[i] = f64::from_bits(TABLE[i].0);
            t.ln_c[i] = f64::from_bits(TABLE[i].1);
            i += 1;
        }
        t
    };

    /// ln of four positive normal doubles outside [1 − 1/16, 1 + 0x1.09p-4); other lanes get a
    /// meaningless value (see [`needs_scalar`]).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn log4(x: __m256d) -> __m256d {
        let c = |bits: u64| _mm256_set1_pd(f64::from_bits(bits));
        let ix = _mm256_castpd_si256(x);
        let tmp = _mm256_sub_epi64(ix, _mm256_set1_epi64x(OFF as i64));
        let i = _mm256_and_si256(_mm256_srli_epi64::<45>(tmp), _mm256_set1_epi64x(127));
        // k = tmp >> 52 (arithmetic), in −1075..1024: biased by 2048 into the low mantissa bits
        // of 2^52, where the subtraction below converts it to a double exactly.
        let biased = _mm256_xor_si256(_mm256_srli_epi64::<52>(tmp), _mm256_set1_epi64x(0x800));
        let kd = _mm256_sub_pd(
            _mm256_castsi256_pd(_mm256_or_si256(
                biased,
                _mm256_set1_epi64x(0x4330_0000_0000_0000),
            )),
            _mm256_set1_pd(4_503_599_627_372_544.0), // 2^52 + 2048
        );
        let z = _mm256_castsi256_pd(_mm256_sub_epi64(
            ix,
            _mm256_and_si256(tmp, _mm256_set1_epi64x((0xfff_u64 << 52) as i64)),
        ));
        // SAFETY: every index is masked to 0..128, the length of both arrays.
        let (inv_c, ln_c) = unsafe {
            (
                _mm256_i64gather_pd::<8>(TABLE_F64.inv_c.as_ptr(), i),
                _mm256_i64gather_pd::<8>(TABLE_F64.ln_c.as_ptr(), i),
            )
        };
        // The library's operation order, fused exactly where its machine code fuses.
        let w = _mm256_fmadd_pd(kd, c(LN2_HI), ln_c);
        let r = _mm256_fmadd_pd(z, inv_c, _mm256_set1_pd(-1.0));
        let a21 = _mm256_fmadd_pd(r, c(POLY[2]), c(POLY[1]));
        let hi = _mm256_add_pd(r, w);
        let r2 = _mm256_mul_pd(r, r);
        let lo = _mm256_fmadd_pd(kd, c(LN2_LO), _mm256_add_pd(_mm256_sub_pd(w, hi), r));
        let r3 = _mm256_mul_pd(r, r2);
        let a43 = _mm256_fmadd_pd(r, c(POLY[4]), c(POLY[3]));
        let lo = _mm256_fmadd_pd(r2, c(POLY[0]), lo);
        let poly = _mm256_fmadd_pd(a43, r2, a21);
        _mm256_add_pd(_mm256_fmadd_pd(r3, poly, lo), hi)
    }

    /// Lanes (bit i for lane i) that [`log4`] does not compute as the library does: not a
    /// normal finite positive double, or within the library's separate near-1 range.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn needs_scalar(x: __m256d) -> i32 {
        // Positive doubles order as their bits, so the library's integer range tests are
        // these comparisons (all false for NaN, which therefore needs the scalar call).
        let normal = _mm256_and_pd(
            _mm256_cmp_pd::<_CMP_GE_OQ>(x, _mm256_set1_pd(f64::MIN_POSITIVE)),
            _mm256_cmp_pd::<_CMP_LT_OQ>(x, _mm256_set1_pd(f64::INFINITY)),
        );
        let away_from_one = _mm256_or_pd(
            _mm256_cmp_pd::<_CMP_LT_OQ>(x, _mm256_set1_pd(f64::from_bits(0x3fee_0000_0000_0000))),
            _mm256_cmp_pd::<_CMP_GE_OQ>(x, _mm256_set1_pd(f64::from_bits(0x3ff1_0900_0000_0000))),
        );
        !_mm256_movemask_pd(_mm256_and_pd(normal, away_from_one)) & 0xf
    }

    /// True when this CPU has AVX2 and FMA and [`log4`] gives `f64::ln`'s bits on the check
    /// sample; decided once per process.
    pub(crate) fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                // SAFETY: both features were detected just above.
                && unsafe { agrees_with_host(&check_sample()) }
        })
    }

    /// 2^16 inputs: every table subinterval at every 8th exponent, plus values spread
    /// log-uniformly over all normal doubles and uniformly over the magnitudes traces give.
    pub(super) fn check_sample() -> Vec<f64> {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            // xorshift64*: any well-spread bit pattern will do.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut xs = Vec::with_capacity(1 << 16);
        for exp in (1..2047_u64).step_by(8) {
            for i in 0..128_u64 {
                xs.push(f64::from_bits(
                    (exp << 52) | (i << 45) | (next() & ((1 << 45) - 1)),
                ));
            }
        }
        while xs.len() < 1 << 16 {
            let bits = next();
            xs.push(f64::from_bits(bits & 0x7fff_ffff_ffff_ffff));
            xs.push(1.0 + (bits >> 11) as f64 * (1e9 / (1u64 << 53) as f64));
        }
        xs.truncate(1 << 16);
        xs
    }

    /// Whether [`log4`] returns `f64::ln`'s bits on every input it handles among `xs`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn agrees_with_host(xs: &[f64]) -> bool {
        xs.chunks_exact(4).all(|x| {
            let mut out = [0.0; 4];
            // SAFETY: `x` holds four doubles and `out` has room for four.
            let v = unsafe { _mm256_loadu_pd(x.as_ptr()) };
            let scalar = needs_scalar(v);
            unsafe { _mm256_storeu_pd(out.as_mut_ptr(), log4(v)) };
            (0..4).all(|k| scalar & (1 << k) != 0 || out[k].to_bits() == x[k].ln().to_bits())
        })
    }
}

/// Elsewhere the callers use their scalar loops.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn available() -> bool {
    false
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::x86::{agrees_with_host, check_sample};

    #[test]
    fn the_vector_log_is_the_hosts_bit_for_bit_or_is_not_used() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            assert!(!super::available());
            return;
        }
        // SAFETY: both features were detected just above.
        let agrees = unsafe { agrees_with_host(&check_sample()) };
        assert_eq!(super::available(), agrees);
    }

    #[test]
    fn a_million_more_inputs_agree() {
        if !super::available() {
            return;
        }
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let xs: Vec<f64> = (0..1 << 20)
            .map(|i| {
                crate::ocelotl::xorshift(&mut state);
                if i % 2 == 0 {
                    f64::from_bits(state & 0x7fff_ffff_ffff_ffff)
                } else {
                    (state >> 11) as f64 * (1e7 / (1u64 << 53) as f64)
                }
            })
            .collect();
        // SAFETY: `available` checked AVX2 and FMA.
        assert!(unsafe { agrees_with_host(&xs) });
    }
}
