//! Batteries of the math, logic and reduce families against loops written from the
//! specification (NeuralNetworks.h and the platform's reference formulas): broadcasting over
//! random shapes of ranks 1–4, the quantized PRELU, HARD_SWISH and requantization against real
//! arithmetic, LOG_SOFTMAX against float64, REDUCE_ALL / REDUCE_ANY against a per-output scan,
//! and the pooled same-shape loops against the plain ones on tensors long enough to split.
//!
//! The fast loops are plain Rust the compiler vectorises for the target's ISA: they take no
//! micro-kernel table, so every ISA level runs the same code (nothing to force per level).

use nnhal_kernels::logic::reference as logic;
use nnhal_kernels::math::fast;
use nnhal_kernels::math::reference::{self as m, HardSwishU8, PreluU8};
use nnhal_kernels::reduce::reference as reduce;
use nnhal_kernels::QuantParams;
use proptest::prelude::*;

/// A shape of rank 1–4 with extents 1–5.
fn dims() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..=5, 1..=4)
}

/// A shape and another that broadcasts against it: a suffix of it with some extents 1.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, bool)> {
    (dims(), any::<u64>(), any::<bool>()).prop_map(|(a, bits, swap)| {
        let keep = (bits as usize) % a.len() + 1;
        let b: Vec<usize> = a[a.len() - keep..]
            .iter()
            .enumerate()
            .map(|(i, &d)| if bits >> (8 + i) & 1 == 1 { 1 } else { d })
            .collect();
        (a, b, swap)
    })
}

/// The flat index in `dims` of the output multi-index `idx` (rank `out.len()`), NumPy rules.
fn source_index(idx: &[usize], dims: &[usize]) -> usize {
    let lead = idx.len() - dims.len();
    dims.iter().enumerate().fold(0, |acc, (i, &d)| {
        acc * d + if d == 1 { 0 } else { idx[lead + i] }
    })
}

fn multi_index(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        idx[i] = flat % dims[i];
        flat /= dims[i];
    }
    idx
}

fn seq(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761).wrapping_add(seed) % 1000) as f32 - 500.0) / 50.0)
        .collect()
}

proptest! {
    #[test]
    fn broadcast_map_follows_numpy((a_dims, b_dims, swap) in broadcast_pair(), seed in any::<u64>()) {
        let (ad, bd) = if swap { (b_dims, a_dims) } else { (a_dims, b_dims) };
        let rank = ad.len().max(bd.len());
        let pad = |d: &[usize]| [vec![1; rank - d.len()], d.to_vec()].concat();
        let od: Vec<usize> = pad(&ad).iter().zip(pad(&bd)).map(|(&x, y)| x.max(y)).collect();
        let a = seq(ad.iter().product(), seed);
        let b = seq(bd.iter().product(), seed ^ 7);
        let n: usize = od.iter().product();
        let mut got = vec![f32::NAN; n];
        m::broadcast_map(&a, &ad, &b, &bd, &mut got, &od, m::prelu);
        for (flat, &g) in got.iter().enumerate() {
            let idx = multi_index(flat, &od);
            let want = m::prelu(a[source_index(&idx, &ad)], b[source_index(&idx, &bd)]);
            prop_assert_eq!(g.to_bits(), want.to_bits(), "at {:?}", idx);
        }
    }

    #[test]
    fn prelu_u8_is_within_one_of_real_arithmetic(
        x in any::<u8>(), alpha in any::<u8>(),
        zx in 0i32..=255, za in 0i32..=255, zo in 0i32..=255,
        sx in 0.005f32..0.5, sa in 0.005f32..0.5, so in 0.005f32..0.5,
    ) {
        let (qx, qa, qo) = (QuantParams::new(sx, zx), QuantParams::new(sa, za), QuantParams::new(so, zo));
        let real_x = (i32::from(x) - zx) as f64 * f64::from(sx);
        let real_a = (i32::from(alpha) - za) as f64 * f64::from(sa);
        let real = if real_x >= 0.0 { real_x } else { real_x * real_a };
        let want = (real / f64::from(so) + f64::from(zo)).round().clamp(0.0, 255.0);
        let got = PreluU8::new(qx, qa, qo).apply(x, alpha);
        prop_assert!((f64::from(got) - want).abs() <= 1.0, "got {} want {}", got, want);
    }

    #[test]
    fn hard_swish_u8_is_within_one_of_real_arithmetic(
        x in any::<u8>(), zx in 0i32..=255, zo in 0i32..=255,
        sx in 0.01f32..0.1, so in 0.01f32..0.1,
    ) {
        // sx / 128 / so stays below 1 over these ranges.
        let (qx, qo) = (QuantParams::new(sx, zx), QuantParams::new(so, zo));
        let k = HardSwishU8::new(qx, qo).expect("an output multiplier below 1");
        let real_x = (i32::from(x) - zx) as f32 * sx;
        let want = (f64::from(m::hard_swish(real_x)) / f64::from(qo.scale) + f64::from(zo))
            .round()
            .clamp(0.0, 255.0);
        let got = k.apply(x);
        prop_assert!((f64::from(got) - want).abs() <= 1.0, "got {} want {}", got, want);
    }

    #[test]
    fn requantize_rounds_the_real_value(
        q in any::<u8>(), zf in 0i32..=255, zt in 0i32..=255,
        sf in 0.01f32..1.0, st in 0.01f32..1.0,
    ) {
        let (from, to) = (QuantParams::new(sf, zf), QuantParams::new(st, zt));
        let real = f64::from((i32::from(q) - zf) as f32 * sf) / f64::from(st);
        let unsigned = m::requantize(q, from, to, false);
        prop_assert_eq!(f64::from(unsigned), (real + f64::from(zt)).round().clamp(0.0, 255.0));
        // The signed image: the same value in the signed domain, shifted back by 128.
        let signed = m::requantize(q, from, to, true);
        let in_signed = (real + f64::from(zt - 128)).round().clamp(-128.0, 127.0);
        prop_assert_eq!(f64::from(signed), in_signed + 128.0);
    }

    #[test]
    fn log_softmax_matches_float64(d in dims(), axis_seed in any::<usize>(), beta in 0.1f32..2.0, seed in any::<u64>()) {
        let axis = axis_seed % d.len();
        let x = seq(d.iter().product(), seed);
        let (depth, inner) = (d[axis], d[axis + 1..].iter().product::<usize>());
        let mut got = vec![0.0; x.len()];
        m::log_softmax(&x, beta, depth, inner, &mut got);
        for o in 0..x.len() / (depth * inner) {
            for i in 0..inner {
                let at = |k: usize| o * depth * inner + k * inner + i;
                let sum: f64 = (0..depth).map(|k| (f64::from(x[at(k)]) * f64::from(beta)).exp()).sum();
                for k in 0..depth {
                    let want = f64::from(x[at(k)]) * f64::from(beta) - sum.ln();
                    prop_assert!((f64::from(got[at(k)]) - want).abs() <= 1e-5 + 1e-5 * want.abs());
                }
            }
        }
    }

    #[test]
    fn reduce_all_any_match_a_scan(d in dims(), mask in any::<u8>(), seed in any::<u64>()) {
        let reduced: Vec<bool> = (0..d.len()).map(|i| mask >> i & 1 == 1).collect();
        let x: Vec<u8> = (0..d.iter().product::<usize>()).map(|i| u8::from(!(i as u64 * 31).wrapping_add(seed).is_multiple_of(3))).collect();
        let out_dims: Vec<usize> = d.iter().zip(&reduced).map(|(&e, &r)| if r { 1 } else { e }).collect();
        let n: usize = out_dims.iter().product();
        let (mut all, mut any) = (vec![9; n], vec![9; n]);
        let axes: Vec<usize> = (0..d.len()).filter(|&i| reduced[i]).collect();
        reduce::all(&x, &d, &axes, &mut all);
        reduce::any(&x, &d, &axes, &mut any);
        for o in 0..n {
            let oi = multi_index(o, &out_dims);
            let members: Vec<u8> = (0..x.len())
                .filter(|&f| {
                    let idx = multi_index(f, &d);
                    idx.iter().zip(&oi).zip(&reduced).all(|((a, b), &r)| r || a == b)
                })
                .map(|f| x[f])
                .collect();
            prop_assert_eq!(all[o], u8::from(members.iter().all(|&v| v != 0)));
            prop_assert_eq!(any[o], u8::from(members.iter().any(|&v| v != 0)));
        }
    }

    #[test]
    fn comparisons_of_quant8_compare_real_values(
        a in any::<u8>(), b in any::<u8>(), za in 0i32..=255, zb in 0i32..=255,
        sa in 0.01f32..1.0, sb in 0.01f32..1.0,
    ) {
        use logic::Comparison::*;
        let (qa, qb) = (QuantParams::new(sa, za), QuantParams::new(sb, zb));
        let (ra, rb) = (logic::real(a, qa), logic::real(b, qb));
        prop_assert_eq!(ra, (i32::from(a) - za) as f32 * sa);
        for (k, want) in [(Equal, ra == rb), (NotEqual, ra != rb), (Greater, ra > rb),
                          (GreaterEqual, ra >= rb), (Less, ra < rb), (LessEqual, ra <= rb)] {
            prop_assert_eq!(k.test(ra, rb), u8::from(want));
        }
    }
}

#[test]
fn cast_saturates_to_uint8_and_truncates() {
    for (x, want) in [
        (-0.5f32, 0u8),
        (0.9, 0),
        (1.5, 1),
        (254.99, 254),
        (255.0, 255),
        (1e9, 255),
        (-1e9, 0),
    ] {
        assert_eq!(m::f32_to_u8(x), want, "{x}");
    }
    for (x, want) in [
        (-1i32, 0u8),
        (0, 0),
        (200, 200),
        (256, 255),
        (i32::MAX, 255),
    ] {
        assert_eq!(m::i32_to_u8(x), want, "{x}");
    }
}

#[test]
fn max_and_min_keep_the_references_nan_order() {
    // std::max(a, b) is `a < b ? b : a`: a NaN first wins, a NaN second loses.
    assert!(m::max_of(f32::NAN, 1.0).is_nan());
    assert_eq!(m::max_of(1.0, f32::NAN), 1.0);
    assert!(m::min_of(f32::NAN, 1.0).is_nan());
    assert_eq!(m::min_of(1.0, f32::NAN), 1.0);
}

#[test]
fn hard_swish_refuses_an_output_multiplier_of_one() {
    // input scale / 128 / output scale = 1: the platform's reference refuses it.
    let (x, o) = (QuantParams::new(1.28, 0), QuantParams::new(0.01, 0));
    assert!(HardSwishU8::new(x, o).is_none());
    assert!(HardSwishU8::new(x, QuantParams::new(0.02, 0)).is_some());
}

#[test]
fn pooled_loops_match_the_plain_ones() {
    // Past the split threshold with a ragged last chunk, on a 4-thread pool.
    let n = (1 << 18) + 37;
    let a = seq(n, 1);
    let b = seq(n, 2);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let mut plain = vec![0.0f32; n];
    m::map(&a, &mut plain, m::hard_swish);
    let mut pooled = vec![f32::NAN; n];
    pool.install(|| fast::map(&a, &mut pooled, m::hard_swish));
    assert_eq!(plain, pooled);
    let mut plain = vec![0u8; n];
    for ((o, &x), &y) in plain.iter_mut().zip(&a).zip(&b) {
        *o = logic::Comparison::Less.test(x, y);
    }
    let mut pooled = vec![9u8; n];
    pool.install(|| {
        fast::zip(&a, &b, &mut pooled, |x, y| {
            logic::Comparison::Less.test(x, y)
        })
    });
    assert_eq!(plain, pooled);
}
