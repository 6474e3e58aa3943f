//! Times the fast float32 DEPTHWISE_CONV_2D on the 13 depthwise layers of MobileNet v1 1.0 224
//! (3×3, RELU6; stride 1 pads 1/1, stride 2 pads 0 before and 1 after) and prints, per layer,
//! the median time in µs, the memory throughput at that time (input + output + packed weights) in GB/s and
//! the fastest call in µs (the machine may be shared), then the totals.
//!
//! `cargo run -p nnhal-kernels --release --example dwbench -- [--isa NAME] [--threads N]
//! [--runs N] [--layer K] [--reference]`: `--isa` picks a table level (default: the best one), `--threads`
//! the rayon pool size the calls run in (default 1), `--runs` the timed calls per layer
//! (default 200), `--layer` times only dwK, `--v2` times MobileNet v2's 17 depthwise layers
//! instead, `--reference` also times the reference kernel.

use std::time::Instant;

use nnhal_kernels::aligned::AlignedBuf;
use nnhal_kernels::conv::dw_f32::{depthwise_conv2d_f32, PackedDwF32};
use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::ukernels::{self, Isa};
use nnhal_kernels::{Activation, Nhwc, Padding, Window};

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

/// (input height = width, channels, stride) of MobileNet v2's 17 depthwise layers.
const LAYERS_V2: [(usize, usize, usize); 17] = [
    (112, 32, 1),
    (112, 96, 2),
    (56, 144, 1),
    (56, 144, 2),
    (28, 192, 1),
    (28, 192, 1),
    (28, 192, 2),
    (14, 384, 1),
    (14, 384, 1),
    (14, 384, 1),
    (14, 384, 1),
    (14, 576, 1),
    (14, 576, 1),
    (14, 576, 2),
    (7, 960, 1),
    (7, 960, 1),
    (7, 960, 1),
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

/// (median, minimum) of `runs` timed calls after a warm-up, in µs.
fn time_us(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
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
    (t[t.len() / 2], t[0])
}

fn main() {
    let mut isa = None;
    let mut threads = 1usize;
    let mut runs = 200usize;
    let mut with_reference = false;
    let mut only: Option<usize> = None;
    let mut layers: &[(usize, usize, usize)] = &LAYERS;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--isa" => isa = Some(Isa::parse(&value()).expect("--isa")),
            "--threads" => threads = value().parse().expect("--threads"),
            "--runs" => runs = value().parse().expect("--runs"),
            "--reference" => with_reference = true,
            "--layer" => only = Some(value().parse().expect("--layer")),
            "--v2" => layers = &LAYERS_V2,
            _ => panic!(
                "unknown argument {a} (--isa NAME, --threads N, --runs N, --layer K, --v2, --reference)"
            ),
        }
    }
    let uk = match isa {
        Some(l) => ukernels::table(l).expect("--isa"),
        None => ukernels::best(),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    println!("isa {}, {threads} thread(s), median of {runs}", uk.isa);
    println!(
        "{:<6} {:>16} {:>3} {:>10} {:>8} {:>8}{}",
        "layer",
        "input",
        "s",
        "µs",
        "GB/s",
        "min µs",
        if with_reference { "   ref µs" } else { "" }
    );
    let (mut total, mut total_min, mut total_ref) = (0.0, 0.0, 0.0);
    for (i, &(hw, c, s)) in layers.iter().enumerate() {
        if only.is_some_and(|k| k != i + 1) {
            continue;
        }
        let w = window(hw, c, s);
        let mut seed = 1u32 + i as u32;
        let mut rand = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1 << 24) as f32 - 0.5
        };
        // 64-byte aligned, as the driver's arenas are.
        let mut input = AlignedBuf::<f32>::zeroed(w.input.len());
        input.iter_mut().for_each(|x| *x = rand());
        let filter: Vec<f32> = (0..9 * c).map(|_| rand()).collect();
        let bias: Vec<f32> = (0..c).map(|_| rand()).collect();
        let packed = PackedDwF32::pack(uk, 3, 3, c, &filter, &bias);
        let mut out = AlignedBuf::<f32>::zeroed(w.output.len());
        let (us, min) = pool.install(|| {
            time_us(runs, || {
                depthwise_conv2d_f32(&w, 1, &packed, &input, Activation::Relu6, &mut out)
            })
        });
        total += us;
        total_min += min;
        let bytes = 4 * (w.input.len() + w.output.len() + 10 * c);
        let mut line = format!(
            "dw{:<4} {:>16} {s:>3} {us:>10.1} {:>8.1} {min:>8.1}",
            i + 1,
            format!("{hw}x{hw}x{c}"),
            bytes as f64 / us / 1e3
        );
        if with_reference {
            let r = pool.install(|| {
                time_us(runs.div_ceil(10), || {
                    conv::depthwise_conv2d_f32(
                        &w,
                        1,
                        &input,
                        &filter,
                        &bias,
                        Activation::Relu6,
                        &mut out,
                    )
                })
            });
            let r = r.0;
            total_ref += r;
            line += &format!(" {r:>9.1}");
        }
        println!("{line}");
    }
    let mut line = format!(
        "{:<6} {:>16} {:>3} {total:>10.1} {:>8} {total_min:>8.1}",
        "total", "", "", ""
    );
    if with_reference {
        line += &format!(" {total_ref:>9.1}");
    }
    println!("{line}");
}
