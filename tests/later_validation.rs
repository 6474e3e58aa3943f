//! Validation rules of the operations NNAPI 1.1–1.3 added, as the platform's validator has
//! them (docs/hal-contract.md, "Later NNAPI versions"): IF and WHILE against the subgraphs
//! they name, SPLIT's outputs, per-channel convolution filters, the quantized MUL output
//! scale, the optional RESIZE flags, the rank limits. Each valid model is answered `false` (never
//! INVALID_ARGUMENT); each malformed one is INVALID_ARGUMENT from both
//! `supported_operations` and `prepare_model`.

use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::{ConstantCopy, ModelInput, ModelOutput};
use OperandType::{
    Bool, Int32, TensorBool8, TensorFloat16, TensorFloat32, TensorInt32, TensorQuant8Asymm,
    TensorQuant8AsymmSigned, TensorQuant8SymmPerChannel,
};

/// A model under construction: operands, constants and the main graph's lists.
#[derive(Default)]
struct Builder {
    model: Model,
}

impl Builder {
    fn operand(&mut self, ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> u32 {
        let mut o = Operand::new(ty, dims, lifetime);
        if matches!(ty, TensorQuant8Asymm | TensorQuant8AsymmSigned) {
            o.scale = 0.5;
        }
        self.model.operands.push(o);
        let index = self.model.operands.len() as u32 - 1;
        match lifetime {
            ModelInput => self.model.input_indexes.push(index),
            ModelOutput => self.model.output_indexes.push(index),
            _ => {}
        }
        index
    }

    fn constant(&mut self, ty: OperandType, dims: &[u32], bytes: &[u8]) -> u32 {
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

    fn int32(&mut self, value: i32) -> u32 {
        self.constant(Int32, &[], &value.to_le_bytes())
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
}

/// A subgraph of `inputs` float32 [4] inputs and the given outputs: each output is ABS of an
/// input, or for a TENSOR_BOOL8 output LESS of an input with itself.
fn subgraph(inputs: usize, outputs: &[(OperandType, &[u32])]) -> Subgraph {
    // A condition compares its inputs into a TENSOR_BOOL8 [1]: LESS broadcasts them, so
    // their extent is left to run time (a [4] input would give a [4] result).
    let condition = outputs.iter().any(|&(ty, _)| ty == TensorBool8);
    let input_dims: &[u32] = if condition { &[0] } else { &[4] };
    let mut operands: Vec<Operand> = (0..inputs)
        .map(|_| Operand::new(TensorFloat32, input_dims, ModelInput))
        .collect();
    let mut operations = Vec::new();
    let mut output_indexes = Vec::new();
    for (k, &(ty, dims)) in outputs.iter().enumerate() {
        operands.push(Operand::new(ty, dims, ModelOutput));
        let out = operands.len() as u32 - 1;
        let src = (k % inputs) as u32;
        let (op, reads) = if ty == TensorBool8 {
            (OperationType::Less, vec![src, src])
        } else {
            (OperationType::Abs, vec![src])
        };
        operands[src as usize].number_of_consumers += reads.len() as u32;
        operations.push(Operation {
            operation_type: op.raw(),
            inputs: reads,
            outputs: vec![out],
        });
        output_indexes.push(out);
    }
    Subgraph {
        operands,
        operations,
        input_indexes: (0..inputs as u32).collect(),
        output_indexes,
    }
}

fn subgraph_operand(b: &mut Builder, index: u32) -> u32 {
    let s = b.operand(OperandType::Subgraph, &[], OperandLifeTime::Subgraph);
    b.model.operands[s as usize].location.offset = index;
    s
}

/// IF(cond, then, else, x) -> y on float32 [4]: both branches ABS.
fn if_model() -> Model {
    let mut b = Builder::default();
    let cond = b.operand(TensorBool8, &[1], ModelInput);
    let then = subgraph_operand(&mut b, 0);
    let otherwise = subgraph_operand(&mut b, 1);
    let x = b.operand(TensorFloat32, &[4], ModelInput);
    let y = b.operand(TensorFloat32, &[4], ModelOutput);
    b.op(OperationType::If, &[cond, then, otherwise, x], &[y]);
    let branch = subgraph(1, &[(TensorFloat32, &[4])]);
    b.model.referenced = vec![branch.clone(), branch];
    b.model
}

/// WHILE(cond, body, x) -> y on float32 [4]: the condition gives TENSOR_BOOL8 [1], the body
/// ABS.
fn while_model() -> Model {
    let mut b = Builder::default();
    let cond = subgraph_operand(&mut b, 0);
    let body = subgraph_operand(&mut b, 1);
    let x = b.operand(TensorFloat32, &[4], ModelInput);
    let y = b.operand(TensorFloat32, &[4], ModelOutput);
    b.op(OperationType::While, &[cond, body, x], &[y]);
    b.model.referenced = vec![
        subgraph(1, &[(TensorBool8, &[1])]),
        subgraph(1, &[(TensorFloat32, &[4])]),
    ];
    b.model
}

fn driver() -> Driver {
    Driver::new(1).unwrap()
}

fn assert_valid(model: &Model, what: &str) {
    driver()
        .supported_operations(model)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

fn assert_invalid(model: Model, what: &str) {
    let d = driver();
    match d.supported_operations(&model) {
        Err(e) => assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}"),
        Ok(s) => panic!("{what}: supported_operations answered {s:?}"),
    }
    match d.prepare_model(model) {
        Err(e) => assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}"),
        Ok(_) => panic!("{what}: prepared"),
    }
}

#[test]
fn valid_control_flow_is_valid_and_runs() {
    for (model, what) in [(if_model(), "IF"), (while_model(), "WHILE")] {
        let supported = driver()
            .supported_operations(&model)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(supported, vec![true], "{what}");
        driver()
            .prepare_model(model)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

#[test]
fn bi12_if_operands_must_match_its_branches() {
    let mut m = if_model();
    m.operands[0].operand_type = TensorInt32.raw();
    assert_invalid(m, "IF condition of TENSOR_INT32");

    let mut m = if_model();
    m.operands[0].dimensions = vec![2];
    assert_invalid(m, "IF condition of shape [2]");

    let mut m = if_model();
    m.referenced[1].operands[0].operand_type = TensorFloat16.raw();
    assert_invalid(m, "else branch taking float16 for a float32 input");

    let mut m = if_model();
    m.referenced[0].operands[1].dimensions = vec![5];
    assert_invalid(m, "then branch giving [5] for a [4] output");

    let mut m = if_model();
    m.operands[1].operand_type = TensorFloat32.raw();
    m.operands[1].lifetime = ModelInput.raw();
    m.operands[1].location = DataLocation::default();
    m.input_indexes.push(1);
    assert_invalid(m, "then branch operand that is not a SUBGRAPH");
}

#[test]
fn bi21_if_with_an_input_its_branches_do_not_take_is_invalid() {
    let mut m = if_model();
    let extra = m.operands.len() as u32;
    let mut o = Operand::new(TensorFloat32, &[4], ModelInput);
    o.number_of_consumers = 1;
    m.operands.push(o);
    m.input_indexes.push(extra);
    m.operations[0].inputs.push(extra);
    assert_invalid(m, "IF with one input more than its branches");
}

#[test]
fn bi12_while_operands_must_match_its_condition_and_body() {
    let mut m = while_model();
    m.referenced[0].operands[1].dimensions = vec![2];
    assert_invalid(m, "WHILE condition giving TENSOR_BOOL8 [2]");

    let mut m = while_model();
    m.referenced[1].operands[1].operand_type = TensorFloat16.raw();
    m.referenced[1].operands[0].operand_type = TensorFloat16.raw();
    assert_invalid(m, "WHILE body on float16 for a float32 loop variable");

    let mut m = while_model();
    m.referenced[1].operands[1].dimensions = vec![5];
    assert_invalid(m, "WHILE body giving [5] for a [4] loop variable");
}

fn split_model(output_types: &[OperandType]) -> Model {
    let mut b = Builder::default();
    let x = b.operand(TensorFloat32, &[2 * output_types.len() as u32], ModelInput);
    let axis = b.int32(0);
    let n = b.int32(output_types.len() as i32);
    let outs: Vec<u32> = output_types
        .iter()
        .map(|&t| b.operand(t, &[2], ModelOutput))
        .collect();
    b.op(OperationType::Split, &[x, axis, n], &outs);
    b.model
}

#[test]
fn bi12_split_outputs_all_take_the_input_type() {
    // Valid, and run (the transform family).
    assert_eq!(
        driver()
            .supported_operations(&split_model(&[TensorFloat32; 3]))
            .unwrap(),
        vec![true],
        "SPLIT into 3"
    );
    assert_invalid(
        split_model(&[TensorFloat32, TensorFloat16, TensorFloat32]),
        "SPLIT with a float16 output of a float32 input",
    );
}

/// CONV_2D (implicit padding) of a signed quant8 [1, 2, 2, 1] input with a per-channel
/// [1, 1, 1, 1] filter quantized along `channel_dim`.
fn per_channel_conv(op: OperationType, channel_dim: u32) -> Model {
    let mut b = Builder::default();
    let x = b.operand(TensorQuant8AsymmSigned, &[1, 2, 2, 1], ModelInput);
    let w = b.constant(TensorQuant8SymmPerChannel, &[1, 1, 1, 1], &[1]);
    b.model.operands[w as usize].channel_quant = Some(ChannelQuant {
        scales: vec![0.5],
        channel_dim,
    });
    let bias = b.constant(TensorInt32, &[1], &0i32.to_le_bytes());
    b.model.operands[bias as usize].scale = 0.25;
    let mut inputs = vec![x, w, bias, b.int32(1), b.int32(1), b.int32(1)];
    if op == OperationType::DepthwiseConv2d {
        inputs.push(b.int32(1));
    }
    inputs.push(b.int32(0));
    let y = b.operand(TensorQuant8AsymmSigned, &[1, 2, 2, 1], ModelOutput);
    b.op(op, &inputs, &[y]);
    b.model
}

#[test]
fn bi38_per_channel_filter_is_quantized_along_output_channels() {
    // Valid per-channel convolutions run (NNAPI 1.2 filters on the quant8 kernels).
    let supported = |model: &Model, what: &str| {
        let s = driver()
            .supported_operations(model)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(s, vec![true], "{what}");
    };
    supported(
        &per_channel_conv(OperationType::Conv2d, 0),
        "CONV_2D per-channel along dimension 0",
    );
    assert_invalid(
        per_channel_conv(OperationType::Conv2d, 3),
        "CONV_2D per-channel along dimension 3",
    );
    supported(
        &per_channel_conv(OperationType::DepthwiseConv2d, 3),
        "DEPTHWISE_CONV_2D per-channel along dimension 3",
    );
    assert_invalid(
        per_channel_conv(OperationType::DepthwiseConv2d, 0),
        "DEPTHWISE_CONV_2D per-channel along dimension 0",
    );
}

fn quant_mul(ty: OperandType, output_scale: f32) -> Model {
    let mut b = Builder::default();
    let x = b.operand(ty, &[4], ModelInput);
    let y = b.operand(ty, &[4], ModelInput);
    let act = b.int32(0);
    let out = b.operand(ty, &[4], ModelOutput);
    b.model.operands[out as usize].scale = output_scale;
    b.op(OperationType::Mul, &[x, y, act], &[out]);
    b.model
}

#[test]
fn bi38_quantized_mul_output_scale_must_exceed_the_product() {
    for ty in [TensorQuant8Asymm, TensorQuant8AsymmSigned] {
        // Input scales 0.5 × 0.5.
        driver()
            .supported_operations(&quant_mul(ty, 0.5))
            .unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_invalid(quant_mul(ty, 0.25), &format!("{ty} MUL output scale 0.25"));
        assert_invalid(
            quant_mul(ty, 0.125),
            &format!("{ty} MUL output scale 0.125"),
        );
    }
}

#[test]
fn resize_with_align_corners_but_no_half_pixel_centers_is_valid() {
    for op in [
        OperationType::ResizeBilinear,
        OperationType::ResizeNearestNeighbor,
    ] {
        let mut b = Builder::default();
        let x = b.operand(TensorFloat32, &[1, 2, 2, 1], ModelInput);
        let (h, w) = (b.int32(4), b.int32(4));
        let layout = b.constant(Bool, &[], &[0]);
        let align = b.constant(Bool, &[], &[1]);
        let y = b.operand(TensorFloat32, &[1, 4, 4, 1], ModelOutput);
        b.op(op, &[x, h, w, layout, align], &[y]);
        driver()
            .supported_operations(&b.model)
            .unwrap_or_else(|e| panic!("{op}: {e}"));
    }
}

fn transpose(dims: &[u32]) -> Model {
    let mut b = Builder::default();
    let x = b.operand(TensorFloat16, dims, ModelInput);
    let perm = b.operand(TensorInt32, &[dims.len() as u32], ModelInput);
    let y = b.operand(TensorFloat16, &vec![0; dims.len()], ModelOutput);
    b.op(OperationType::Transpose, &[x, perm], &[y]);
    b.model
}

fn sub(a: &[u32], c: &[u32]) -> Model {
    let mut b = Builder::default();
    let x = b.operand(TensorFloat16, a, ModelInput);
    let y = b.operand(TensorFloat16, c, ModelInput);
    let act = b.int32(0);
    let out = b.operand(TensorFloat16, &[0; 5], ModelOutput);
    b.op(OperationType::Sub, &[x, y, act], &[out]);
    b.model
}

#[test]
fn bi37_later_operations_refuse_a_known_rank_above_4() {
    // (Float16 runs as its float32 image: the valid ones are answered, not refused.)
    assert_valid(&transpose(&[1, 2, 2, 1]), "TRANSPOSE of rank 4");
    assert_invalid(transpose(&[1, 1, 2, 2, 1]), "TRANSPOSE of rank 5");
    assert_invalid(sub(&[1, 1, 1, 1, 2], &[2]), "SUB of rank 5 and 1");
    // The broadcasting arithmetic checks ranks only once both are known.
    assert_valid(&sub(&[1, 1, 1, 1, 2], &[]), "SUB of rank 5 and unknown");
}
