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
//! its rows into the output, the bias and the activation. The fast quant8 form is the same
//! product on the uint8 GEMM of [`crate::conv::u8`] with its int32 sums kept (no epilogue
//! requantization; the zero-point algebra of that module makes each sum the exact
//! `Σ (a − za)(w − zw)`), scattered into an int32 image with wrapping adds, then the bias and
//! the per-channel requantization: the reference's values, so bit-exact.

use std::cell::RefCell;

use super::{FilterQuant, FilterShape};
use crate::conv::f32::{self as fast_f32, PackedConvF32};
use crate::conv::grouped::requantizers;
use crate::conv::u8::{self as fast_u8, PackedConvU8};
use crate::persist::{self, Persist, PersistError, Source};
use crate::quant::RequantizeAny;
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

/// The image: the filter shape, the bias and the GEMM image, whose shape must be the
/// `[(fy, fx, oc), in_c]` rows of that filter.
impl Persist for PackedTransposeF32 {
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_shape(out, self.shape);
        persist::put_slice(out, &self.bias);
        self.gemm.persist(out);
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let shape = src.shape()?;
        let bias = src.vec(shape.out_c)?;
        let gemm = PackedConvF32::restore(uk, src)?;
        if gemm.shape() != gemm_shape(shape) {
            return Err(PersistError("transposed filter of another shape".into()));
        }
        Ok(PackedTransposeF32 { gemm, bias, shape })
    }
}

/// The image: the filter shape, the bias, the requantizers (each within the ranges
/// [`RequantizeAny::apply`] assumes) and the GEMM image.
impl Persist for PackedTransposeU8 {
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_shape(out, self.shape);
        persist::put_slice(out, &self.bias);
        persist::put_usize(out, self.rq.len());
        for r in &self.rq {
            persist::put_requantize_any(out, r);
        }
        self.gemm.persist(out);
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let shape = src.shape()?;
        let bias = src.vec(shape.out_c)?;
        if src.usize()? != shape.out_c {
            return Err(PersistError(
                "requantizers for another channel count".into(),
            ));
        }
        let rq = (0..shape.out_c)
            .map(|_| src.requantize_any())
            .collect::<Result<Vec<_>, _>>()?;
        let gemm = PackedConvU8::restore(uk, src)?;
        if gemm.shape() != gemm_shape(shape) {
            return Err(PersistError("transposed filter of another shape".into()));
        }
        Ok(PackedTransposeU8 {
            gemm,
            bias,
            rq,
            shape,
        })
    }
}

/// The shape of the GEMM a transposed convolution with filter `shape` packs.
fn gemm_shape(shape: FilterShape) -> FilterShape {
    FilterShape {
        out_c: shape.kh * shape.kw * shape.out_c,
        kh: 1,
        kw: 1,
        in_c: shape.in_c,
    }
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

/// The filter `[out_c, kh, kw, in_c]` re-laid as GEMM rows `[(fy, fx, oc), in_c]`.
fn transpose_rows<T: Copy + Default>(shape: FilterShape, filter: &[T]) -> Vec<T> {
    let FilterShape {
        out_c,
        kh,
        kw,
        in_c,
    } = shape;
    let mut rows = vec![T::default(); kh * kw * out_c * in_c];
    for oc in 0..out_c {
        for fy in 0..kh {
            for fx in 0..kw {
                let src = ((oc * kh + fy) * kw + fx) * in_c;
                let dst = ((fy * kw + fx) * out_c + oc) * in_c;
                rows[dst..dst + in_c].copy_from_slice(&filter[src..src + in_c]);
            }
        }
    }
    rows
}

/// A quant8 TRANSPOSE_CONV_2D filter packed for the uint8 GEMM (rows `[(fy, fx, oc), in_c]`,
/// int32 sums), with the bias and the per-channel requantizers.
#[derive(Debug)]
pub struct PackedTransposeU8 {
    gemm: PackedConvU8,
    bias: Vec<i32>,
    rq: Vec<RequantizeAny>,
    shape: FilterShape,
}

impl PackedTransposeU8 {
    /// `filter` is `[out_c, kh, kw, in_c]` (uint8 with one zero point, or int8 per channel),
    /// `bias` `[out_c]`. `None` where the reference would fail (it then reports the error) or
    /// the GEMM cannot represent the zero points.
    #[allow(clippy::too_many_arguments)]
    pub fn pack(
        uk: &Ukernels,
        shape: FilterShape,
        filter: &[u8],
        filter_q: FilterQuant,
        bias: &[i32],
        input_q: QuantParams,
        output_q: QuantParams,
        act: Activation,
    ) -> Option<Self> {
        if filter.len() != shape.out_c * shape.taps() || bias.len() != shape.out_c {
            return None;
        }
        let rq = requantizers(input_q, filter_q, shape.out_c, output_q, act).ok()?;
        let (bytes, zw) = match filter_q {
            FilterQuant::Tensor(q) => (filter.to_vec(), q.zero_point),
            FilterQuant::Channel(_) => (crate::conv::reference::filter_image(filter), 128),
        };
        let gemm_shape = FilterShape {
            out_c: shape.kh * shape.kw * shape.out_c,
            kh: 1,
            kw: 1,
            in_c: shape.in_c,
        };
        let rows = transpose_rows(shape, &bytes);
        let gemm = PackedConvU8::pack_raw(uk, gemm_shape, &rows, zw, input_q.zero_point)?;
        Some(PackedTransposeU8 {
            gemm,
            bias: bias.to_vec(),
            rq,
            shape,
        })
    }

    /// The filter extents this was packed for.
    pub fn shape(&self) -> FilterShape {
        self.shape
    }
}

thread_local! {
    /// Per-thread int32 images of the quant8 fast form (GEMM rows, scattered sums), grown to
    /// the largest operation seen and reused.
    static TRANSPOSE_SCRATCH: RefCell<(Vec<i32>, Vec<i32>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

/// TRANSPOSE_CONV_2D quant8 on the packed uint8 GEMM; bit-exact with [`transpose_conv2d_u8`].
pub fn transpose_conv2d_u8_fast(
    w: &TransposeWindow,
    packed: &PackedTransposeU8,
    input: &[u8],
    output: &mut [u8],
) {
    let s = packed.shape;
    assert_eq!(
        (s.out_c, s.kh, s.kw, s.in_c),
        (w.output.c, w.filter_h, w.filter_w, w.input.c),
        "filter shape does not match the window"
    );
    let pixels = w.input.n * w.input.h * w.input.w;
    let cols = s.kh * s.kw * s.out_c;
    let out_c = s.out_c;
    TRANSPOSE_SCRATCH.with(|scratch| {
        let mut fresh = (Vec::new(), Vec::new());
        let mut held = scratch.try_borrow_mut();
        let (rows, acc) = match held.as_mut() {
            Ok(s) => &mut **s,
            Err(_) => &mut fresh,
        };
        rows.resize(pixels * cols, 0);
        acc.clear();
        acc.resize(output.len(), 0);
        fast_u8::fully_connected_u8_raw(&packed.gemm, pixels, input, &mut rows[..pixels * cols]);
        let mut p = 0;
        for b in 0..w.input.n {
            for y in 0..w.input.h {
                for x in 0..w.input.w {
                    let row = &rows[p * cols..(p + 1) * cols];
                    w.for_each_tap(y, x, |fy, fx, oy, ox| {
                        let o0 = w.output.offset(b, oy, ox, 0);
                        let r0 = (fy * s.kw + fx) * out_c;
                        for (o, &v) in acc[o0..o0 + out_c].iter_mut().zip(&row[r0..r0 + out_c]) {
                            *o = o.wrapping_add(v);
                        }
                    });
                    p += 1;
                }
            }
        }
        if out_c > 0 {
            for (px, apx) in output.chunks_exact_mut(out_c).zip(acc.chunks_exact(out_c)) {
                for (((o, &a), &b), r) in px.iter_mut().zip(apx).zip(&packed.bias).zip(&packed.rq) {
                    *o = r.apply(a.wrapping_add(b));
                }
            }
        }
    });
}
