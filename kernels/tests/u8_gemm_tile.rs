//! The uint8 GEMM tile of every level this processor runs ([`U8Gemm`]), called directly
//! against a scalar evaluation of its contract ([`U8GemmArgs`]): every row count from 1 to
//! `mr` (and, for a kernel that takes any row count, several tiles with each partial last
//! one), every `k mod 4` (k below 4, k = 27, long k), every column count of a block, A rows
//! at a stride longer than k, per-tensor and per-column requantization (with and without
//! the fused column constants), the raw int32 output, and row corrections that are all zero
//! (`corr_zero`) or not. Output bytes outside the tile must stay untouched.

mod support;

use nnhal_kernels::aligned::AlignedBuf;
use nnhal_kernels::ukernels::quant8::{fuse_cols, Requant8, U8Gemm, U8GemmArgs};
use support::{tables, Rng};

/// How a case requantizes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Tensor,
    Columns { left: bool },
    Raw,
}

impl Rng {
    fn byte(&mut self) -> u8 {
        match self.below(4) {
            0 => [0u8, 255][self.below(2)],
            _ => self.next() as u8,
        }
    }

    fn requant(&mut self) -> Requant8 {
        let zero_point = [0, 128, 255, self.below(256) as i32][self.below(4)];
        let (min, max) = match self.below(3) {
            0 => (0, 255),
            1 => (zero_point, 255),
            _ => {
                let a = self.below(256) as i32;
                let b = self.below(256) as i32;
                (a.min(b), a.max(b))
            }
        };
        Requant8 {
            multiplier: self.multiplier(),
            shift: self.below(32) as u32,
            zero_point,
            lo: min - zero_point,
            hi: max - zero_point,
        }
    }

    fn multiplier(&mut self) -> i32 {
        match self.below(5) {
            0 => 0,
            1 => i32::MAX,
            2 => 1 << 30,
            _ => (1 << 30) + (self.next() % (1 << 30)) as i32,
        }
    }
}

/// One random tile call of `g` with `rows` rows, `k` taps and `cols` columns, compared with
/// the scalar evaluation.
fn check(g: &U8Gemm, rng: &mut Rng, rows: usize, k: usize, cols: usize, mode: Mode, zero: bool) {
    let nr = g.nr;
    let groups = k.div_ceil(4);
    let stride = k + rng.below(9);
    // Row r of A is `k` bytes at `r·stride`; the bytes between rows are noise the kernel must
    // not use, and the buffer ends with the last row.
    let a: Vec<u8> = (0..(rows - 1) * stride + k).map(|_| rng.byte()).collect();
    // Weights as the packing stores them: `w − shift` per byte, groups of nr × 4, zero past k.
    let wq: Vec<u8> = (0..nr * k).map(|_| rng.byte()).collect();
    let mut w = AlignedBuf::<u8>::zeroed(groups.max(1) * nr * 4);
    for n in 0..nr {
        for kk in 0..k {
            w[(kk / 4) * nr * 4 + n * 4 + kk % 4] =
                (i32::from(wq[n * k + kk]) - g.weight_shift) as u8;
        }
    }
    let big = rng.below(3) == 0;
    let bias: Vec<i32> = (0..nr)
        .map(|_| {
            if big {
                rng.next() as i32
            } else {
                (rng.next() % 40001) as i32 - 20000
            }
        })
        .collect();
    let corr: Vec<i32> = (0..rows)
        .map(|_| {
            if zero {
                0
            } else {
                rng.next() as i32 >> rng.below(20)
            }
        })
        .collect();
    let rq = rng.requant();
    let mut col = vec![0i32; 3 * nr];
    for n in 0..nr {
        col[n] = rng.multiplier();
        col[nr + n] = if matches!(mode, Mode::Columns { left: true }) {
            rng.below(31) as i32
        } else {
            0
        };
        col[2 * nr + n] = rng.below(32) as i32;
    }
    let fused = fuse_cols(&col, nr);
    let out_stride = cols + rng.below(5);
    let mut out = vec![0xA5u8; rows * out_stride];
    let mut raw = vec![0x5A5A_5A5Ai32; rows * out_stride];
    let args = U8GemmArgs {
        a: a.as_ptr(),
        a_stride: stride,
        rows,
        k,
        w: w.as_ptr(),
        bias: bias.as_ptr(),
        row_corr: corr.as_ptr(),
        corr_zero: zero,
        out: out.as_mut_ptr(),
        out_stride,
        cols,
        rq,
        col_rq: if matches!(mode, Mode::Columns { .. }) {
            col.as_ptr()
        } else {
            std::ptr::null()
        },
        col_fused: match (&fused, mode) {
            (Some(f), Mode::Columns { .. }) => f.as_ptr(),
            _ => std::ptr::null(),
        },
        raw: if mode == Mode::Raw {
            raw.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        },
    };
    // SAFETY: A holds `rows` rows of `k` bytes at `stride`, the weights `ceil(k/4)` groups of
    // `nr × 4` bytes (64-byte aligned), `nr` biases, `rows` corrections, the output `rows`
    // rows of `cols ≤ out_stride` values, the column constants `3·nr` values (and the fused
    // ones a whole block); the table's kernel runs on this processor.
    unsafe { (g.kernel)(&args) };
    for r in 0..rows {
        for c in 0..out_stride {
            let at = r * out_stride + c;
            let ctx = || {
                format!(
                    "{} rows {rows} k {k} cols {cols} {mode:?} zero {zero} row {r} col {c}",
                    g.name
                )
            };
            if c >= cols {
                assert_eq!(out[at], 0xA5, "{}: wrote past cols", ctx());
                assert_eq!(raw[at], 0x5A5A_5A5A, "{}: wrote past cols", ctx());
                continue;
            }
            let mut acc = bias[c].wrapping_add(corr[r]);
            for kk in 0..k {
                let x = i32::from(a[r * stride + kk]);
                acc = acc.wrapping_add(x * (i32::from(wq[c * k + kk]) - g.weight_shift));
            }
            match mode {
                Mode::Raw => {
                    assert_eq!(raw[at], acc, "{}", ctx());
                    assert_eq!(out[at], 0xA5, "{}: raw mode wrote bytes", ctx());
                }
                Mode::Tensor => assert_eq!(out[at], rq.apply(acc), "{}", ctx()),
                Mode::Columns { .. } => {
                    let want = rq.apply_col(acc, col[c], col[nr + c], col[2 * nr + c]);
                    assert_eq!(out[at], want, "{}", ctx());
                }
            }
        }
    }
}

#[test]
fn gemm_tiles_match_the_scalar_contract() {
    // The small K of MobileNet v2's expansions (16, 24, 32) and their neighbours among them.
    let ks = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 24, 27, 32, 61, 62, 63, 64, 255,
    ];
    let modes = [
        Mode::Tensor,
        Mode::Columns { left: false },
        Mode::Columns { left: true },
        Mode::Raw,
    ];
    for t in tables() {
        let g = &t.u8_gemm;
        let mut rng = Rng(0x6e6d_2d75_3867 ^ g.nr as u64);
        for rows in 1..=g.mr {
            for &k in &ks {
                for mode in modes {
                    for zero in [false, true] {
                        let cols = if rng.below(2) == 0 {
                            g.nr
                        } else {
                            rng.range(1, g.nr)
                        };
                        check(g, &mut rng, rows, k, cols, mode, zero);
                    }
                }
            }
        }
        // A kernel that walks the row tiles itself: several whole tiles, each partial tile
        // after them, every requantization mode, corrections zero or not.
        if g.any_rows {
            for rows in (g.mr + 1..=3 * g.mr).chain([10 * g.mr + 4]) {
                for &k in &[1, 2, 3, 15, 16, 17, 24, 27, 32, 64] {
                    for mode in modes {
                        for zero in [false, true] {
                            let cols = if rng.below(2) == 0 {
                                g.nr
                            } else {
                                rng.range(1, g.nr)
                            };
                            check(g, &mut rng, rows, k, cols, mode, zero);
                        }
                    }
                }
            }
        }
        for cols in 1..=g.nr {
            check(g, &mut rng, g.mr, 27, cols, Mode::Tensor, false);
            check(
                g,
                &mut rng,
                1,
                13,
                cols,
                Mode::Columns { left: false },
                true,
            );
        }
    }
}
