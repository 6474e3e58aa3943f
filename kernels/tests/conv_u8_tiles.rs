//! The tile-matrix path of the uint8 GEMM (`ukernels::tile`) against the register-tile path of
//! the best level this processor runs, byte for byte: the software model of the tile
//! instructions on every x86_64 machine, the AMX-INT8 unit where the processor has it. The same
//! packing, K remainders (K = 27, 65, ...), partial row tiles, channel tails, nonzero zero
//! points, per-tensor and per-channel requantization, raw sums and the im2col panels run on
//! both, on the (M, K, N) shapes of the MobileNet layers and random tails.
#![cfg(all(target_arch = "x86_64", feature = "avx512"))]

mod support;

use nnhal_kernels::conv::u8::{self as conv_u8, ConvQuant, PackedConvU8};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::quant::ChannelRequant;
use nnhal_kernels::ukernels::tile::U8_TILES_SOFTWARE;
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};
use support::Rng;

/// The (M, K, N) battery: the MobileNet v1 pointwise layers and logits, the first
/// convolution as a GEMM (K = 27), and odd tails of every dimension.
const SHAPES: [(usize, usize, usize); 7] = [
    (1, 1024, 1001),
    (49, 1024, 1024),
    (196, 512, 512),
    (3136, 64, 128),
    (12544, 32, 64),
    (12544, 27, 32),
    (17, 65, 33),
];

/// The register-tile table the tile path must agree with (the best level; every level is
/// bit-exact with the reference, `conv_u8_fast.rs`).
fn register_table() -> Ukernels {
    let mut t = ukernels::table(Isa::detect()).unwrap().clone();
    t.u8_tiles = None;
    t
}

/// `base` with the software tile unit for every row count.
fn software_table(base: &Ukernels) -> Ukernels {
    let mut t = base.clone();
    t.u8_tiles = Some(U8_TILES_SOFTWARE);
    t
}

/// The hardware tile table, if this process may use AMX.
fn amx_table() -> Option<Ukernels> {
    let t = ukernels::table(Isa::Avx512Amx).ok()?;
    let mut t = t.clone();
    // Every row count, so the battery's small M runs on the tiles too.
    t.u8_tiles.as_mut()?.min_rows = 1;
    Some(t)
}

fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

/// A multiplier small enough that outputs spread over the byte range for K up to 1024.
fn quant(rng: &mut Rng, k: usize) -> ConvQuant {
    // Nonzero, and near the middle so the mean of the products stays small beside their
    // spread.
    let zp = |rng: &mut Rng| 96 + rng.below(64) as i32;
    // Each (a − za)(w − zw) has a spread of about 74², a sum of k of them √k times that.
    let m = 40.0 / (5500.0 * (k as f32).sqrt());
    ConvQuant {
        input: QuantParams::new(0.5, zp(rng)),
        filter: QuantParams::new(0.25, zp(rng)),
        // Away from the ends, so the outputs spread on both sides of the zero point.
        output: QuantParams::new(0.125 / m, 64 + rng.below(128) as i32),
        act: [Activation::None, Activation::Relu][rng.below(2)],
    }
}

/// Runs FULLY_CONNECTED `m × k × n` with per-tensor, per-channel and raw outputs on `tables`
/// and checks that every table gives the first one's bytes.
fn fc_agree(tables: &[(&str, &Ukernels)], rng: &mut Rng, (m, k, n): (usize, usize, usize)) {
    let shape = FilterShape {
        out_c: n,
        kh: 1,
        kw: 1,
        in_c: k,
    };
    let input = bytes(rng, m * k);
    let filter = bytes(rng, n * k);
    let bias: Vec<i32> = (0..n)
        .map(|_| rng.below(1 << 16) as i32 - (1 << 15))
        .collect();
    let q = quant(rng, k);
    let scales: Vec<f32> = (0..n)
        .map(|c| 0.25 * (1.0 + (c % 7) as f32 / 8.0))
        .collect();
    let channels =
        ChannelRequant::per_channel(q.input, &scales, q.output, Activation::None).unwrap();
    let mut first: Option<(Vec<u8>, Vec<u8>, Vec<i32>)> = None;
    for (name, uk) in tables {
        let per_tensor = PackedConvU8::pack(uk, shape, &filter, &bias, q).unwrap();
        let per_channel =
            PackedConvU8::pack_channels(uk, shape, &filter, &bias, q.input, &channels).unwrap();
        let raw =
            PackedConvU8::pack_raw(uk, shape, &filter, q.filter.zero_point, q.input.zero_point)
                .unwrap();
        let mut out = (vec![0u8; m * n], vec![0u8; m * n], vec![0i32; m * n]);
        conv_u8::fully_connected_u8(&per_tensor, m, &input, &mut out.0);
        conv_u8::fully_connected_u8(&per_channel, m, &input, &mut out.1);
        conv_u8::fully_connected_u8_raw(&raw, m, &input, &mut out.2);
        match &first {
            None => {
                // The outputs are not degenerate (a constant output would compare equal
                // whatever the sums were; the raw sums are compared as well).
                let distinct = out
                    .0
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len();
                assert!(
                    distinct > 1 || m * n < 64,
                    "({m}, {k}, {n}): {distinct} values"
                );
                first = Some(out);
            }
            Some(want) => {
                for (what, same) in [
                    ("per-tensor", want.0 == out.0),
                    ("per-channel", want.1 == out.1),
                    ("raw", want.2 == out.2),
                ] {
                    assert!(same, "{name}: ({m}, {k}, {n}) {what} differs");
                }
            }
        }
    }
}

/// A padded, strided 3 × 3 convolution (the im2col panels of the tile path) on `tables`.
fn conv_agree(tables: &[(&str, &Ukernels)], rng: &mut Rng, hw: usize, in_c: usize, out_c: usize) {
    let input_shape = Nhwc::new(1, hw, hw, in_c);
    let out_hw = (hw + 1 - 3) / 2 + 1;
    let w = Window {
        input: input_shape,
        output: Nhwc::new(1, out_hw, out_hw, out_c),
        filter_h: 3,
        filter_w: 3,
        stride_h: 2,
        stride_w: 2,
        padding: Padding {
            top: 0,
            bottom: 1,
            left: 0,
            right: 1,
        },
    };
    let shape = FilterShape {
        out_c,
        kh: 3,
        kw: 3,
        in_c,
    };
    let input = bytes(rng, input_shape.len());
    let filter = bytes(rng, out_c * shape.taps());
    let bias: Vec<i32> = (0..out_c).map(|_| rng.below(4096) as i32 - 2048).collect();
    let q = quant(rng, shape.taps());
    let mut first: Option<Vec<u8>> = None;
    for (name, uk) in tables {
        let p = PackedConvU8::pack(uk, shape, &filter, &bias, q).unwrap();
        let mut out = vec![0u8; w.output.len()];
        conv_u8::conv2d_u8(&w, &p, &input, &mut out);
        match &first {
            None => first = Some(out),
            Some(want) => assert!(*want == out, "{name}: conv {hw}x{hw}x{in_c} -> {out_c}"),
        }
    }
}

fn battery(name: &str, tiles: &Ukernels, seed: u64) {
    let base = register_table();
    let tables = [("register tiles", &base), (name, tiles)];
    let mut rng = Rng(seed);
    for shape in SHAPES {
        fc_agree(&tables, &mut rng, shape);
    }
    // Random tails: every M, K and N remainder class of the 16 × 64 × 64 tiles.
    for _ in 0..12 {
        let shape = (rng.range(1, 70), rng.range(1, 200), rng.range(1, 150));
        fc_agree(&tables, &mut rng, shape);
    }
    conv_agree(&tables, &mut rng, 25, 3, 32);
    conv_agree(&tables, &mut rng, 9, 13, 70);
}

#[test]
fn software_tiles_equal_the_register_tiles() {
    let software = software_table(&register_table());
    battery("software tiles", &software, 0x7113_5EED);
}

/// The software unit with the AVX-512 epilogue of the AMX level (the one the hardware runs).
#[test]
fn software_tiles_with_the_avx512_epilogue_equal_the_register_tiles() {
    if !Isa::Avx512.is_supported() {
        eprintln!("skipped: no AVX-512");
        return;
    }
    let mut t = software_table(&register_table());
    if let Some(tiles) = t.u8_tiles.as_mut() {
        tiles.epilogue = ukernels::x86_64::amx::u8_epilogue_avx512;
    }
    battery("software tiles, AVX-512 epilogue", &t, 0x7113_5EEE);
}

#[test]
fn amx_tiles_equal_the_register_tiles() {
    let Some(amx) = amx_table() else {
        eprintln!("skipped: no AMX");
        return;
    };
    battery("AMX tiles", &amx, 0xA3C5_0001);
}

#[test]
fn the_tile_path_is_chosen_by_the_table() {
    let base = register_table();
    let software = software_table(&base);
    let shape = FilterShape {
        out_c: 8,
        kh: 1,
        kw: 1,
        in_c: 8,
    };
    let q = quant(&mut Rng(1), 8);
    let p = PackedConvU8::pack(&software, shape, &[3; 64], &[0; 8], q).unwrap();
    assert_eq!(p.tile_kernel_name(), Some(U8_TILES_SOFTWARE.name));
    let p = PackedConvU8::pack(&base, shape, &[3; 64], &[0; 8], q).unwrap();
    assert_eq!(p.tile_kernel_name(), None);
    // The AMX level is offered only with the tile unit usable, and then has the tile slot.
    if let Ok(t) = ukernels::table(Isa::Avx512Amx) {
        assert!(t.u8_tiles.is_some());
    }
    assert!(ukernels::table(Isa::Avx512Vnni).map_or(true, |t| t.u8_tiles.is_none()));
}
