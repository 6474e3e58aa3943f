//! The packed recurrent cells (`recurrent::fast`) against the reference sequence loops
//! (`recurrent::sequence`, themselves checked step by step against the single-step reference
//! cells in `sequence_recurrent.rs`), on every instruction set level this processor supports:
//! every optional LSTM group (CIFG, peepholes, projection with and without bias, layer
//! normalisation, cross-linked auxiliary input), clipping, each cell activation, both time
//! layouts, both directions, a column range of a wider output, and sizes that are not
//! multiples of any register tile. The scratch starts as NaN, so any value read before it is
//! written shows.
//!
//! The packed cells sum each product in the micro-kernel's order, so each value may differ by
//! a few ULP of its sums per step; the bound is `1e-5 + 1e-4 · |want|`.

mod support;

use nnhal_kernels::recurrent::fast::{
    lstm_sequence_packed, rnn_sequence_packed, LstmStates, PackedLstm, PackedRnn,
};
use nnhal_kernels::recurrent::reference::{
    LstmActivation, LstmAux, LstmDims, LstmInputs, LstmLayerNorm, LstmParams, RnnDims, RnnInputs,
};
use nnhal_kernels::recurrent::sequence::{
    lstm_scratch_len, lstm_sequence_f32, rnn_scratch_len, rnn_sequence_f32, SeqAux, SeqDims,
};
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::Activation;
use support::recurrent::{assert_close, in_columns};
use support::{tables, Rng};

impl Rng {
    /// Uniform in [-scale, scale).
    fn values(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale)
            .collect()
    }

    /// A `[rows, cols]` weight matrix whose row sums over inputs in [-1, 1] stay about 1, as
    /// trained weights keep them, so that a recurrence without a squashing activation does not
    /// blow its rounding up step after step.
    fn matrix(&mut self, rows: usize, cols: usize) -> Vec<f32> {
        self.values(rows * cols, 1.5 / (cols.max(1) as f32).sqrt())
    }
}

#[derive(Clone, Copy, Debug)]
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
    clip: bool,
    activation: LstmActivation,
    extra_columns: usize,
    seed: u64,
}

impl Case {
    fn seq(&self) -> SeqDims {
        SeqDims {
            max_time: self.max_time,
            batch: self.batch,
            time_major: self.time_major,
        }
    }
}

fn check_lstm(uk: &Ukernels, c: &Case) {
    let mut rng = Rng(c.seed);
    let seq = c.seq();
    let (t, b, i, a, u, o) = (
        c.max_time,
        c.batch,
        c.input_size,
        c.aux_size,
        c.units,
        c.output_size,
    );
    let x = rng.values(t * b * i, 1.0);
    let xa = rng.values(t * b * a, 1.0);
    let w_x: Vec<Vec<f32>> = (0..4).map(|_| rng.matrix(u, i)).collect();
    let w_a: Vec<Vec<f32>> = (0..4).map(|_| rng.matrix(u, a)).collect();
    let w_h: Vec<Vec<f32>> = (0..4).map(|_| rng.matrix(u, o)).collect();
    let v: Vec<Vec<f32>> = (0..11).map(|_| rng.values(u, 0.5)).collect();
    let w_proj = rng.matrix(o, u);
    let b_proj = rng.values(o, 0.5);
    let h0 = rng.values(b * o, 1.0);
    let c0 = rng.values(b * u, 1.0);
    let dims = LstmDims {
        batch: b,
        input_size: i,
        num_units: u,
        output_size: o,
    };
    let params = LstmParams {
        activation: c.activation,
        cell_clip: if c.clip { 0.6 } else { 0.0 },
        proj_clip: if c.clip && c.projection { 0.4 } else { 0.0 },
    };
    let inputs = LstmInputs {
        input: &x,
        input_to_input_weights: (!c.cifg).then(|| &w_x[0][..]),
        input_to_forget_weights: &w_x[1],
        input_to_cell_weights: &w_x[2],
        input_to_output_weights: &w_x[3],
        recurrent_to_input_weights: (!c.cifg).then(|| &w_h[0][..]),
        recurrent_to_forget_weights: &w_h[1],
        recurrent_to_cell_weights: &w_h[2],
        recurrent_to_output_weights: &w_h[3],
        cell_to_input_weights: (c.peephole && !c.cifg).then(|| &v[0][..]),
        cell_to_forget_weights: c.peephole.then(|| &v[1][..]),
        cell_to_output_weights: c.peephole.then(|| &v[2][..]),
        input_gate_bias: (!c.cifg).then(|| &v[3][..]),
        forget_gate_bias: &v[4],
        cell_bias: &v[5],
        output_gate_bias: &v[6],
        projection_weights: c.projection.then_some(&w_proj[..]),
        projection_bias: c.projection_bias.then_some(&b_proj[..]),
        output_state_in: &h0,
        cell_state_in: &c0,
        layer_norm: c.layer_norm.then(|| LstmLayerNorm {
            input: (!c.cifg).then(|| &v[7][..]),
            forget: &v[8],
            cell: &v[9],
            output: &v[10],
        }),
        aux: c.aux.then(|| LstmAux {
            input: &xa,
            aux_size: a,
            to_input: (!c.cifg).then(|| &w_a[0][..]),
            to_forget: &w_a[1],
            to_cell: &w_a[2],
            to_output: &w_a[3],
        }),
    };

    // The oracle: the reference loops over the sequence.
    let mut want_h = vec![0.0; b * o];
    let mut want_c = vec![0.0; b * u];
    let mut scratch = vec![0.0; lstm_scratch_len(dims, if c.aux { a } else { 0 })];
    let want = in_columns(t * b, o, c.extra_columns, |out| {
        lstm_sequence_f32(
            seq,
            dims,
            &inputs,
            params,
            c.reverse,
            out,
            &mut want_h,
            &mut want_c,
            &mut scratch,
        )
    });

    // Packing reads only the weights: the sequence, the states and the auxiliary input are
    // handed over at run time.
    let weights = LstmInputs {
        input: &[],
        output_state_in: &[],
        cell_state_in: &[],
        aux: inputs.aux.map(|aux| LstmAux { input: &[], ..aux }),
        ..inputs
    };
    let packed = PackedLstm::pack(uk, dims, &weights, params).expect("packs");
    assert_eq!(packed.aux_size(), if c.aux { a } else { 0 });
    let mut got_h = vec![f32::NAN; b * o];
    let mut got_c = vec![f32::NAN; b * u];
    let mut scratch = vec![f32::NAN; packed.scratch_len(seq)];
    let got = in_columns(t * b, o, c.extra_columns, |out| {
        lstm_sequence_packed(
            &packed,
            seq,
            &x,
            c.aux.then_some(&xa[..]),
            c.reverse,
            out,
            LstmStates {
                output_state_in: &h0,
                cell_state_in: &c0,
                output_state_out: &mut got_h,
                cell_state_out: &mut got_c,
            },
            &mut scratch,
        )
    });
    let what = format!("{} {c:?}", uk.isa.name());
    assert_close(&got, &want, &format!("LSTM output, {what}"));
    assert_close(&got_h, &want_h, &format!("LSTM output state, {what}"));
    assert_close(&got_c, &want_c, &format!("LSTM cell state, {what}"));
}

fn check_rnn(uk: &Ukernels, c: &Case, act: Activation) {
    let mut rng = Rng(c.seed ^ 0x5eed);
    let seq = c.seq();
    let (t, b, i, a, u) = (c.max_time, c.batch, c.input_size, c.aux_size, c.units);
    let x = rng.values(t * b * i, 1.0);
    let xa = rng.values(t * b * a, 1.0);
    let w = rng.matrix(u, i);
    let wa = rng.matrix(u, a);
    let r = rng.matrix(u, u);
    let bias = rng.values(u, 0.5);
    let h0 = rng.values(b * u, 1.0);
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
                input: &xa,
                size: a,
            },
            &wa[..],
        )
    });
    let mut want_h = vec![0.0; b * u];
    let mut scratch = vec![0.0; rnn_scratch_len(dims, if c.aux { a } else { 0 })];
    let want = in_columns(t * b, u, c.extra_columns, |out| {
        rnn_sequence_f32(
            seq,
            dims,
            &cell,
            aux,
            act,
            c.reverse,
            out,
            &mut want_h,
            &mut scratch,
        )
    });
    let packed =
        PackedRnn::pack(uk, dims, &w, &r, &bias, c.aux.then_some((&wa[..], a))).expect("packs");
    let mut got_h = vec![f32::NAN; b * u];
    let mut scratch = vec![f32::NAN; packed.scratch_len(seq)];
    let got = in_columns(t * b, u, c.extra_columns, |out| {
        rnn_sequence_packed(
            &packed,
            seq,
            &x,
            c.aux.then_some(&xa[..]),
            &h0,
            act,
            c.reverse,
            out,
            &mut got_h,
            &mut scratch,
        )
    });
    let what = format!("{} {act:?} {c:?}", uk.isa.name());
    assert_close(&got, &want, &format!("RNN output, {what}"));
    assert_close(&got_h, &want_h, &format!("RNN state, {what}"));
}

const CELL_ACTIVATIONS: [LstmActivation; 5] = [
    LstmActivation::Tanh,
    LstmActivation::None,
    LstmActivation::Relu,
    LstmActivation::Relu6,
    LstmActivation::Sigmoid,
];

/// Every combination of the optional groups, layouts and directions on a small size, on every
/// level.
#[test]
fn every_optional_group_matches_the_reference() {
    for uk in tables() {
        for bits in 0u32..512 {
            let f = |k: u32| bits & (1 << k) != 0;
            let projection = f(5);
            let c = Case {
                max_time: 3,
                batch: 2,
                input_size: 3,
                aux_size: 2,
                units: 5,
                output_size: if projection { 3 } else { 5 },
                time_major: f(0),
                reverse: f(1),
                aux: f(2),
                cifg: f(3),
                peephole: f(4),
                projection,
                projection_bias: projection && f(6),
                layer_norm: f(7),
                clip: f(8),
                activation: CELL_ACTIVATIONS[bits as usize % CELL_ACTIVATIONS.len()],
                extra_columns: 2 * usize::from(f(1)),
                seed: u64::from(bits) * 7919 + 1,
            };
            check_lstm(uk, &c);
            let act = support::ACTIVATIONS[bits as usize % support::ACTIVATIONS.len()];
            check_rnn(uk, &c, act);
        }
    }
}

/// Random sizes past the register tiles (up to 70 units: several column blocks and a tail;
/// batches past one row tile), on every level.
#[test]
fn random_sizes_match_the_reference() {
    let mut rng = Rng(0x1234_5678);
    for uk in tables() {
        for n in 0..40 {
            let projection = rng.below(2) == 1;
            let units = rng.range(1, 70);
            let c = Case {
                max_time: rng.range(1, 9),
                batch: rng.range(1, 11),
                input_size: rng.range(1, 40),
                aux_size: rng.range(1, 9),
                units,
                output_size: if projection { rng.range(1, 40) } else { units },
                time_major: rng.below(2) == 1,
                reverse: rng.below(2) == 1,
                aux: rng.below(3) == 0,
                cifg: rng.below(2) == 1,
                peephole: rng.below(2) == 1,
                projection,
                projection_bias: projection && rng.below(2) == 1,
                layer_norm: rng.below(2) == 1,
                clip: rng.below(2) == 1,
                activation: LstmActivation::Tanh,
                extra_columns: rng.below(3),
                seed: rng.next(),
            };
            check_lstm(uk, &c);
            check_rnn(uk, &c, support::ACTIVATIONS[n % support::ACTIVATIONS.len()]);
        }
    }
}

/// Weights that do not fit their extents are refused (the operation then runs the
/// reference loops), never packed short.
#[test]
fn mismatched_weights_are_not_packed() {
    let uk = tables()[0];
    let dims = RnnDims {
        batch: 1,
        input_size: 3,
        num_units: 2,
    };
    let (w, r, b) = (vec![0.5; 6], vec![0.5; 4], vec![0.0; 2]);
    assert!(PackedRnn::pack(uk, dims, &w, &r, &b, None).is_some());
    assert!(PackedRnn::pack(uk, dims, &w[..5], &r, &b, None).is_none());
    assert!(PackedRnn::pack(uk, dims, &w, &r[..3], &b, None).is_none());
    assert!(PackedRnn::pack(uk, dims, &w, &r, &b[..1], None).is_none());
    assert!(PackedRnn::pack(uk, dims, &w, &r, &b, Some((&w[..5], 3))).is_none());
}
