//! The sequence forms of RNN and LSTM (`recurrent::sequence`) against a plain oracle built
//! from the single-step reference cells: the whole sequence transposed to time-major, one
//! freshly allocated cell call per step (visited backwards for the backward direction), the
//! outputs transposed back; an auxiliary input checked as the cell on the input and the
//! auxiliary input concatenated, with the weights concatenated to match. Random sizes, every
//! optional LSTM group, both time layouts, both directions, a column range of a wider output
//! (merge_outputs).

mod support;

use nnhal_kernels::recurrent::reference::{
    lstm_f32, rnn_f32, LstmActivation, LstmAux, LstmDims, LstmInputs, LstmLayerNorm, LstmOutputs,
    LstmParams, RnnDims, RnnInputs,
};
use nnhal_kernels::recurrent::sequence::{
    lstm_scratch_len, lstm_sequence_f32, rnn_scratch_len, rnn_sequence_f32, SeqAux, SeqDims,
};
use nnhal_kernels::Activation;
use proptest::prelude::*;
use support::recurrent::{assert_close, in_columns};

/// Deterministic values in [-scale, scale).
fn values(n: usize, seed: &mut u64, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `[rows, a] ++ [rows, b]` row by row.
fn concat_rows(x: &[f32], a: usize, y: &[f32], b: usize) -> Vec<f32> {
    if a + b == 0 {
        return Vec::new();
    }
    let rows = x.len().checked_div(a).unwrap_or_else(|| y.len() / b);
    (0..rows)
        .flat_map(|r| x[r * a..(r + 1) * a].iter().chain(&y[r * b..(r + 1) * b]))
        .copied()
        .collect()
}

/// `[d0, d1, n]` to `[d1, d0, n]`.
fn swap01(x: &[f32], d0: usize, d1: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0.0; x.len()];
    for i in 0..d0 {
        for j in 0..d1 {
            y[(j * d0 + i) * n..(j * d0 + i + 1) * n]
                .copy_from_slice(&x[(i * d1 + j) * n..(i * d1 + j + 1) * n]);
        }
    }
    y
}

fn to_time_major(seq: SeqDims, x: &[f32], n: usize) -> Vec<f32> {
    if seq.time_major {
        x.to_vec()
    } else {
        swap01(x, seq.batch, seq.max_time, n)
    }
}

fn from_time_major(seq: SeqDims, x: &[f32], n: usize) -> Vec<f32> {
    if seq.time_major {
        x.to_vec()
    } else {
        swap01(x, seq.max_time, seq.batch, n)
    }
}

#[derive(Debug, Clone)]
struct Case {
    max_time: usize,
    batch: usize,
    input_size: usize,
    aux_size: usize,
    units: usize,
    output_size: usize,
    time_major: bool,
    reverse: bool,
    aux: bool,
    cifg: bool,
    peephole: bool,
    projection: bool,
    projection_bias: bool,
    layer_norm: bool,
    extra_columns: usize,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            1usize..5,
            1usize..4,
            1usize..6,
            1usize..5,
            1usize..6,
            1usize..6,
        ),
        any::<[bool; 9]>(),
        0usize..4,
        any::<u64>(),
    )
        .prop_map(|((t, b, i, a, u, o), f, extra_columns, seed)| Case {
            max_time: t,
            batch: b,
            input_size: i,
            aux_size: a,
            units: u,
            output_size: if f[5] { o } else { u },
            time_major: f[0],
            reverse: f[1],
            aux: f[2],
            cifg: f[3],
            peephole: f[4],
            projection: f[5],
            projection_bias: f[5] && f[6],
            layer_norm: f[7],
            extra_columns: if f[8] { extra_columns } else { 0 },
            seed,
        })
}

fn check_rnn(c: &Case) {
    let mut seed = c.seed;
    let seq = SeqDims {
        max_time: c.max_time,
        batch: c.batch,
        time_major: c.time_major,
    };
    let (t, b, i, a, u) = (c.max_time, c.batch, c.input_size, c.aux_size, c.units);
    let x = values(t * b * i, &mut seed, 1.0);
    let xa = values(t * b * a, &mut seed, 1.0);
    let w = values(u * i, &mut seed, 0.5);
    let wa = values(u * a, &mut seed, 0.5);
    let r = values(u * u, &mut seed, 0.5);
    let bias = values(u, &mut seed, 0.5);
    let h0 = values(b * u, &mut seed, 1.0);
    let act = Activation::Relu6;
    let dims = RnnDims {
        batch: b,
        input_size: i,
        num_units: u,
    };
    let cell = RnnInputs {
        input: &x,
        weights: &w,
        recurrent_weights: &r,
        bias: &bias,
        hidden_state_in: &h0,
    };
    let aux = c.aux.then(|| {
        (
            SeqAux {
                input: &xa[..],
                size: a,
            },
            &wa[..],
        )
    });
    let mut h_final = vec![f32::NAN; b * u];
    let mut scratch = vec![f32::NAN; rnn_scratch_len(dims, if c.aux { a } else { 0 })];
    let got = in_columns(t * b, u, c.extra_columns, |out| {
        rnn_sequence_f32(
            seq,
            dims,
            &cell,
            aux,
            act,
            c.reverse,
            out,
            &mut h_final,
            &mut scratch,
        )
    });

    // Oracle: time-major, one cell call per step, the auxiliary input as extra input columns.
    let (x_tm, xa_tm) = (to_time_major(seq, &x, i), to_time_major(seq, &xa, a));
    let (width, w_all) = if c.aux {
        (i + a, concat_rows(&w, i, &wa, a))
    } else {
        (i, w.clone())
    };
    let mut h = h0.clone();
    let mut out_tm = vec![0.0; t * b * u];
    let order: Vec<usize> = if c.reverse {
        (0..t).rev().collect()
    } else {
        (0..t).collect()
    };
    for step in order {
        let xs = &x_tm[step * b * i..(step + 1) * b * i];
        let input = if c.aux {
            concat_rows(xs, i, &xa_tm[step * b * a..(step + 1) * b * a], a)
        } else {
            xs.to_vec()
        };
        let mut h_next = vec![0.0; b * u];
        let mut y = vec![0.0; b * u];
        rnn_f32(
            RnnDims {
                input_size: width,
                ..dims
            },
            &RnnInputs {
                input: &input,
                weights: &w_all,
                hidden_state_in: &h,
                ..cell
            },
            act,
            &mut h_next,
            &mut y,
        );
        out_tm[step * b * u..(step + 1) * b * u].copy_from_slice(&y);
        h = h_next;
    }
    assert_close(&got, &from_time_major(seq, &out_tm, u), "RNN output");
    assert_close(&h_final, &h, "RNN final state");
}

/// The LSTM tensors that do not change between the kernel and the oracle.
struct Fixed<'a> {
    c: &'a Case,
    w_h: &'a [Vec<f32>],
    vecs: &'a [Vec<f32>],
    w_proj: &'a [f32],
    b_proj: &'a [f32],
}

impl<'a> Fixed<'a> {
    fn inputs(
        &self,
        input: &'a [f32],
        w_x: &'a [Vec<f32>],
        h: &'a [f32],
        cs: &'a [f32],
    ) -> LstmInputs<'a> {
        let (c, w_h, vecs) = (self.c, self.w_h, self.vecs);
        LstmInputs {
            input,
            input_to_input_weights: (!c.cifg).then(|| &w_x[0][..]),
            input_to_forget_weights: &w_x[1],
            input_to_cell_weights: &w_x[2],
            input_to_output_weights: &w_x[3],
            recurrent_to_input_weights: (!c.cifg).then(|| &w_h[0][..]),
            recurrent_to_forget_weights: &w_h[1],
            recurrent_to_cell_weights: &w_h[2],
            recurrent_to_output_weights: &w_h[3],
            cell_to_input_weights: (c.peephole && !c.cifg).then(|| &vecs[0][..]),
            cell_to_forget_weights: c.peephole.then(|| &vecs[1][..]),
            cell_to_output_weights: c.peephole.then(|| &vecs[2][..]),
            input_gate_bias: (!c.cifg).then(|| &vecs[3][..]),
            forget_gate_bias: &vecs[4],
            cell_bias: &vecs[5],
            output_gate_bias: &vecs[6],
            projection_weights: c.projection.then_some(self.w_proj),
            projection_bias: c.projection_bias.then_some(self.b_proj),
            output_state_in: h,
            cell_state_in: cs,
            layer_norm: c.layer_norm.then(|| LstmLayerNorm {
                input: (!c.cifg).then(|| &vecs[7][..]),
                forget: &vecs[8],
                cell: &vecs[9],
                output: &vecs[10],
            }),
            aux: None,
        }
    }
}

fn check_lstm(c: &Case) {
    let mut seed = c.seed;
    let seq = SeqDims {
        max_time: c.max_time,
        batch: c.batch,
        time_major: c.time_major,
    };
    let (t, b, i, a, u, o) = (
        c.max_time,
        c.batch,
        c.input_size,
        c.aux_size,
        c.units,
        c.output_size,
    );
    let x = values(t * b * i, &mut seed, 1.0);
    let xa = values(t * b * a, &mut seed, 1.0);
    let mut mat = |cols: usize| values(u * cols, &mut seed, 0.5);
    let w_x: Vec<Vec<f32>> = (0..4).map(|_| mat(i)).collect();
    let w_a: Vec<Vec<f32>> = (0..4).map(|_| mat(a)).collect();
    let w_h: Vec<Vec<f32>> = (0..4).map(|_| mat(o)).collect();
    let vecs: Vec<Vec<f32>> = (0..11).map(|_| values(u, &mut seed, 0.5)).collect();
    let w_proj = values(o * u, &mut seed, 0.5);
    let b_proj = values(o, &mut seed, 0.5);
    let h0 = values(b * o, &mut seed, 1.0);
    let c0 = values(b * u, &mut seed, 1.0);
    let dims = LstmDims {
        batch: b,
        input_size: i,
        num_units: u,
        output_size: o,
    };
    let params = LstmParams {
        activation: LstmActivation::Tanh,
        cell_clip: 0.0,
        proj_clip: if c.projection { 0.8 } else { 0.0 },
    };
    let fixed = Fixed {
        c,
        w_h: &w_h,
        vecs: &vecs,
        w_proj: &w_proj,
        b_proj: &b_proj,
    };
    let mut seq_inputs = fixed.inputs(&x, &w_x, &h0, &c0);
    seq_inputs.aux = c.aux.then(|| LstmAux {
        input: &xa,
        aux_size: a,
        to_input: (!c.cifg).then(|| &w_a[0][..]),
        to_forget: &w_a[1],
        to_cell: &w_a[2],
        to_output: &w_a[3],
    });
    let mut h_final = vec![f32::NAN; b * o];
    let mut c_final = vec![f32::NAN; b * u];
    let mut scratch = vec![f32::NAN; lstm_scratch_len(dims, if c.aux { a } else { 0 })];
    let got = in_columns(t * b, o, c.extra_columns, |out| {
        lstm_sequence_f32(
            seq,
            dims,
            &seq_inputs,
            params,
            c.reverse,
            out,
            &mut h_final,
            &mut c_final,
            &mut scratch,
        )
    });

    let (x_tm, xa_tm) = (to_time_major(seq, &x, i), to_time_major(seq, &xa, a));
    let (width, w_all): (usize, Vec<Vec<f32>>) = if c.aux {
        (
            i + a,
            (0..4)
                .map(|g| concat_rows(&w_x[g], i, &w_a[g], a))
                .collect(),
        )
    } else {
        (i, w_x.clone())
    };
    let (mut h, mut cs) = (h0.clone(), c0.clone());
    let mut out_tm = vec![0.0; t * b * o];
    let order: Vec<usize> = if c.reverse {
        (0..t).rev().collect()
    } else {
        (0..t).collect()
    };
    for step in order {
        let xs = &x_tm[step * b * i..(step + 1) * b * i];
        let input = if c.aux {
            concat_rows(xs, i, &xa_tm[step * b * a..(step + 1) * b * a], a)
        } else {
            xs.to_vec()
        };
        let mut gates = vec![0.0; b * u * if c.cifg { 3 } else { 4 }];
        let (mut h_next, mut c_next, mut y) =
            (vec![0.0; b * o], vec![0.0; b * u], vec![0.0; b * o]);
        lstm_f32(
            LstmDims {
                input_size: width,
                ..dims
            },
            &fixed.inputs(&input, &w_all, &h, &cs),
            params,
            LstmOutputs {
                scratch: &mut gates,
                output_state_out: &mut h_next,
                cell_state_out: &mut c_next,
                output: &mut y,
            },
        );
        out_tm[step * b * o..(step + 1) * b * o].copy_from_slice(&y);
        (h, cs) = (h_next, c_next);
    }
    assert_close(&got, &from_time_major(seq, &out_tm, o), "LSTM output");
    assert_close(&h_final, &h, "LSTM final output state");
    assert_close(&c_final, &cs, "LSTM final cell state");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rnn_sequence_matches_the_stepwise_oracle(c in case()) {
        check_rnn(&c);
    }

    #[test]
    fn lstm_sequence_matches_the_stepwise_oracle(c in case()) {
        check_lstm(&c);
    }
}

/// Every combination of the LSTM's optional groups, both layouts and directions, at least
/// once (proptest samples them; this enumerates them on one size).
#[test]
fn lstm_sequence_every_optional_group() {
    for bits in 0u32..256 {
        let f = |k: u32| bits & (1 << k) != 0;
        let projection = f(5);
        let c = Case {
            max_time: 3,
            batch: 2,
            input_size: 3,
            aux_size: 2,
            units: 4,
            output_size: if projection { 3 } else { 4 },
            time_major: f(0),
            reverse: f(1),
            aux: f(2),
            cifg: f(3),
            peephole: f(4),
            projection,
            projection_bias: projection && f(6),
            layer_norm: f(7),
            extra_columns: 2,
            seed: u64::from(bits) * 7919,
        };
        check_lstm(&c);
        check_rnn(&c);
    }
}
