//! Per-channel quantized convolutions (NNAPI 1.2 TENSOR_QUANT8_SYMM_PER_CHANNEL filters) against
//! a plain oracle written from the specification: every output is
//! `clamp(zero_point + MultiplyByQuantizedMultiplier(bias[c] + Σ (x − x_zp)·f_int8, M_c))` with
//! `M_c = f64(input_scale · filter_scale[c]) / f64(output_scale)` split into a Q31 mantissa and
//! a power of two, and taps outside the input skipped. Random shapes, channel counts (with
//! tails), strides, paddings, dilations, depth multipliers, zero points, scales and
//! activations; CONV_2D and DEPTHWISE_CONV_2D, with and without dilation; and the fast paths
//! (packed GEMM and depthwise micro-kernels with per-column requantization) against the same
//! oracle at every instruction-set level the processor has.

mod support;

use nnhal_kernels::conv::dw_u8::{self, PackedDwU8};
use nnhal_kernels::conv::reference::{self as conv, Dilation};
use nnhal_kernels::conv::u8::{self as fast_u8, PackedConvU8};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::quant::{
    quantize_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
    ChannelRequant,
};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};
use support::{tables, Rng, ACTIVATIONS};

/// The requantization of one accumulator in channel scale `fs`, from the definition.
fn oracle_requant(
    acc: i32,
    input: QuantParams,
    fs: f32,
    output: QuantParams,
    act: Activation,
) -> u8 {
    let real = f64::from(input.scale * fs) / f64::from(output.scale);
    let (m, e) = quantize_multiplier(real);
    let (m, e) = if e < -31 { (0, 0) } else { (m, e) };
    let shifted = acc.wrapping_mul(1i32 << e.max(0));
    let v = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(shifted, m),
        (-e).max(0),
    );
    let (lo, hi) = act.range_u8(output);
    v.saturating_add(output.zero_point).clamp(lo, hi) as u8
}

struct Case {
    w: Window,
    d: Dilation,
    input: Vec<u8>,
    filter: Vec<i8>,
    bias: Vec<i32>,
    scales: Vec<f32>,
    iq: QuantParams,
    oq: QuantParams,
    act: Activation,
}

fn random_case(rng: &mut Rng, depthwise: bool, dilated: bool) -> (Case, usize) {
    let m = if depthwise { 1 + rng.below(3) } else { 1 };
    let in_c = 1 + rng.below(if depthwise { 20 } else { 13 });
    let out_c = if depthwise {
        in_c * m
    } else {
        1 + rng.below(37)
    };
    let d = if dilated {
        Dilation {
            h: 1 + rng.below(3),
            w: 1 + rng.below(3),
        }
    } else {
        Dilation { h: 1, w: 1 }
    };
    let (kh, kw) = (1 + rng.below(3), 1 + rng.below(3));
    let (eh, ew) = ((kh - 1) * d.h + 1, (kw - 1) * d.w + 1);
    let padding = Padding {
        top: rng.below(eh),
        bottom: rng.below(eh),
        left: rng.below(ew),
        right: rng.below(ew),
    };
    let (sh, sw) = (1 + rng.below(2), 1 + rng.below(2));
    let h = eh.saturating_sub(padding.top + padding.bottom).max(1) + rng.below(6);
    let wd = ew.saturating_sub(padding.left + padding.right).max(1) + rng.below(6);
    let n = 1 + rng.below(2);
    let oh = (h + padding.top + padding.bottom - eh) / sh + 1;
    let ow = (wd + padding.left + padding.right - ew) / sw + 1;
    let w = Window {
        input: Nhwc::new(n, h, wd, in_c),
        output: Nhwc::new(n, oh, ow, out_c),
        filter_h: kh,
        filter_w: kw,
        stride_h: sh,
        stride_w: sw,
        padding,
    };
    let taps = if depthwise {
        kh * kw * out_c
    } else {
        out_c * kh * kw * in_c
    };
    let input = (0..w.input.len()).map(|_| rng.below(256) as u8).collect();
    let filter = (0..taps).map(|_| rng.below(256) as u8 as i8).collect();
    let bias = (0..out_c)
        .map(|_| rng.below(20_001) as i32 - 10_000)
        .collect();
    // Channel scales spread over three decades, so some multipliers exceed 1.
    let scales = (0..out_c)
        .map(|_| 0.0005 * (1.0 + rng.below(2000) as f32))
        .collect();
    let iq = QuantParams::new(0.01 * (1.0 + rng.below(100) as f32), rng.below(256) as i32);
    let oq = QuantParams::new(0.05 * (1.0 + rng.below(100) as f32), rng.below(256) as i32);
    let act = ACTIVATIONS[rng.below(4)];
    let case = Case {
        w,
        d,
        input,
        filter,
        bias,
        scales,
        iq,
        oq,
        act,
    };
    (case, m)
}

/// The oracle: direct sums over the dilated taps, int8 filter values as they are.
fn oracle(c: &Case, depthwise: bool, m: usize) -> Vec<u8> {
    let w = &c.w;
    let mut out = vec![0u8; w.output.len()];
    for b in 0..w.output.n {
        for oy in 0..w.output.h {
            for ox in 0..w.output.w {
                for oc in 0..w.output.c {
                    let mut acc = c.bias[oc];
                    for ky in 0..w.filter_h {
                        for kx in 0..w.filter_w {
                            let iy =
                                (oy * w.stride_h + ky * c.d.h) as isize - w.padding.top as isize;
                            let ix =
                                (ox * w.stride_w + kx * c.d.w) as isize - w.padding.left as isize;
                            if iy < 0
                                || ix < 0
                                || iy >= w.input.h as isize
                                || ix >= w.input.w as isize
                            {
                                continue;
                            }
                            let (iy, ix) = (iy as usize, ix as usize);
                            let channels: Vec<(usize, usize)> = if depthwise {
                                vec![(oc / m, (ky * w.filter_w + kx) * w.output.c + oc)]
                            } else {
                                (0..w.input.c)
                                    .map(|ic| {
                                        (
                                            ic,
                                            ((oc * w.filter_h + ky) * w.filter_w + kx) * w.input.c
                                                + ic,
                                        )
                                    })
                                    .collect()
                            };
                            for (ic, fi) in channels {
                                let x = i32::from(c.input[w.input.offset(b, iy, ix, ic)])
                                    - c.iq.zero_point;
                                acc = acc.wrapping_add(x * i32::from(c.filter[fi]));
                            }
                        }
                    }
                    out[w.output.offset(b, oy, ox, oc)] =
                        oracle_requant(acc, c.iq, c.scales[oc], c.oq, c.act);
                }
            }
        }
    }
    out
}

fn run(c: &Case, depthwise: bool, m: usize) -> Option<Vec<u8>> {
    let rq = ChannelRequant::per_channel(c.iq, &c.scales, c.oq, c.act).ok()?;
    let bytes: Vec<u8> = c.filter.iter().map(|&v| v as u8).collect();
    let image = conv::filter_image(&bytes);
    let zps = (c.iq.zero_point, 128);
    let mut out = vec![0u8; c.w.output.len()];
    let plain = c.d == Dilation { h: 1, w: 1 };
    match (depthwise, plain) {
        (false, true) => {
            conv::conv2d_u8_channels(&c.w, &c.input, &image, zps, &c.bias, &rq, &mut out)
        }
        (false, false) => conv::conv2d_dilated_u8_channels(
            &c.w, c.d, &c.input, &image, zps, &c.bias, &rq, &mut out,
        ),
        (true, true) => conv::depthwise_conv2d_u8_channels(
            &c.w, m, &c.input, &image, zps, &c.bias, &rq, &mut out,
        ),
        (true, false) => conv::depthwise_conv2d_dilated_u8_channels(
            &c.w, c.d, m, &c.input, &image, zps, &c.bias, &rq, &mut out,
        ),
    }
    Some(out)
}

fn battery(seed: u64, depthwise: bool, dilated: bool) {
    let mut rng = Rng(seed);
    let mut checked = 0;
    for i in 0..150 {
        let (c, m) = random_case(&mut rng, depthwise, dilated);
        let Some(got) = run(&c, depthwise, m) else {
            continue;
        };
        assert_eq!(
            got,
            oracle(&c, depthwise, m),
            "case {i}: {:?} dilation {:?}",
            c.w,
            c.d
        );
        checked += 1;
    }
    assert!(
        checked >= 100,
        "only {checked} cases had representable multipliers"
    );
}

#[test]
fn conv2d_per_channel_matches_the_oracle() {
    battery(1, false, false);
}

#[test]
fn conv2d_dilated_per_channel_matches_the_oracle() {
    battery(2, false, true);
}

#[test]
fn depthwise_per_channel_matches_the_oracle() {
    battery(3, true, false);
}

#[test]
fn depthwise_dilated_per_channel_matches_the_oracle() {
    battery(4, true, true);
}

/// The per-tensor constructor is the 1.0 requantizer in every channel; the per-channel one
/// differs from it only through the scale and the f64 division.
#[test]
fn channel_requant_per_tensor_and_refusals() {
    let (i, o) = (QuantParams::new(0.5, 3), QuantParams::new(0.25, 7));
    let f = QuantParams::new(0.125, 0);
    let t = ChannelRequant::per_tensor(i, f, o, Activation::Relu6, 3).unwrap();
    assert_eq!(t.channels(), 3);
    let pc = ChannelRequant::per_channel(i, &[0.125, 0.25], o, Activation::None).unwrap();
    for acc in [-1000, -7, 0, 5, 999] {
        assert_eq!(
            pc.apply(0, acc),
            oracle_requant(acc, i, 0.125, o, Activation::None)
        );
        assert_eq!(
            pc.apply(1, acc),
            oracle_requant(acc, i, 0.25, o, Activation::None)
        );
    }
    // A multiplier needing a shift past 30, and an empty activation range, are refused.
    assert!(ChannelRequant::per_channel(i, &[0.1, 1e10], o, Activation::None).is_err());
    let narrow = QuantParams::new(100.0, 255);
    assert!(ChannelRequant::per_channel(i, &[0.1], narrow, Activation::Relu1).is_ok());
    let below = QuantParams::new(1e-3, 0);
    assert!(ChannelRequant::per_channel(i, &[0.1], below, Activation::None).is_ok());
}

/// A case for the fast paths: [`random_case`] without dilation, with channel counts that leave
/// tails in every block width (1, 3, 15, 17, 33, 47, 65 …), input zero points 0, 128 and 255
/// among random ones, and every multiplier regime: all below 1, all at 1 or above, mixed.
fn fast_case(rng: &mut Rng, depthwise: bool) -> (Case, usize) {
    let (mut c, m) = random_case(rng, depthwise, false);
    const WIDE: [usize; 9] = [1, 3, 15, 16, 17, 31, 33, 47, 65];
    if !depthwise && rng.below(2) == 0 {
        // Wider outputs, so several packed blocks and a tail.
        let out_c = WIDE[rng.below(WIDE.len())];
        let k = c.w.filter_h * c.w.filter_w * c.w.input.c;
        c.w.output.c = out_c;
        c.filter = (0..out_c * k).map(|_| rng.below(256) as u8 as i8).collect();
        c.bias = (0..out_c)
            .map(|_| rng.below(20_001) as i32 - 10_000)
            .collect();
    }
    // Depthwise channel counts also cover the 64-channel blocks of the byte dot-product kernel
    // (one block, several, and tails of 1, 2 and 16 lanes).
    const DW_WIDE: [usize; 12] = [1, 3, 15, 16, 17, 33, 47, 64, 65, 96, 130, 144];
    if depthwise && m == 1 && rng.below(2) == 0 {
        let ch = DW_WIDE[rng.below(DW_WIDE.len())];
        c.w.input.c = ch;
        c.w.output.c = ch;
        c.input = (0..c.w.input.len()).map(|_| rng.below(256) as u8).collect();
        c.filter = (0..c.w.filter_h * c.w.filter_w * ch)
            .map(|_| rng.below(256) as u8 as i8)
            .collect();
        c.bias = (0..ch).map(|_| rng.below(20_001) as i32 - 10_000).collect();
    }
    let zp = [0, 128, 255, rng.below(256) as i32][rng.below(4)];
    c.iq = QuantParams::new(c.iq.scale, zp);
    let out_c = c.w.output.c;
    c.scales = match rng.below(3) {
        // Every real multiplier below 1.
        0 => (0..out_c)
            .map(|_| c.oq.scale / c.iq.scale * (0.001 + 0.99 * rng.below(1000) as f32 / 1000.0))
            .collect(),
        // Every one at 1 or above (left shifts up to a few bits).
        1 => (0..out_c)
            .map(|_| c.oq.scale / c.iq.scale * (1.0 + rng.below(3000) as f32 / 100.0))
            .collect(),
        _ => (0..out_c)
            .map(|_| 0.0005 * (1.0 + rng.below(2000) as f32))
            .collect(),
    };
    (c, m)
}

/// The fast per-channel CONV_2D and DEPTHWISE_CONV_2D at every level against the oracle and
/// the reference loops.
fn fast_battery(seed: u64, depthwise: bool) {
    for uk in tables() {
        let mut rng = Rng(seed ^ ((uk.isa as u64) << 40));
        let mut checked = 0;
        for i in 0..120 {
            let (c, m) = fast_case(&mut rng, depthwise);
            let Ok(rq) = ChannelRequant::per_channel(c.iq, &c.scales, c.oq, c.act) else {
                continue;
            };
            let bytes: Vec<u8> = c.filter.iter().map(|&v| v as u8).collect();
            let image = conv::filter_image(&bytes);
            let w = &c.w;
            let mut got = vec![0u8; w.output.len()];
            if depthwise {
                let p = PackedDwU8::pack_channels(
                    uk, w.filter_h, w.filter_w, w.output.c, &image, &c.bias, c.iq, &rq,
                )
                .expect("representable");
                // Signed filters always fit the byte dot-product kernel where there is one.
                assert_eq!(
                    p.kernel_name(),
                    uk.u8_dw4
                        .map_or(uk.u8_dw2.map_or(uk.u8_dw.name, |d| d.name), |d| d.name)
                );
                dw_u8::depthwise_conv2d_u8(w, m, &p, &c.input, &mut got);
            } else {
                let shape = FilterShape {
                    out_c: w.output.c,
                    kh: w.filter_h,
                    kw: w.filter_w,
                    in_c: w.input.c,
                };
                let p = PackedConvU8::pack_channels(uk, shape, &image, &c.bias, c.iq, &rq).unwrap();
                assert_eq!(p.kernel_name(), uk.u8_gemm.name);
                fast_u8::conv2d_u8(w, &p, &c.input, &mut got);
            }
            let want = oracle(&c, depthwise, m);
            assert_eq!(
                got, want,
                "{} case {i}: {w:?} multiplier {m} {:?} {:?} {:?}",
                uk.isa, c.iq, c.oq, c.act
            );
            assert_eq!(Some(got), run(&c, depthwise, m), "{} case {i}", uk.isa);
            checked += 1;
        }
        assert!(checked >= 90, "{}: only {checked} cases ran", uk.isa);
    }
}

#[test]
fn conv2d_per_channel_fast_matches_the_oracle_at_every_level() {
    fast_battery(0x5c_0001, false);
}

#[test]
fn depthwise_per_channel_fast_matches_the_oracle_at_every_level() {
    fast_battery(0x5c_0002, true);
}

/// Extreme accumulators through the per-column epilogue: every kernel agrees with the scalar
/// [`ChannelRequant::apply`] on a 1×1 convolution whose single tap reaches near ±2^31 (left
/// shifts then wrap, as the reference's do) for right shifts 0..=31 and left shifts 0..=30.
#[test]
fn per_column_requantization_extremes_at_every_level() {
    let n = 40;
    let iq = QuantParams::new(1.0, 0);
    // Output scales giving exponents from +30 down to −31 across the channels.
    let scales: Vec<f32> = (0..n)
        .map(|c| 2f32.powi(30 - 61 * c as i32 / (n as i32 - 1)) * 0.75)
        .collect();
    for uk in tables() {
        for act in ACTIVATIONS {
            for oz in [0, 77, 128, 255] {
                let oq = QuantParams::new(1.0, oz);
                let rq = ChannelRequant::per_channel(iq, &scales, oq, act).unwrap();
                let bias: Vec<i32> = (0..n as i32)
                    .map(|c| c * 12_345_679 - 250_000_000)
                    .collect();
                let filter: Vec<u8> = (0..n).map(|c| [1i8, -1, 127, -128][c % 4] as u8).collect();
                let image = conv::filter_image(&filter);
                let input: Vec<u8> = vec![0, 1, 127, 128, 200, 255];
                let w = Window {
                    input: Nhwc::new(1, 1, input.len(), 1),
                    output: Nhwc::new(1, 1, input.len(), n),
                    filter_h: 1,
                    filter_w: 1,
                    stride_h: 1,
                    stride_w: 1,
                    padding: Padding::default(),
                };
                let shape = FilterShape {
                    out_c: n,
                    kh: 1,
                    kw: 1,
                    in_c: 1,
                };
                let p = PackedConvU8::pack_channels(uk, shape, &image, &bias, iq, &rq).unwrap();
                let mut got = vec![0u8; w.output.len()];
                fast_u8::conv2d_u8(&w, &p, &input, &mut got);
                let mut want = vec![0u8; w.output.len()];
                conv::conv2d_u8_channels(&w, &input, &image, (0, 128), &bias, &rq, &mut want);
                assert_eq!(got, want, "{} {act:?} zero point {oz}", uk.isa);
            }
        }
    }
}

/// The per-column epilogue of the depthwise kernels at extreme accumulators: a 1×1 depthwise
/// convolution whose single tap reaches near ±2^31, right shifts 0..=31 and left shifts
/// 0..=30 across 72 channels (a full 64-channel block and a tail), against
/// [`conv::depthwise_conv2d_u8_channels`].
#[test]
fn depthwise_per_column_requantization_extremes_at_every_level() {
    let n = 72;
    let iq = QuantParams::new(1.0, 0);
    let scales: Vec<f32> = (0..n)
        .map(|c| 2f32.powi(30 - 61 * c as i32 / (n as i32 - 1)) * 0.75)
        .collect();
    let pixels: [u8; 6] = [0, 1, 127, 128, 200, 255];
    for uk in tables() {
        for act in ACTIVATIONS {
            for oz in [0, 77, 128, 255] {
                let oq = QuantParams::new(1.0, oz);
                let rq = ChannelRequant::per_channel(iq, &scales, oq, act).unwrap();
                let bias: Vec<i32> = (0..n as i32).map(|c| c * 6_345_679 - 250_000_000).collect();
                let filter: Vec<u8> = (0..n).map(|c| [1i8, -1, 127, -128][c % 4] as u8).collect();
                let image = conv::filter_image(&filter);
                let input: Vec<u8> = (0..pixels.len() * n)
                    .map(|i| pixels[(i / n + i % 5) % pixels.len()])
                    .collect();
                let w = Window {
                    input: Nhwc::new(1, 1, pixels.len(), n),
                    output: Nhwc::new(1, 1, pixels.len(), n),
                    filter_h: 1,
                    filter_w: 1,
                    stride_h: 1,
                    stride_w: 1,
                    padding: Padding::default(),
                };
                let p = PackedDwU8::pack_channels(uk, 1, 1, n, &image, &bias, iq, &rq).unwrap();
                let mut got = vec![0u8; w.output.len()];
                dw_u8::depthwise_conv2d_u8(&w, 1, &p, &input, &mut got);
                let mut want = vec![0u8; w.output.len()];
                conv::depthwise_conv2d_u8_channels(
                    &w,
                    1,
                    &input,
                    &image,
                    (0, 128),
                    &bias,
                    &rq,
                    &mut want,
                );
                assert_eq!(
                    got,
                    want,
                    "{} {} {act:?} zero point {oz}",
                    uk.isa,
                    p.kernel_name()
                );
            }
        }
    }
}

/// The per-channel epilogue of the byte dot-product depthwise kernel (one 64-bit multiply,
/// add and shift per lane, constants packed per channel) at every level, against the reference
/// loops and the oracle: channel counts 1..=200 (one and several 64-channel blocks, the
/// 256-bit tail of at most 32 channels, 1-lane tails), kernels 1×1 to 5×5, strides 1 and 2,
/// padding on every side, batches of 1 and 2, and per-channel multipliers whose exponents
/// span +30 (left shifts) down to −31 (right shifts 0..=31) with mantissas at both ends of
/// the Q31 range, some layers with no left shift at all (the kernel skips the shift there),
/// biases up to ±2^30 so the left shifts wrap. The kernel must be the byte one wherever the
/// table has it.
#[test]
fn depthwise_byte_dot_product_per_channel_battery_at_every_level() {
    const CHANNELS: [usize; 19] = [
        1, 2, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 144, 160, 192, 200,
    ];
    const MANTISSAS: [f32; 4] = [0.5, 0.75, 0.999_999_94, 0.612_345];
    for uk in tables() {
        let mut rng = Rng(0xd4c8 ^ ((uk.isa as u64) << 40));
        let (mut checked, mut byte_runs, mut left_layers) = (0, 0, 0);
        for i in 0..140 {
            let ch = CHANNELS[rng.below(CHANNELS.len())];
            let (kh, kw) = (rng.range(1, 5), rng.range(1, 5));
            let (sh, sw) = (rng.range(1, 2), rng.range(1, 2));
            let padding = Padding {
                top: rng.below(kh),
                bottom: rng.below(kh),
                left: rng.below(kw),
                right: rng.below(kw),
            };
            let h = kh.saturating_sub(padding.top + padding.bottom).max(1) + rng.below(5);
            let wd = kw.saturating_sub(padding.left + padding.right).max(1) + rng.below(9);
            let n = rng.range(1, 2);
            let w = Window {
                input: Nhwc::new(n, h, wd, ch),
                output: Nhwc::new(
                    n,
                    (h + padding.top + padding.bottom - kh) / sh + 1,
                    (wd + padding.left + padding.right - kw) / sw + 1,
                    ch,
                ),
                filter_h: kh,
                filter_w: kw,
                stride_h: sh,
                stride_w: sw,
                padding,
            };
            // Exponents: all right shifts (no left shift in the layer), or the whole span.
            let right_only = i % 3 == 0;
            let scales: Vec<f32> = (0..ch)
                .map(|_| {
                    let e = if right_only {
                        -(rng.range(1, 32) as i32)
                    } else {
                        rng.range(0, 61) as i32 - 31
                    };
                    MANTISSAS[rng.below(MANTISSAS.len())] * 2f32.powi(e)
                })
                .collect();
            let bias_span = [20_001, 1 << 20, 1 << 30][rng.below(3)];
            let c = Case {
                w,
                d: Dilation { h: 1, w: 1 },
                input: (0..w.input.len()).map(|_| rng.below(256) as u8).collect(),
                filter: (0..kh * kw * ch)
                    .map(|_| rng.below(256) as u8 as i8)
                    .collect(),
                bias: (0..ch)
                    .map(|_| (rng.below(2 * bias_span + 1) as i64 - bias_span as i64) as i32)
                    .collect(),
                scales,
                iq: QuantParams::new(1.0, [0, 128, 255, rng.below(256) as i32][rng.below(4)]),
                oq: QuantParams::new(1.0, rng.below(256) as i32),
                act: ACTIVATIONS[rng.below(4)],
            };
            let Ok(rq) = ChannelRequant::per_channel(c.iq, &c.scales, c.oq, c.act) else {
                continue;
            };
            left_layers += usize::from(!right_only);
            let bytes: Vec<u8> = c.filter.iter().map(|&v| v as u8).collect();
            let image = conv::filter_image(&bytes);
            let p = PackedDwU8::pack_channels(uk, kh, kw, ch, &image, &c.bias, c.iq, &rq)
                .expect("representable");
            assert_eq!(
                p.kernel_name(),
                uk.u8_dw4
                    .map_or(uk.u8_dw2.map_or(uk.u8_dw.name, |d| d.name), |d| d.name)
            );
            byte_runs += usize::from(uk.u8_dw4.is_some());
            let mut got = vec![0xa5u8; w.output.len()];
            dw_u8::depthwise_conv2d_u8(&w, 1, &p, &c.input, &mut got);
            let want = run(&c, true, 1).expect("representable");
            assert_eq!(
                got.iter().zip(&want).position(|(a, b)| a != b),
                None,
                "{} {} case {i}: {w:?} {:?} {:?} {:?}",
                uk.isa,
                p.kernel_name(),
                c.iq,
                c.oq,
                c.act
            );
            assert_eq!(got, oracle(&c, true, 1), "{} case {i}", uk.isa);
            checked += 1;
        }
        assert!(checked >= 120, "{}: only {checked} cases ran", uk.isa);
        assert!(left_layers >= 60, "{}: {left_layers} layers", uk.isa);
        if uk.u8_dw4.is_some() {
            assert_eq!(byte_runs, checked, "{}", uk.isa);
        }
    }
}

/// The byte kernel's 3-column path (each input column's tap quads built once for the three
/// pixels sharing it): filters of 1 to 4 rows and 3 columns, horizontal stride 1 (2 does not
/// take it), vertical strides 1 and 2, interior runs of 1, 2, 3 and many pixels beside padded border columns,
/// rows in the vertical padding, channel counts with full 64-channel blocks, tails above and
/// below 32 channels (the latter on the tap-quad row path, the rest of the row on this one),
/// per-channel multipliers with and without left shifts; against the reference loops
/// and the oracle at every level, the path asserted taken wherever the table has the byte
/// kernel.
#[test]
fn depthwise_three_column_path_matches_the_oracle_at_every_level() {
    const CHANNELS: [usize; 10] = [1, 16, 31, 33, 64, 96, 100, 144, 160, 200];
    for uk in tables() {
        let mut rng = Rng(0xc013 ^ ((uk.isa as u64) << 40));
        let (mut checked, mut column_runs) = (0, 0);
        for i in 0..96 {
            let ch = CHANNELS[i % CHANNELS.len()];
            let kh = 1 + i % 4;
            let (sh, sw) = (1 + (i / 4) % 2, 1 + (i / 8) % 2);
            // Stride 2 keeps the per-pixel kernel: checked below, and its results too.
            let padding = Padding {
                top: rng.below(kh),
                bottom: rng.below(kh),
                left: rng.below(3),
                right: rng.below(3),
            };
            // Input widths whose interior runs are 1, 2, 3 or several pixels long.
            // The first interior pixel starts `skip` columns into the input.
            let interior = [1, 2, 3, 4 + rng.below(9)][(i / 16) % 4];
            let skip = padding.left.div_ceil(sw) * sw - padding.left;
            let wd = (interior - 1) * sw + 3 + skip;
            let h = kh.saturating_sub(padding.top + padding.bottom).max(1) + rng.below(4);
            let n = rng.range(1, 2);
            let w = Window {
                input: Nhwc::new(n, h, wd, ch),
                output: Nhwc::new(
                    n,
                    (h + padding.top + padding.bottom - kh) / sh + 1,
                    (wd + padding.left + padding.right - 3) / sw + 1,
                    ch,
                ),
                filter_h: kh,
                filter_w: 3,
                stride_h: sh,
                stride_w: sw,
                padding,
            };
            let right_only = i % 2 == 0;
            let scales: Vec<f32> = (0..ch)
                .map(|_| {
                    let e = if right_only {
                        -(rng.range(1, 32) as i32)
                    } else {
                        rng.range(0, 61) as i32 - 31
                    };
                    [0.5, 0.75, 0.999_999_94][rng.below(3)] * 2f32.powi(e)
                })
                .collect();
            let c = Case {
                w,
                d: Dilation { h: 1, w: 1 },
                input: (0..w.input.len()).map(|_| rng.below(256) as u8).collect(),
                filter: (0..kh * 3 * ch)
                    .map(|_| rng.below(256) as u8 as i8)
                    .collect(),
                bias: (0..ch)
                    .map(|_| (rng.below(1 << 21) as i64 - (1 << 20)) as i32)
                    .collect(),
                scales,
                iq: QuantParams::new(1.0, [0, 128, 255, rng.below(256) as i32][rng.below(4)]),
                oq: QuantParams::new(1.0, rng.below(256) as i32),
                act: ACTIVATIONS[rng.below(4)],
            };
            let Ok(rq) = ChannelRequant::per_channel(c.iq, &c.scales, c.oq, c.act) else {
                continue;
            };
            let bytes: Vec<u8> = c.filter.iter().map(|&v| v as u8).collect();
            let image = conv::filter_image(&bytes);
            let p = PackedDwU8::pack_channels(uk, kh, 3, ch, &image, &c.bias, c.iq, &rq)
                .expect("representable");
            let column = dw_u8::runs_column_path(&w, &p);
            let expected = uk.u8_dw4.is_some() && sw == 1;
            assert_eq!(column, expected, "{} case {i}: {w:?}", uk.isa);
            column_runs += usize::from(column);
            let mut got = vec![0xa5u8; w.output.len()];
            dw_u8::depthwise_conv2d_u8(&w, 1, &p, &c.input, &mut got);
            let want = run(&c, true, 1).expect("representable");
            assert_eq!(
                got.iter().zip(&want).position(|(a, b)| a != b),
                None,
                "{} case {i}: {w:?} {:?} {:?} {:?}",
                uk.isa,
                c.iq,
                c.oq,
                c.act
            );
            assert_eq!(got, oracle(&c, true, 1), "{} case {i}", uk.isa);
            checked += 1;
        }
        assert!(checked >= 80, "{}: only {checked} cases ran", uk.isa);
        if uk.u8_dw4.is_some() {
            assert!(column_runs >= 40, "{}: {column_runs} column runs", uk.isa);
        }
    }
}

/// The fused per-column epilogue (layers without left shifts) at its extremes: right shifts
/// 0..=31, multipliers at 2^30 and just below 2^31, accumulators near both int32 ends, output
/// zero points 0 and 255, rows that fill the register tiles, a single row and a ragged last
/// tile, and a partial last channel block, against [`conv::conv2d_u8_channels`].
#[test]
fn fused_per_column_requantization_extremes_at_every_level() {
    let n = 70;
    let iq = QuantParams::new(1.0, 0);
    // Real multipliers below 1 only: mantissas at 0.5 (Q31 2^30), just below 1 and between,
    // exponents 0 down to −31.
    let mantissa = [0.5f64, 0.999_999_9, 0.75, 0.500_000_1, 0.6];
    let scales: Vec<f32> = (0..n)
        .map(|c| (mantissa[c % mantissa.len()] * 2f64.powi(-((c % 32) as i32))) as f32)
        .collect();
    let pixels: [u8; 6] = [0, 1, 127, 128, 200, 255];
    let bias_at = [
        i32::MIN + 40_000,
        i32::MAX - 40_000,
        0,
        -1_000_000_007,
        123_456_789,
    ];
    for uk in tables() {
        for rows in [1, 7, 17] {
            for act in ACTIVATIONS {
                for oz in [0, 255, 3] {
                    let oq = QuantParams::new(1.0, oz);
                    let rq = ChannelRequant::per_channel(iq, &scales, oq, act).unwrap();
                    let bias: Vec<i32> = (0..n).map(|c| bias_at[c % bias_at.len()]).collect();
                    let filter: Vec<u8> =
                        (0..n).map(|c| [1i8, -1, 127, -128][c % 4] as u8).collect();
                    let image = conv::filter_image(&filter);
                    let input: Vec<u8> = (0..rows).map(|r| pixels[r % pixels.len()]).collect();
                    let w = Window {
                        input: Nhwc::new(1, 1, rows, 1),
                        output: Nhwc::new(1, 1, rows, n),
                        filter_h: 1,
                        filter_w: 1,
                        stride_h: 1,
                        stride_w: 1,
                        padding: Padding::default(),
                    };
                    let shape = FilterShape {
                        out_c: n,
                        kh: 1,
                        kw: 1,
                        in_c: 1,
                    };
                    let p = PackedConvU8::pack_channels(uk, shape, &image, &bias, iq, &rq).unwrap();
                    let mut got = vec![0u8; w.output.len()];
                    fast_u8::conv2d_u8(&w, &p, &input, &mut got);
                    let mut want = vec![0u8; w.output.len()];
                    conv::conv2d_u8_channels(&w, &input, &image, (0, 128), &bias, &rq, &mut want);
                    assert_eq!(got, want, "{} rows {rows} {act:?} zero point {oz}", uk.isa);
                }
            }
        }
    }
}

/// The per-channel layers of MobileNet v2 that have few taps or few channels: pointwise with
/// K = 16, 24 or 32 and N = 8, 16, 24 or 40 (a 32-wide block with an unused half), and the
/// first convolution of a 3-channel image (3×3, strides 1 and 2, SAME-like and VALID), odd
/// sizes, input zero points 0, 128 and 255, output zero points (int8 −128 as 0 among them),
/// every activation, on the GEMM kernel at every level, against the oracle.
#[test]
fn small_k_and_narrow_per_channel_layers_match_the_oracle_at_every_level() {
    let mut windows = Vec::new();
    for in_c in [16, 24, 32] {
        for out_c in [8, 16, 24, 40] {
            windows.push(Window {
                input: Nhwc::new(1, 9, 13, in_c),
                output: Nhwc::new(1, 9, 13, out_c),
                filter_h: 1,
                filter_w: 1,
                stride_h: 1,
                stride_w: 1,
                padding: Padding::default(),
            });
        }
    }
    for s in [1, 2] {
        for pad in [0, 1] {
            for out_c in [16, 24, 32] {
                let (h, w) = (15, 17);
                let padding = Padding {
                    top: pad,
                    left: pad,
                    bottom: 1,
                    right: 1,
                };
                windows.push(Window {
                    input: Nhwc::new(1, h, w, 3),
                    output: Nhwc::new(
                        1,
                        (h + pad + 1 - 3) / s + 1,
                        (w + pad + 1 - 3) / s + 1,
                        out_c,
                    ),
                    filter_h: 3,
                    filter_w: 3,
                    stride_h: s,
                    stride_w: s,
                    padding,
                });
            }
        }
    }
    for uk in tables() {
        let mut rng = Rng(0x5c_0003 ^ ((uk.isa as u64) << 40));
        let mut checked = 0;
        for (i, w) in windows.iter().enumerate() {
            for act in ACTIVATIONS {
                let k = w.filter_h * w.filter_w * w.input.c;
                let out_c = w.output.c;
                let iq = QuantParams::new(0.0078125, [0, 128, 255][i % 3]);
                let oq = QuantParams::new(
                    0.02 + 0.01 * rng.below(10) as f32,
                    [0, 128, 255, rng.below(256) as i32][rng.below(4)],
                );
                let c = Case {
                    w: *w,
                    d: Dilation { h: 1, w: 1 },
                    input: (0..w.input.len()).map(|_| rng.below(256) as u8).collect(),
                    filter: (0..out_c * k).map(|_| rng.below(256) as u8 as i8).collect(),
                    bias: (0..out_c)
                        .map(|_| rng.below(20_001) as i32 - 10_000)
                        .collect(),
                    scales: (0..out_c)
                        .map(|_| 0.0005 * (1.0 + rng.below(200) as f32))
                        .collect(),
                    iq,
                    oq,
                    act,
                };
                let rq = ChannelRequant::per_channel(c.iq, &c.scales, c.oq, c.act).unwrap();
                let bytes: Vec<u8> = c.filter.iter().map(|&v| v as u8).collect();
                let image = conv::filter_image(&bytes);
                let shape = FilterShape {
                    out_c,
                    kh: w.filter_h,
                    kw: w.filter_w,
                    in_c: w.input.c,
                };
                let p = PackedConvU8::pack_channels(uk, shape, &image, &c.bias, c.iq, &rq).unwrap();
                assert_eq!(p.kernel_name(), uk.u8_gemm.name);
                let mut got = vec![0u8; w.output.len()];
                fast_u8::conv2d_u8(w, &p, &c.input, &mut got);
                assert_eq!(got, oracle(&c, false, 1), "{} {w:?} {act:?} {oq:?}", uk.isa);
                checked += 1;
            }
        }
        assert_eq!(checked, windows.len() * ACTIVATIONS.len());
    }
}

/// The tap-pair depthwise kernel (two taps per multiply-add, int16 weight pairs) where the
/// table has one, per tensor and per channel, against the reference loops: interior runs of
/// 1 to 9 pixels (the kernel's groups of 4, 2 and 1) beside single border pixels, filters
/// with odd and even tap counts (1×1, 1×2, 2×3, 3×3, 5×5, 7×7; an odd count pairs its last
/// tap with itself), channel counts below, at and above the 16-channel block and not
/// multiples of 8, strides 1 and 2, padding on every side, input zero points 0, 128 and 255,
/// uint8 filter zero points whose weights span −255..=255, per-channel multipliers at 1 or
/// above (left shifts) and below, every activation. The kernel must be the tap-pair one
/// wherever the table has it and no byte dot-product packing applies.
#[test]
fn depthwise_tap_pair_runs_match_reference_at_every_level() {
    const CHANNELS: [usize; 12] = [1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 40, 64];
    const FILTERS: [(usize, usize); 6] = [(1, 1), (1, 2), (2, 3), (3, 3), (5, 5), (7, 7)];
    for uk in tables() {
        let mut rng = Rng(0xd2 ^ ((uk.isa as u64) << 40));
        let (mut pair_runs, mut widths) = (0, [false; 10]);
        for case in 0..240 {
            let c = CHANNELS[rng.below(CHANNELS.len())];
            let (kh, kw) = FILTERS[case % FILTERS.len()];
            let s = 1 + rng.below(2);
            let pad = |rng: &mut Rng, k: usize| rng.below(k);
            let padding = Padding {
                top: pad(&mut rng, kh),
                bottom: pad(&mut rng, kh),
                left: pad(&mut rng, kw),
                right: pad(&mut rng, kw),
            };
            // Output width 1..=11: interior runs of every length up to 9 with the borders.
            let ow = 1 + rng.below(11);
            let oh = 1 + rng.below(3);
            let iw = ((ow - 1) * s + kw)
                .saturating_sub(padding.left + padding.right)
                .max(1);
            let ih = ((oh - 1) * s + kh)
                .saturating_sub(padding.top + padding.bottom)
                .max(1);
            let n = 1 + rng.below(2);
            let padded_w = iw + padding.left + padding.right;
            let padded_h = ih + padding.top + padding.bottom;
            if padded_w < kw || padded_h < kh {
                continue;
            }
            let w = Window {
                input: Nhwc::new(n, ih, iw, c),
                output: Nhwc::new(n, (padded_h - kh) / s + 1, (padded_w - kw) / s + 1, c),
                filter_h: kh,
                filter_w: kw,
                stride_h: s,
                stride_w: s,
                padding,
            };
            let zp = [0, 128, 255, rng.below(256) as i32][rng.below(4)];
            let iq = QuantParams::new(0.5, zp);
            let act = ACTIVATIONS[rng.below(ACTIVATIONS.len())];
            let oq = QuantParams::new(1.0, [0, 77, 128, 255][rng.below(4)]);
            let input: Vec<u8> = (0..w.input.len()).map(|_| rng.below(256) as u8).collect();
            let filter: Vec<u8> = (0..kh * kw * c)
                .map(|i| match case % 3 {
                    // Extremes: weights ±255 against zero points 0 and 255.
                    0 => [0u8, 255][(i + case) % 2],
                    _ => rng.below(256) as u8,
                })
                .collect();
            let bias: Vec<i32> = (0..c)
                .map(|_| rng.below(2_000_001) as i32 - 1_000_000)
                .collect();
            // Every filter shape both ways.
            let per_channel = (case / FILTERS.len()) % 2 == 1;
            let mut want = vec![0u8; w.output.len()];
            let p = if per_channel {
                // Signed filters (zero point 128 in the image); multipliers from 2^−12 to
                // about 2^5, so some channels shift left.
                let scales: Vec<f32> = (0..c)
                    .map(|_| {
                        2f32.powi(rng.below(18) as i32 - 12) * (1.0 + rng.below(100) as f32 / 100.0)
                    })
                    .collect();
                let rq = ChannelRequant::per_channel(iq, &scales, oq, act).unwrap();
                conv::depthwise_conv2d_u8_channels(
                    &w,
                    1,
                    &input,
                    &filter,
                    (zp, 128),
                    &bias,
                    &rq,
                    &mut want,
                );
                PackedDwU8::pack_channels(uk, kh, kw, c, &filter, &bias, iq, &rq)
                    .expect("representable")
            } else {
                let q = fast_u8::ConvQuant {
                    input: iq,
                    filter: QuantParams::new(0.01, [0, 255, 3, 128][rng.below(4)]),
                    output: QuantParams::new([0.02f32, 0.5, 3.0][rng.below(3)], oq.zero_point),
                    act,
                };
                conv::depthwise_conv2d_u8(
                    &w, 1, &input, q.input, &filter, q.filter, &bias, q.output, q.act, &mut want,
                )
                .unwrap();
                PackedDwU8::pack(uk, kh, kw, c, &filter, &bias, q).unwrap()
            };
            if let (Some(d2), None) = (uk.u8_dw2, uk.u8_dw4) {
                if p.kernel_name() != "reference" {
                    assert_eq!(p.kernel_name(), d2.name, "case {case}");
                    pair_runs += 1;
                    let interior = (0..w.output.w)
                        .filter(|&ox| ox * s >= padding.left && ox * s + kw <= padding.left + iw)
                        .count();
                    widths[interior.min(9)] = true;
                }
            }
            let mut got = vec![0xa5u8; w.output.len()];
            dw_u8::depthwise_conv2d_u8(&w, 1, &p, &input, &mut got);
            assert!(
                got == want,
                "{} {} case {case}: {w:?} first diff at {:?}",
                uk.isa,
                p.kernel_name(),
                got.iter().zip(&want).position(|(a, b)| a != b)
            );
        }
        if uk.u8_dw2.is_some() && uk.u8_dw4.is_none() {
            assert!(pair_runs >= 150, "{}: {pair_runs} tap-pair runs", uk.isa);
            assert!(
                widths[1..].iter().all(|&w| w),
                "{}: interior run lengths seen {widths:?}",
                uk.isa
            );
        }
    }
}
