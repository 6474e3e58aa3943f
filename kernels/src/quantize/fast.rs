//! QUANTIZE and DEQUANTIZE on the kernel table's vector loops
//! ([`crate::ukernels::quant8::U8Convert`]), equal to [`super::reference`] element for element:
//! the same int32 difference, conversion and float32 product for DEQUANTIZE, the same division,
//! rounding (half away from zero) and NaN-to-255 clamp for QUANTIZE. Tables without the slot
//! (the portable level) run the reference loops.

use crate::parallel::{for_chunks, pays_to_split, speed};
use crate::ukernels::Ukernels;
use crate::QuantParams;

use super::reference;

/// Elements per task of a parallel pass (a multiple of every kernel's vector width).
const CHUNK: usize = 1 << 14;

/// `body(input run, output run)` over the whole tensor, in runs of [`CHUNK`] spread over the
/// pool when the pass is long enough to pay for a fork.
fn chunked<T, U>(input: &[T], output: &mut [U], body: impl Fn(&[T], &mut [U]) + Sync)
where
    T: Sync,
    U: Send,
{
    assert_eq!(input.len(), output.len(), "lengths");
    if pays_to_split(output.len(), speed::CONVERT_VECTOR_ELEMENTS) {
        for_chunks(output, CHUNK, |i, dst| {
            let start = i * CHUNK;
            body(&input[start..start + dst.len()], dst);
        });
    } else {
        body(input, output);
    }
}

/// DEQUANTIZE of bytes read as `b ^ flip` with zero point `zp`.
fn dequantize(uk: &Ukernels, input: &[u8], flip: u8, zp: i32, scale: f32, output: &mut [f32]) {
    let Some(c) = uk.u8_convert else {
        unreachable!("callers check the slot");
    };
    chunked(input, output, |src, dst| {
        // SAFETY: `src` and `dst` are runs of equal length (`chunked`); the kernel comes from
        // a table, so the processor runs its level.
        unsafe { (c.dequantize)(src.as_ptr(), src.len(), flip, zp, scale, dst.as_mut_ptr()) }
    });
}

/// DEQUANTIZE from TENSOR_QUANT8_ASYMM (see [`reference::dequantize_u8`]).
pub fn dequantize_u8(uk: &Ukernels, input: &[u8], q: QuantParams, output: &mut [f32]) {
    if uk.u8_convert.is_some() {
        dequantize(uk, input, 0, q.zero_point, q.scale, output);
    } else {
        reference::dequantize_u8(input, q, output);
    }
}

/// DEQUANTIZE from TENSOR_QUANT8_SYMM (see [`reference::dequantize_i8`]): an int8 value `v`
/// is the byte `b` with `v = (b ^ 0x80) − 128`.
pub fn dequantize_i8(uk: &Ukernels, input: &[u8], scale: f32, output: &mut [f32]) {
    if uk.u8_convert.is_some() {
        dequantize(uk, input, 0x80, 128, scale, output);
    } else {
        reference::dequantize_i8(input, scale, output);
    }
}

/// QUANTIZE to TENSOR_QUANT8_ASYMM (see [`reference::quantize_u8`]).
pub fn quantize_u8(uk: &Ukernels, input: &[f32], q: QuantParams, output: &mut [u8]) {
    let Some(c) = uk.u8_convert else {
        reference::quantize_u8(input, q, output);
        return;
    };
    let (scale, zp) = (q.scale, q.zero_point as f32);
    chunked(input, output, |src, dst| {
        // SAFETY: `src` and `dst` are runs of equal length (`chunked`); the kernel comes from
        // a table, so the processor runs its level.
        unsafe { (c.quantize)(src.as_ptr(), src.len(), scale, zp, dst.as_mut_ptr()) }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ukernels::{self, Isa};

    /// Every kernel table this processor runs.
    fn tables() -> Vec<&'static Ukernels> {
        Isa::levels()
            .iter()
            .filter_map(|&l| ukernels::table(l).ok())
            .collect()
    }

    /// Lengths around every vector width and unroll, and one long enough to split.
    const LENGTHS: &[usize] = &[
        0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 1000,
    ];

    /// Bit patterns of `out` and `want` agree (NaN-free here, but ±0 must match too).
    fn same_bits(out: &[f32], want: &[f32]) -> bool {
        out.iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    }

    #[test]
    fn dequantize_is_the_reference_at_every_level() {
        let scales = [
            1.0,
            0.007388558,
            0.5,
            3.0e-39,
            1.0e-45,
            1.7e38,
            3.4028235e38,
            0.1,
        ];
        let zero_points = [0, 128, 255, 1, 127];
        let long = 3 * CHUNK + 5 * speed::CONVERT_VECTOR_ELEMENTS + 13;
        let mut vector = 0;
        for uk in tables() {
            for &n in LENGTHS.iter().chain([long].iter()) {
                // Every byte value, in an order that differs from one length to the next.
                let input: Vec<u8> = (0..n).map(|i| (i * 97 + n) as u8).collect();
                for &scale in &scales {
                    for &zp in &zero_points {
                        let q = QuantParams::new(scale, zp);
                        let mut want = vec![0.0f32; n];
                        reference::dequantize_u8(&input, q, &mut want);
                        let mut out = vec![f32::NAN; n];
                        dequantize_u8(uk, &input, q, &mut out);
                        assert!(same_bits(&out, &want), "{} n {n} {q:?}", uk.isa);
                    }
                    let mut want = vec![0.0f32; n];
                    reference::dequantize_i8(&input, scale, &mut want);
                    let mut out = vec![f32::NAN; n];
                    dequantize_i8(uk, &input, scale, &mut out);
                    assert!(same_bits(&out, &want), "{} symm n {n} {scale}", uk.isa);
                }
            }
            vector += usize::from(uk.u8_convert.is_some());
        }
        // The vector kernels ran at every x86_64 level above the portable one (the Arm levels
        // convert with the portable loop).
        let expected = if cfg!(target_arch = "x86_64") {
            tables().iter().filter(|t| t.isa != Isa::Generic).count()
        } else {
            0
        };
        assert_eq!(vector, expected);
    }

    #[test]
    fn dequantize_wraps_a_zero_point_outside_the_bytes_like_the_reference() {
        // The reference takes `q − zero_point` wrapping; its conversion rounds.
        for uk in tables() {
            for zp in [i32::MIN, i32::MAX, -1, 256, 1 << 24, (1 << 24) + 1] {
                let input: Vec<u8> = (0..=255).collect();
                let q = QuantParams::new(0.25, zp);
                let mut want = vec![0.0f32; 256];
                reference::dequantize_u8(&input, q, &mut want);
                let mut out = vec![0.0f32; 256];
                dequantize_u8(uk, &input, q, &mut out);
                assert!(same_bits(&out, &want), "{} zero point {zp}", uk.isa);
            }
        }
    }

    /// Values at and around every rounding tie, the clamp's ends, the float32 integer limit
    /// and the special values.
    fn quantize_inputs(scale: f32) -> Vec<f32> {
        let mut x = vec![
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            1.0e-45,
            8_388_608.0,
            8_388_609.0,
            -8_388_609.0,
            16_777_217.0,
            0.49999997,
            -0.49999997,
        ];
        for i in -300..300 {
            let t = i as f32 * 0.5;
            for v in [t, t.next_up(), t.next_down()] {
                x.push(v * scale);
                x.push(v);
            }
        }
        x
    }

    #[test]
    fn quantize_is_the_reference_at_every_level() {
        let scales = [
            1.0,
            0.5,
            0.0046017943,
            0.1,
            3.0e-39,
            1.0e-45,
            1.7e38,
            3.4028235e38,
            7.0,
        ];
        let zero_points = [0, 128, 255, 3];
        for uk in tables() {
            for &scale in &scales {
                let all = quantize_inputs(scale);
                for &zp in &zero_points {
                    let q = QuantParams::new(scale, zp);
                    let mut want = vec![0u8; all.len()];
                    reference::quantize_u8(&all, q, &mut want);
                    for &n in LENGTHS.iter().chain([all.len()].iter()) {
                        let n = n.min(all.len());
                        // A window that starts off the vector grid too.
                        for start in [0, all.len() - n, (all.len() - n) / 3] {
                            let mut out = vec![0xa5u8; n];
                            quantize_u8(uk, &all[start..start + n], q, &mut out);
                            assert_eq!(out, want[start..start + n], "{} n {n} {q:?}", uk.isa);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn long_quantize_splits_over_the_pool_and_agrees() {
        let n = 5 * CHUNK + 7 * speed::CONVERT_VECTOR_ELEMENTS + 3;
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3000.0).collect();
        let q = QuantParams::new(0.75, 3);
        let mut want = vec![0u8; n];
        reference::quantize_u8(&x, q, &mut want);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for uk in tables() {
            let mut out = vec![0u8; n];
            pool.install(|| quantize_u8(uk, &x, q, &mut out));
            assert_eq!(out, want, "{}", uk.isa);
        }
    }
}
