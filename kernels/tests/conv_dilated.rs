//! The dilated reference convolutions (NNAPI 1.2 dilation factors) against the plain reference
//! kernels run on the equivalent undilated filter: a filter of size `k` with dilation `d` is a
//! filter of size `(k − 1)·d + 1` whose taps between the real ones are zero (the filter zero
//! point in uint8). Random shapes, strides, paddings, depth multipliers and activations.

mod support;

use nnhal_kernels::conv::reference::{self as conv, Dilation};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};
use support::Rng;

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu1,
    Activation::Relu6,
];

struct Case {
    dilated: Window,
    plain: Window,
    d: Dilation,
}

/// A random window with dilation factors 1..=3 (not both 1), and its undilated twin.
fn case(rng: &mut Rng, in_c: usize, out_c: usize) -> Case {
    let d = loop {
        let d = Dilation {
            h: 1 + rng.below(3),
            w: 1 + rng.below(3),
        };
        if d != (Dilation { h: 1, w: 1 }) {
            break d;
        }
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
    let w = ew.saturating_sub(padding.left + padding.right).max(1) + rng.below(6);
    let n = 1 + rng.below(2);
    let oh = (h + padding.top + padding.bottom - eh) / sh + 1;
    let ow = (w + padding.left + padding.right - ew) / sw + 1;
    let window = |fh, fw| Window {
        input: Nhwc::new(n, h, w, in_c),
        output: Nhwc::new(n, oh, ow, out_c),
        filter_h: fh,
        filter_w: fw,
        stride_h: sh,
        stride_w: sw,
        padding,
    };
    Case {
        dilated: window(kh, kw),
        plain: window(eh, ew),
        d,
    }
}

/// Spreads `[outer, kh, kw, inner]` filter taps onto the dilated grid, `fill` elsewhere.
fn spread<T: Copy>(f: &[T], outer: usize, c: &Case, inner: usize, fill: T) -> Vec<T> {
    let (kh, kw) = (c.dilated.filter_h, c.dilated.filter_w);
    let (eh, ew) = (c.plain.filter_h, c.plain.filter_w);
    let mut out = vec![fill; outer * eh * ew * inner];
    for o in 0..outer {
        for y in 0..kh {
            for x in 0..kw {
                let src = ((o * kh + y) * kw + x) * inner;
                let dst = ((o * eh + y * c.d.h) * ew + x * c.d.w) * inner;
                out[dst..dst + inner].copy_from_slice(&f[src..src + inner]);
            }
        }
    }
    out
}

fn floats(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| (rng.below(17) as f32 - 8.0) / 4.0).collect()
}

fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(256) as u8).collect()
}

#[test]
fn dilated_conv_f32_is_the_zero_spread_filter() {
    let mut rng = Rng(0xd11a7e);
    for round in 0..300 {
        let (in_c, out_c) = (1 + rng.below(4), 1 + rng.below(4));
        let c = case(&mut rng, in_c, out_c);
        let act = ACTS[round % 4];
        let taps = c.dilated.filter_h * c.dilated.filter_w;
        let (x, f, b) = (
            floats(&mut rng, c.dilated.input.len()),
            floats(&mut rng, out_c * taps * in_c),
            floats(&mut rng, out_c),
        );
        let mut got = vec![f32::NAN; c.dilated.output.len()];
        conv::conv2d_dilated_f32(&c.dilated, c.d, &x, &f, &b, act, &mut got);
        let mut want = vec![0.0; got.len()];
        let wide = spread(&f, out_c, &c, in_c, 0.0);
        conv::conv2d_f32(&c.plain, &x, &wide, &b, act, &mut want);
        // Quarter steps sum exactly: any order gives the same float.
        assert_eq!(got, want, "{:?} {:?}", c.dilated, c.d);
    }
}

#[test]
fn dilated_depthwise_f32_is_the_zero_spread_filter() {
    let mut rng = Rng(0xd11a7e + 1);
    for round in 0..300 {
        let (in_c, m) = (1 + rng.below(4), 1 + rng.below(3));
        let c = case(&mut rng, in_c, in_c * m);
        let act = ACTS[round % 4];
        let out_c = in_c * m;
        let taps = c.dilated.filter_h * c.dilated.filter_w;
        let (x, f, b) = (
            floats(&mut rng, c.dilated.input.len()),
            floats(&mut rng, taps * out_c),
            floats(&mut rng, out_c),
        );
        let mut got = vec![f32::NAN; c.dilated.output.len()];
        conv::depthwise_conv2d_dilated_f32(&c.dilated, c.d, m, &x, &f, &b, act, &mut got);
        let mut want = vec![0.0; got.len()];
        let wide = spread(&f, 1, &c, out_c, 0.0);
        conv::depthwise_conv2d_f32(&c.plain, m, &x, &wide, &b, act, &mut want);
        assert_eq!(got, want, "{:?} {:?}", c.dilated, c.d);
    }
}

#[test]
fn dilated_quant8_is_the_zero_point_spread_filter_bit_for_bit() {
    let mut rng = Rng(0xd11a7e + 2);
    for round in 0..300 {
        let act = ACTS[round % 4];
        let (iq, fq) = (
            QuantParams::new(0.5, rng.below(256) as i32),
            QuantParams::new(0.25, rng.below(256) as i32),
        );
        // Multipliers below and above 1 (NNAPI 1.2 allows both).
        let oq = QuantParams::new(
            [0.2f32, 0.1, 1.0, 3.0][round % 4 / 2 * 2 + rng.below(2)],
            rng.below(256) as i32,
        );
        let in_c = 1 + rng.below(4);
        if round % 2 == 0 {
            let out_c = 1 + rng.below(4);
            let c = case(&mut rng, in_c, out_c);
            let taps = c.dilated.filter_h * c.dilated.filter_w;
            let (x, f) = (
                bytes(&mut rng, c.dilated.input.len()),
                bytes(&mut rng, out_c * taps * in_c),
            );
            let b: Vec<i32> = (0..out_c).map(|_| rng.below(2001) as i32 - 1000).collect();
            let mut got = vec![0x5a; c.dilated.output.len()];
            conv::conv2d_dilated_u8(&c.dilated, c.d, &x, iq, &f, fq, &b, oq, act, &mut got)
                .unwrap();
            let mut want = vec![0; got.len()];
            let wide = spread(&f, out_c, &c, in_c, fq.zero_point as u8);
            conv::conv2d_u8(&c.plain, &x, iq, &wide, fq, &b, oq, act, &mut want).unwrap();
            assert_eq!(got, want, "{:?} {:?} {oq:?}", c.dilated, c.d);
        } else {
            let m = 1 + rng.below(3);
            let out_c = in_c * m;
            let c = case(&mut rng, in_c, out_c);
            let taps = c.dilated.filter_h * c.dilated.filter_w;
            let (x, f) = (
                bytes(&mut rng, c.dilated.input.len()),
                bytes(&mut rng, taps * out_c),
            );
            let b: Vec<i32> = (0..out_c).map(|_| rng.below(2001) as i32 - 1000).collect();
            let mut got = vec![0x5a; c.dilated.output.len()];
            conv::depthwise_conv2d_dilated_u8(
                &c.dilated, c.d, m, &x, iq, &f, fq, &b, oq, act, &mut got,
            )
            .unwrap();
            let mut want = vec![0; got.len()];
            let wide = spread(&f, 1, &c, out_c, fq.zero_point as u8);
            conv::depthwise_conv2d_u8(&c.plain, m, &x, iq, &wide, fq, &b, oq, act, &mut want)
                .unwrap();
            assert_eq!(got, want, "{:?} {:?} {oq:?}", c.dilated, c.d);
        }
    }
}
