//! The one way host code assembles a [`Model`]: operands, inline constants (CONSTANT_COPY in
//! `operand_values`, each 4-byte aligned as the framework lays them out), operations,
//! the input/output lists and the consumer counts the HAL requires (types.hal 1.0 `Operand`:
//! `numberOfConsumers` counts every appearance in an operation's inputs).
//!
//! The golden-vector loader, the operation probes and the model importers all build through
//! it, so they agree on alignment, lifetimes and consumer counts. [`ModelBuilder::infer`] gives
//! the output dimensions of an operation from its inputs with [`crate::shape::infer`], so an
//! importer never computes NNAPI shapes itself.

use crate::shape::{self, Arg, InferError};
use crate::types::{
    DataLocation, Model, Operand, OperandLifeTime, OperandType, Operation, OperationType,
};

/// Rounds up to the 4-byte alignment the framework and VTS give every constant and argument.
pub fn align4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Appends `bytes` to a constant store at the next 4-byte boundary and returns where they are
/// (pool index 0: `operand_values`, or the single constant pool of CONSTANT_REFERENCE models).
pub fn append_constant(store: &mut Vec<u8>, bytes: &[u8]) -> DataLocation {
    store.resize(align4(store.len()), 0);
    let offset = store.len();
    store.extend_from_slice(bytes);
    DataLocation {
        pool_index: 0,
        offset: offset as u32,
        length: bytes.len() as u32,
    }
}

/// Sets every operand's `number_of_consumers` to its number of appearances in operation inputs,
/// duplicates included (ADD(x, x) consumes x twice), as the HAL defines it. Out-of-range indexes
/// are ignored so this can run on deliberately broken models.
pub fn count_consumers(model: &mut Model) {
    count_consumers_in(&mut model.operands, &model.operations);
}

/// [`count_consumers`] for one graph's operands and operations (a main graph or a referenced
/// subgraph; the AIDL interface carries no counts, so its conversion derives them here).
pub fn count_consumers_in(operands: &mut [Operand], operations: &[Operation]) {
    for operand in operands.iter_mut() {
        operand.number_of_consumers = 0;
    }
    for operation in operations {
        for &i in &operation.inputs {
            if let Some(operand) = operands.get_mut(i as usize) {
                operand.number_of_consumers = operand.number_of_consumers.saturating_add(1);
            }
        }
    }
}

/// Builds a model operand by operand; [`ModelBuilder::finish`] counts the consumers.
#[derive(Default)]
pub struct ModelBuilder {
    model: Model,
}

impl ModelBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The model so far (operands, operations, constants).
    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn operand_at(&self, index: u32) -> &Operand {
        &self.model.operands[index as usize]
    }

    pub fn operand_mut(&mut self, index: u32) -> &mut Operand {
        &mut self.model.operands[index as usize]
    }

    /// Adds `operand` as given and returns its index.
    pub fn push(&mut self, operand: Operand) -> u32 {
        self.model.operands.push(operand);
        (self.model.operands.len() - 1) as u32
    }

    pub fn operand(&mut self, ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> u32 {
        self.push(Operand::new(ty, dims, lifetime))
    }

    /// A temporary with quantization parameters (ignored by float types).
    pub fn temporary(&mut self, ty: OperandType, dims: &[u32], scale: f32, zero_point: i32) -> u32 {
        let mut operand = Operand::new(ty, dims, OperandLifeTime::TemporaryVariable);
        operand.scale = scale;
        operand.zero_point = zero_point;
        self.push(operand)
    }

    /// Appends `operand` to the model inputs (its lifetime becomes MODEL_INPUT).
    pub fn mark_input(&mut self, index: u32) {
        self.model.operands[index as usize].lifetime = OperandLifeTime::ModelInput.raw();
        self.model.input_indexes.push(index);
    }

    /// Appends `operand` to the model outputs (its lifetime becomes MODEL_OUTPUT).
    pub fn mark_output(&mut self, index: u32) {
        self.model.operands[index as usize].lifetime = OperandLifeTime::ModelOutput.raw();
        self.model.output_indexes.push(index);
    }

    pub fn input(&mut self, ty: OperandType, dims: &[u32]) -> u32 {
        let i = self.operand(ty, dims, OperandLifeTime::ModelInput);
        self.model.input_indexes.push(i);
        i
    }

    pub fn output(&mut self, ty: OperandType, dims: &[u32]) -> u32 {
        let i = self.operand(ty, dims, OperandLifeTime::ModelOutput);
        self.model.output_indexes.push(i);
        i
    }

    /// An omitted optional input.
    pub fn no_value(&mut self) -> u32 {
        self.operand(OperandType::TensorFloat32, &[0], OperandLifeTime::NoValue)
    }

    /// A CONSTANT_COPY operand holding `bytes`.
    pub fn constant(&mut self, ty: OperandType, dims: &[u32], bytes: &[u8]) -> u32 {
        self.constant_operand(Operand::new(ty, dims, OperandLifeTime::ConstantCopy), bytes)
    }

    /// `operand` (its type, dimensions and quantization) made a CONSTANT_COPY holding `bytes`.
    pub fn constant_operand(&mut self, mut operand: Operand, bytes: &[u8]) -> u32 {
        operand.lifetime = OperandLifeTime::ConstantCopy.raw();
        operand.location = append_constant(&mut self.model.operand_values, bytes);
        self.push(operand)
    }

    pub fn int(&mut self, v: i32) -> u32 {
        self.constant(OperandType::Int32, &[], &v.to_le_bytes())
    }

    pub fn float(&mut self, v: f32) -> u32 {
        self.constant(OperandType::Float32, &[], &v.to_le_bytes())
    }

    /// A TENSOR_FLOAT32 constant.
    pub fn f32_tensor(&mut self, dims: &[u32], values: &[f32]) -> u32 {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(OperandType::TensorFloat32, dims, &bytes)
    }

    /// A TENSOR_INT32 constant with `scale` (the bias of a quantized operation; 0 otherwise).
    pub fn i32_tensor(&mut self, dims: &[u32], values: &[i32], scale: f32) -> u32 {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut operand = Operand::new(
            OperandType::TensorInt32,
            dims,
            OperandLifeTime::ConstantCopy,
        );
        operand.scale = scale;
        self.constant_operand(operand, &bytes)
    }

    /// A TENSOR_QUANT8_ASYMM constant.
    pub fn u8_tensor(&mut self, dims: &[u32], values: &[u8], scale: f32, zero_point: i32) -> u32 {
        let mut operand = Operand::new(
            OperandType::TensorQuant8Asymm,
            dims,
            OperandLifeTime::ConstantCopy,
        );
        operand.scale = scale;
        operand.zero_point = zero_point;
        self.constant_operand(operand, values)
    }

    /// Overwrites the bytes of a CONSTANT_COPY operand with as many new ones (a fused
    /// activation changing an operation's activation scalar).
    pub fn rewrite_constant(&mut self, index: u32, bytes: &[u8]) {
        let location = self.model.operands[index as usize].location;
        assert_eq!(location.length as usize, bytes.len(), "same size");
        let start = location.offset as usize;
        self.model.operand_values[start..start + bytes.len()].copy_from_slice(bytes);
    }

    /// Appends an operation (consumer counts are settled by [`ModelBuilder::finish`]).
    pub fn operation(&mut self, ty: OperationType, inputs: &[u32], outputs: &[u32]) -> usize {
        self.model.operations.push(Operation {
            operation_type: ty.raw(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        });
        self.model.operations.len() - 1
    }

    /// The output dimensions `ty` gives for these inputs (constants read from the store), as
    /// validation and the executor compute them.
    pub fn infer(&self, ty: OperationType, inputs: &[u32]) -> Result<Vec<Vec<u32>>, String> {
        let model = &self.model;
        let args: Vec<Option<Arg>> = inputs
            .iter()
            .map(|&i| {
                let o = &model.operands[i as usize];
                let value = (o.lifetime == OperandLifeTime::ConstantCopy.raw()).then(|| {
                    let start = o.location.offset as usize;
                    &model.operand_values[start..start + o.location.length as usize]
                });
                if o.lifetime == OperandLifeTime::NoValue.raw() {
                    return None;
                }
                Some(Arg {
                    ty: OperandType::from_raw(o.operand_type)?,
                    dims: &o.dimensions,
                    scale: o.scale,
                    zero_point: o.zero_point,
                    value,
                })
            })
            .collect();
        match shape::infer(ty, &args) {
            Ok(inferred) => Ok(inferred.outputs),
            Err(InferError::Invalid(why)) => Err(why),
            Err(InferError::Unknown) => Err("output dimensions not known statically".into()),
        }
    }

    /// The finished model, consumer counts set.
    pub fn finish(mut self) -> Model {
        count_consumers(&mut self.model);
        self.model
    }
}

/// How a graph edge of an imported model relates to the NNAPI operand behind it: NNAPI 1.0
/// images are NHWC, while ONNX (and CoreML) speak NCHW; the runner converts on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EdgeLayout {
    /// The operand holds the elements in the source's own order.
    Same,
    /// A source `[N, C, H, W]` tensor held as `[N, H, W, C]`.
    Nhwc,
    /// A source `[N, C·H·W]` tensor (an NCHW image flattened) held in `[N, H, W, C]` order
    /// (any source shape with that element count: CoreML's flattened `[C·H·W, 1, 1]` too).
    FlatNhwc { c: usize, h: usize, w: usize },
    /// A source tensor whose last three dimensions are `C, H, W` and whose leading ones are 1
    /// (CoreML's `[C, H, W]` and `[Seq, B, C, H, W]` blobs) held as `[1, H, W, C]`.
    Chw,
}

/// The element type on the source model's side of an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceType {
    Float32,
    UInt8,
    /// Signed 8-bit (a TensorFlow Lite int8 model's edges, TENSOR_QUANT8_ASYMM_SIGNED).
    Int8,
    /// 32-bit integers (TENSOR_INT32: indices, lookup keys, ARG_MAX results).
    Int32,
    /// Booleans, one byte each, 0 or 1 (TENSOR_BOOL8: masks, comparison results).
    Bool8,
}

impl SourceType {
    /// NumPy's name of the element type.
    pub fn name(self) -> &'static str {
        match self {
            SourceType::Float32 => "float32",
            SourceType::UInt8 => "uint8",
            SourceType::Int8 => "int8",
            SourceType::Int32 => "int32",
            SourceType::Bool8 => "bool",
        }
    }
}

/// One graph input or output of an imported model.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// The source model's name for it.
    pub name: String,
    /// Its shape in the source layout.
    pub shape: Vec<usize>,
    pub layout: EdgeLayout,
    pub source_type: SourceType,
    /// A float32 source edge held as TENSOR_QUANT8_ASYMM (scale, zero point): the runner
    /// quantizes an input (or dequantizes an output) on the host.
    pub quantized: Option<(f32, i32)>,
}

/// A model lowered from another format, with what a runner needs to feed it and read it.
#[derive(Clone, Debug)]
pub struct ImportedModel {
    pub model: Model,
    /// In `model.input_indexes` order.
    pub inputs: Vec<Edge>,
    /// In `model.output_indexes` order.
    pub outputs: Vec<Edge>,
    /// One line per source node: what it became (operations, fused, folded, removed).
    pub summary: Vec<String>,
    /// A classifier's class labels, one per element of output 0 (the probabilities).
    pub class_labels: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_aligned_and_consumers_counted() {
        let mut b = ModelBuilder::new();
        let x = b.input(OperandType::TensorFloat32, &[1, 2, 2, 1]);
        let one = b.u8_tensor(&[1], &[7], 1.0, 0);
        let c = b.f32_tensor(&[1], &[2.0]);
        let act = b.int(0);
        let dims = b.infer(OperationType::Add, &[x, c, act]).unwrap();
        assert_eq!(dims, vec![vec![1, 2, 2, 1]]);
        let y = b.output(OperandType::TensorFloat32, &dims[0]);
        b.operation(OperationType::Add, &[x, x, act], &[y]);
        let model = b.finish();
        assert_eq!(model.operands[one as usize].location.offset, 0);
        assert_eq!(model.operands[c as usize].location.offset, 4);
        assert_eq!(model.operands[x as usize].number_of_consumers, 2);
        assert_eq!(model.operands[c as usize].number_of_consumers, 0);
        assert!(crate::validate::validate_model(&model).is_ok());
    }
}
