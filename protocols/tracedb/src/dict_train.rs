//! Training a stream's zstd dictionary with fastCover parameters fitted to the writer's small
//! samples, instead of `ZDICT_trainFromBuffer`'s defaults.
//!
//! `zstd::dict::from_continuous` calls `ZDICT_trainFromBuffer`, which searches five segment sizes
//! with a frequency table of 2^20 entries (6 MB, allocated, cleared and copied for each of the five
//! tries): sized for samples of many MB. A writer's sample is [`crate::DICT_SAMPLE_BYTES`] (128
//! KiB, about 2^17 positions), so a table of 2^17 entries holds every d-mer of it, and one segment
//! size serves (below); the training then takes a fraction of the time (it was a tenth of a 631
//! k-event CTF import's CPU time) for dictionaries that compress as well or better (the file sizes
//! are in BENCHMARKS.md, "Import — binary Linux captures"). The zstd crate binds the fastCover entry points only behind its `experimental`
//! feature, which would rebuild every crate that links zstd; the C library it builds holds them
//! always (zstd 1.5.7, `zdict.h` under `ZDICT_STATIC_LINKING_ONLY`), so they are declared here.

use std::ffi::{c_int, c_uint, c_void};

/// `ZDICT_params_t` of zstd 1.5.7's `zdict.h`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ZdictParams {
    compression_level: c_int,
    notification_level: c_uint,
    dict_id: c_uint,
}

/// `ZDICT_fastCover_params_t` of zstd 1.5.7's `zdict.h` (field order and types as declared there).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FastCoverParams {
    k: c_uint,
    d: c_uint,
    f: c_uint,
    steps: c_uint,
    nb_threads: c_uint,
    split_point: f64,
    accel: c_uint,
    shrink_dict: c_uint,
    shrink_dict_max_regression: c_uint,
    z_params: ZdictParams,
}

unsafe extern "C" {
    fn ZDICT_optimizeTrainFromBuffer_fastCover(
        dict_buffer: *mut c_void,
        dict_buffer_capacity: usize,
        samples_buffer: *const c_void,
        samples_sizes: *const usize,
        nb_samples: c_uint,
        parameters: *mut FastCoverParams,
    ) -> usize;
    fn ZDICT_isError(code: usize) -> c_uint;
}

/// Whether the linked zstd (`ZSTD_versionNumber`, e.g. 10507) is one whose `zdict.h` declares
/// [`FastCoverParams`] as above: the 1.5 series, where the layout has not changed.
fn layout_is_known(version: u32) -> bool {
    (10500..10600).contains(&version)
}

/// Frequency table of 2^17 entries: as many as a 128 KiB sample has positions.
const TABLE_BITS: c_uint = 17;

/// The segment size (bytes) the dictionary is built from.
const SEGMENT_BYTES: c_uint = 200;

/// zstd's default level, which `ZDICT_trainFromBuffer` tunes the entropy tables for too.
const LEVEL: c_int = 3;

/// A dictionary of at most `capacity` bytes trained on `samples` (the samples one after another,
/// `sizes` giving each one's length); `None` when zstd finds nothing worth a dictionary (too few or
/// too small samples), as `zstd::dict::from_continuous` would.
pub(crate) fn train(samples: &[u8], sizes: &[usize], capacity: usize) -> Option<Vec<u8>> {
    if sizes.iter().sum::<usize>() != samples.len() {
        return None;
    }
    if !layout_is_known(zstd::zstd_safe::version_number()) {
        // Another zstd than the one whose header the declarations above follow: the crate's
        // trainer (the default search) rather than a guess at the parameters' layout.
        return zstd::dict::from_continuous(samples, sizes, capacity).ok();
    }
    let nb_samples = c_uint::try_from(sizes.len()).ok()?;
    // One try with a fixed segment size instead of five: `ZDICT_trainFromBuffer` searches k over
    // 50..2000; on the writer's samples of LTTng kernel and ROS 2 user-space streams a segment of
    // 200 bytes gave files 1.3 % and 3.3 % smaller than the search's pick (BENCHMARKS.md).
    let mut params = FastCoverParams {
        k: SEGMENT_BYTES,
        d: 8,
        f: TABLE_BITS,
        nb_threads: 1,
        accel: 1,
        z_params: ZdictParams {
            compression_level: LEVEL,
            ..ZdictParams::default()
        },
        ..FastCoverParams::default()
    };
    let mut dict = vec![0u8; capacity];
    // SAFETY: `dict` is writable for `capacity` bytes; `samples` holds `sizes.len()` samples whose
    // lengths sum to its length (checked above); `params` is a valid `ZDICT_fastCover_params_t`
    // (the layout of zstd 1.5.7's header, which the linked library is) that the call may update.
    let n = unsafe {
        ZDICT_optimizeTrainFromBuffer_fastCover(
            dict.as_mut_ptr().cast(),
            capacity,
            samples.as_ptr().cast(),
            sizes.as_ptr(),
            nb_samples,
            &mut params,
        )
    };
    // SAFETY: a plain function of the returned code.
    if unsafe { ZDICT_isError(n) } != 0 || n > capacity {
        return None;
    }
    dict.truncate(n);
    Some(dict)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of a few shapes that repeat, as a stream's event blocks do.
    fn samples() -> (Vec<u8>, Vec<usize>) {
        let (mut bytes, mut sizes) = (Vec::new(), Vec::new());
        for block in 0..64u32 {
            let start = bytes.len();
            for i in 0..128u32 {
                let x = block * 128 + i;
                bytes.extend_from_slice(b"sched_switch prev_comm=");
                bytes.extend_from_slice(format!("task{} prev_tid={} ", x % 7, x % 13).as_bytes());
                bytes.extend_from_slice(&(x.wrapping_mul(2_654_435_761)).to_le_bytes());
            }
            sizes.push(bytes.len() - start);
        }
        (bytes, sizes)
    }

    #[test]
    fn a_trained_dictionary_is_one_zstd_uses_and_it_compresses_better() {
        let (bytes, sizes) = samples();
        let dict = train(&bytes, &sizes, 16 << 10).expect("a dictionary");
        assert!(!dict.is_empty() && dict.len() <= 16 << 10);
        // A real zstd dictionary (magic, then entropy tables): zstd takes it and gives the data back.
        assert_eq!(&dict[..4], &0xEC30_A437u32.to_le_bytes());
        let block = &bytes[..sizes[0]];
        let with = zstd::bulk::Compressor::with_dictionary(1, &dict)
            .unwrap()
            .compress(block)
            .unwrap();
        let without = zstd::bulk::compress(block, 1).unwrap();
        assert!(
            with.len() < without.len(),
            "{} >= {}",
            with.len(),
            without.len()
        );
        let back = zstd::bulk::Decompressor::with_dictionary(&dict)
            .unwrap()
            .decompress(&with, block.len())
            .unwrap();
        assert_eq!(back, block);
    }

    #[test]
    fn the_linked_zstd_is_one_whose_layout_is_declared_here() {
        // If this fails, zstd was upgraded: check `ZDICT_fastCover_params_t` in its `zdict.h`
        // and widen `layout_is_known` (until then the crate's slower trainer is used).
        assert!(layout_is_known(zstd::zstd_safe::version_number()));
        assert!(!layout_is_known(10407) && !layout_is_known(10600));
    }

    #[test]
    fn samples_that_do_not_add_up_or_are_too_few_give_no_dictionary() {
        let (bytes, mut sizes) = samples();
        sizes[0] += 1;
        assert!(train(&bytes, &sizes, 16 << 10).is_none());
        assert!(train(b"abc", &[3], 16 << 10).is_none());
    }
}
