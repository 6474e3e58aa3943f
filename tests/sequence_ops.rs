//! The NNAPI 1.2 sequence operations (UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN and
//! _LSTM) at the driver's edge: well-formed float32 models are supported, and malformed ones
//! (optional groups given in part, auxiliary weights without their input, sizes that do not
//! fit, output counts that do not fit `merge_outputs`) are INVALID_ARGUMENT with a reason from
//! both `supported_operations` and `prepare_model` (BI-36, BI-37 of docs/bad-inputs.md). The
//! weights are constants, so the shapes are checked with the model (an optional tensor given
//! as a model input defers them to execution). QUANTIZED_16BIT_LSTM with scales or sizes other
//! than its fixed ones is INVALID_ARGUMENT alike, and so is a QUANTIZED_LSTM whose optional
//! groups do not agree (BI-40) or whose scales and scalars break its rules (BI-38).

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::{ConstantCopy, ModelInput, ModelOutput, NoValue};
use OperandType::{Bool, Float32, Int32, TensorFloat32};

#[derive(Default)]
struct Builder {
    model: Model,
}

impl Builder {
    fn operand(&mut self, ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> u32 {
        self.model.operands.push(Operand::new(ty, dims, lifetime));
        let index = self.model.operands.len() as u32 - 1;
        match lifetime {
            ModelInput => self.model.input_indexes.push(index),
            ModelOutput => self.model.output_indexes.push(index),
            _ => {}
        }
        index
    }

    fn constant(&mut self, ty: OperandType, bytes: &[u8]) -> u32 {
        self.constant_tensor(ty, &[], bytes)
    }

    fn constant_tensor(&mut self, ty: OperandType, dims: &[u32], bytes: &[u8]) -> u32 {
        let index = self.operand(ty, dims, ConstantCopy);
        let offset = self.model.operand_values.len().div_ceil(4) * 4;
        self.model.operand_values.resize(offset, 0);
        self.model.operand_values.extend_from_slice(bytes);
        self.model.operands[index as usize].location = DataLocation {
            pool_index: 0,
            offset: offset as u32,
            length: bytes.len() as u32,
        };
        index
    }

    /// A float32 constant of `dims` (zeros): its shape is known when the model is checked.
    fn tensor(&mut self, dims: &[u32]) -> u32 {
        let n: u32 = dims.iter().product();
        self.constant_tensor(TensorFloat32, dims, &vec![0; 4 * n as usize])
    }

    fn input(&mut self, dims: &[u32]) -> u32 {
        self.operand(TensorFloat32, dims, ModelInput)
    }

    /// A tensor input, or an omitted one (no value) when `dims` is `None`.
    fn optional(&mut self, dims: Option<&[u32]>) -> u32 {
        match dims {
            Some(d) => self.tensor(d),
            None => self.operand(TensorFloat32, &[0], NoValue),
        }
    }

    fn op(&mut self, ty: OperationType, inputs: &[u32], outputs: &[u32]) {
        for &i in inputs {
            self.model.operands[i as usize].number_of_consumers += 1;
        }
        self.model.operations.push(Operation {
            operation_type: ty.raw(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        });
    }

    /// `n` outputs of unspecified extents: the first `sequences` of rank 3, the states rank 2.
    fn outputs(&mut self, n: usize, sequences: usize) -> Vec<u32> {
        (0..n)
            .map(|k| {
                let dims: &[u32] = if k < sequences { &[0, 0, 0] } else { &[0, 0] };
                self.operand(TensorFloat32, dims, ModelOutput)
            })
            .collect()
    }
}

fn driver() -> Driver {
    Driver::new(1).unwrap()
}

/// Supported, prepared and run.
fn assert_supported(model: &Model, what: &str) {
    let supported = driver()
        .supported_operations(model)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(supported.iter().all(|&s| s), "{what}: {supported:?}");
    execute(model.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// A malformed model is INVALID_ARGUMENT from `supported_operations` and `prepare_model`
/// when its parameters are known then; the BOOL flags of the bidirectional and LSTM forms
/// are read only when the operation runs, so there it is supported and every execution is
/// INVALID_ARGUMENT.
fn assert_invalid(model: Model, what: &str) {
    let d = driver();
    match d.supported_operations(&model) {
        Err(e) => {
            assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}");
            match d.prepare_model(model) {
                Err(e) => assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}"),
                Ok(_) => panic!("{what}: prepared"),
            }
        }
        Ok(s) => {
            assert_eq!(s, vec![true], "{what}");
            let e = execute(model).expect_err(what);
            assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}");
            assert!(!e.to_string().is_empty(), "{what}: no reason");
        }
    }
}

/// Prepares `model` and runs it once on zero inputs, each output in a pool of its own.
fn execute(model: Model) -> Result<(), HalError> {
    let prepared = driver().prepare_model(model.clone())?;
    let mut pools = Vec::new();
    let argument = |bytes: usize, pools: &mut Vec<Memory>| {
        let len = bytes.max(1) as u64;
        pools.push(Memory::shared(
            create_memfd("arg", &vec![0; bytes], len, true).unwrap(),
            len,
        ));
        RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index: pools.len() as u32 - 1,
                offset: 0,
                length: bytes as u32,
            },
            dimensions: vec![],
        }
    };
    let inputs = model
        .input_indexes
        .iter()
        .map(|&i| {
            let n: u32 = model.operands[i as usize].dimensions.iter().product();
            argument(4 * n as usize, &mut pools)
        })
        .collect();
    let outputs = model
        .output_indexes
        .iter()
        .map(|_| argument(4096, &mut pools))
        .collect();
    prepared.execute(&Request {
        inputs,
        outputs,
        pools,
    })?;
    Ok(())
}

/// BIDIRECTIONAL_SEQUENCE_RNN, time-major, 3 steps, batch 2, input 4, 3 forward and 5
/// backward units.
struct BiRnn {
    aux: Option<u32>,
    fw_aux: bool,
    bw_aux: bool,
    bw_input: u32,
    merge: bool,
    outputs: usize,
}

impl BiRnn {
    fn plain() -> Self {
        BiRnn {
            aux: None,
            fw_aux: false,
            bw_aux: false,
            bw_input: 4,
            merge: false,
            outputs: 2,
        }
    }

    fn model(&self) -> Model {
        let (t, b, i, fw, bw) = (3, 2, 4, 3, 5);
        let mut m = Builder::default();
        let x = m.input(&[t, b, i]);
        let fw_cell = [
            m.tensor(&[fw, i]),
            m.tensor(&[fw, fw]),
            m.tensor(&[fw]),
            m.tensor(&[b, fw]),
        ];
        let bw_cell = [
            m.tensor(&[bw, self.bw_input]),
            m.tensor(&[bw, bw]),
            m.tensor(&[bw]),
            m.tensor(&[b, bw]),
        ];
        let a = self.aux.unwrap_or(0);
        let aux_dims = [t, b, a];
        let aux = m.optional(self.aux.is_some().then_some(&aux_dims[..]));
        let fw_aux = m.optional(self.fw_aux.then_some(&[fw, a][..]));
        let bw_aux = m.optional(self.bw_aux.then_some(&[bw, a][..]));
        let act = m.constant(Int32, &1i32.to_le_bytes());
        let time_major = m.constant(Bool, &[1]);
        let merge = m.constant(Bool, &[u8::from(self.merge)]);
        let inputs: Vec<u32> = [x]
            .into_iter()
            .chain(fw_cell)
            .chain(bw_cell)
            .chain([aux, fw_aux, bw_aux, act, time_major, merge])
            .collect();
        let outputs = m.outputs(self.outputs, if self.merge { 1 } else { 2 });
        m.op(OperationType::BidirectionalSequenceRnn, &inputs, &outputs);
        m.model
    }
}

#[test]
fn bidirectional_rnn_forms_are_supported() {
    assert_supported(&BiRnn::plain().model(), "no linking");
    for outputs in [1, 3] {
        let merged = BiRnn {
            merge: true,
            outputs,
            ..BiRnn::plain()
        };
        assert_supported(&merged.model(), "merged");
    }
    let states = BiRnn {
        outputs: 4,
        ..BiRnn::plain()
    };
    assert_supported(&states.model(), "with final states");
    let cross = BiRnn {
        aux: Some(2),
        fw_aux: true,
        bw_aux: true,
        ..BiRnn::plain()
    };
    assert_supported(&cross.model(), "cross-linked auxiliary input");
    let parallel = BiRnn {
        aux: Some(6),
        bw_input: 6,
        ..BiRnn::plain()
    };
    assert_supported(&parallel.model(), "parallel-linked auxiliary input");
}

#[test]
fn bi37_bidirectional_rnn_malformed_groups_and_sizes() {
    let cases = [
        (
            BiRnn {
                merge: true,
                outputs: 2,
                ..BiRnn::plain()
            },
            "merged with a backward output",
        ),
        (
            BiRnn {
                outputs: 3,
                ..BiRnn::plain()
            },
            "unmerged with 3 outputs",
        ),
        (
            BiRnn {
                merge: true,
                outputs: 4,
                ..BiRnn::plain()
            },
            "merged with 4 outputs",
        ),
        (
            BiRnn {
                fw_aux: true,
                bw_aux: true,
                ..BiRnn::plain()
            },
            "auxiliary weights without an auxiliary input",
        ),
        (
            BiRnn {
                aux: Some(2),
                fw_aux: true,
                ..BiRnn::plain()
            },
            "auxiliary weights for one direction",
        ),
        (
            BiRnn {
                bw_input: 5,
                ..BiRnn::plain()
            },
            "backward weights of another input size",
        ),
        (
            BiRnn {
                aux: Some(6),
                ..BiRnn::plain()
            },
            "parallel linking with backward weights of the main input's size",
        ),
    ];
    for (case, what) in cases {
        assert_invalid(case.model(), what);
    }
}

/// UNIDIRECTIONAL_SEQUENCE_LSTM, batch-major, 2 steps, batch 1, input 3, 4 units; the
/// optional tensors present as listed (LSTM's input numbering, 1..=17, and 24..=27).
fn uni_lstm(present: &[usize], outputs: usize, output_state: u32) -> Model {
    let (t, b, i, u) = (2, 1, 3, 4);
    let mut m = Builder::default();
    let x = m.input(&[b, t, i]);
    let mut inputs = vec![x];
    for k in 1..=17 {
        let dims: Vec<u32> = match k {
            1..=4 => vec![u, i],
            5..=8 => vec![u, output_state],
            16 => vec![output_state, u],
            17 => vec![output_state],
            _ => vec![u],
        };
        let required = matches!(k, 2..=4 | 6..=8 | 13..=15);
        let given = required || present.contains(&k);
        inputs.push(m.optional(given.then_some(&dims[..])));
    }
    inputs.push(m.tensor(&[b, output_state]));
    inputs.push(m.tensor(&[b, u]));
    inputs.push(m.constant(Int32, &4i32.to_le_bytes()));
    inputs.push(m.constant(Float32, &0f32.to_le_bytes()));
    inputs.push(m.constant(Float32, &0f32.to_le_bytes()));
    inputs.push(m.constant(Bool, &[0]));
    for k in 24..=27 {
        inputs.push(m.optional(present.contains(&k).then_some(&[u][..])));
    }
    let outs = m.outputs(outputs, 1);
    m.op(OperationType::UnidirectionalSequenceLstm, &inputs, &outs);
    m.model
}

#[test]
fn unidirectional_lstm_forms_are_supported() {
    let full = [1, 5, 9, 10, 11, 12];
    assert_supported(&uni_lstm(&full, 1, 4), "peephole");
    assert_supported(
        &uni_lstm(&[10, 11], 3, 4),
        "CIFG peephole with final states",
    );
    assert_supported(&uni_lstm(&[1, 5, 12, 16, 17], 1, 2), "projection");
    assert_supported(
        &uni_lstm(&[25, 26, 27], 1, 4),
        "CIFG with layer normalisation",
    );
    assert_supported(
        &uni_lstm(&[1, 5, 12, 24, 25, 26, 27], 3, 4),
        "layer normalisation",
    );
}

#[test]
fn bi36_unidirectional_lstm_partial_optional_groups() {
    assert_invalid(
        uni_lstm(&[1, 12], 1, 4),
        "input gate without its recurrent weights",
    );
    assert_invalid(
        uni_lstm(&[1, 5, 12, 9, 10], 1, 4),
        "peephole without cell_to_output",
    );
    assert_invalid(uni_lstm(&[17], 1, 4), "projection bias without projection");
    assert_invalid(
        uni_lstm(&[1, 5, 12, 25, 26, 27], 1, 4),
        "layer norm without the input gate's",
    );
    assert_invalid(
        uni_lstm(&[24, 25, 26, 27], 1, 4),
        "input layer norm with CIFG",
    );
    assert_invalid(uni_lstm(&[], 2, 4), "2 outputs");
}

#[test]
fn bi37_unidirectional_lstm_inconsistent_sizes() {
    // Without projection the output state must be as wide as the cell.
    assert_invalid(
        uni_lstm(&[], 1, 3),
        "output size 3 without projection over 4 units",
    );
}

/// UNIDIRECTIONAL_SEQUENCE_RNN (its time_major is INT32, so it is checked with the model):
/// batch-major input [2, 3, 4], `units` units, weights of `weight_cols` columns.
fn uni_rnn(units: u32, weight_cols: u32, outputs: usize) -> Model {
    let mut m = Builder::default();
    let x = m.input(&[2, 3, 4]);
    let w = m.tensor(&[units, weight_cols]);
    let r = m.tensor(&[units, units]);
    let b = m.tensor(&[units]);
    let h = m.tensor(&[2, units]);
    let act = m.constant(Int32, &0i32.to_le_bytes());
    let time_major = m.constant(Int32, &0i32.to_le_bytes());
    let outs = m.outputs(outputs, 1);
    m.op(
        OperationType::UnidirectionalSequenceRnn,
        &[x, w, r, b, h, act, time_major],
        &outs,
    );
    m.model
}

#[test]
fn bi37_unidirectional_rnn_sizes_and_outputs() {
    assert_supported(&uni_rnn(5, 4, 1), "RNN");
    assert_supported(&uni_rnn(5, 4, 2), "RNN with its final state");
    let d = driver();
    for (m, what) in [
        (uni_rnn(5, 3, 1), "weights of another input size"),
        (uni_rnn(5, 4, 3), "3 outputs"),
    ] {
        let e = d.supported_operations(&m).expect_err(what);
        assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}");
    }
}

/// QUANTIZED_16BIT_LSTM with its fixed quantization: quant8 input and previous output (1/128,
/// 128), eight weight matrices (scale 0.004, zero point 100; the recurrent ones
/// `[units, recurrent_cols]`), int32 biases of `bias_scale`, the 16-bit cell state of
/// `cell_scale`. The weights are constants, so their shapes are checked with the model.
fn qlstm16(recurrent_cols: u32, bias_scale: f32, cell_scale: f32) -> Model {
    let (batch, input_size, units) = (2u32, 3u32, 4u32);
    let mut m = Builder::default();
    let quant = |m: &mut Builder, i: u32, scale: f32, zero_point: i32| {
        let o = &mut m.model.operands[i as usize];
        o.scale = scale;
        o.zero_point = zero_point;
        i
    };
    let x = m.operand(
        OperandType::TensorQuant8Asymm,
        &[batch, input_size],
        ModelInput,
    );
    let x = quant(&mut m, x, 1.0 / 128.0, 128);
    let mut weights = Vec::new();
    for k in 0..8 {
        let cols = if k < 4 { input_size } else { recurrent_cols };
        let w = m.constant_tensor(
            OperandType::TensorQuant8Asymm,
            &[units, cols],
            &vec![100 + k as u8; (units * cols) as usize],
        );
        weights.push(quant(&mut m, w, 0.004, 100));
    }
    let mut biases = Vec::new();
    for _ in 0..4 {
        let b = m.constant_tensor(
            OperandType::TensorInt32,
            &[units],
            &vec![0; 4 * units as usize],
        );
        biases.push(quant(&mut m, b, bias_scale, 0));
    }
    let c = m.operand(OperandType::TensorQuant16Symm, &[batch, units], ModelInput);
    let c = quant(&mut m, c, cell_scale, 0);
    let h = m.operand(OperandType::TensorQuant8Asymm, &[batch, units], ModelInput);
    let h = quant(&mut m, h, 1.0 / 128.0, 128);
    let c_out = m.operand(OperandType::TensorQuant16Symm, &[0, 0], ModelOutput);
    let c_out = quant(&mut m, c_out, 1.0 / 2048.0, 0);
    let out = m.operand(OperandType::TensorQuant8Asymm, &[0, 0], ModelOutput);
    let out = quant(&mut m, out, 1.0 / 128.0, 128);
    let inputs: Vec<u32> = [vec![x], weights, biases, vec![c, h]].concat();
    m.op(OperationType::Quantized16bitLstm, &inputs, &[c_out, out]);
    m.model
}

#[test]
fn bi37_quantized_16bit_lstm_scales_and_sizes() {
    let bias_scale = 0.004 / 128.0;
    assert_supported(
        &qlstm16(4, bias_scale, 1.0 / 2048.0),
        "QUANTIZED_16BIT_LSTM",
    );
    for (m, what) in [
        (
            qlstm16(3, bias_scale, 1.0 / 2048.0),
            "recurrent weights of another width",
        ),
        (
            qlstm16(4, bias_scale * 2.0, 1.0 / 2048.0),
            "biases of another scale",
        ),
        (
            qlstm16(4, bias_scale, 1.0 / 1024.0),
            "a cell state of 5 integer bits",
        ),
    ] {
        assert_invalid(m, what);
    }
}

/// QUANTIZED_LSTM (NNAPI 1.3), batch 2, input 3, 4 units: which optional groups it has
/// (`input_gate`, `peephole`, `layer_norm`: the input gate's members of the last two follow
/// `input_gate`; a `false` in `members` omits one member of a group on its own), projection
/// to 3 outputs or none, and the scales and scalars the rules constrain.
#[derive(Clone)]
struct QLstm {
    input_gate: bool,
    peephole: bool,
    layer_norm: bool,
    projection: bool,
    projection_bias: bool,
    /// Inputs 1–23 given (when their group is): clearing one drops that member alone.
    members: [bool; 24],
    cell_scale: f32,
    intermediate: f32,
    hidden_zero_point: i32,
    hidden_scale: f32,
    cell_clip: f32,
}

impl QLstm {
    fn plain() -> Self {
        QLstm {
            input_gate: true,
            peephole: true,
            layer_norm: true,
            projection: true,
            projection_bias: true,
            members: [true; 24],
            cell_scale: 1.0 / 32768.0,
            intermediate: 0.007,
            hidden_zero_point: 0,
            hidden_scale: 0.007,
            cell_clip: 0.0,
        }
    }

    fn model(&self) -> Model {
        use OperandType::{
            TensorInt32, TensorQuant16Symm, TensorQuant8AsymmSigned, TensorQuant8Symm,
        };
        let (batch, input_size, units) = (2u32, 3u32, 4u32);
        let output_size = if self.projection { 3 } else { units };
        let mut m = Builder::default();
        let quant = |m: &mut Builder, i: u32, scale: f32| {
            m.model.operands[i as usize].scale = scale;
            i
        };
        let x = m.operand(TensorQuant8AsymmSigned, &[batch, input_size], ModelInput);
        let x = quant(&mut m, x, 1.0 / 128.0);
        let mut inputs = vec![x];
        // Input k (1..=23): a constant of its type and shape, or omitted.
        for k in 1..=23usize {
            let group = match k {
                1 | 5 | 12 => self.input_gate,
                9 => self.peephole && self.input_gate,
                10 | 11 => self.peephole,
                16 => self.projection,
                17 => self.projection_bias,
                20 => self.layer_norm && self.input_gate,
                21..=23 => self.layer_norm,
                _ => true,
            };
            let (ty, dims, elem, scale): (_, Vec<u32>, usize, f32) = match k {
                1..=4 => (TensorQuant8Symm, vec![units, input_size], 1, 0.01),
                5..=8 => (TensorQuant8Symm, vec![units, output_size], 1, 0.01),
                9..=11 => (TensorQuant16Symm, vec![units], 2, 1.0),
                12..=15 => (TensorInt32, vec![units], 4, 0.0),
                16 => (TensorQuant8Symm, vec![output_size, units], 1, 0.004),
                17 => (TensorInt32, vec![output_size], 4, 0.0),
                18 => (
                    TensorQuant8AsymmSigned,
                    vec![batch, output_size],
                    1,
                    1.0 / 128.0,
                ),
                19 => (TensorQuant16Symm, vec![batch, units], 2, self.cell_scale),
                _ => (TensorQuant16Symm, vec![units], 2, 1.0 / 32768.0),
            };
            let i = if k == 18 || k == 19 {
                m.operand(ty, &dims, ModelInput)
            } else if group && self.members[k] {
                let n: u32 = dims.iter().product();
                m.constant_tensor(ty, &dims, &vec![1; elem * n as usize])
            } else {
                m.operand(ty, &[0], NoValue)
            };
            inputs.push(quant(&mut m, i, scale));
        }
        let f = |m: &mut Builder, v: f32| m.constant(Float32, &v.to_le_bytes());
        inputs.push(f(&mut m, self.cell_clip));
        inputs.push(f(&mut m, 0.0));
        for _ in 0..4 {
            inputs.push(f(&mut m, self.intermediate));
        }
        inputs.push(m.constant(Int32, &self.hidden_zero_point.to_le_bytes()));
        inputs.push(f(&mut m, self.hidden_scale));
        let state = m.operand(TensorQuant8AsymmSigned, &[0, 0], ModelOutput);
        let state = quant(&mut m, state, 1.0 / 128.0);
        let cell = m.operand(TensorQuant16Symm, &[0, 0], ModelOutput);
        let cell = quant(&mut m, cell, self.cell_scale);
        let out = m.operand(TensorQuant8AsymmSigned, &[0, 0], ModelOutput);
        let out = quant(&mut m, out, 1.0 / 128.0);
        m.op(OperationType::QuantizedLstm, &inputs, &[state, cell, out]);
        m.model
    }
}

#[test]
fn quantized_lstm_every_group_combination_is_supported_and_runs() {
    for bits in 0..32u32 {
        let c = QLstm {
            input_gate: bits & 1 != 0,
            peephole: bits & 2 != 0,
            layer_norm: bits & 4 != 0,
            projection: bits & 8 != 0,
            projection_bias: bits & 24 == 24,
            ..QLstm::plain()
        };
        assert_supported(&c.model(), &format!("QUANTIZED_LSTM groups {bits:05b}"));
    }
}

#[test]
fn bi40_quantized_lstm_optional_groups_that_do_not_agree() {
    let without = |k: usize| {
        let mut c = QLstm::plain();
        c.members[k] = false;
        c
    };
    for (c, what) in [
        (without(5), "input gate weights without recurrent_to_input"),
        (without(12), "input gate weights without its bias"),
        (
            without(9),
            "peephole without cell_to_input (input gate present)",
        ),
        (without(11), "peephole without cell_to_output"),
        (without(20), "layer norm without the input gate's weights"),
        (without(22), "layer norm without the cell gate's weights"),
        (
            QLstm {
                projection: false,
                projection_bias: true,
                ..QLstm::plain()
            },
            "a projection bias without projection weights",
        ),
        (
            QLstm {
                input_gate: false,
                ..QLstm::plain()
            },
            "(control) CIFG with every other group",
        ),
    ] {
        if what.starts_with("(control)") {
            assert_supported(&c.model(), what);
        } else {
            assert_invalid(c.model(), what);
        }
    }
}

#[test]
fn bi38_quantized_lstm_scales_and_scalars() {
    for (c, what) in [
        (
            QLstm {
                cell_scale: 1.0 / 1000.0,
                ..QLstm::plain()
            },
            "a cell state scale that is no power of two",
        ),
        (
            QLstm {
                cell_scale: 1.0 / 256.0,
                ..QLstm::plain()
            },
            "a cell state of 2^-8",
        ),
        (
            QLstm {
                cell_scale: 2f32.powi(-16),
                ..QLstm::plain()
            },
            "a cell state of 2^-16",
        ),
        (
            QLstm {
                intermediate: 0.0,
                ..QLstm::plain()
            },
            "a zero intermediate scale",
        ),
        (
            QLstm {
                hidden_scale: 0.0,
                ..QLstm::plain()
            },
            "a zero hidden state scale",
        ),
        (
            QLstm {
                hidden_zero_point: 128,
                ..QLstm::plain()
            },
            "a hidden zero point beyond int8",
        ),
        (
            QLstm {
                cell_clip: -1.0,
                ..QLstm::plain()
            },
            "a negative cell clip",
        ),
    ] {
        assert_invalid(c.model(), what);
    }
    assert_supported(
        &QLstm {
            cell_scale: 2f32.powi(-9),
            cell_clip: 0.5,
            ..QLstm::plain()
        }
        .model(),
        "a cell state of 2^-9 with a clip",
    );
}
