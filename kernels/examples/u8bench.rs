//! Times the uint8 fast operators on the MobileNet v1 1.0/224 layer shapes
//! (perf/README.md): per layer µs and GOP/s (2 ops per multiply-add), and the
//! total. Weights and inputs are pseudo-random with realistic quantization (input zero point
//! 128, filter zero point 120, multipliers 0.001–0.005, ReLU6).
//!
//! `--v2` times MobileNet v2's pointwise expansion shapes instead (small K: 16, 24, 32, 64,
//! 96 input channels), each on an input of its own.
//!
//! `cargo run -p nnhal-kernels --release --example u8bench -- [--isa NAME] [--threads N]
//! [--reps N] [--layer NAME] [--v2 1]`

use std::time::Instant;

use nnhal_kernels::conv::dw_u8::{depthwise_conv2d_u8, PackedDwU8};
use nnhal_kernels::conv::u8::{conv2d_u8, ConvQuant, PackedConvU8};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::pool::u8::average_pool_u8;
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};

#[derive(Clone, Copy)]
enum Kind {
    Conv,
    Dw,
    Pool,
}

struct Layer {
    name: String,
    kind: Kind,
    w: Window,
}

/// MobileNet v2 1.0/224's pointwise expansions of each spatial size (1×1, stride 1).
fn layers_v2() -> Vec<Layer> {
    [
        (112, 16, 96),
        (56, 24, 144),
        (28, 32, 192),
        (14, 64, 384),
        (14, 96, 576),
    ]
    .iter()
    .map(|&(hw, cin, cout)| Layer {
        name: format!("e{hw}k{cin}"),
        kind: Kind::Conv,
        w: Window {
            input: Nhwc::new(1, hw, hw, cin),
            output: Nhwc::new(1, hw, hw, cout),
            filter_h: 1,
            filter_w: 1,
            stride_h: 1,
            stride_w: 1,
            padding: Padding::default(),
        },
    })
    .collect()
}

fn layers() -> Vec<Layer> {
    let mut v = Vec::new();
    let same3 = |s: usize| Padding {
        top: (s == 1) as usize,
        left: (s == 1) as usize,
        bottom: 1,
        right: 1,
    };
    let win = |i: Nhwc, oc: usize, k: usize, s: usize, p: Padding| {
        let o = |x: usize, pad: usize| (x + pad - k) / s + 1;
        Window {
            input: i,
            output: Nhwc::new(1, o(i.h, p.top + p.bottom), o(i.w, p.left + p.right), oc),
            filter_h: k,
            filter_w: k,
            stride_h: s,
            stride_w: s,
            padding: p,
        }
    };
    v.push(Layer {
        name: "conv0".into(),
        kind: Kind::Conv,
        w: win(Nhwc::new(1, 224, 224, 3), 32, 3, 2, same3(2)),
    });
    let blocks = [
        (32, 64, 1),
        (64, 128, 2),
        (128, 128, 1),
        (128, 256, 2),
        (256, 256, 1),
        (256, 512, 2),
        (512, 512, 1),
        (512, 512, 1),
        (512, 512, 1),
        (512, 512, 1),
        (512, 512, 1),
        (512, 1024, 2),
        (1024, 1024, 1),
    ];
    let mut hw = 112;
    for (i, &(cin, cout, s)) in blocks.iter().enumerate() {
        let dw = win(Nhwc::new(1, hw, hw, cin), cin, 3, s, same3(s));
        hw = dw.output.h;
        v.push(Layer {
            name: format!("dw{}", i + 1),
            kind: Kind::Dw,
            w: dw,
        });
        v.push(Layer {
            name: format!("pw{}", i + 1),
            kind: Kind::Conv,
            w: win(Nhwc::new(1, hw, hw, cin), cout, 1, 1, Padding::default()),
        });
    }
    v.push(Layer {
        name: "avgpool".into(),
        kind: Kind::Pool,
        w: win(Nhwc::new(1, 7, 7, 1024), 1024, 7, 2, Padding::default()),
    });
    v.push(Layer {
        name: "logits".into(),
        kind: Kind::Conv,
        w: win(Nhwc::new(1, 1, 1, 1024), 1001, 1, 1, Padding::default()),
    });
    v
}

/// One layer's timed call.
type Runner = Box<dyn FnMut(&[u8], &mut [u8]) + Send>;

struct Rng(u64);
impl Rng {
    fn byte(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 56) as u8
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut isa, mut threads, mut reps) = (Isa::detect(), 1usize, 50usize);
    let mut only: Option<String> = None;
    let mut v2 = false;
    while let Some(a) = args.next() {
        let val = args.next().expect("option value");
        match a.as_str() {
            "--isa" => isa = Isa::parse(&val).expect("isa"),
            "--threads" => threads = val.parse().expect("threads"),
            "--reps" => reps = val.parse().expect("reps"),
            "--layer" => only = Some(val),
            "--v2" => v2 = val != "0",
            _ => panic!("unknown option {a}"),
        }
    }
    let uk: &Ukernels = ukernels::table(isa).expect("isa not supported");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rng = Rng(1);
    let mut total = 0.0;
    let mut total_macs = 0u64;
    println!("isa {isa} threads {threads} reps {reps}");
    println!(
        "{:<8} {:>10} {:>10} {:>8}  kernel",
        "layer", "µs", "GOP/s", "MMAC"
    );
    let mut layers_run: Vec<(String, u64, &str, Runner)> = Vec::new();
    // Layer i reads buffer `inputs[i]` and writes buffer `inputs[i] + 1`.
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    let mut inputs: Vec<usize> = Vec::new();
    for (i, l) in (if v2 { layers_v2() } else { layers() }).iter().enumerate() {
        let w = l.w;
        // Each layer reads the previous layer's output, as in an inference, when it fits.
        if buffers.last().is_none_or(|b| b.len() != w.input.len()) {
            buffers.push((0..w.input.len()).map(|_| rng.byte()).collect());
        }
        inputs.push(buffers.len() - 1);
        buffers.push((0..w.output.len()).map(|_| rng.byte()).collect());
        let mult = [0.001f32, 0.002, 0.003, 0.005][i % 4];
        let q = ConvQuant {
            input: QuantParams::new(0.02, 128),
            // v2 int8: symmetric int8 filters, run as their unsigned image (zero point 128).
            filter: QuantParams::new(0.01, if v2 { 128 } else { 120 }),
            output: QuantParams::new(0.02 * 0.01 / mult, 0),
            act: Activation::Relu6,
        };
        let (macs, run, kernel): (u64, Runner, &str) = match l.kind {
            Kind::Conv => {
                let shape = FilterShape {
                    out_c: w.output.c,
                    kh: w.filter_h,
                    kw: w.filter_w,
                    in_c: w.input.c,
                };
                let filter: Vec<u8> = (0..shape.out_c * shape.taps())
                    .map(|_| rng.byte())
                    .collect();
                let bias: Vec<i32> = (0..shape.out_c)
                    .map(|i| (i as i32 * 37) % 2000 - 1000)
                    .collect();
                let p = PackedConvU8::pack(uk, shape, &filter, &bias, q).unwrap();
                let name = p.kernel_name();
                let macs = (w.output.len() * shape.taps()) as u64;
                (
                    macs,
                    Box::new(move |i: &[u8], o: &mut [u8]| conv2d_u8(&w, &p, i, o)),
                    name,
                )
            }
            Kind::Dw => {
                let c = w.output.c;
                let filter: Vec<u8> = (0..9 * c).map(|_| rng.byte()).collect();
                let bias: Vec<i32> = (0..c).map(|i| (i as i32 * 37) % 2000 - 1000).collect();
                let p = PackedDwU8::pack(uk, 3, 3, c, &filter, &bias, q).unwrap();
                let name = p.kernel_name();
                (
                    (w.output.len() * 9) as u64,
                    Box::new(move |i: &[u8], o: &mut [u8]| depthwise_conv2d_u8(&w, 1, &p, i, o)),
                    name,
                )
            }
            Kind::Pool => (
                0,
                Box::new(move |i: &[u8], o: &mut [u8]| {
                    average_pool_u8(uk, &w, i, QuantParams::new(0.02, 0), Activation::None, o)
                }),
                "portable",
            ),
        };
        layers_run.push((l.name.clone(), macs, kernel, run));
    }
    for (i, (name, macs, kernel, run)) in layers_run.iter_mut().enumerate() {
        if only.as_ref().is_some_and(|o| o != name) {
            continue;
        }
        let (head, tail) = buffers.split_at_mut(inputs[i] + 1);
        let (input, output) = (&head[inputs[i]], &mut tail[0]);
        let times: Vec<f64> = pool.install(|| {
            for _ in 0..3 {
                run(input, output);
            }
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    run(input, output);
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect::<Vec<f64>>()
        });
        let us = median(times);
        total += us;
        total_macs += *macs;
        println!(
            "{:<8} {:>10.1} {:>10.1} {:>8.2}  {kernel}",
            name,
            us,
            2.0 * *macs as f64 / us / 1e3,
            *macs as f64 / 1e6
        );
    }
    println!(
        "{:<8} {:>10.1} {:>10.1} {:>8.2}",
        "sum",
        total,
        2.0 * total_macs as f64 / total / 1e3,
        total_macs as f64 / 1e6
    );
    if only.is_some() {
        return;
    }
    // The layers back to back inside the pool, as the driver runs one inference.
    let times: Vec<f64> = pool.install(|| {
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                for (i, (_, _, _, run)) in layers_run.iter_mut().enumerate() {
                    let (head, tail) = buffers.split_at_mut(inputs[i] + 1);
                    run(&head[inputs[i]], &mut tail[0]);
                }
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect::<Vec<f64>>()
    });
    let us = median(times);
    println!(
        "{:<8} {:>10.1} {:>10.1} {:>8.2}",
        "network",
        us,
        2.0 * total_macs as f64 / us / 1e3,
        total_macs as f64 / 1e6
    );
}
