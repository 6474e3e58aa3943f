//! TRANSPOSE_CONV_2D (NNAPI 1.2, `OperationType` 91): each input pixel scatters
//! `input[b, y, x, :] · filter[oc, fy, fx, :]` onto output pixel
//! `(y·stride_h − pad_top + fy, x·stride_w − pad_left + fx)` when that lies inside the output;
//! then the bias and the fused activation. Filter `[out_c, kh, kw, in_c]`.
//!
//! The quant8 form sums into an int32 image first and requantizes each element once, after
//! adding the bias, with the output channel's multiplier (one per channel for a
//! TENSOR_QUANT8_SYMM_PER_CHANNEL filter) — the reference's order, so results are bit-exact.
//!
//! The reference loops here are the test oracles. The fast float32 form is one GEMM on the
//! packed micro-kernels of [`crate::conv::f32`] (input pixels × the filter laid out as
//! `[(fy, fx, oc), in_c]`, a FULLY_CONNECTED without bias) followed by the col2im scatter-add of
//! its rows into the output, the bias and the activation.

use super::{FilterQuant, FilterShape};
use crate::conv::f32::{self as fast_f32, PackedConvF32};
use crate::conv::grouped::requantizers;
use crate::ukernels::Ukernels;
use crate::{Activation, KernelError, Nhwc, QuantParams};

/// The geometry of one TRANSPOSE_CONV_2D: input and output images, filter taps, strides and
/// the leading paddings (the trailing ones only shaped the output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposeWindow {
    pub input: Nhwc,
    pub output: Nhwc,
    pub filter_h: usize,
    pub filter_w: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
}

impl TransposeWindow {
    /// Calls `f(fy, fx, oy, ox)` for every tap of input pixel `(y, x)` that lands inside the
    /// output.
    #[inline]
    fn for_each_tap(&self, y: usize, x: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        for fy in 0..self.filter_h {
            let oy = (y * self.stride_h + fy) as isize - self.pad_top as isize;
            if oy < 0 || oy >= self.output.h as isize {
                continue;
            }
            for fx in 0..self.filter_w {
                let ox = (x * self.stride_w + fx) as isize - self.pad_left as isize;
                if ox < 0 || ox >= self.output.w as isize {
                    continue;
                }
                f(fy, fx, oy as usize, ox as usize);
            }
        }
    }
}

/// TRANSPOSE_CONV_2D float32 reference.
pub fn transpose_conv2d_f32(
    w: &TransposeWindow,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    let (in_c, out_c) = (w.input.c, w.output.c);
    output.fill(0.0);
    for b in 0..w.input.n {
        for y in 0..w.input.h {
            for x in 0..w.input.w {
                let i0 = w.input.offset(b, y, x, 0);
                let px = &input[i0..i0 + in_c];
                w.for_each_tap(y, x, |fy, fx, oy, ox| {
                    let o0 = w.output.offset(b, oy, ox, 0);
                    for oc in 0..out_c {
                        let f0 = ((oc * w.filter_h + fy) * w.filter_w + fx) * in_c;
                        let mut sum = 0.0f32;
                        for (a, f) in px.iter().zip(&filter[f0..f0 + in_c]) {
                            sum += a * f;
                        }
                        output[o0 + oc] += sum;
                    }
                });
            }
        }
    }
    finish_f32(output, out_c, bias, act);
}

/// Adds the bias and applies the activation to every output pixel.
fn finish_f32(output: &mut [f32], out_c: usize, bias: &[f32], act: Activation) {
    if out_c == 0 {
        return;
    }
    for px in output.chunks_exact_mut(out_c) {
        for (o, b) in px.iter_mut().zip(bias) {
            *o = act.apply_f32(*o + b);
        }
    }
}

/// TRANSPOSE_CONV_2D quant8 reference: uint8 input and output, a uint8 filter with one zero
/// point or an int8 per-channel filter, int32 bias. `scratch` holds the int32 image (one value
/// per output element).
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv2d_u8(
    w: &TransposeWindow,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: FilterQuant,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let (in_c, out_c) = (w.input.c, w.output.c);
    let rq = requantizers(input_q, filter_q, out_c, output_q, act)?;
    let fv = filter_q.values(filter);
    let za = input_q.zero_point;
    let mut acc = vec![0i32; output.len()];
    for b in 0..w.input.n {
        for y in 0..w.input.h {
            for x in 0..w.input.w {
                let i0 = w.input.offset(b, y, x, 0);
                let px = &input[i0..i0 + in_c];
                w.for_each_tap(y, x, |fy, fx, oy, ox| {
                    let o0 = w.output.offset(b, oy, ox, 0);
                    for oc in 0..out_c {
                        let f0 = ((oc * w.filter_h + fy) * w.filter_w + fx) * in_c;
                        let mut sum = 0i32;
                        for (&a, &f) in px.iter().zip(&fv[f0..f0 + in_c]) {
                            sum = sum.wrapping_add((i32::from(a) - za).wrapping_mul(f));
                        }
                        acc[o0 + oc] = acc[o0 + oc].wrapping_add(sum);
                    }
                });
            }
        }
    }
    if out_c > 0 {
        for (px, apx) in output.chunks_exact_mut(out_c).zip(acc.chunks_exact(out_c)) {
            for (((o, &a), &b), r) in px.iter_mut().zip(apx).zip(bias).zip(&rq) {
                *o = r.apply(a.wrapping_add(b));
            }
        }
    }
    Ok(())
}

/// A float32 TRANSPOSE_CONV_2D filter packed for the GEMM: `[(fy, fx, oc), in_c]` rows, no bias.
#[derive(Debug)]
pub struct PackedTransposeF32 {
    gemm: PackedConvF32,
    bias: Vec<f32>,
    shape: FilterShape,
}

impl PackedTransposeF32 {
    /// `filter` is `[out_c, kh, kw, in_c]`, `bias` `[out_c]`.
    pub fn pack(uk: &Ukernels, shape: FilterShape, filter: &[f32], bias: &[f32]) -> Self {
        let FilterShape {
            out_c,
            kh,
            kw,
            in_c,
        } = shape;
        let cols = kh * kw * out_c;
        let mut rows = vec![0.0f32; cols * in_c];
        for oc in 0..out_c {
            for fy in 0..kh {
                for fx in 0..kw {
                    let src = ((oc * kh + fy) * kw + fx) * in_c;
                    let dst = ((fy * kw + fx) * out_c + oc) * in_c;
                    rows[dst..dst + in_c].copy_from_slice(&filter[src..src + in_c]);
                }
            }
        }
        let gemm_shape = FilterShape {
            out_c: cols,
            kh: 1,
            kw: 1,
            in_c,
        };
        PackedTransposeF32 {
            gemm: PackedConvF32::pack(uk, gemm_shape, &rows, &vec![0.0; cols]),
            bias: bias.to_vec(),
            shape,
        }
    }

    /// The filter extents this was packed for.
    pub fn shape(&self) -> FilterShape {
        self.shape
    }
}

/// TRANSPOSE_CONV_2D float32 on the packed GEMM: every input pixel times the filter in one
/// product (`[pixels, in_c] × [in_c, kh·kw·out_c]`), whose rows are then added into the output
/// pixels they reach. Equal to [`transpose_conv2d_f32`] up to the order of the float sums.
pub fn transpose_conv2d_f32_fast(
    w: &TransposeWindow,
    packed: &PackedTransposeF32,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    let s = packed.shape;
    assert_eq!(
        (s.out_c, s.kh, s.kw, s.in_c),
        (w.output.c, w.filter_h, w.filter_w, w.input.c),
        "filter shape does not match the window"
    );
    let pixels = w.input.n * w.input.h * w.input.w;
    let cols = s.kh * s.kw * s.out_c;
    let mut rows = vec![0.0f32; pixels * cols];
    fast_f32::fully_connected_f32(&packed.gemm, pixels, input, Activation::None, &mut rows);
    output.fill(0.0);
    let out_c = s.out_c;
    let mut p = 0;
    for b in 0..w.input.n {
        for y in 0..w.input.h {
            for x in 0..w.input.w {
                let row = &rows[p * cols..(p + 1) * cols];
                w.for_each_tap(y, x, |fy, fx, oy, ox| {
                    let o0 = w.output.offset(b, oy, ox, 0);
                    let r0 = (fy * s.kw + fx) * out_c;
                    for (o, v) in output[o0..o0 + out_c].iter_mut().zip(&row[r0..r0 + out_c]) {
                        *o += v;
                    }
                });
                p += 1;
            }
        }
    }
    finish_f32(output, out_c, &packed.bias, act);
}
