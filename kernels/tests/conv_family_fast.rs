//! GROUPED_CONV_2D and TRANSPOSE_CONV_2D (NNAPI 1.2): the fast forms on the packed GEMMs
//! against the reference loops at every instruction-set level this processor runs (float32
//! within rounding, uint8 byte for byte), and the reference loops against independent
//! formulations (a grouped convolution of one group is CONV_2D; a transposed convolution
//! gathers what the reference scatters; a per-channel int8 filter with equal scales is the
//! uint8 filter with zero point 128). INSTANCE_NORMALIZATION against a float64 evaluation.

mod support;

use nnhal_kernels::conv::grouped::{self, PackedGrouped};
use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::conv::transpose::{
    self, PackedTransposeF32, PackedTransposeU8, TransposeWindow,
};
use nnhal_kernels::conv::u8::ConvQuant;
use nnhal_kernels::conv::{FilterQuant, FilterShape};
use nnhal_kernels::normalization::reference as norm;
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};
use support::{tables, Rng, ACTIVATIONS};

impl Rng {
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.below(2001) as f32 - 1000.0) / 250.0)
            .collect()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-3 * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

/// A random grouped window: (window, groups).
fn grouped_window(rng: &mut Rng) -> (Window, usize) {
    let groups = rng.range(1, 4);
    let fd = rng.range(1, 9);
    let ogd = rng.range(1, 11);
    let (kh, kw) = (rng.range(1, 3), rng.range(1, 3));
    let (sh, sw) = (rng.range(1, 2), rng.range(1, 3));
    let pad = Padding {
        left: rng.below(kw),
        right: rng.below(kw),
        top: rng.below(kh),
        bottom: rng.below(kh),
    };
    let ih = rng.range(kh, 9);
    let iw = rng.range(kw, 9);
    let oh = (ih + pad.top + pad.bottom - kh) / sh + 1;
    let ow = (iw + pad.left + pad.right - kw) / sw + 1;
    let n = rng.range(1, 2);
    (
        Window {
            input: Nhwc::new(n, ih, iw, fd * groups),
            output: Nhwc::new(n, oh, ow, ogd * groups),
            filter_h: kh,
            filter_w: kw,
            stride_h: sh,
            stride_w: sw,
            padding: pad,
        },
        groups,
    )
}

fn filter_shape(w: &Window, groups: usize) -> FilterShape {
    FilterShape {
        out_c: w.output.c,
        kh: w.filter_h,
        kw: w.filter_w,
        in_c: w.input.c / groups,
    }
}

#[test]
fn grouped_f32_fast_matches_reference_at_every_level() {
    for uk in tables() {
        let mut rng = Rng(0x6c0f_0001 ^ uk.isa as u64);
        for case in 0..60 {
            let (w, groups) = grouped_window(&mut rng);
            let s = filter_shape(&w, groups);
            let x = rng.f32s(w.input.len());
            let f = rng.f32s(s.out_c * s.taps());
            let b = rng.f32s(s.out_c);
            let act = rng.pick(&ACTIVATIONS);
            let mut want = vec![0.0; w.output.len()];
            grouped::grouped_conv2d_f32(&w, groups, &x, &f, &b, act, &mut want);
            let p = PackedGrouped::pack_f32(uk, s, groups, &f, &b);
            let mut got = vec![f32::NAN; w.output.len()];
            grouped::grouped_conv2d_f32_fast(&w, &p, &x, act, &mut got);
            close(
                &got,
                &want,
                &format!("{} case {case} {w:?} groups {groups}", uk.isa),
            );
        }
    }
}

#[test]
fn one_group_is_conv2d() {
    let mut rng = Rng(0x6c0f_0002);
    for _ in 0..40 {
        let (mut w, _) = grouped_window(&mut rng);
        w.input.c = rng.range(1, 7);
        let s = filter_shape(&w, 1);
        let x = rng.f32s(w.input.len());
        let f = rng.f32s(s.out_c * s.taps());
        let b = rng.f32s(s.out_c);
        let mut want = vec![0.0; w.output.len()];
        conv::conv2d_f32(&w, &x, &f, &b, Activation::None, &mut want);
        let mut got = vec![0.0; w.output.len()];
        grouped::grouped_conv2d_f32(&w, 1, &x, &f, &b, Activation::None, &mut got);
        close(&got, &want, "one group");
        let q = |s: f32, z: i32| QuantParams::new(s, z);
        let (xq, fq, oq) = (q(0.5, 100), q(0.02, 120), q(0.9, 7));
        let (xu, fu) = (rng.bytes(x.len()), rng.bytes(f.len()));
        let bi: Vec<i32> = (0..s.out_c)
            .map(|_| rng.below(2001) as i32 - 1000)
            .collect();
        let mut want = vec![0u8; w.output.len()];
        conv::conv2d_u8(&w, &xu, xq, &fu, fq, &bi, oq, Activation::Relu, &mut want).unwrap();
        let mut got = vec![0u8; w.output.len()];
        grouped::grouped_conv2d_u8(
            &w,
            1,
            &xu,
            xq,
            &fu,
            FilterQuant::Tensor(fq),
            &bi,
            oq,
            Activation::Relu,
            &mut got,
        )
        .unwrap();
        assert_eq!(got, want);
    }
}

/// Scales whose multiplier `si·sf/so` runs from tiny to just below 1.
fn conv_quant(rng: &mut Rng) -> ConvQuant {
    let m = rng.pick(&[1e-5f32, 0.001, 0.02, 0.3, 0.75, 0.9999]);
    let (si, sf) = (
        rng.pick(&[0.0078125f32, 0.5, 1.0]),
        rng.pick(&[0.001f32, 0.25]),
    );
    let zp = |rng: &mut Rng| rng.pick(&[0, 1, 127, 128, 200, 255]);
    ConvQuant {
        input: QuantParams::new(si, zp(rng)),
        filter: QuantParams::new(sf, zp(rng)),
        output: QuantParams::new(si * sf / m, zp(rng)),
        act: rng.pick(&ACTIVATIONS),
    }
}

#[test]
fn grouped_u8_fast_matches_reference_at_every_level() {
    for uk in tables() {
        let mut rng = Rng(0x6c0f_0003 ^ uk.isa as u64);
        let mut ran = 0;
        for case in 0..80 {
            let (w, groups) = grouped_window(&mut rng);
            let s = filter_shape(&w, groups);
            let q = conv_quant(&mut rng);
            let x = rng.bytes(w.input.len());
            let f = rng.bytes(s.out_c * s.taps());
            let b: Vec<i32> = (0..s.out_c)
                .map(|_| rng.below(40001) as i32 - 20000)
                .collect();
            let mut want = vec![0u8; w.output.len()];
            let fq = FilterQuant::Tensor(q.filter);
            grouped::grouped_conv2d_u8(
                &w, groups, &x, q.input, &f, fq, &b, q.output, q.act, &mut want,
            )
            .unwrap();
            let Some(p) = PackedGrouped::pack_u8(uk, s, groups, &f, &b, q) else {
                continue;
            };
            ran += 1;
            let mut got = vec![0u8; w.output.len()];
            grouped::grouped_conv2d_u8_fast(&w, &p, &x, &mut got);
            assert_eq!(
                got, want,
                "{} case {case} {w:?} groups {groups} {q:?}",
                uk.isa
            );
        }
        assert!(ran >= 60, "only {ran} cases packed");
    }
}

/// GROUPED_CONV_2D on the GEMMs with per-column requantization: per-channel filters (their
/// unsigned image at zero point 128) and per-tensor filters whose multiplier is 1 or more,
/// against the grouped reference at every level.
#[test]
fn grouped_u8_requant_fast_matches_reference_at_every_level() {
    for uk in tables() {
        let mut rng = Rng(0x6c0f_0005 ^ uk.isa as u64);
        let mut ran = [0; 2];
        for case in 0..80 {
            let (w, groups) = grouped_window(&mut rng);
            let s = filter_shape(&w, groups);
            let zp = |rng: &mut Rng| rng.pick(&[0, 1, 127, 128, 200, 255]);
            let iq = QuantParams::new(rng.pick(&[0.0078125f32, 0.5, 1.0]), zp(&mut rng));
            let oq = QuantParams::new(rng.pick(&[0.01f32, 0.1, 1.0]), zp(&mut rng));
            let act = rng.pick(&ACTIVATIONS);
            let x = rng.bytes(w.input.len());
            let f = rng.bytes(s.out_c * s.taps());
            let b: Vec<i32> = (0..s.out_c)
                .map(|_| rng.below(40001) as i32 - 20000)
                .collect();
            let per_channel = case % 2 == 0;
            let scales: Vec<f32> = (0..s.out_c)
                .map(|_| rng.pick(&[0.0001f32, 0.003, 0.05, 0.4, 2.0, 9.0]))
                .collect();
            let tq = QuantParams::new(rng.pick(&[0.05f32, 0.5, 4.0]), zp(&mut rng));
            let fq = if per_channel {
                FilterQuant::Channel(&scales)
            } else {
                FilterQuant::Tensor(tq)
            };
            let mut want = vec![0u8; w.output.len()];
            let reference =
                grouped::grouped_conv2d_u8(&w, groups, &x, iq, &f, fq, &b, oq, act, &mut want);
            let Ok(rq) = grouped::requantizers(iq, fq, s.out_c, oq, act) else {
                assert!(reference.is_err());
                continue;
            };
            reference.unwrap();
            let (filter, filter_zp) = if per_channel {
                (conv::filter_image(&f), 128)
            } else {
                (f.clone(), tq.zero_point)
            };
            let p = PackedGrouped::pack_u8_requant(uk, s, groups, &filter, filter_zp, &b, iq, &rq)
                .expect("representable");
            ran[usize::from(per_channel)] += 1;
            let mut got = vec![0u8; w.output.len()];
            grouped::grouped_conv2d_u8_fast(&w, &p, &x, &mut got);
            assert_eq!(
                got, want,
                "{} case {case} {w:?} groups {groups} per-channel {per_channel}",
                uk.isa
            );
        }
        assert!(ran[0] >= 25 && ran[1] >= 25, "{}: ran {ran:?}", uk.isa);
    }
}

#[test]
fn per_channel_with_equal_scales_is_the_uint8_filter_at_zero_point_128() {
    let mut rng = Rng(0x6c0f_0004);
    for _ in 0..40 {
        let (w, groups) = grouped_window(&mut rng);
        let s = filter_shape(&w, groups);
        let q = conv_quant(&mut rng);
        let x = rng.bytes(w.input.len());
        let f = rng.bytes(s.out_c * s.taps());
        let b: Vec<i32> = (0..s.out_c)
            .map(|_| rng.below(4001) as i32 - 2000)
            .collect();
        let scales = vec![q.filter.scale; s.out_c];
        let unsigned: Vec<u8> = f.iter().map(|v| v ^ 0x80).collect();
        let u8q = FilterQuant::Tensor(QuantParams::new(q.filter.scale, 128));
        let mut want = vec![0u8; w.output.len()];
        grouped::grouped_conv2d_u8(
            &w, groups, &x, q.input, &unsigned, u8q, &b, q.output, q.act, &mut want,
        )
        .unwrap();
        let mut got = vec![0u8; w.output.len()];
        let pc = FilterQuant::Channel(&scales);
        grouped::grouped_conv2d_u8(
            &w, groups, &x, q.input, &f, pc, &b, q.output, q.act, &mut got,
        )
        .unwrap();
        assert_eq!(got, want, "grouped");
        // The same for TRANSPOSE_CONV_2D.
        let tw = transpose_window(&mut rng);
        let ts = FilterShape {
            out_c: tw.output.c,
            kh: tw.filter_h,
            kw: tw.filter_w,
            in_c: tw.input.c,
        };
        let x = rng.bytes(tw.input.len());
        let f = rng.bytes(ts.out_c * ts.taps());
        let b: Vec<i32> = (0..ts.out_c)
            .map(|_| rng.below(4001) as i32 - 2000)
            .collect();
        let scales = vec![q.filter.scale; ts.out_c];
        let unsigned: Vec<u8> = f.iter().map(|v| v ^ 0x80).collect();
        let mut want = vec![0u8; tw.output.len()];
        transpose::transpose_conv2d_u8(
            &tw, &x, q.input, &unsigned, u8q, &b, q.output, q.act, &mut want,
        )
        .unwrap();
        let mut got = vec![0u8; tw.output.len()];
        let pc = FilterQuant::Channel(&scales);
        transpose::transpose_conv2d_u8(&tw, &x, q.input, &f, pc, &b, q.output, q.act, &mut got)
            .unwrap();
        assert_eq!(got, want, "transpose");
    }
}

/// Quant8 TRANSPOSE_CONV_2D on the uint8 GEMM (int32 sums, scatter, per-channel
/// requantization) against the reference at every level: per-tensor filters (multipliers below
/// and above 1) and per-channel ones.
#[test]
fn transpose_u8_fast_matches_reference_at_every_level() {
    for uk in tables() {
        let mut rng = Rng(0x6c0f_0006 ^ uk.isa as u64);
        let mut ran = [0; 2];
        for case in 0..80 {
            let tw = transpose_window(&mut rng);
            let s = FilterShape {
                out_c: tw.output.c,
                kh: tw.filter_h,
                kw: tw.filter_w,
                in_c: tw.input.c,
            };
            let zp = |rng: &mut Rng| rng.pick(&[0, 1, 127, 128, 200, 255]);
            let iq = QuantParams::new(rng.pick(&[0.0078125f32, 0.5, 1.0]), zp(&mut rng));
            let oq = QuantParams::new(rng.pick(&[0.01f32, 0.1, 1.0]), zp(&mut rng));
            let act = rng.pick(&ACTIVATIONS);
            let x = rng.bytes(tw.input.len());
            let f = rng.bytes(s.out_c * s.taps());
            let b: Vec<i32> = (0..s.out_c)
                .map(|_| rng.below(40001) as i32 - 20000)
                .collect();
            let per_channel = case % 2 == 0;
            let scales: Vec<f32> = (0..s.out_c)
                .map(|_| rng.pick(&[0.0001f32, 0.003, 0.05, 0.4, 2.0, 9.0]))
                .collect();
            let tq = QuantParams::new(rng.pick(&[0.0005f32, 0.05, 0.5, 4.0]), zp(&mut rng));
            let fq = if per_channel {
                FilterQuant::Channel(&scales)
            } else {
                FilterQuant::Tensor(tq)
            };
            let mut want = vec![0u8; tw.output.len()];
            let reference =
                transpose::transpose_conv2d_u8(&tw, &x, iq, &f, fq, &b, oq, act, &mut want);
            let packed = PackedTransposeU8::pack(uk, s, &f, fq, &b, iq, oq, act);
            let Some(p) = packed else {
                assert!(reference.is_err(), "case {case}: not packed");
                continue;
            };
            reference.unwrap();
            ran[usize::from(per_channel)] += 1;
            let mut got = vec![0u8; tw.output.len()];
            transpose::transpose_conv2d_u8_fast(&tw, &p, &x, &mut got);
            assert_eq!(got, want, "{} case {case} {tw:?} {fq:?}", uk.isa);
        }
        assert!(ran[0] >= 25 && ran[1] >= 25, "{}: ran {ran:?}", uk.isa);
    }
}

/// A random transposed window: any strides, leading paddings below the filter, an output
/// extent cut anywhere from one to past the full scatter.
fn transpose_window(rng: &mut Rng) -> TransposeWindow {
    let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
    let (sh, sw) = (rng.range(1, 3), rng.range(1, 3));
    let (ih, iw) = (rng.range(1, 6), rng.range(1, 6));
    let (pt, pl) = (rng.below(kh), rng.below(kw));
    let full_h = ih * sh + kh - sh - pt;
    let full_w = iw * sw + kw - sw - pl;
    TransposeWindow {
        input: Nhwc::new(rng.range(1, 2), ih, iw, rng.range(1, 9)),
        output: Nhwc::new(
            0,
            rng.range(1, full_h + 2),
            rng.range(1, full_w + 2),
            rng.range(1, 11),
        ),
        filter_h: kh,
        filter_w: kw,
        stride_h: sh,
        stride_w: sw,
        pad_top: pt,
        pad_left: pl,
    }
    .with_batch()
}

trait WithBatch {
    fn with_batch(self) -> Self;
}
impl WithBatch for TransposeWindow {
    fn with_batch(mut self) -> Self {
        self.output.n = self.input.n;
        self
    }
}

/// The transposed convolution gathered per output element (each output pixel collects the
/// input pixels whose window reaches it), summed in float64.
fn transpose_gather(w: &TransposeWindow, x: &[f64], f: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; w.output.len()];
    for n in 0..w.output.n {
        for oy in 0..w.output.h {
            for ox in 0..w.output.w {
                for oc in 0..w.output.c {
                    let mut sum = b[oc];
                    for y in 0..w.input.h {
                        for x_ in 0..w.input.w {
                            let fy = (oy + w.pad_top) as isize - (y * w.stride_h) as isize;
                            let fx = (ox + w.pad_left) as isize - (x_ * w.stride_w) as isize;
                            if !(0..w.filter_h as isize).contains(&fy)
                                || !(0..w.filter_w as isize).contains(&fx)
                            {
                                continue;
                            }
                            for ic in 0..w.input.c {
                                let fi = ((oc * w.filter_h + fy as usize) * w.filter_w
                                    + fx as usize)
                                    * w.input.c
                                    + ic;
                                sum += x[w.input.offset(n, y, x_, ic)] * f[fi];
                            }
                        }
                    }
                    out[w.output.offset(n, oy, ox, oc)] = sum;
                }
            }
        }
    }
    out
}

#[test]
fn transpose_reference_matches_the_gathered_form() {
    let mut rng = Rng(0x6c0f_0005);
    for case in 0..60 {
        let w = transpose_window(&mut rng);
        let (kc, oc) = (w.filter_h * w.filter_w * w.input.c, w.output.c);
        let x = rng.f32s(w.input.len());
        let f = rng.f32s(oc * kc);
        let b = rng.f32s(oc);
        let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
        let want: Vec<f32> = transpose_gather(&w, &wide(&x), &wide(&f), &wide(&b))
            .iter()
            .map(|&v| v as f32)
            .collect();
        let mut got = vec![f32::NAN; w.output.len()];
        transpose::transpose_conv2d_f32(&w, &x, &f, &b, Activation::None, &mut got);
        close(&got, &want, &format!("f32 case {case} {w:?}"));
        // uint8: the int32 image is exact, so the gathered sum requantized with the same
        // per-channel multipliers gives the same bytes.
        let q = conv_quant(&mut rng);
        let scales: Vec<f32> = (0..oc).map(|_| rng.pick(&[0.001f32, 0.01, 0.25])).collect();
        let (xu, fu) = (rng.bytes(x.len()), rng.bytes(f.len()));
        let bi: Vec<i32> = (0..oc).map(|_| rng.below(4001) as i32 - 2000).collect();
        let xa: Vec<f64> = xu
            .iter()
            .map(|&v| f64::from(i32::from(v) - q.input.zero_point))
            .collect();
        let fa: Vec<f64> = fu.iter().map(|&v| f64::from(v as i8)).collect();
        let ba: Vec<f64> = bi.iter().map(|&v| f64::from(v)).collect();
        let acc = transpose_gather(&w, &xa, &fa, &ba);
        let rq = grouped::requantizers(q.input, FilterQuant::Channel(&scales), oc, q.output, q.act)
            .unwrap();
        let want: Vec<u8> = acc
            .iter()
            .enumerate()
            .map(|(i, &a)| rq[i % oc].apply(a as i32))
            .collect();
        let mut got = vec![0u8; w.output.len()];
        let pc = FilterQuant::Channel(&scales);
        transpose::transpose_conv2d_u8(&w, &xu, q.input, &fu, pc, &bi, q.output, q.act, &mut got)
            .unwrap();
        assert_eq!(got, want, "u8 case {case} {w:?}");
    }
}

#[test]
fn transpose_f32_fast_matches_reference_at_every_level() {
    for uk in tables() {
        let mut rng = Rng(0x6c0f_0006 ^ uk.isa as u64);
        for case in 0..60 {
            let w = transpose_window(&mut rng);
            let s = FilterShape {
                out_c: w.output.c,
                kh: w.filter_h,
                kw: w.filter_w,
                in_c: w.input.c,
            };
            let x = rng.f32s(w.input.len());
            let f = rng.f32s(s.out_c * s.taps());
            let b = rng.f32s(s.out_c);
            let act = rng.pick(&ACTIVATIONS);
            let mut want = vec![0.0; w.output.len()];
            transpose::transpose_conv2d_f32(&w, &x, &f, &b, act, &mut want);
            let p = PackedTransposeF32::pack(uk, s, &f, &b);
            let mut got = vec![f32::NAN; w.output.len()];
            transpose::transpose_conv2d_f32_fast(&w, &p, &x, act, &mut got);
            close(&got, &want, &format!("{} case {case} {w:?}", uk.isa));
        }
    }
}

#[test]
fn instance_normalization_matches_float64() {
    let mut rng = Rng(0x6c0f_0007);
    for _ in 0..40 {
        let s = Nhwc::new(
            rng.range(1, 2),
            rng.range(1, 6),
            rng.range(1, 6),
            rng.range(1, 7),
        );
        let x = rng.f32s(s.len());
        let (gamma, beta, eps) = (
            rng.pick(&[1.0f32, 0.5, -2.0]),
            rng.pick(&[0.0f32, 1.5]),
            1e-3,
        );
        let mut got = vec![f32::NAN; s.len()];
        norm::instance_normalization_f32(&x, s, gamma, beta, eps, &mut got);
        for n in 0..s.n {
            for c in 0..s.c {
                let plane: Vec<f64> = (0..s.h * s.w)
                    .map(|p| f64::from(x[s.offset(n, p / s.w, p % s.w, c)]))
                    .collect();
                let mean = plane.iter().sum::<f64>() / plane.len() as f64;
                let var =
                    plane.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / plane.len() as f64;
                let sigma = (var + f64::from(eps)).sqrt();
                for p in 0..s.h * s.w {
                    let i = s.offset(n, p / s.w, p % s.w, c);
                    let want =
                        (f64::from(x[i]) - mean) * f64::from(gamma) / sigma + f64::from(beta);
                    assert!(
                        (f64::from(got[i]) - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{s:?} {i}: {} vs {want}",
                        got[i]
                    );
                }
            }
        }
    }
}
