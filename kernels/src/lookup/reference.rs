//! Table lookups and locality-sensitive hashing: EMBEDDING_LOOKUP, HASHTABLE_LOOKUP and
//! LSH_PROJECTION (types.hal 1.0, `OperationType` 7, 10 and 15).
//!
//! The lookups are type-blind row copies, generic over the element type so one kernel serves
//! TENSOR_FLOAT32, TENSOR_INT32 and TENSOR_QUANT8_ASYMM values (the quantization parameters of
//! the output are the values' own, so no arithmetic is involved).
//!
//! LSH_PROJECTION hashes raw tensor bytes with FarmHash `Fingerprint64`, as the reference does,
//! so the projected bits match the reference exactly for every input type. Its types are 1.0's
//! sparse (1) and dense (2), and NNAPI 1.2's corrected sparse (3).

use crate::KernelError;

/// EMBEDDING_LOOKUP: `values` is viewed as `[rows, row_len]` (every dimension after the first
/// folded into `row_len`); `output` is `[lookups.len(), row_len]` and receives, for each
/// lookup, the row it names.
///
/// An index outside `[0, rows)` is run-time data that validation cannot see, so it is reported
/// as [`KernelError::InvalidData`] (the HAL requires the execution to fail). The indices are
/// all checked before anything is written.
pub fn embedding_lookup<T: Copy>(
    lookups: &[i32],
    values: &[T],
    rows: usize,
    row_len: usize,
    output: &mut [T],
) -> Result<(), KernelError> {
    debug_assert_eq!(values.len(), rows * row_len);
    debug_assert_eq!(output.len(), lookups.len() * row_len);
    if let Some((position, &bad)) = lookups
        .iter()
        .enumerate()
        .find(|&(_, &index)| usize::try_from(index).map_or(true, |index| index >= rows))
    {
        return Err(KernelError::InvalidData(format!(
            "EMBEDDING_LOOKUP: lookup {position} is {bad}, outside [0, {rows})"
        )));
    }
    if row_len == 0 {
        return Ok(());
    }
    for (&index, out_row) in lookups.iter().zip(output.chunks_exact_mut(row_len)) {
        // Checked above: 0 <= index < rows.
        let start = index as usize * row_len;
        out_row.copy_from_slice(&values[start..start + row_len]);
    }
    Ok(())
}

/// HASHTABLE_LOOKUP: `keys` (`[n]`, sorted ascending) and `values` (`[n, row_len]`) form a map;
/// for each lookup the matching row is copied to `output` (`[lookups.len(), row_len]`) and
/// `hits` (`[lookups.len()]`) gets 1, or the output row is zeroed and `hits` gets 0.
///
/// The keys come from the request, so their order cannot be trusted: the search is a binary
/// search (as the reference's `bsearch`), which on unsorted keys may miss a present key but
/// never reads out of bounds. Only keys that have a value row take part, because the
/// reference sizes the search by the values' first dimension and a longer key list must not
/// select a row that does not exist.
///
/// A miss writes `T::default()` (raw zero, not the zero point), as the reference's `memset`.
pub fn hashtable_lookup<T: Copy + Default>(
    lookups: &[i32],
    keys: &[i32],
    values: &[T],
    row_len: usize,
    output: &mut [T],
    hits: &mut [u8],
) {
    debug_assert_eq!(output.len(), lookups.len() * row_len);
    debug_assert_eq!(hits.len(), lookups.len());
    let rows = values.len().checked_div(row_len).unwrap_or(keys.len());
    let keys = &keys[..keys.len().min(rows)];
    for (i, (&lookup, hit)) in lookups.iter().zip(hits.iter_mut()).enumerate() {
        let found = keys.binary_search(&lookup).ok();
        *hit = u8::from(found.is_some());
        if row_len == 0 {
            continue;
        }
        let out_row = &mut output[i * row_len..(i + 1) * row_len];
        match found {
            Some(row) => out_row.copy_from_slice(&values[row * row_len..(row + 1) * row_len]),
            None => out_row.fill(T::default()),
        }
    }
}

/// The LSH_PROJECTION output format (the operation's `type` scalar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LshProjectionType {
    /// Type 1: one int32 per hash function holding its `num_bits` sign bits, first bit most
    /// significant. As in NNAPI 1.0 (and the reference's `SPARSE_DEPRECATED`), the hash
    /// function's index is not folded into the value.
    Sparse,
    /// Type 2: one int32 (0 or 1) per bit, `num_hash · num_bits` in all.
    Dense,
    /// Type 3 (NNAPI 1.2's `SPARSE`, the fix of type 1): as [`Self::Sparse`], plus
    /// `i · 2^num_bits` for hash function `i`, so that each function's signatures occupy their
    /// own range of buckets and two functions never collide on the same value.
    SparseBucketed,
}

impl LshProjectionType {
    /// Maps the operation's `type` scalar; `None` for codes NNAPI does not define.
    pub fn from_code(code: i32) -> Option<Self> {
        match code {
            1 => Some(Self::Sparse),
            2 => Some(Self::Dense),
            3 => Some(Self::SparseBucketed),
            _ => None,
        }
    }
}

/// LSH_PROJECTION: projects the input onto `num_hash · num_bits` sign bits.
///
/// * `hash`: `[num_hash, num_bits]` float seeds, one per output bit.
/// * `input`: the raw little-endian bytes of the input tensor (any element type), viewed as
///   `input_rows` rows (the first dimension) of equal byte length.
/// * `weight`: one weight per input row. Dense uses it (absent means 1.0 each, which is what
///   the reference computes for an omitted weight); Sparse ignores it, since NNAPI requires it
///   omitted there.
/// * `output`: `[num_hash]` for the sparse types, `[num_hash · num_bits]` for Dense.
///
/// Each bit is the sign of `Σ_k weight_k · fingerprint(seed ‖ row_k)`, where the seed's four
/// float bytes are prefixed to the row's bytes and the 64-bit fingerprint is read as a signed
/// integer and widened to `f64` (the reference's `running_sign_bit`). A zero or negative sum
/// gives 0.
// The flat argument list mirrors the operation's operands one for one.
#[allow(clippy::too_many_arguments)]
pub fn lsh_projection(
    hash: &[f32],
    num_hash: usize,
    num_bits: usize,
    input: &[u8],
    input_rows: usize,
    weight: Option<&[f32]>,
    kind: LshProjectionType,
    output: &mut [i32],
) {
    debug_assert_eq!(hash.len(), num_hash * num_bits);
    let row_bytes = input.len().checked_div(input_rows).unwrap_or(0);
    let weight = match kind {
        LshProjectionType::Dense => weight,
        LshProjectionType::Sparse | LshProjectionType::SparseBucketed => None,
    };
    if let Some(w) = weight {
        debug_assert_eq!(w.len(), input_rows);
    }
    // One key buffer reused for every (seed, row) pair: seed bytes, then the row's bytes.
    let mut key = vec![0u8; 4 + row_bytes];
    let mut sign_bit = |seed: f32| -> i32 {
        key[..4].copy_from_slice(&seed.to_le_bytes());
        let mut score = 0.0f64;
        for k in 0..input_rows {
            key[4..].copy_from_slice(&input[k * row_bytes..(k + 1) * row_bytes]);
            let running_value = farmhash::fingerprint64(&key) as i64 as f64;
            score += match weight {
                Some(w) => f64::from(w[k]) * running_value,
                None => running_value,
            };
        }
        i32::from(score > 0.0)
    };
    match kind {
        LshProjectionType::Sparse | LshProjectionType::SparseBucketed => {
            debug_assert_eq!(output.len(), num_hash);
            let bucketed = kind == LshProjectionType::SparseBucketed;
            for (i, out) in output.iter_mut().enumerate().take(num_hash) {
                let seeds = &hash[i * num_bits..(i + 1) * num_bits];
                // Shifting in u32 keeps a full 32-bit signature well defined; its first bit
                // then lands in the sign position, exactly as the reference's int32 shifts.
                let signature = seeds.iter().fold(0u32, |signature, &seed| {
                    (signature << 1) | sign_bit(seed) as u32
                });
                // The bucket offset wraps in 32 bits like the reference's int32 arithmetic;
                // with 32 bits per function it is a multiple of 2^32, i.e. nothing.
                let offset = if bucketed {
                    ((i as u64) << num_bits.min(32)) as u32
                } else {
                    0
                };
                *out = signature.wrapping_add(offset) as i32;
            }
        }
        LshProjectionType::Dense => {
            debug_assert_eq!(output.len(), num_hash * num_bits);
            for (out, &seed) in output.iter_mut().zip(hash) {
                *out = sign_bit(seed);
            }
        }
    }
}

/// FarmHash `Fingerprint64`, i.e. `farmhashna::Hash64`: the 64-bit fingerprint the reference
/// LSH_PROJECTION hashes with. A fingerprint is frozen by definition, so this fixed port gives
/// the reference's bits on every platform (all loads are little-endian, as FarmHash
/// specifies for fingerprints).
mod farmhash {
    const K0: u64 = 0xc3a5_c85c_97cb_3127;
    const K1: u64 = 0xb492_b66f_be98_f273;
    const K2: u64 = 0x9ae1_6a3b_2f90_404f;

    #[inline]
    fn fetch64(s: &[u8], at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(b)
    }

    #[inline]
    fn fetch32(s: &[u8], at: usize) -> u64 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&s[at..at + 4]);
        u64::from(u32::from_le_bytes(b))
    }

    #[inline]
    fn shift_mix(v: u64) -> u64 {
        v ^ (v >> 47)
    }

    #[inline]
    fn hash_len16(u: u64, v: u64, mul: u64) -> u64 {
        let mut a = (u ^ v).wrapping_mul(mul);
        a ^= a >> 47;
        let mut b = (v ^ a).wrapping_mul(mul);
        b ^= b >> 47;
        b.wrapping_mul(mul)
    }

    fn hash_len0to16(s: &[u8]) -> u64 {
        let len = s.len();
        if len >= 8 {
            let mul = K2.wrapping_add(len as u64 * 2);
            let a = fetch64(s, 0).wrapping_add(K2);
            let b = fetch64(s, len - 8);
            let c = b.rotate_right(37).wrapping_mul(mul).wrapping_add(a);
            let d = a.rotate_right(25).wrapping_add(b).wrapping_mul(mul);
            return hash_len16(c, d, mul);
        }
        if len >= 4 {
            let mul = K2.wrapping_add(len as u64 * 2);
            let a = fetch32(s, 0);
            return hash_len16((len as u64).wrapping_add(a << 3), fetch32(s, len - 4), mul);
        }
        if len > 0 {
            let a = u32::from(s[0]);
            let b = u32::from(s[len >> 1]);
            let c = u32::from(s[len - 1]);
            let y = a.wrapping_add(b << 8);
            let z = (len as u32).wrapping_add(c << 2);
            return shift_mix(u64::from(y).wrapping_mul(K2) ^ u64::from(z).wrapping_mul(K0))
                .wrapping_mul(K2);
        }
        K2
    }

    fn hash_len17to32(s: &[u8]) -> u64 {
        let len = s.len();
        let mul = K2.wrapping_add(len as u64 * 2);
        let a = fetch64(s, 0).wrapping_mul(K1);
        let b = fetch64(s, 8);
        let c = fetch64(s, len - 8).wrapping_mul(mul);
        let d = fetch64(s, len - 16).wrapping_mul(K2);
        hash_len16(
            a.wrapping_add(b)
                .rotate_right(43)
                .wrapping_add(c.rotate_right(30))
                .wrapping_add(d),
            a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
                .wrapping_add(c),
            mul,
        )
    }

    fn hash_len33to64(s: &[u8]) -> u64 {
        let len = s.len();
        let mul = K2.wrapping_add(len as u64 * 2);
        let a = fetch64(s, 0).wrapping_mul(K2);
        let b = fetch64(s, 8);
        let c = fetch64(s, len - 8).wrapping_mul(mul);
        let d = fetch64(s, len - 16).wrapping_mul(K2);
        let y = a
            .wrapping_add(b)
            .rotate_right(43)
            .wrapping_add(c.rotate_right(30))
            .wrapping_add(d);
        let z = hash_len16(
            y,
            a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
                .wrapping_add(c),
            mul,
        );
        let e = fetch64(s, 16).wrapping_mul(mul);
        let f = fetch64(s, 24);
        let g = y.wrapping_add(fetch64(s, len - 32)).wrapping_mul(mul);
        let h = z.wrapping_add(fetch64(s, len - 24)).wrapping_mul(mul);
        hash_len16(
            e.wrapping_add(f)
                .rotate_right(43)
                .wrapping_add(g.rotate_right(30))
                .wrapping_add(h),
            e.wrapping_add(f.wrapping_add(a).rotate_right(18))
                .wrapping_add(g),
            mul,
        )
    }

    /// Mixes 32 bytes at `s[at..]` with two seeds into a 128-bit pair.
    #[inline]
    fn weak_hash_len32_with_seeds(s: &[u8], at: usize, a: u64, b: u64) -> (u64, u64) {
        let w = fetch64(s, at);
        let x = fetch64(s, at + 8);
        let y = fetch64(s, at + 16);
        let z = fetch64(s, at + 24);
        let mut a = a.wrapping_add(w);
        let mut b = b.wrapping_add(a).wrapping_add(z).rotate_right(21);
        let c = a;
        a = a.wrapping_add(x).wrapping_add(y);
        b = b.wrapping_add(a.rotate_right(44));
        (a.wrapping_add(z), b.wrapping_add(c))
    }

    /// `Fingerprint64(s)`.
    pub fn fingerprint64(s: &[u8]) -> u64 {
        let len = s.len();
        if len <= 16 {
            return hash_len0to16(s);
        }
        if len <= 32 {
            return hash_len17to32(s);
        }
        if len <= 64 {
            return hash_len33to64(s);
        }

        // Over 64 bytes: 64-byte blocks through a 56-byte state, then the last 64 bytes
        // (which may overlap the final block) once more with a length-dependent multiplier.
        const SEED: u64 = 81;
        let mut x = SEED;
        let mut y = SEED.wrapping_mul(K1).wrapping_add(113);
        let mut z = shift_mix(y.wrapping_mul(K2).wrapping_add(113)).wrapping_mul(K2);
        let mut v = (0u64, 0u64);
        let mut w = (0u64, 0u64);
        x = x.wrapping_mul(K2).wrapping_add(fetch64(s, 0));

        let end = ((len - 1) / 64) * 64;
        let last64 = len - 64;
        let mut p = 0;
        while p != end {
            x = x
                .wrapping_add(y)
                .wrapping_add(v.0)
                .wrapping_add(fetch64(s, p + 8))
                .rotate_right(37)
                .wrapping_mul(K1);
            y = y
                .wrapping_add(v.1)
                .wrapping_add(fetch64(s, p + 48))
                .rotate_right(42)
                .wrapping_mul(K1);
            x ^= w.1;
            y = y.wrapping_add(v.0).wrapping_add(fetch64(s, p + 40));
            z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(K1);
            v = weak_hash_len32_with_seeds(s, p, v.1.wrapping_mul(K1), x.wrapping_add(w.0));
            w = weak_hash_len32_with_seeds(
                s,
                p + 32,
                z.wrapping_add(w.1),
                y.wrapping_add(fetch64(s, p + 16)),
            );
            std::mem::swap(&mut z, &mut x);
            p += 64;
        }
        let mul = K1.wrapping_add((z & 0xff) << 1);
        let p = last64;
        w.0 = w.0.wrapping_add(((len - 1) & 63) as u64);
        v.0 = v.0.wrapping_add(w.0);
        w.0 = w.0.wrapping_add(v.0);
        x = x
            .wrapping_add(y)
            .wrapping_add(v.0)
            .wrapping_add(fetch64(s, p + 8))
            .rotate_right(37)
            .wrapping_mul(mul);
        y = y
            .wrapping_add(v.1)
            .wrapping_add(fetch64(s, p + 48))
            .rotate_right(42)
            .wrapping_mul(mul);
        x ^= w.1.wrapping_mul(9);
        y = y
            .wrapping_add(v.0.wrapping_mul(9))
            .wrapping_add(fetch64(s, p + 40));
        z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(mul);
        v = weak_hash_len32_with_seeds(s, p, v.1.wrapping_mul(mul), x.wrapping_add(w.0));
        w = weak_hash_len32_with_seeds(
            s,
            p + 32,
            z.wrapping_add(w.1),
            y.wrapping_add(fetch64(s, p + 16)),
        );
        std::mem::swap(&mut z, &mut x);
        hash_len16(
            hash_len16(v.0, w.0, mul)
                .wrapping_add(shift_mix(y).wrapping_mul(K0))
                .wrapping_add(z),
            hash_len16(v.1, w.1, mul).wrapping_add(x),
            mul,
        )
    }

    #[cfg(test)]
    mod tests {
        use super::fingerprint64;

        /// Bytes `i·7 + 3 (mod 256)`: not periodic over any block size the hash uses.
        fn pattern(len: usize) -> Vec<u8> {
            (0..len).map(|i| (i * 7 + 3) as u8).collect()
        }

        /// Fingerprints from the C++ FarmHash `util::Fingerprint64`, covering every length
        /// branch (0, 1–3, 4–7, 8–16, 17–32, 33–64, one block + tail, exact blocks, many
        /// blocks).
        #[test]
        fn matches_farmhash_fingerprint64() {
            let expected: &[(usize, u64)] = &[
                (0, 0x9ae16a3b2f90404f),
                (1, 0xbec09cc447469d8b),
                (2, 0x16f8263645a8ecf5),
                (3, 0x40b4412e33eefd64),
                (4, 0xf3c7ee05197a7b92),
                (5, 0x156112f7c93e5cb3),
                (7, 0x4fef0b39c12aa9a4),
                (8, 0x0c97ecbc1e9d2626),
                (9, 0xe51cf38098a5bfff),
                (12, 0x07e11fa045e761bc),
                (15, 0x2ca35f0a039b4f1b),
                (16, 0x7eda0ed8c837a168),
                (17, 0xc9518fe63ebf6127),
                (24, 0x310064a8de2c42d2),
                (31, 0xbd5ca6ee28fc43cb),
                (32, 0xa53f806f23a314e8),
                (33, 0xc24f9d7ce864f0e9),
                (40, 0xb3987ba065f59b3a),
                (63, 0x9643c13fc68d469c),
                (64, 0x0566266cb579eca2),
                (65, 0x77e0867714e6b0e4),
                (100, 0x9e17c36fe4a61b08),
                (127, 0xcaa19a12c8273b7e),
                (128, 0x666823960b3ac271),
                (129, 0x98206b8579bca083),
                (200, 0x6d7105b27cbe2fd7),
                (1000, 0xe021806cc1e3dc4c),
            ];
            for &(len, want) in expected {
                assert_eq!(fingerprint64(&pattern(len)), want, "length {len}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_lookup_copies_rows_and_rejects_bad_indices() {
        let values = [0.0f32, 0.1, 1.0, 1.1, 2.0, 2.1];
        let mut out = [9.0f32; 6];
        embedding_lookup(&[2, 0, 2], &values, 3, 2, &mut out).unwrap();
        assert_eq!(out, [2.0, 2.1, 0.0, 0.1, 2.0, 2.1]);

        let mut out = [7u8; 4];
        for bad in [[0, 3], [-1, 0], [i32::MIN, 0]] {
            let err = embedding_lookup(&bad, &[1u8, 2, 3, 4, 5, 6], 3, 2, &mut out);
            assert!(matches!(err, Err(KernelError::InvalidData(_))));
            assert_eq!(out, [7u8; 4], "nothing written on error");
        }
        // Zero-length rows still validate the indices.
        assert!(embedding_lookup::<f32>(&[0], &[], 1, 0, &mut []).is_ok());
        assert!(embedding_lookup::<f32>(&[1], &[], 1, 0, &mut []).is_err());
    }

    #[test]
    fn hashtable_lookup_hits_and_misses() {
        let keys = [-3, 7, 20];
        let values = [1i32, 2, 3, 4, 5, 6];
        let mut out = [9i32; 8];
        let mut hits = [9u8; 4];
        hashtable_lookup(&[20, 8, -3, 7], &keys, &values, 2, &mut out, &mut hits);
        assert_eq!(out, [5, 6, 0, 0, 1, 2, 3, 4]);
        assert_eq!(hits, [1, 0, 1, 1]);
    }

    #[test]
    fn hashtable_lookup_untrusted_keys_stay_in_bounds() {
        // Unsorted keys, and more keys than value rows: any answer is acceptable, but every
        // selected row must exist.
        let keys = [50, 1, 40, 2, 30, 99, 98];
        let values = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let lookups: Vec<i32> = (-2..110).collect();
        let mut out = vec![0.0f32; lookups.len()];
        let mut hits = vec![0u8; lookups.len()];
        hashtable_lookup(&lookups, &keys, &values, 1, &mut out, &mut hits);
        for ((&l, &o), &h) in lookups.iter().zip(&out).zip(&hits) {
            if h == 1 {
                let row = keys[..5].iter().position(|&k| k == l).unwrap();
                assert_eq!(o, values[row]);
            } else {
                assert_eq!(o, 0.0);
            }
        }
        assert_eq!(
            hits[(99 + 2) as usize],
            0,
            "key without a value row never hits"
        );
    }

    #[test]
    fn lsh_sparse_packs_bits_most_significant_first() {
        // The same seed repeated gives the same bit, so the packed value is 0 or all ones.
        let input = 12345i32.to_le_bytes();
        let mut dense = [0i32; 1];
        lsh_projection(
            &[0.5],
            1,
            1,
            &input,
            1,
            None,
            LshProjectionType::Dense,
            &mut dense,
        );
        let mut sparse = [0i32; 2];
        lsh_projection(
            &[0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
            2,
            3,
            &input,
            1,
            None,
            LshProjectionType::Sparse,
            &mut sparse,
        );
        assert_eq!(sparse, [dense[0] * 7, dense[0] * 7]);
    }

    #[test]
    fn lsh_dense_weight_sign_flips_bits() {
        let hash = [0.123f32, 0.456, -0.321, -0.654, 1.234, 5.678];
        let input: Vec<u8> = [12345i32, 54321, 67890, 9876]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut plus = [0i32; 6];
        let mut minus = [0i32; 6];
        let kind = LshProjectionType::Dense;
        lsh_projection(&hash, 3, 2, &input, 2, Some(&[1.0, 1.0]), kind, &mut plus);
        lsh_projection(
            &hash,
            3,
            2,
            &input,
            2,
            Some(&[-1.0, -1.0]),
            kind,
            &mut minus,
        );
        for (p, m) in plus.iter().zip(&minus) {
            assert_eq!(p + m, 1, "a nonzero score flips sign with the weights");
        }
        let mut unweighted = [0i32; 6];
        lsh_projection(&hash, 3, 2, &input, 2, None, kind, &mut unweighted);
        assert_eq!(unweighted, plus);
    }

    #[test]
    fn lsh_sparse_type3_offsets_each_function_into_its_own_buckets() {
        let hash = [
            0.123f32, 0.456, -0.321, -0.654, 1.234, 5.678, -4.321, -8.765,
        ];
        let input: Vec<u8> = [12345i32, 54321, 67890, 9876, -12345678, -87654321]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let run = |kind, num_hash, num_bits, hash: &[f32]| {
            let mut out = vec![-7i32; num_hash];
            lsh_projection(hash, num_hash, num_bits, &input, 3, None, kind, &mut out);
            out
        };
        let old = run(LshProjectionType::Sparse, 4, 2, &hash);
        let new = run(LshProjectionType::SparseBucketed, 4, 2, &hash);
        assert!(old.iter().all(|&v| (0..4).contains(&v)), "{old:?}");
        for (i, (&o, &n)) in old.iter().zip(&new).enumerate() {
            assert_eq!(n, o + 4 * i as i32, "function {i}: type 1 {o}, type 3 {n}");
        }
        assert_ne!(
            old, new,
            "the types differ whenever there are two functions"
        );
        // Buckets are disjoint: no two functions share a value.
        let mut seen = new.clone();
        seen.dedup();
        assert_eq!(seen.len(), new.len());

        // 32 bits per function: the offset is a multiple of 2^32, which int32 wraps away.
        let wide: Vec<f32> = (0..64).map(|k| hash[k % 8] + k as f32).collect();
        assert_eq!(
            run(LshProjectionType::SparseBucketed, 2, 32, &wide),
            run(LshProjectionType::Sparse, 2, 32, &wide)
        );
        // 31 bits: function 1 adds 2^31, flipping the sign bit.
        let narrow = &wide[..62];
        let (o, n) = (
            run(LshProjectionType::Sparse, 2, 31, narrow),
            run(LshProjectionType::SparseBucketed, 2, 31, narrow),
        );
        assert_eq!(n[0], o[0]);
        assert_eq!(n[1], o[1].wrapping_add(i32::MIN));
        assert_eq!(
            LshProjectionType::from_code(3),
            Some(LshProjectionType::SparseBucketed)
        );
    }

    #[test]
    fn lsh_degenerate_shapes_do_not_panic() {
        let mut out = [5i32; 2];
        lsh_projection(
            &[],
            2,
            0,
            &[1, 2],
            2,
            None,
            LshProjectionType::Sparse,
            &mut out,
        );
        assert_eq!(out, [0, 0]);
        let mut out = [5i32; 2];
        lsh_projection(
            &[1.0, 2.0],
            1,
            2,
            &[],
            0,
            None,
            LshProjectionType::Dense,
            &mut out,
        );
        assert_eq!(out, [0, 0], "an empty sum is not positive");
    }
}
