//! Times the uint8 DEPTHWISE_CONV_2D on the 13 depthwise layers of MobileNet v1 1.0 224
//! (3×3, RELU6; stride 1 pads 1/1, stride 2 pads 0 before and 1 after) with the best table
//! of this processor against the same table without its tap-pair depthwise kernel
//! (`u8_dw2`), alternating the two in rounds so that both see the same load, and prints per
//! layer the median of the per-round medians in µs of each and their ratio.
//!
//! `cargo run -p nnhal-kernels --release --example dwu8bench -- [--rounds N] [--runs N]
//! [--per-channel]`: `--rounds` the alternations (default 7), `--runs` the timed calls per
//! layer and round (default 50), `--per-channel` int8 per-channel filters (MobileNet v2's
//! form) instead of uint8 per-tensor ones.

use std::time::Instant;

use nnhal_kernels::conv::dw_u8::{depthwise_conv2d_u8, PackedDwU8};
use nnhal_kernels::conv::u8::ConvQuant;
use nnhal_kernels::quant::ChannelRequant;
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};

/// (input height = width, channels, stride) of dw1 … dw13.
const LAYERS: [(usize, usize, usize); 13] = [
    (112, 32, 1),
    (112, 64, 2),
    (56, 128, 1),
    (56, 128, 2),
    (28, 256, 1),
    (28, 256, 2),
    (14, 512, 1),
    (14, 512, 1),
    (14, 512, 1),
    (14, 512, 1),
    (14, 512, 1),
    (14, 512, 2),
    (7, 1024, 1),
];

fn window(hw: usize, c: usize, stride: usize) -> Window {
    let out = hw.div_ceil(stride);
    let total = ((out - 1) * stride + 3).saturating_sub(hw);
    let head = total / 2;
    Window {
        input: Nhwc::new(1, hw, hw, c),
        output: Nhwc::new(1, out, out, c),
        filter_h: 3,
        filter_w: 3,
        stride_h: stride,
        stride_w: stride,
        padding: Padding {
            top: head,
            bottom: total - head,
            left: head,
            right: total - head,
        },
    }
}

/// Median of `runs` timed calls after a warm-up, in µs.
fn time_us(runs: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..runs.div_ceil(10).max(2) {
        f();
    }
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (mut rounds, mut runs, mut per_channel) = (7usize, 50usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => rounds = value().parse().expect("--rounds N"),
            "--runs" => runs = value().parse().expect("--runs N"),
            "--per-channel" => per_channel = true,
            _ => panic!("unknown argument {a}"),
        }
    }
    let best = *Isa::levels()
        .iter()
        .rev()
        .find(|l| l.is_supported())
        .expect("a level");
    let new: &Ukernels = ukernels::table(best).expect("supported");
    let mut old = new.clone();
    old.u8_dw2 = None;
    let mut seed = 0x1234_5678u64;
    let mut byte = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as u8
    };
    let (mut sum_old, mut sum_new) = (0.0, 0.0);
    for (i, &(hw, c, s)) in LAYERS.iter().enumerate() {
        let w = window(hw, c, s);
        let input: Vec<u8> = (0..w.input.len()).map(|_| byte()).collect();
        let filter: Vec<u8> = (0..9 * c).map(|_| byte()).collect();
        let bias: Vec<i32> = (0..c).map(|j| (j as i32 * 37) % 2000 - 1000).collect();
        let iq = QuantParams::new(0.02, 128);
        let oq = QuantParams::new(0.05, 0);
        let pack = |t: &Ukernels| {
            if per_channel {
                let scales: Vec<f32> = (0..c).map(|j| 0.001 + 0.0001 * (j % 17) as f32).collect();
                let rq = ChannelRequant::per_channel(iq, &scales, oq, Activation::Relu6).unwrap();
                PackedDwU8::pack_channels(t, 3, 3, c, &filter, &bias, iq, &rq).unwrap()
            } else {
                let q = ConvQuant {
                    input: iq,
                    filter: QuantParams::new(0.01, 120),
                    output: oq,
                    act: Activation::Relu6,
                };
                PackedDwU8::pack(t, 3, 3, c, &filter, &bias, q).unwrap()
            }
        };
        let (p_old, p_new) = (pack(&old), pack(new));
        let (mut o1, mut o2) = (vec![0u8; w.output.len()], vec![0u8; w.output.len()]);
        let (mut t_old, mut t_new) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            t_old.push(time_us(runs, || {
                depthwise_conv2d_u8(&w, 1, &p_old, &input, &mut o1)
            }));
            t_new.push(time_us(runs, || {
                depthwise_conv2d_u8(&w, 1, &p_new, &input, &mut o2)
            }));
        }
        assert!(o1 == o2, "dw{}: outputs differ", i + 1);
        let (a, b) = (median(t_old), median(t_new));
        sum_old += a;
        sum_new += b;
        println!(
            "dw{:<2} {hw:>3}x{hw:<3} c{c:<5} s{s}  {:>18} {a:8.1} µs  {:>18} {b:8.1} µs  x{:.2}",
            i + 1,
            p_old.kernel_name(),
            p_new.kernel_name(),
            a / b
        );
    }
    println!(
        "total {sum_old:.1} µs → {sum_new:.1} µs  x{:.2}",
        sum_old / sum_new
    );
}
