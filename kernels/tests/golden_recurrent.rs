//! Golden conformance vectors for the lookup and recurrent kernels: EMBEDDING_LOOKUP,
//! HASHTABLE_LOOKUP, LSH_PROJECTION, LSTM, RNN and SVDF, run straight on the kernels with the
//! operands wired as the executor wires them.

mod common;

use common::{assert_f32_close, assert_i32_exact, assert_u8_close, Example, Vector};
use nnhal_kernels::lookup::reference::{
    embedding_lookup, hashtable_lookup, lsh_projection, LshProjectionType,
};
use nnhal_kernels::recurrent::reference::{
    lstm_f32, rnn_f32, svdf_f32, LstmActivation, LstmDims, LstmInputs, LstmOutputs, LstmParams,
    RnnDims, RnnInputs, SvdfDims, SvdfInputs,
};
use nnhal_kernels::Activation;

fn activation(code: i32) -> Activation {
    match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Relu1,
        3 => Activation::Relu6,
        _ => panic!("fused activation {code}"),
    }
}

/// The single operation of a vector, checked to be of the expected type.
fn operation<'a>(v: &'a Vector, ty: &str) -> (&'a [usize], &'a [usize]) {
    assert_eq!(v.operations.len(), 1, "{}", v.name);
    let op = &v.operations[0];
    assert_eq!(op.ty, ty, "{}", v.name);
    (&op.inputs, &op.outputs)
}

fn row_len(dims: &[usize]) -> usize {
    dims[1..].iter().product()
}

/// Compares one float output unless the vector's tolerance ignores it; reports whether it
/// was compared.
fn check_f32(v: &Vector, ex: &Example, operand: usize, actual: &[f32]) -> bool {
    if v.ignored.contains(&operand) {
        return false;
    }
    let what = format!("{} operand {operand}", v.name);
    assert_f32_close(&what, &ex.outputs[&operand], actual);
    true
}

fn run_embedding_lookup(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "EMBEDDING_LOOKUP");
    let dims = &v.operands[ins[1]].dims;
    let (rows, row_len) = (dims[0], row_len(dims));
    for ex in &v.examples {
        let lookups = v.i32s(ex, ins[0]);
        let mut out = vec![0.0f32; lookups.len() * row_len];
        embedding_lookup(&lookups, &v.f32s(ex, ins[1]), rows, row_len, &mut out).unwrap();
        assert!(check_f32(&v, ex, outs[0], &out));
    }
}

fn run_hashtable_lookup(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "HASHTABLE_LOOKUP");
    let values = &v.operands[ins[2]];
    let row_len = row_len(&values.dims);
    for ex in &v.examples {
        let lookups = v.i32s(ex, ins[0]);
        let keys = v.i32s(ex, ins[1]);
        let mut hits = vec![0u8; lookups.len()];
        let expected = &ex.outputs[&outs[0]];
        let what = format!("{name} output");
        match values.ty.as_str() {
            "TENSOR_FLOAT32" => {
                let mut out = vec![0.0f32; lookups.len() * row_len];
                let vals = v.f32s(ex, ins[2]);
                hashtable_lookup(&lookups, &keys, &vals, row_len, &mut out, &mut hits);
                assert_f32_close(&what, expected, &out);
            }
            "TENSOR_QUANT8_ASYMM" => {
                let mut out = vec![0u8; lookups.len() * row_len];
                let vals = v.u8s(ex, ins[2]);
                hashtable_lookup(&lookups, &keys, &vals, row_len, &mut out, &mut hits);
                assert_eq!(assert_u8_close(&what, expected, &out), out.len());
            }
            "TENSOR_INT32" => {
                let mut out = vec![0i32; lookups.len() * row_len];
                let vals = v.i32s(ex, ins[2]);
                hashtable_lookup(&lookups, &keys, &vals, row_len, &mut out, &mut hits);
                assert_i32_exact(&what, expected, &out);
            }
            other => panic!("{name}: values of type {other}"),
        }
        let hits_expected = &ex.outputs[&outs[1]];
        assert_eq!(
            assert_u8_close(&format!("{name} hits"), hits_expected, &hits),
            hits.len()
        );
    }
}

fn run_lsh_projection(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "LSH_PROJECTION");
    let hash_dims = &v.operands[ins[0]].dims;
    let (num_hash, num_bits) = (hash_dims[0], hash_dims[1]);
    let input = &v.operands[ins[1]];
    for ex in &v.examples {
        let hash = v.f32s(ex, ins[0]);
        let bytes: Vec<u8> = match input.ty.as_str() {
            "TENSOR_INT32" => v
                .i32s(ex, ins[1])
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
            "TENSOR_FLOAT32" => v
                .f32s(ex, ins[1])
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
            "TENSOR_QUANT8_ASYMM" => v.u8s(ex, ins[1]),
            other => panic!("{name}: input of type {other}"),
        };
        let weight = v.value(ex, ins[2]).map(|_| v.f32s(ex, ins[2]));
        let kind = LshProjectionType::from_code(v.scalar_i32(ex, ins[3])).unwrap();
        let len = match kind {
            LshProjectionType::Sparse | LshProjectionType::SparseBucketed => num_hash,
            LshProjectionType::Dense => num_hash * num_bits,
        };
        let mut out = vec![0i32; len];
        lsh_projection(
            &hash,
            num_hash,
            num_bits,
            &bytes,
            input.dims[0],
            weight.as_deref(),
            kind,
            &mut out,
        );
        assert_i32_exact(name, &ex.outputs[&outs[0]], &out);
    }
}

fn run_rnn(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "RNN");
    let input_dims = &v.operands[ins[0]].dims;
    let dims = RnnDims {
        batch: input_dims[0],
        input_size: input_dims[1],
        num_units: v.operands[ins[1]].dims[0],
    };
    for ex in &v.examples {
        let t: Vec<Vec<f32>> = (0..5).map(|i| v.f32s(ex, ins[i])).collect();
        let inputs = RnnInputs {
            input: &t[0],
            weights: &t[1],
            recurrent_weights: &t[2],
            bias: &t[3],
            hidden_state_in: &t[4],
        };
        let n = dims.batch * dims.num_units;
        let (mut state, mut out) = (vec![0.0; n], vec![0.0; n]);
        let act = activation(v.scalar_i32(ex, ins[5]));
        rnn_f32(dims, &inputs, act, &mut state, &mut out);
        check_f32(&v, ex, outs[0], &state);
        assert!(check_f32(&v, ex, outs[1], &out));
    }
}

fn run_svdf(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "SVDF");
    let input_dims = &v.operands[ins[0]].dims;
    let time_dims = &v.operands[ins[2]].dims;
    for ex in &v.examples {
        let dims = SvdfDims {
            batch: input_dims[0],
            input_size: input_dims[1],
            num_filters: time_dims[0],
            memory_size: time_dims[1],
            rank: usize::try_from(v.scalar_i32(ex, ins[5])).unwrap(),
        };
        let bias = v.value(ex, ins[3]).map(|_| v.f32s(ex, ins[3]));
        let (input, wf, wt, state_in) = (
            v.f32s(ex, ins[0]),
            v.f32s(ex, ins[1]),
            v.f32s(ex, ins[2]),
            v.f32s(ex, ins[4]),
        );
        let inputs = SvdfInputs {
            input: &input,
            weights_feature: &wf,
            weights_time: &wt,
            bias: bias.as_deref(),
            state_in: &state_in,
        };
        let mut state_out = vec![0.0; dims.batch * dims.state_len()];
        let mut out = vec![0.0; dims.batch * dims.num_units()];
        let act = activation(v.scalar_i32(ex, ins[6]));
        svdf_f32(dims, &inputs, act, &mut state_out, &mut out);
        check_f32(&v, ex, outs[0], &state_out);
        assert!(check_f32(&v, ex, outs[1], &out));
    }
}

fn run_lstm(name: &str) {
    let v = Vector::load(name);
    let (ins, outs) = operation(&v, "LSTM");
    assert_eq!((ins.len(), outs.len()), (23, 4), "{name}");
    let input_dims = &v.operands[ins[0]].dims;
    let dims = LstmDims {
        batch: input_dims[0],
        input_size: input_dims[1],
        num_units: v.operands[ins[4]].dims[0],
        output_size: v.operands[ins[8]].dims[1],
    };
    for ex in &v.examples {
        let t: Vec<Option<Vec<f32>>> = ins[..20]
            .iter()
            .map(|&i| v.value(ex, i).map(|_| v.f32s(ex, i)))
            .collect();
        let opt = |i: usize| t[i].as_deref();
        let req = |i: usize| t[i].as_deref().unwrap();
        let inputs = LstmInputs {
            input: req(0),
            input_to_input_weights: opt(1),
            input_to_forget_weights: req(2),
            input_to_cell_weights: req(3),
            input_to_output_weights: req(4),
            recurrent_to_input_weights: opt(5),
            recurrent_to_forget_weights: req(6),
            recurrent_to_cell_weights: req(7),
            recurrent_to_output_weights: req(8),
            cell_to_input_weights: opt(9),
            cell_to_forget_weights: opt(10),
            cell_to_output_weights: opt(11),
            input_gate_bias: opt(12),
            forget_gate_bias: req(13),
            cell_bias: req(14),
            output_gate_bias: req(15),
            projection_weights: opt(16),
            projection_bias: opt(17),
            output_state_in: req(18),
            cell_state_in: req(19),
            layer_norm: None,
            aux: None,
        };
        let params = LstmParams {
            activation: LstmActivation::from_code(v.scalar_i32(ex, ins[20])).unwrap(),
            cell_clip: v.scalar_f32(ex, ins[21]),
            proj_clip: v.scalar_f32(ex, ins[22]),
        };
        let gates = if inputs.input_to_input_weights.is_some() {
            4
        } else {
            3
        };
        let mut scratch = vec![0.0; dims.batch * dims.num_units * gates];
        assert_eq!(
            scratch.len(),
            v.operands[outs[0]].dims.iter().product::<usize>()
        );
        let mut output_state = vec![0.0; dims.batch * dims.output_size];
        let mut cell_state = vec![0.0; dims.batch * dims.num_units];
        let mut output = vec![0.0; dims.batch * dims.output_size];
        lstm_f32(
            dims,
            &inputs,
            params,
            LstmOutputs {
                scratch: &mut scratch,
                output_state_out: &mut output_state,
                cell_state_out: &mut cell_state,
                output: &mut output,
            },
        );
        check_f32(&v, ex, outs[0], &scratch);
        check_f32(&v, ex, outs[1], &output_state);
        check_f32(&v, ex, outs[2], &cell_state);
        assert!(check_f32(&v, ex, outs[3], &output));
    }
}

macro_rules! golden {
    ($runner:ident: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $runner(stringify!($name));
            }
        )*
    };
}

/// One test per vector, named after it (in a module of their own, since some vector names
/// are also kernel names).
mod vectors {
    use super::*;

    golden!(run_embedding_lookup: embedding_lookup);
    golden!(run_hashtable_lookup: hashtable_lookup_float, hashtable_lookup_quant8);
    golden!(run_lsh_projection: lsh_projection, lsh_projection_2);
    golden!(run_rnn: rnn);
    golden!(run_svdf: svdf, svdf2, svdf_bias_present);
    golden!(
        run_lstm: lstm,
        lstm_state,
        lstm2,
        lstm2_state,
        lstm3,
        lstm3_state,
        lstm3_state2,
    );
}

/// Every vector of these operations in the directory has a test above.
#[test]
fn every_vector_is_covered() {
    let covered = [
        "embedding_lookup",
        "hashtable_lookup_float",
        "hashtable_lookup_quant8",
        "lsh_projection",
        "lsh_projection_2",
        "rnn",
        "svdf",
        "svdf2",
        "svdf_bias_present",
        "lstm",
        "lstm_state",
        "lstm2",
        "lstm2_state",
        "lstm3",
        "lstm3_state",
        "lstm3_state2",
    ];
    let ops = [
        "EMBEDDING_LOOKUP",
        "HASHTABLE_LOOKUP",
        "LSH_PROJECTION",
        "LSTM",
        "RNN",
        "SVDF",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vts_tests/vectors");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let uses_ours = json["model"]["operations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|op| ops.contains(&op["type"].as_str().unwrap()));
        let name = path.file_stem().unwrap().to_str().unwrap();
        assert!(
            !uses_ours || covered.contains(&name),
            "{name} has no golden test"
        );
    }
}
