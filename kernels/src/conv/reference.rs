//! Convolution-like operations of types.hal 1.0 (`OperationType`): CONV_2D, DEPTHWISE_CONV_2D
//! and FULLY_CONNECTED, for TENSOR_FLOAT32 and TENSOR_QUANT8_ASYMM (with TENSOR_INT32 bias).
//!
//! All image tensors are NHWC. Filters follow the HAL layouts: CONV_2D
//! `[out_c, filter_h, filter_w, in_c]`, DEPTHWISE_CONV_2D `[1, filter_h, filter_w, out_c]`,
//! FULLY_CONNECTED `[units, input_size]`. Padding is explicit (the caller resolves SAME/VALID)
//! and padded positions contribute nothing to a sum, so a window is simply clipped to the
//! input.
//!
//! uint8 variants accumulate `Σ (in − in_zp)·(f − f_zp)` in int32, add the int32 bias and
//! requantize with [`RequantizeAny::for_conv`], matching the reference bit for bit: below 1
//! the output multiplier works as in NNAPI 1.0, at 1 and above (allowed since NNAPI 1.2) it
//! shifts left first. The `*_channels` variants take one requantizer per output channel
//! ([`ChannelRequant`]): NNAPI 1.2's TENSOR_QUANT8_SYMM_PER_CHANNEL filters, passed as their
//! unsigned image ([`filter_image`], zero point 128).
//!
//! The `*_dilated` variants take NNAPI 1.2's dilation factors: filter tap `k` reads input
//! position `origin + k·dilation`. They are the plain reference loops, used only when a factor
//! is not 1.
//! int32 accumulation wraps on overflow, as the reference's two's-complement arithmetic does
//! in practice; only absurdly deep windows can get there.
//!
//! Work is split over (batch, output row) through [`crate::parallel`], on the team or pool the
//! caller runs in.

use crate::quant::{ChannelRequant, RequantizeAny};
use crate::{Activation, KernelError, QuantParams, Window};

/// The in-bounds part of one window along one spatial axis: filter taps
/// `first_tap..first_tap + len` read input positions `first_input..first_input + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Taps {
    pub first_tap: usize,
    pub first_input: usize,
    pub len: usize,
}

/// Clips the window of output position `out` to the input along one axis. The window origin
/// is `out·stride − pad_head` (signed); taps before position 0 or past `extent` fall into the
/// padding and are dropped.
pub(crate) fn taps(
    out: usize,
    stride: usize,
    pad_head: usize,
    filter: usize,
    extent: usize,
) -> Taps {
    let origin = (out * stride) as isize - pad_head as isize;
    let lo = (-origin).max(0);
    let hi = (filter as isize).min(extent as isize - origin);
    if hi <= lo {
        return Taps {
            first_tap: 0,
            first_input: 0,
            len: 0,
        };
    }
    Taps {
        first_tap: lo as usize,
        first_input: (origin + lo) as usize,
        len: (hi - lo) as usize,
    }
}

/// The clipped horizontal windows of every output column. They are the same for every output
/// row, so they are computed once per call.
pub(crate) fn column_taps(w: &Window) -> Vec<Taps> {
    (0..w.output.w)
        .map(|ox| taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w))
        .collect()
}

/// The clipped vertical window of output row `oy`.
pub(crate) fn row_taps(w: &Window, oy: usize) -> Taps {
    taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h)
}

/// Builds the requantizer of a quantized convolution-like op, rejecting parameters the
/// reference cannot represent (a negative, non-finite or huge multiplier) or that would give
/// an empty activation range.
fn requantizer(
    input_q: QuantParams,
    filter_q: QuantParams,
    output_q: QuantParams,
    act: Activation,
) -> Result<RequantizeAny, KernelError> {
    let rq = RequantizeAny::for_conv(input_q, filter_q, output_q, act).ok_or_else(|| {
        KernelError::InvalidData(format!(
            "quantized multiplier {} · {} / {} is out of range",
            input_q.scale, filter_q.scale, output_q.scale
        ))
    })?;
    if rq.min > rq.max {
        return Err(KernelError::InvalidData(format!(
            "empty activation range {}..={} for output zero point {}",
            rq.min, rq.max, output_q.zero_point
        )));
    }
    Ok(rq)
}

/// `init + Σ a·b` in float32. Spans shorter than eight are summed strictly in order onto
/// `init`, exactly like the reference's running total, so small layers reproduce it bit for
/// bit; longer spans use eight independent partial sums so the compiler can vectorise without
/// being allowed to reassociate.
#[inline]
fn dot_f32(init: f32, a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut sum = init;
    if a.len() >= 8 {
        let mut lanes = [0.0f32; 8];
        for (x, y) in ca.zip(cb) {
            for i in 0..8 {
                lanes[i] += x[i] * y[i];
            }
        }
        let quads = [
            lanes[0] + lanes[4],
            lanes[1] + lanes[5],
            lanes[2] + lanes[6],
            lanes[3] + lanes[7],
        ];
        sum += (quads[0] + quads[2]) + (quads[1] + quads[3]);
    }
    for (&x, &y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// `Σ (a − a_zp)·(b − b_zp)` in int32. Integer addition is associative modulo 2^32, so the lane
/// split gives exactly the reference's sequential (wrapping) sum.
#[inline]
fn dot_u8(a: &[u8], a_zp: i32, b: &[u8], b_zp: i32) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    let term = |x: u8, y: u8| {
        i32::from(x)
            .wrapping_sub(a_zp)
            .wrapping_mul(i32::from(y).wrapping_sub(b_zp))
    };
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let mut acc = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .fold(0i32, |s, (&x, &y)| s.wrapping_add(term(x, y)));
    let mut lanes = [0i32; 8];
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] = lanes[i].wrapping_add(term(x[i], y[i]));
        }
    }
    for l in lanes {
        acc = acc.wrapping_add(l);
    }
    acc
}

fn debug_check_conv(w: &Window, input: usize, filter: usize, bias: usize, output: usize) {
    debug_assert_eq!(input, w.input.len(), "input length");
    debug_assert_eq!(
        filter,
        w.output.c * w.filter_h * w.filter_w * w.input.c,
        "filter length"
    );
    debug_assert_eq!(bias, w.output.c, "bias length");
    debug_assert_eq!(output, w.output.len(), "output length");
    debug_assert_eq!(w.input.n, w.output.n, "batch");
}

/// Runs `f(batch, out_y, row)` for every output row, in parallel on a pool worker. Rows are the
/// unit of work: each one is independent and large enough to amortise the scheduling.
pub(crate) fn for_each_row<T: Send>(
    w: &Window,
    output: &mut [T],
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    let row_len = w.output.w * w.output.c;
    if row_len == 0 || w.output.h == 0 {
        return;
    }
    let out_h = w.output.h;
    let body = |(r, row): (usize, &mut [T])| f(r / out_h, r % out_h, row);
    crate::parallel::for_chunks(output, row_len, |r, row| body((r, row)));
}

/// CONV_2D, float32. `filter` is `[out_c, filter_h, filter_w, in_c]`, `bias` is `[out_c]`.
pub fn conv2d_f32(
    w: &Window,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    debug_check_conv(w, input.len(), filter.len(), bias.len(), output.len());
    let (in_c, out_c) = (w.input.c, w.output.c);
    let cols = column_taps(w);
    for_each_row(w, output, |b, oy, row| {
        let ty = row_taps(w, oy);
        for (out_px, tx) in row.chunks_exact_mut(out_c).zip(&cols) {
            // Within one input row the clipped window is contiguous in both the input (x, c)
            // and the filter (fx, c), so each filter row is a single dot product.
            let span = tx.len * in_c;
            for (oc, out) in out_px.iter_mut().enumerate() {
                let mut sum = 0.0f32;
                for k in 0..ty.len {
                    let i0 = w.input.offset(b, ty.first_input + k, tx.first_input, 0);
                    let f0 =
                        ((oc * w.filter_h + ty.first_tap + k) * w.filter_w + tx.first_tap) * in_c;
                    sum = dot_f32(sum, &input[i0..i0 + span], &filter[f0..f0 + span]);
                }
                *out = act.apply_f32(sum + bias[oc]);
            }
        }
    });
}

/// CONV_2D, quant8 (int32 bias with scale `input_scale · filter_scale`, zero point 0).
///
/// Fails with [`KernelError::InvalidData`] when the output multiplier is out of range.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_u8(
    w: &Window,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: QuantParams,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let rq = ChannelRequant::per_tensor(input_q, filter_q, output_q, act, w.output.c)?;
    let zps = (input_q.zero_point, filter_q.zero_point);
    conv2d_u8_channels(w, input, filter, zps, bias, &rq, output);
    Ok(())
}

/// CONV_2D, quant8, with one requantizer per output channel (`rq` covers `w.output.c`).
/// `zero_points` are the input's and the filter's. A TENSOR_QUANT8_SYMM_PER_CHANNEL filter
/// is passed as its unsigned image ([`filter_image`]) with filter zero point 128: the same
/// values.
pub fn conv2d_u8_channels(
    w: &Window,
    input: &[u8],
    filter: &[u8],
    (in_zp, f_zp): (i32, i32),
    bias: &[i32],
    rq: &ChannelRequant,
    output: &mut [u8],
) {
    debug_check_conv(w, input.len(), filter.len(), bias.len(), output.len());
    assert_eq!(rq.channels(), w.output.c, "requantizers");
    let (in_c, out_c) = (w.input.c, w.output.c);
    let cols = column_taps(w);
    for_each_row(w, output, |b, oy, row| {
        let ty = row_taps(w, oy);
        for (out_px, tx) in row.chunks_exact_mut(out_c).zip(&cols) {
            let span = tx.len * in_c;
            for (oc, out) in out_px.iter_mut().enumerate() {
                // Padding stands for the real value 0, i.e. the input zero point, whose
                // offset-corrected contribution is 0: skipping it is exact.
                let mut acc = 0i32;
                for k in 0..ty.len {
                    let i0 = w.input.offset(b, ty.first_input + k, tx.first_input, 0);
                    let f0 =
                        ((oc * w.filter_h + ty.first_tap + k) * w.filter_w + tx.first_tap) * in_c;
                    acc = acc.wrapping_add(dot_u8(
                        &input[i0..i0 + span],
                        in_zp,
                        &filter[f0..f0 + span],
                        f_zp,
                    ));
                }
                *out = rq.apply(oc, acc.wrapping_add(bias[oc]));
            }
        }
    });
}

fn debug_check_depthwise(
    w: &Window,
    depth_multiplier: usize,
    input: usize,
    filter: usize,
    bias: usize,
    output: usize,
) {
    debug_assert_eq!(input, w.input.len(), "input length");
    debug_assert_eq!(w.output.c, w.input.c * depth_multiplier, "output depth");
    debug_assert_eq!(
        filter,
        w.filter_h * w.filter_w * w.output.c,
        "filter length"
    );
    debug_assert_eq!(bias, w.output.c, "bias length");
    debug_assert_eq!(output, w.output.len(), "output length");
    debug_assert_eq!(w.input.n, w.output.n, "batch");
}

/// Adds `x · f` to `acc` for one window tap of a depthwise convolution: input channel `ic`
/// feeds output channels `ic·m .. ic·m + m`, which sit contiguously in `acc` and `f`.
#[inline]
fn depthwise_tap<A: Copy, X: Copy, F: Copy>(
    m: usize,
    acc: &mut [A],
    in_px: &[X],
    f_px: &[F],
    mac: impl Fn(A, X, F) -> A,
) {
    if m == 1 {
        for ((a, &x), &f) in acc.iter_mut().zip(in_px).zip(f_px) {
            *a = mac(*a, x, f);
        }
    } else {
        for ((a, &x), f) in acc.chunks_exact_mut(m).zip(in_px).zip(f_px.chunks_exact(m)) {
            for (a, &f) in a.iter_mut().zip(f) {
                *a = mac(*a, x, f);
            }
        }
    }
}

/// DEPTHWISE_CONV_2D, float32. `filter` is `[1, filter_h, filter_w, out_c]` with
/// `out_c = in_c · depth_multiplier`; output channel `ic·depth_multiplier + m` reads input
/// channel `ic`.
pub fn depthwise_conv2d_f32(
    w: &Window,
    depth_multiplier: usize,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    debug_check_depthwise(
        w,
        depth_multiplier,
        input.len(),
        filter.len(),
        bias.len(),
        output.len(),
    );
    if depth_multiplier == 0 {
        return;
    }
    let (in_c, out_c) = (w.input.c, w.output.c);
    let cols = column_taps(w);
    for_each_row(w, output, |b, oy, row| {
        let ty = row_taps(w, oy);
        for (out_px, tx) in row.chunks_exact_mut(out_c).zip(&cols) {
            // The output pixel doubles as the accumulator; as in the reference, the bias is
            // added after the window sum, not used as its starting value.
            out_px.fill(0.0);
            for ky in 0..ty.len {
                let iy = ty.first_input + ky;
                let fy = ty.first_tap + ky;
                for kx in 0..tx.len {
                    let i0 = w.input.offset(b, iy, tx.first_input + kx, 0);
                    let f0 = (fy * w.filter_w + tx.first_tap + kx) * out_c;
                    depthwise_tap(
                        depth_multiplier,
                        out_px,
                        &input[i0..i0 + in_c],
                        &filter[f0..f0 + out_c],
                        |a, x, f| a + x * f,
                    );
                }
            }
            for (o, &bv) in out_px.iter_mut().zip(bias) {
                *o = act.apply_f32(*o + bv);
            }
        }
    });
}

/// DEPTHWISE_CONV_2D, quant8. Layouts as in [`depthwise_conv2d_f32`].
///
/// Fails with [`KernelError::InvalidData`] when the output multiplier is out of range.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_u8(
    w: &Window,
    depth_multiplier: usize,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: QuantParams,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let rq = ChannelRequant::per_tensor(input_q, filter_q, output_q, act, w.output.c)?;
    let zps = (input_q.zero_point, filter_q.zero_point);
    depthwise_conv2d_u8_channels(w, depth_multiplier, input, filter, zps, bias, &rq, output);
    Ok(())
}

/// DEPTHWISE_CONV_2D, quant8, with one requantizer per output channel; arguments as in
/// [`conv2d_u8_channels`].
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_u8_channels(
    w: &Window,
    depth_multiplier: usize,
    input: &[u8],
    filter: &[u8],
    (in_zp, f_zp): (i32, i32),
    bias: &[i32],
    rq: &ChannelRequant,
    output: &mut [u8],
) {
    debug_check_depthwise(
        w,
        depth_multiplier,
        input.len(),
        filter.len(),
        bias.len(),
        output.len(),
    );
    assert_eq!(rq.channels(), w.output.c, "requantizers");
    if depth_multiplier == 0 {
        return;
    }
    let (in_c, out_c) = (w.input.c, w.output.c);
    let cols = column_taps(w);
    for_each_row(w, output, |b, oy, row| {
        let ty = row_taps(w, oy);
        // One output pixel's accumulators, reused across the row.
        let mut acc = vec![0i32; out_c];
        for (out_px, tx) in row.chunks_exact_mut(out_c).zip(&cols) {
            acc.fill(0);
            for ky in 0..ty.len {
                let iy = ty.first_input + ky;
                let fy = ty.first_tap + ky;
                for kx in 0..tx.len {
                    let i0 = w.input.offset(b, iy, tx.first_input + kx, 0);
                    let f0 = (fy * w.filter_w + tx.first_tap + kx) * out_c;
                    depthwise_tap(
                        depth_multiplier,
                        &mut acc,
                        &input[i0..i0 + in_c],
                        &filter[f0..f0 + out_c],
                        |a: i32, x: u8, f: u8| {
                            a.wrapping_add(
                                i32::from(x)
                                    .wrapping_sub(in_zp)
                                    .wrapping_mul(i32::from(f).wrapping_sub(f_zp)),
                            )
                        },
                    );
                }
            }
            for (oc, ((o, &a), &bv)) in out_px.iter_mut().zip(&acc).zip(bias).enumerate() {
                *o = rq.apply(oc, a.wrapping_add(bv));
            }
        }
    });
}

/// Output elements per parallel task of FULLY_CONNECTED: enough dot products to cover about
/// 16k multiply-adds, so small layers do not drown in scheduling.
fn fc_grain(input_size: usize) -> usize {
    (16 * 1024 / input_size.max(1)).max(1)
}

/// FULLY_CONNECTED, float32. `input` is `[batch, input_size]` (any higher-rank input
/// flattened), `weights` is `[units, input_size]`, `bias` is `[units]`; output `[batch, units]`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_f32(
    batch: usize,
    input_size: usize,
    units: usize,
    input: &[f32],
    weights: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    debug_assert_eq!(input.len(), batch * input_size, "input length");
    debug_assert_eq!(weights.len(), units * input_size, "weights length");
    debug_assert_eq!(bias.len(), units, "bias length");
    debug_assert_eq!(output.len(), batch * units, "output length");
    if units == 0 {
        return;
    }
    let body = |(i, out): (usize, &mut f32)| {
        let (b, u) = (i / units, i % units);
        let x = &input[b * input_size..(b + 1) * input_size];
        let wt = &weights[u * input_size..(u + 1) * input_size];
        *out = act.apply_f32(dot_f32(0.0, x, wt) + bias[u]);
    };
    crate::parallel::for_each_element(output, fc_grain(input_size), body);
}

/// FULLY_CONNECTED, quant8. Layouts as in [`fully_connected_f32`].
///
/// Fails with [`KernelError::InvalidData`] when the output multiplier is out of range.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_u8(
    batch: usize,
    input_size: usize,
    units: usize,
    input: &[u8],
    input_q: QuantParams,
    weights: &[u8],
    weights_q: QuantParams,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    debug_assert_eq!(input.len(), batch * input_size, "input length");
    debug_assert_eq!(weights.len(), units * input_size, "weights length");
    debug_assert_eq!(bias.len(), units, "bias length");
    debug_assert_eq!(output.len(), batch * units, "output length");
    let rq = requantizer(input_q, weights_q, output_q, act)?;
    if units == 0 {
        return Ok(());
    }
    let (in_zp, w_zp) = (input_q.zero_point, weights_q.zero_point);
    let body = |(i, out): (usize, &mut u8)| {
        let (b, u) = (i / units, i % units);
        let x = &input[b * input_size..(b + 1) * input_size];
        let wt = &weights[u * input_size..(u + 1) * input_size];
        *out = rq.apply(dot_u8(x, in_zp, wt, w_zp).wrapping_add(bias[u]));
    };
    crate::parallel::for_each_element(output, fc_grain(input_size), body);
    Ok(())
}

/// Dilation factors of a convolution (NNAPI 1.2): the distance between adjacent filter taps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dilation {
    pub h: usize,
    pub w: usize,
}

/// The input position read by tap `k` of output position `out` along one axis, or `None` in
/// the padding.
#[inline]
fn dilated_tap(
    out: usize,
    stride: usize,
    pad_head: usize,
    k: usize,
    dilation: usize,
) -> Option<usize> {
    (out * stride + k * dilation).checked_sub(pad_head)
}

/// Visits every (output element, input element, filter element) triple of a dilated window:
/// `f(out_index, input_pixel_offset, filter_tap)` with the filter tap as `fy·filter_w + fx`.
/// The caller's `w.padding` is the padding of the dilated (effective) window.
fn for_each_dilated_tap(w: &Window, d: Dilation, mut f: impl FnMut(usize, usize, usize)) {
    for b in 0..w.output.n {
        for oy in 0..w.output.h {
            for ox in 0..w.output.w {
                let pixel = ((b * w.output.h + oy) * w.output.w + ox) * w.output.c;
                for fy in 0..w.filter_h {
                    let Some(iy) = dilated_tap(oy, w.stride_h, w.padding.top, fy, d.h)
                        .filter(|&y| y < w.input.h)
                    else {
                        continue;
                    };
                    for fx in 0..w.filter_w {
                        let Some(ix) = dilated_tap(ox, w.stride_w, w.padding.left, fx, d.w)
                            .filter(|&x| x < w.input.w)
                        else {
                            continue;
                        };
                        f(pixel, w.input.offset(b, iy, ix, 0), fy * w.filter_w + fx);
                    }
                }
            }
        }
    }
}

/// CONV_2D with dilation, float32. Layouts as in [`conv2d_f32`].
pub fn conv2d_dilated_f32(
    w: &Window,
    d: Dilation,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    debug_check_conv(w, input.len(), filter.len(), bias.len(), output.len());
    let (in_c, out_c, taps) = (w.input.c, w.output.c, w.filter_h * w.filter_w);
    output.fill(0.0);
    for_each_dilated_tap(w, d, |o, i, t| {
        for oc in 0..out_c {
            let f0 = (oc * taps + t) * in_c;
            output[o + oc] = dot_f32(output[o + oc], &input[i..i + in_c], &filter[f0..f0 + in_c]);
        }
    });
    for px in output.chunks_exact_mut(out_c) {
        for (y, &b) in px.iter_mut().zip(bias) {
            *y = act.apply_f32(*y + b);
        }
    }
}

/// CONV_2D with dilation, quant8. Layouts and quantization as in [`conv2d_u8`].
#[allow(clippy::too_many_arguments)]
pub fn conv2d_dilated_u8(
    w: &Window,
    d: Dilation,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: QuantParams,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let rq = ChannelRequant::per_tensor(input_q, filter_q, output_q, act, w.output.c)?;
    let zps = (input_q.zero_point, filter_q.zero_point);
    conv2d_dilated_u8_channels(w, d, input, filter, zps, bias, &rq, output);
    Ok(())
}

/// CONV_2D with dilation, quant8, one requantizer per output channel; arguments as in
/// [`conv2d_u8_channels`].
#[allow(clippy::too_many_arguments)]
pub fn conv2d_dilated_u8_channels(
    w: &Window,
    d: Dilation,
    input: &[u8],
    filter: &[u8],
    (in_zp, f_zp): (i32, i32),
    bias: &[i32],
    rq: &ChannelRequant,
    output: &mut [u8],
) {
    debug_check_conv(w, input.len(), filter.len(), bias.len(), output.len());
    assert_eq!(rq.channels(), w.output.c, "requantizers");
    let (in_c, out_c, taps) = (w.input.c, w.output.c, w.filter_h * w.filter_w);
    let mut acc: Vec<i32> = bias.iter().copied().cycle().take(output.len()).collect();
    for_each_dilated_tap(w, d, |o, i, t| {
        for oc in 0..out_c {
            let f0 = (oc * taps + t) * in_c;
            let s = dot_u8(&input[i..i + in_c], in_zp, &filter[f0..f0 + in_c], f_zp);
            acc[o + oc] = acc[o + oc].wrapping_add(s);
        }
    });
    for (k, (y, a)) in output.iter_mut().zip(acc).enumerate() {
        *y = rq.apply(k % out_c.max(1), a);
    }
}

/// DEPTHWISE_CONV_2D with dilation, float32. Layouts as in [`depthwise_conv2d_f32`].
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_dilated_f32(
    w: &Window,
    d: Dilation,
    depth_multiplier: usize,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    debug_check_depthwise(
        w,
        depth_multiplier,
        input.len(),
        filter.len(),
        bias.len(),
        output.len(),
    );
    if depth_multiplier == 0 {
        return;
    }
    let out_c = w.output.c;
    output.fill(0.0);
    for_each_dilated_tap(w, d, |o, i, t| {
        for oc in 0..out_c {
            output[o + oc] += input[i + oc / depth_multiplier] * filter[t * out_c + oc];
        }
    });
    for px in output.chunks_exact_mut(out_c) {
        for (y, &b) in px.iter_mut().zip(bias) {
            *y = act.apply_f32(*y + b);
        }
    }
}

/// DEPTHWISE_CONV_2D with dilation, quant8. Layouts and quantization as in
/// [`depthwise_conv2d_u8`].
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_dilated_u8(
    w: &Window,
    d: Dilation,
    depth_multiplier: usize,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: QuantParams,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let rq = ChannelRequant::per_tensor(input_q, filter_q, output_q, act, w.output.c)?;
    let zps = (input_q.zero_point, filter_q.zero_point);
    depthwise_conv2d_dilated_u8_channels(
        w,
        d,
        depth_multiplier,
        input,
        filter,
        zps,
        bias,
        &rq,
        output,
    );
    Ok(())
}

/// DEPTHWISE_CONV_2D with dilation, quant8, one requantizer per output channel; arguments as
/// in [`conv2d_u8_channels`].
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_dilated_u8_channels(
    w: &Window,
    d: Dilation,
    depth_multiplier: usize,
    input: &[u8],
    filter: &[u8],
    (in_zp, f_zp): (i32, i32),
    bias: &[i32],
    rq: &ChannelRequant,
    output: &mut [u8],
) {
    debug_check_depthwise(
        w,
        depth_multiplier,
        input.len(),
        filter.len(),
        bias.len(),
        output.len(),
    );
    assert_eq!(rq.channels(), w.output.c, "requantizers");
    if depth_multiplier == 0 {
        return;
    }
    let out_c = w.output.c;
    let mut acc: Vec<i32> = bias.iter().copied().cycle().take(output.len()).collect();
    for_each_dilated_tap(w, d, |o, i, t| {
        for oc in 0..out_c {
            let x = i32::from(input[i + oc / depth_multiplier]) - in_zp;
            let f = i32::from(filter[t * out_c + oc]) - f_zp;
            acc[o + oc] = acc[o + oc].wrapping_add(x.wrapping_mul(f));
        }
    });
    for (k, (y, a)) in output.iter_mut().zip(acc).enumerate() {
        *y = rq.apply(k % out_c.max(1), a);
    }
}

/// The unsigned image of a TENSOR_QUANT8_SYMM_PER_CHANNEL filter: each int8 byte `b` becomes
/// `b ⊕ 0x80`, the uint8 whose difference to zero point 128 is the int8 value. The quant8
/// loops then take the filter with zero point 128 and compute exactly the int8 products.
pub fn filter_image(filter: &[u8]) -> Vec<u8> {
    filter.iter().map(|b| b ^ 0x80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Nhwc, Padding};

    fn window(
        input: Nhwc,
        out_c: usize,
        (filter_h, filter_w): (usize, usize),
        (stride_h, stride_w): (usize, usize),
        padding: Padding,
    ) -> Window {
        let oh = (input.h + padding.top + padding.bottom - filter_h) / stride_h + 1;
        let ow = (input.w + padding.left + padding.right - filter_w) / stride_w + 1;
        Window {
            input,
            output: Nhwc::new(input.n, oh, ow, out_c),
            filter_h,
            filter_w,
            stride_h,
            stride_w,
            padding,
        }
    }

    fn pad(all: usize) -> Padding {
        Padding {
            left: all,
            right: all,
            top: all,
            bottom: all,
        }
    }

    #[test]
    fn rows_run_on_the_caller_outside_a_pool_and_on_workers_inside() {
        let w = window(Nhwc::new(2, 6, 6, 3), 4, (3, 3), (1, 1), pad(1));
        let mut out = vec![0u8; w.output.len()];
        let seen = std::sync::Mutex::new(Vec::new());
        let record = |_: usize, _: usize, _: &mut [u8]| {
            seen.lock()
                .unwrap()
                .push((std::thread::current().id(), rayon::current_thread_index()));
        };
        for_each_row(&w, &mut out, record);
        let caller = std::thread::current().id();
        let off_pool = std::mem::take(&mut *seen.lock().unwrap());
        assert_eq!(off_pool.len(), 12);
        assert!(
            off_pool.iter().all(|&s| s == (caller, None)),
            "{off_pool:?}"
        );

        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| for_each_row(&w, &mut out, record));
        let on_pool = seen.lock().unwrap();
        assert_eq!(on_pool.len(), 12);
        assert!(
            on_pool.iter().all(|(_, index)| index.is_some()),
            "{on_pool:?}"
        );
    }

    /// Straightforward six-loop convolution used to cross-check the clipped-span version.
    fn naive_conv(w: &Window, input: &[f32], filter: &[f32], bias: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; w.output.len()];
        for b in 0..w.output.n {
            for oy in 0..w.output.h {
                for ox in 0..w.output.w {
                    for oc in 0..w.output.c {
                        let mut s = 0.0;
                        for fy in 0..w.filter_h {
                            for fx in 0..w.filter_w {
                                let iy = (oy * w.stride_h + fy) as isize - w.padding.top as isize;
                                let ix = (ox * w.stride_w + fx) as isize - w.padding.left as isize;
                                if iy < 0
                                    || ix < 0
                                    || iy >= w.input.h as isize
                                    || ix >= w.input.w as isize
                                {
                                    continue;
                                }
                                for ic in 0..w.input.c {
                                    s += input[w.input.offset(b, iy as usize, ix as usize, ic)]
                                        * filter[((oc * w.filter_h + fy) * w.filter_w + fx)
                                            * w.input.c
                                            + ic];
                                }
                            }
                        }
                        out[w.output.offset(b, oy, ox, oc)] = s + bias[oc];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn taps_clip_to_input() {
        // Filter 3, stride 2, pad 1, input 5: origins −1, 1, 3.
        assert_eq!(
            taps(0, 2, 1, 3, 5),
            Taps {
                first_tap: 1,
                first_input: 0,
                len: 2
            }
        );
        assert_eq!(
            taps(1, 2, 1, 3, 5),
            Taps {
                first_tap: 0,
                first_input: 1,
                len: 3
            }
        );
        assert_eq!(
            taps(2, 2, 1, 3, 5),
            Taps {
                first_tap: 0,
                first_input: 3,
                len: 2
            }
        );
        // A window entirely inside the padding is empty.
        assert_eq!(taps(0, 1, 4, 3, 5).len, 0);
        assert_eq!(taps(3, 1, 0, 3, 2).len, 0);
    }

    #[test]
    fn conv_f32_padding_and_stride() {
        // 1×3×3×1 input 1..9, 2×2 filter of ones, pad 1, stride 2 → 2×2 corner sums.
        let w = window(Nhwc::new(1, 3, 3, 1), 1, (2, 2), (2, 2), pad(1));
        assert_eq!(w.output, Nhwc::new(1, 2, 2, 1));
        let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let mut out = vec![0.0; 4];
        conv2d_f32(&w, &input, &[1.0; 4], &[0.5], Activation::None, &mut out);
        // (0,0): only input(0,0)=1. (0,1): input(0,1)+(0,2)=5. (1,0): 4+7. (1,1): 5+6+8+9.
        assert_eq!(out, vec![1.5, 5.5, 11.5, 28.5]);
    }

    #[test]
    fn conv_f32_matches_naive_on_odd_shapes() {
        let input_shape = Nhwc::new(2, 7, 6, 3);
        let w = window(
            input_shape,
            4,
            (3, 2),
            (2, 1),
            Padding {
                left: 1,
                right: 0,
                top: 2,
                bottom: 1,
            },
        );
        let input: Vec<f32> = (0..input_shape.len())
            .map(|i| ((i * 37 % 17) as f32 - 8.0) * 0.25)
            .collect();
        let filter: Vec<f32> = (0..4 * 3 * 2 * 3)
            .map(|i| ((i * 11 % 13) as f32 - 6.0) * 0.125)
            .collect();
        let bias = [0.5, -1.0, 0.0, 2.0];
        let mut out = vec![0.0; w.output.len()];
        conv2d_f32(&w, &input, &filter, &bias, Activation::None, &mut out);
        // Every clipped span is shorter than eight, so the summation order is the naive
        // one and the results are identical, not merely close.
        assert_eq!(out, naive_conv(&w, &input, &filter, &bias));
    }

    #[test]
    fn conv_f32_activations_clamp() {
        let w = window(Nhwc::new(1, 1, 1, 2), 4, (1, 1), (1, 1), pad(0));
        // Output channels produce −3, −0.5, 0.5, 7.
        let filter = [-3.0, 0.0, -0.5, 0.0, 0.5, 0.0, 7.0, 0.0];
        let bias = [0.0; 4];
        let cases = [
            (Activation::None, [-3.0, -0.5, 0.5, 7.0]),
            (Activation::Relu, [0.0, 0.0, 0.5, 7.0]),
            (Activation::Relu1, [-1.0, -0.5, 0.5, 1.0]),
            (Activation::Relu6, [0.0, 0.0, 0.5, 6.0]),
        ];
        for (act, expected) in cases {
            let mut out = [0.0; 4];
            conv2d_f32(&w, &[1.0, 9.0], &filter, &bias, act, &mut out);
            assert_eq!(out, expected, "{act:?}");
        }
    }

    #[test]
    fn conv_u8_zero_points_and_padding() {
        // Same geometry as conv_f32_padding_and_stride. Input real = 0.5·(q − 10), filter
        // real = 0.25·(q − 100), output real = 1·(q − 50).
        let w = window(Nhwc::new(1, 3, 3, 1), 1, (2, 2), (2, 2), pad(1));
        let input_q = QuantParams::new(0.5, 10);
        let filter_q = QuantParams::new(0.25, 100);
        let output_q = QuantParams::new(1.0, 50);
        // Reals 1..9 → q = 2·v + 10.
        let input: Vec<u8> = (1..=9).map(|v| (2 * v + 10) as u8).collect();
        // Filter reals of 1 → q = 104.
        let filter = [104u8; 4];
        // Bias real 0.5 at scale 0.125 → 4.
        let mut out = [0u8; 4];
        conv2d_u8(
            &w,
            &input,
            input_q,
            &filter,
            filter_q,
            &[4],
            output_q,
            Activation::None,
            &mut out,
        )
        .unwrap();
        // Reals 1.5, 5.5, 11.5, 28.5 round half away from zero: 2, 6, 12, 29.
        assert_eq!(out, [52, 56, 62, 79]);

        // Relu6 caps at zero point + 6.
        conv2d_u8(
            &w,
            &input,
            input_q,
            &filter,
            filter_q,
            &[4],
            output_q,
            Activation::Relu6,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [52, 56, 56, 56]);
    }

    #[test]
    fn conv_u8_takes_multipliers_of_one_or_more_and_rejects_huge_ones() {
        let w = window(Nhwc::new(1, 1, 1, 1), 1, (1, 1), (1, 1), pad(0));
        let q = QuantParams::new(1.0, 0);
        let mut out = [0u8; 1];
        conv2d_u8(&w, &[7], q, &[3], q, &[1], q, Activation::None, &mut out).unwrap();
        assert_eq!(out, [22]);
        // 7·3·2.5 = 52.5 rounds away from zero.
        let half = QuantParams::new(0.4, 0);
        conv2d_u8(&w, &[7], q, &[3], q, &[0], half, Activation::None, &mut out).unwrap();
        assert_eq!(out, [53]);
        let tiny = QuantParams::new(1e-12, 0);
        let r = conv2d_u8(&w, &[1], q, &[1], q, &[0], tiny, Activation::None, &mut out);
        assert!(matches!(r, Err(KernelError::InvalidData(_))));
    }

    #[test]
    fn depthwise_f32_multiplier_two() {
        // 1×2×2×2 input, 2×2 filter, multiplier 2 → 1×1×1×4, VALID.
        let w = window(Nhwc::new(1, 2, 2, 2), 4, (2, 2), (1, 1), pad(0));
        let input = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0];
        // Per tap: channels (ic0·m0, ic0·m1, ic1·m0, ic1·m1).
        let filter = [
            1.0, 2.0, 1.0, 0.0, //
            1.0, 2.0, 0.0, 1.0, //
            1.0, 2.0, 0.0, 0.0, //
            1.0, 2.0, 0.0, 0.0,
        ];
        let bias = [0.0, 1.0, 2.0, 3.0];
        let mut out = [0.0; 4];
        depthwise_conv2d_f32(&w, 2, &input, &filter, &bias, Activation::None, &mut out);
        assert_eq!(out, [10.0, 21.0, 12.0, 23.0]);
    }

    #[test]
    fn depthwise_f32_padding() {
        // 1×3×3×1, 3×3 filter of ones, SAME padding 1 → neighbourhood sums.
        let w = window(Nhwc::new(1, 3, 3, 1), 1, (3, 3), (1, 1), pad(1));
        let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let mut out = [0.0; 9];
        depthwise_conv2d_f32(&w, 1, &input, &[1.0; 9], &[0.0], Activation::None, &mut out);
        assert_eq!(out, [12.0, 21.0, 16.0, 27.0, 45.0, 33.0, 24.0, 39.0, 28.0]);
        depthwise_conv2d_f32(
            &w,
            1,
            &input,
            &[1.0; 9],
            &[-20.0],
            Activation::Relu,
            &mut out,
        );
        assert_eq!(out, [0.0, 1.0, 0.0, 7.0, 25.0, 13.0, 4.0, 19.0, 8.0]);
    }

    #[test]
    fn depthwise_u8_multiplier_two_with_zero_points() {
        // The float case above, quantized: input 0.5·(q − 20), filter 0.5·(q − 8),
        // output 2·(q − 100); bias scale 0.25.
        let w = window(Nhwc::new(1, 2, 2, 2), 4, (2, 2), (1, 1), pad(0));
        let input_q = QuantParams::new(0.5, 20);
        let filter_q = QuantParams::new(0.5, 8);
        let output_q = QuantParams::new(2.0, 100);
        let input: Vec<u8> = [1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0]
            .iter()
            .map(|&v| (v * 2.0) as u8 + 20)
            .collect();
        let filter: Vec<u8> = [
            1.0f32, 2.0, 1.0, 0.0, 1.0, 2.0, 0.0, 1.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0,
        ]
        .iter()
        .map(|&v| (v * 2.0) as u8 + 8)
        .collect();
        let bias = [0, 4, 8, 12];
        let mut out = [0u8; 4];
        depthwise_conv2d_u8(
            &w,
            2,
            &input,
            input_q,
            &filter,
            filter_q,
            &bias,
            output_q,
            Activation::None,
            &mut out,
        )
        .unwrap();
        // Reals 10, 21, 12, 23 → /2 = 5, 10.5, 6, 11.5 → 5, 11, 6, 12 (ties away from zero).
        assert_eq!(out, [105, 111, 106, 112]);
        // Relu1 → real range [−1, 1] → q 100 ± 0.5 rounds to 99..=101.
        depthwise_conv2d_u8(
            &w,
            2,
            &input,
            input_q,
            &filter,
            filter_q,
            &bias,
            output_q,
            Activation::Relu1,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [101; 4]);
    }

    #[test]
    fn depthwise_matches_conv_on_one_channel() {
        let input_shape = Nhwc::new(1, 5, 4, 1);
        let w = window(
            input_shape,
            1,
            (3, 3),
            (2, 2),
            Padding {
                left: 1,
                right: 2,
                top: 0,
                bottom: 1,
            },
        );
        let input: Vec<f32> = (0..20).map(|i| (i as f32) * 0.5 - 3.0).collect();
        let filter: Vec<f32> = (0..9).map(|i| (i as f32) - 4.0).collect();
        let mut a = vec![0.0; w.output.len()];
        let mut b = vec![0.0; w.output.len()];
        conv2d_f32(&w, &input, &filter, &[1.0], Activation::None, &mut a);
        depthwise_conv2d_f32(&w, 1, &input, &filter, &[1.0], Activation::None, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn fully_connected_f32_batches() {
        // Two batches of three inputs, two units.
        let input = [1.0, 2.0, 3.0, -1.0, 0.0, 1.0];
        let weights = [1.0, 1.0, 1.0, 0.5, -1.0, 2.0];
        let bias = [1.0, -1.0];
        let mut out = [0.0; 4];
        fully_connected_f32(2, 3, 2, &input, &weights, &bias, Activation::None, &mut out);
        assert_eq!(out, [7.0, 3.5, 1.0, 0.5]);
        fully_connected_f32(
            2,
            3,
            2,
            &input,
            &weights,
            &bias,
            Activation::Relu1,
            &mut out,
        );
        assert_eq!(out, [1.0, 1.0, 1.0, 0.5]);
    }

    #[test]
    fn fully_connected_u8_zero_points() {
        // The float case above: input 0.5·(q − 128), weights 0.5·(q − 64), output
        // 0.5·(q − 32); bias scale 0.25.
        let input_q = QuantParams::new(0.5, 128);
        let weights_q = QuantParams::new(0.5, 64);
        let output_q = QuantParams::new(0.5, 32);
        let input: Vec<u8> = [1.0f32, 2.0, 3.0, -1.0, 0.0, 1.0]
            .iter()
            .map(|&v| (v * 2.0 + 128.0) as u8)
            .collect();
        let weights: Vec<u8> = [1.0f32, 1.0, 1.0, 0.5, -1.0, 2.0]
            .iter()
            .map(|&v| (v * 2.0 + 64.0) as u8)
            .collect();
        let bias = [4, -4];
        let mut out = [0u8; 4];
        fully_connected_u8(
            2,
            3,
            2,
            &input,
            input_q,
            &weights,
            weights_q,
            &bias,
            output_q,
            Activation::None,
            &mut out,
        )
        .unwrap();
        // Reals 7, 3.5, 1, 0.5 at scale 0.5 → 14, 7, 2, 1 above the zero point.
        assert_eq!(out, [46, 39, 34, 33]);
        fully_connected_u8(
            2,
            3,
            2,
            &input,
            input_q,
            &weights,
            weights_q,
            &bias,
            output_q,
            Activation::Relu6,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [44, 39, 34, 33]);
    }

    #[test]
    fn accumulator_wraps_instead_of_panicking() {
        // 40 000 products of 255·255 exceed i32::MAX; the sum must wrap like the reference's
        // int32 arithmetic, not trap.
        let n = 40_000;
        let a = vec![255u8; n];
        let expected = (65_025i64 * n as i64) as i32;
        assert_eq!(dot_u8(&a, 0, &a, 0), expected);
    }

    #[test]
    fn dot_f32_handles_every_tail_length() {
        for n in 0..20 {
            let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let b = vec![2.0f32; n];
            let expected: f32 = (0..n).map(|i| 2.0 * i as f32).sum();
            assert_eq!(dot_f32(0.0, &a, &b), expected, "{n}");
        }
    }
}
