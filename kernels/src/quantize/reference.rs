//! QUANTIZE and DEQUANTIZE, element by element in the reference's arithmetic.
//!
//! QUANTIZE computes `zero_point + round(x / scale)` in float32 (`round` ties away from zero),
//! clamps it to 0..=255 in float32 and converts: a NaN input goes through the reference's
//! `max(0, min(255, NaN))`, which yields 255. DEQUANTIZE takes `q − zero_point` exactly in int32
//! and multiplies the converted difference by the (channel's) scale in float32.

use crate::parallel::{for_chunks, pays_to_split, speed};
use crate::QuantParams;

/// Elements per task of a parallel map.
const CHUNK: usize = 1 << 14;

/// `output[i] = f(i, input[i])`, chunked over the pool for long tensors.
fn map_indexed<T, U, F>(input: &[T], output: &mut [U], f: F)
where
    T: Copy + Sync,
    U: Send,
    F: Fn(usize, T) -> U + Sync,
{
    assert_eq!(input.len(), output.len(), "lengths");
    let body = |start: usize, dst: &mut [U]| {
        for (k, (d, &s)) in dst.iter_mut().zip(&input[start..]).enumerate() {
            *d = f(start + k, s);
        }
    };
    if pays_to_split(output.len(), speed::CONVERT_ELEMENTS) {
        for_chunks(output, CHUNK, |i, dst| body(i * CHUNK, dst));
    } else {
        body(0, output);
    }
}

/// The reference's `std::max(lo, std::min(hi, x))` on floats: a NaN `x` gives `hi`.
#[inline]
fn clamp_like_reference(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < hi { x } else { hi };
    if lo < y {
        y
    } else {
        lo
    }
}

/// QUANTIZE to TENSOR_QUANT8_ASYMM with `q` (scale > 0, zero point 0..=255).
pub fn quantize_u8(input: &[f32], q: QuantParams, output: &mut [u8]) {
    let (scale, zp) = (q.scale, q.zero_point as f32);
    map_indexed(input, output, |_, x| {
        clamp_like_reference(zp + (x / scale).round(), 0.0, 255.0) as u8
    });
}

/// DEQUANTIZE from TENSOR_QUANT8_ASYMM: `scale · (q − zero_point)`.
pub fn dequantize_u8(input: &[u8], q: QuantParams, output: &mut [f32]) {
    let (scale, zp) = (q.scale, q.zero_point);
    map_indexed(input, output, |_, v| {
        scale * i32::from(v).wrapping_sub(zp) as f32
    });
}

/// DEQUANTIZE from TENSOR_QUANT8_SYMM: the bytes are int8 values, zero point 0.
pub fn dequantize_i8(input: &[u8], scale: f32, output: &mut [f32]) {
    map_indexed(input, output, |_, v| scale * f32::from(v as i8));
}

/// DEQUANTIZE from TENSOR_QUANT8_SYMM_PER_CHANNEL: int8 values of a tensor of extents `dims`
/// whose dimension `channel_dim` has one scale per index in `scales`.
pub fn dequantize_per_channel(
    input: &[u8],
    dims: &[usize],
    channel_dim: usize,
    scales: &[f32],
    output: &mut [f32],
) {
    assert!(channel_dim < dims.len(), "channel dimension");
    assert_eq!(scales.len(), dims[channel_dim], "one scale per channel");
    // Elements between two consecutive indices of the channel dimension.
    let inner: usize = dims[channel_dim + 1..].iter().product();
    let channels = dims[channel_dim];
    if inner == 0 || channels == 0 {
        return;
    }
    map_indexed(input, output, |i, v| {
        scales[(i / inner) % channels] * f32::from(v as i8)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_rounds_half_away_from_zero_and_saturates() {
        let q = QuantParams::new(0.5, 10);
        let x = [
            0.25,
            -0.25,
            0.75,
            -0.75,
            1.0,
            1000.0,
            -1000.0,
            f32::NAN,
            f32::INFINITY,
        ];
        let mut out = [0u8; 9];
        quantize_u8(&x, q, &mut out);
        assert_eq!(out, [11, 9, 12, 8, 12, 255, 0, 255, 255]);
    }

    #[test]
    fn dequantize_centres_and_scales() {
        let mut out = [0.0f32; 3];
        dequantize_u8(&[0, 128, 255], QuantParams::new(0.5, 128), &mut out);
        assert_eq!(out, [-64.0, 0.0, 63.5]);
    }

    #[test]
    fn dequantize_symmetric_and_per_channel() {
        let bytes = [0x81u8, 0xff, 0, 1, 0x7f, 0x80];
        let mut out = [0.0f32; 6];
        dequantize_i8(&bytes, 0.5, &mut out);
        assert_eq!(out, [-63.5, -0.5, 0.0, 0.5, 63.5, -64.0]);
        // [2, 3] quantized along dimension 1, then along dimension 0.
        dequantize_per_channel(&bytes, &[2, 3], 1, &[1.0, 2.0, 4.0], &mut out);
        assert_eq!(out, [-127.0, -2.0, 0.0, 1.0, 254.0, -512.0]);
        dequantize_per_channel(&bytes, &[2, 3], 0, &[1.0, 2.0], &mut out);
        assert_eq!(out, [-127.0, -1.0, 0.0, 2.0, 254.0, -256.0]);
    }

    #[test]
    fn long_tensors_split_over_the_pool_agree() {
        let n = 3 * crate::parallel::MIN_ELEMENTS + 17;
        let input: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
        let dims = [n / 7, 7];
        let len = dims[0] * 7;
        let scales = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5];
        let mut out = vec![0.0f32; len];
        dequantize_per_channel(&input[..len], &dims, 1, &scales, &mut out);
        for (i, (&o, &v)) in out.iter().zip(&input).enumerate() {
            assert_eq!(o, scales[i % 7] * f32::from(v as i8));
        }
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 3000.0).collect();
        let mut q = vec![0u8; n];
        quantize_u8(&x, QuantParams::new(0.75, 3), &mut q);
        for (&xi, &qi) in x.iter().zip(&q) {
            let want = (3.0 + (xi / 0.75).round()).clamp(0.0, 255.0) as u8;
            assert_eq!(qi, want);
        }
    }
}
