//! Turns a golden vector into the HAL structures a driver receives: the [`Model`] in either
//! constant mode, and one [`Request`] per example, laid out the way the VTS harness lays them out.
//!
//! * [`ConstantMode::Copy`]: constants travel inline in `Model::operand_values`
//!   (CONSTANT_COPY), omitted optional inputs stay NO_VALUE operands.
//! * [`ConstantMode::Reference`]: the same constants live in one sealed memfd pool
//!   (CONSTANT_REFERENCE), and the omitted optional inputs become MODEL_INPUTs again at their
//!   AOSP positions, supplied with `has_no_value`. That is how AOSP and VTS build these tests, so
//!   both the pool path and the `hasNoValue` path of the driver are exercised.
//!
//! Requests use two sealed memfd pools (inputs in pool 0, outputs in pool 1) with every argument
//! starting on a 4-byte boundary and no request dimensions, as VTS's `createRequest` does.

use super::{Example, Vector, VectorError};
use nnhal_hal::builder::append_constant;
use nnhal_hal::memory::create_memfd;
use nnhal_hal::{
    ChannelQuant, DataLocation, HalError, HalResult, MappedPool, Memory, Model, Operand,
    OperandLifeTime, OperandType, Operation, OperationType, Request, RequestArgument, Subgraph,
};

/// Where a model's constants live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstantMode {
    /// CONSTANT_COPY in `operand_values`; omitted optional inputs as NO_VALUE operands.
    Copy,
    /// CONSTANT_REFERENCE in one shared-memory pool; omitted optional inputs as MODEL_INPUTs
    /// fed with `has_no_value`.
    Reference,
}

impl ConstantMode {
    pub const ALL: [ConstantMode; 2] = [ConstantMode::Copy, ConstantMode::Reference];

    pub fn name(self) -> &'static str {
        match self {
            ConstantMode::Copy => "CONSTANT_COPY",
            ConstantMode::Reference => "CONSTANT_REFERENCE",
        }
    }
}

impl std::fmt::Display for ConstantMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn invalid(msg: String) -> VectorError {
    VectorError::Invalid(msg)
}

// The canonical builder's helpers, re-exported where the vector tools have always found them.
pub use nnhal_hal::builder::{align4, count_consumers};

/// Number of elements of an operand with these dimensions (1 for scalars); `None` on overflow.
pub fn element_count(dimensions: &[u32]) -> Option<usize> {
    dimensions
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
}

/// Byte size of a fully specified operand of type `ty`; `None` for OEM types, unknown types or
/// overflow. An unspecified (0) dimension gives 0, as AOSP's `sizeOfData` does.
pub fn byte_size(ty: i32, dimensions: &[u32]) -> Option<usize> {
    let elem = OperandType::from_raw(ty)?.element_size()?;
    element_count(dimensions)?.checked_mul(elem)
}

/// The IEEE half-precision bits nearest to `x` (round to nearest, ties to even), as a C
/// compiler narrows a float literal to `_Float16`.
pub fn f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // Keep the top bits of the significand, round on the rest; a carry out of the mantissa
    // correctly bumps the exponent (up to infinity).
    let round = |kept: u32, rest: u32, half: u32| -> u16 {
        let up = rest > half || (rest == half && kept & 1 == 1);
        (kept + u32::from(up)) as u16
    };
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        return sign | round(m >> shift, m & ((1 << shift) - 1), 1 << (shift - 1));
    }
    let kept = ((e as u32) << 10) | (man >> 13);
    sign | round(kept, man & 0x1fff, 0x1000)
}

/// The value of IEEE half-precision bits.
pub fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => sign * man as f32 * 2f32.powi(-24),
        0x1f if man == 0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => f32::from_bits(
            (u32::from(h & 0x8000) << 16) | (((exp + 112) as u32) << 23) | (man << 13),
        ),
    }
}

/// Encodes values of an operand of type `ty` as the driver reads them: little-endian
/// elements of the type's size (4 bytes for float32/int32/uint32, 2 for float16 and the
/// 16-bit quantized types, 1 for the 8-bit and boolean types).
pub fn encode(ty: OperandType, values: &[f64], what: &str) -> Result<Vec<u8>, VectorError> {
    let mut out = Vec::with_capacity(values.len() * 4);
    for (i, &v) in values.iter().enumerate() {
        let bad = || invalid(format!("{what}: value {v} at {i} does not fit {ty}"));
        let integer = |lo: f64, hi: f64| {
            if v.fract() != 0.0 || v < lo || v > hi {
                Err(bad())
            } else {
                Ok(v)
            }
        };
        match ty {
            OperandType::Float32 | OperandType::TensorFloat32 => {
                out.extend_from_slice(&(v as f32).to_le_bytes())
            }
            OperandType::Float16 | OperandType::TensorFloat16 => {
                out.extend_from_slice(&f16_bits(v as f32).to_le_bytes())
            }
            OperandType::Int32 | OperandType::TensorInt32 => out.extend_from_slice(
                &(integer(f64::from(i32::MIN), f64::from(i32::MAX))? as i32).to_le_bytes(),
            ),
            OperandType::UInt32 => {
                out.extend_from_slice(&(integer(0.0, f64::from(u32::MAX))? as u32).to_le_bytes())
            }
            OperandType::TensorQuant8Asymm => out.push(integer(0.0, 255.0)? as u8),
            OperandType::Bool | OperandType::TensorBool8 => out.push(integer(0.0, 1.0)? as u8),
            OperandType::TensorQuant8AsymmSigned
            | OperandType::TensorQuant8Symm
            | OperandType::TensorQuant8SymmPerChannel => {
                out.push(integer(-128.0, 127.0)? as i8 as u8)
            }
            OperandType::TensorQuant16Asymm => {
                out.extend_from_slice(&(integer(0.0, 65535.0)? as u16).to_le_bytes())
            }
            OperandType::TensorQuant16Symm => {
                out.extend_from_slice(&(integer(-32768.0, 32767.0)? as i16).to_le_bytes())
            }
            _ => {
                return Err(invalid(format!(
                    "{what}: {ty} values are not part of the vector format"
                )))
            }
        }
    }
    Ok(out)
}

/// The inverse of [`encode`]: reads the elements of `bytes` as `ty` values.
pub fn decode(ty: OperandType, bytes: &[u8]) -> Vec<f64> {
    let word = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    let half = |c: &[u8]| [c[0], c[1]];
    match ty {
        OperandType::Float32 | OperandType::TensorFloat32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(word(c))))
            .collect(),
        OperandType::Float16 | OperandType::TensorFloat16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(f16_value(u16::from_le_bytes(half(c)))))
            .collect(),
        OperandType::Int32 | OperandType::TensorInt32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(i32::from_le_bytes(word(c))))
            .collect(),
        OperandType::UInt32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(u32::from_le_bytes(word(c))))
            .collect(),
        OperandType::TensorQuant8Asymm
        | OperandType::TensorOemByte
        | OperandType::Bool
        | OperandType::TensorBool8 => bytes.iter().map(|&b| f64::from(b)).collect(),
        OperandType::TensorQuant8AsymmSigned
        | OperandType::TensorQuant8Symm
        | OperandType::TensorQuant8SymmPerChannel => {
            bytes.iter().map(|&b| f64::from(b as i8)).collect()
        }
        OperandType::TensorQuant16Asymm => bytes
            .chunks_exact(2)
            .map(|c| f64::from(u16::from_le_bytes(half(c))))
            .collect(),
        OperandType::TensorQuant16Symm => bytes
            .chunks_exact(2)
            .map(|c| f64::from(i16::from_le_bytes(half(c))))
            .collect(),
        _ => Vec::new(),
    }
}

fn operand_type(v: &Vector, index: usize) -> Result<OperandType, VectorError> {
    let name = &v.model.operands[index].operand_type;
    OperandType::from_name(name)
        .ok_or_else(|| invalid(format!("operand {index}: unknown operand type {name}")))
}

/// The model input list of `v` in `mode`, with, for each position, the position in the vector's
/// reduced input list that supplies its data (`None`: an omitted input, fed with `has_no_value`).
pub fn request_inputs(
    v: &Vector,
    mode: ConstantMode,
) -> Result<Vec<(u32, Option<usize>)>, VectorError> {
    let reduced = &v.model.input_indexes;
    let omitted = &v.aosp.omitted_inputs;
    let full: Vec<u32> = match (mode, &v.aosp.input_indexes) {
        (ConstantMode::Reference, Some(aosp)) if !omitted.is_empty() => aosp.clone(),
        _ => reduced.clone(),
    };
    let mut out = Vec::with_capacity(full.len());
    for &operand in &full {
        if let Some(pos) = reduced.iter().position(|&r| r == operand) {
            out.push((operand, Some(pos)));
        } else if omitted.contains(&operand) {
            out.push((operand, None));
        } else {
            return Err(invalid(format!(
                "aosp.inputIndexes names operand {operand}, which is neither a model input nor omitted"
            )));
        }
    }
    // Every reduced input must survive in the full list, in the same relative order, or the
    // example keys would feed the wrong operands.
    let fed: Vec<u32> = out
        .iter()
        .filter(|(_, p)| p.is_some())
        .map(|(o, _)| *o)
        .collect();
    if &fed != reduced {
        return Err(invalid(format!(
            "aosp.inputIndexes {full:?} does not contain model.inputIndexes {reduced:?} in order"
        )));
    }
    Ok(out)
}

/// Builds HAL operands from vector operands; constant bytes are appended to `constants`
/// (4-byte aligned) and located there. `fed_later` says whether an operand is an omitted
/// optional input that becomes a MODEL_INPUT fed with no value.
fn build_operands(
    operands: &[super::VectorOperand],
    mode: ConstantMode,
    constants: &mut Vec<u8>,
    fed_later: &dyn Fn(usize) -> bool,
    scope: &str,
) -> Result<Vec<Operand>, VectorError> {
    let mut out = Vec::with_capacity(operands.len());
    for (index, vo) in operands.iter().enumerate() {
        let what = format!("{scope}operand {index}");
        let ty = OperandType::from_name(&vo.operand_type)
            .ok_or_else(|| invalid(format!("{what}: unknown operand type {}", vo.operand_type)))?;
        let lifetime = OperandLifeTime::from_name(&vo.lifetime)
            .ok_or_else(|| invalid(format!("{what}: unknown lifetime {}", vo.lifetime)))?;
        let mut operand = Operand::new(ty, &vo.dimensions, lifetime);
        operand.scale = vo.scale;
        operand.zero_point = vo.zero_point;
        operand.channel_quant = vo.channel_quant.as_ref().map(|cq| ChannelQuant {
            scales: cq.scales.clone(),
            channel_dim: cq.channel_dim,
        });
        match lifetime {
            OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference => {
                let values = vo
                    .value
                    .as_deref()
                    .ok_or_else(|| invalid(format!("{what}: constant without a value")))?;
                let bytes = encode(ty, values, &what)?;
                let expected = byte_size(ty.raw(), &vo.dimensions);
                if expected != Some(bytes.len()) {
                    return Err(invalid(format!(
                        "{what}: {} values do not fill dimensions {:?}",
                        values.len(),
                        vo.dimensions
                    )));
                }
                operand.lifetime = match mode {
                    ConstantMode::Copy => OperandLifeTime::ConstantCopy,
                    ConstantMode::Reference => OperandLifeTime::ConstantReference,
                }
                .raw();
                operand.location = append_constant(constants, &bytes);
            }
            // The VTS harness's location for a subgraph reference: offset = its index.
            OperandLifeTime::Subgraph => {
                let k = match vo.value.as_deref() {
                    Some(&[k]) if k >= 0.0 && k.fract() == 0.0 && k <= f64::from(u32::MAX) => k,
                    _ => {
                        return Err(invalid(format!(
                            "{what}: a SUBGRAPH operand's value is [index]"
                        )))
                    }
                };
                operand.location = DataLocation {
                    pool_index: 0,
                    offset: k as u32,
                    length: 0,
                };
            }
            // An omitted optional input in reference mode: a model input fed with no value.
            OperandLifeTime::NoValue if fed_later(index) => {
                operand.lifetime = OperandLifeTime::ModelInput.raw();
            }
            _ => {}
        }
        out.push(operand);
    }
    Ok(out)
}

/// Converts vector operations, checking every operand index against `n`.
fn build_operations(
    operations: &[super::VectorOperation],
    n: usize,
    scope: &str,
) -> Result<Vec<Operation>, VectorError> {
    operations
        .iter()
        .enumerate()
        .map(|(k, op)| {
            let ty = OperationType::from_name(&op.operation_type).ok_or_else(|| {
                invalid(format!(
                    "{scope}operation {k}: unknown type {}",
                    op.operation_type
                ))
            })?;
            if let Some(&bad) = op
                .inputs
                .iter()
                .chain(&op.outputs)
                .find(|&&i| i as usize >= n)
            {
                return Err(invalid(format!(
                    "{scope}operation {k}: operand index {bad} out of range"
                )));
            }
            Ok(Operation {
                operation_type: ty.raw(),
                inputs: op.inputs.clone(),
                outputs: op.outputs.clone(),
            })
        })
        .collect()
}

/// Builds the HAL model of `v` in `mode`, referenced subgraphs included (their constants
/// share the main model's store).
pub fn to_model(v: &Vector, mode: ConstantMode) -> Result<Model, VectorError> {
    let n = v.model.operands.len();
    let inputs = request_inputs(v, mode)?;
    let mut model = Model::default();
    // Constant bytes in declaration order; they go to operand_values or to the pool.
    let mut constants: Vec<u8> = Vec::new();
    let fed_later = |index: usize| {
        inputs
            .iter()
            .any(|&(o, p)| o as usize == index && p.is_none())
    };
    model.operands = build_operands(&v.model.operands, mode, &mut constants, &fed_later, "")?;
    model.operations = build_operations(&v.model.operations, n, "")?;
    model.input_indexes = inputs.iter().map(|&(o, _)| o).collect();
    model.output_indexes = v.model.output_indexes.clone();
    if let Some(&bad) = model
        .input_indexes
        .iter()
        .chain(&model.output_indexes)
        .find(|&&i| i as usize >= n)
    {
        return Err(invalid(format!(
            "model input/output index {bad} out of range"
        )));
    }
    for (s, sub) in v.model.referenced.iter().enumerate() {
        let scope = format!("referenced subgraph {s}: ");
        let operands = build_operands(&sub.operands, mode, &mut constants, &|_| false, &scope)?;
        let operations = build_operations(&sub.operations, operands.len(), &scope)?;
        let mut graph = Model {
            operands,
            operations,
            ..Model::default()
        };
        count_consumers(&mut graph);
        model.referenced.push(Subgraph {
            operands: graph.operands,
            operations: graph.operations,
            input_indexes: sub.input_indexes.clone(),
            output_indexes: sub.output_indexes.clone(),
        });
    }
    model.relax_computation_float32_to_float16 = v.relaxed;
    count_consumers(&mut model);

    match mode {
        ConstantMode::Copy => model.operand_values = constants,
        ConstantMode::Reference if !constants.is_empty() => {
            let size = constants.len() as u64;
            let fd = create_memfd("nnhal-vts-constants", &constants, size, true)
                .map_err(|e| invalid(format!("cannot create the constant pool: {e}")))?;
            model.pools.push(Memory::shared(fd, size));
        }
        ConstantMode::Reference => {}
    }
    Ok(model)
}

/// One output argument of a built request.
#[derive(Clone, Debug)]
pub struct OutputSlot {
    /// Position in `Model::output_indexes` (and in the example's output keys).
    pub position: usize,
    pub operand: u32,
    pub operand_type: OperandType,
    pub dimensions: Vec<u32>,
    pub scale: f32,
    pub zero_point: i32,
    /// Where the driver writes it in the output pool (pool 1).
    pub location: DataLocation,
}

/// A request for one example, and where to find each output afterwards.
#[derive(Clone, Debug)]
pub struct BuiltRequest {
    pub request: Request,
    pub outputs: Vec<OutputSlot>,
}

/// Index of the input pool in every built request.
pub const INPUT_POOL: u32 = 0;
/// Index of the output pool in every built request.
pub const OUTPUT_POOL: u32 = 1;

impl BuiltRequest {
    /// Reads every output region back from the output pool, in output order.
    pub fn read_outputs(&self) -> HalResult<Vec<Vec<u8>>> {
        let memory = self
            .request
            .pools
            .get(OUTPUT_POOL as usize)
            .ok_or_else(|| HalError::InvalidArgument("request has no output pool".into()))?;
        let pool = MappedPool::map(memory, "output pool")?;
        self.outputs
            .iter()
            .map(|slot| {
                pool.read_vec(
                    u64::from(slot.location.offset),
                    slot.location.length as usize,
                )
            })
            .collect()
    }
}

/// A sealed memfd pool holding `data`, at least 4 bytes long: a pool of size 0 is invalid, and
/// a model whose only inputs are omitted still gets a well-formed (unused) input pool.
fn sealed_pool(name: &str, data: &[u8]) -> Result<Memory, VectorError> {
    let size = data.len().max(4) as u64;
    let fd = create_memfd(name, data, size, true)
        .map_err(|e| invalid(format!("cannot create the {name} pool: {e}")))?;
    Ok(Memory::shared(fd, size))
}

/// Builds a fresh request for `example` against the model `to_model(v, mode)` returns.
pub fn build_request(
    v: &Vector,
    mode: ConstantMode,
    example: &Example,
) -> Result<BuiltRequest, VectorError> {
    let mut request = Request::default();
    let mut input_data: Vec<u8> = Vec::new();
    for (operand, source) in request_inputs(v, mode)? {
        let Some(pos) = source else {
            request.inputs.push(RequestArgument {
                has_no_value: true,
                ..RequestArgument::default()
            });
            continue;
        };
        let what = format!("input {pos} (operand {operand})");
        let ty = operand_type(v, operand as usize)?;
        let values = example
            .input(pos)
            .ok_or_else(|| invalid(format!("{what}: example has no values")))?;
        let dims = &v.model.operands[operand as usize].dimensions;
        if element_count(dims) != Some(values.len()) {
            return Err(invalid(format!(
                "{what}: {} values for dimensions {dims:?}",
                values.len()
            )));
        }
        let bytes = encode(ty, values, &what)?;
        let offset = input_data.len();
        input_data.extend_from_slice(&bytes);
        input_data.resize(align4(input_data.len()), 0);
        request.inputs.push(RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index: INPUT_POOL,
                offset: offset as u32,
                length: bytes.len() as u32,
            },
            dimensions: Vec::new(),
        });
    }

    let mut outputs = Vec::new();
    let mut output_size = 0usize;
    for (position, &operand) in v.model.output_indexes.iter().enumerate() {
        let vo =
            v.model.operands.get(operand as usize).ok_or_else(|| {
                invalid(format!("output {position}: operand {operand} out of range"))
            })?;
        let ty = operand_type(v, operand as usize)?;
        // Unspecified (0) dimensions: the buffer holds the expected values, at least one byte,
        // as the VTS harness sizes it.
        let length = match byte_size(ty.raw(), &vo.dimensions).filter(|&l| l > 0) {
            Some(l) => l,
            None => {
                let expected = example.output(position).map_or(0, <[f64]>::len);
                let elem = ty.element_size().unwrap_or(1);
                (expected * elem).max(1)
            }
        };
        let location = DataLocation {
            pool_index: OUTPUT_POOL,
            offset: output_size as u32,
            length: length as u32,
        };
        output_size += align4(length);
        request.outputs.push(RequestArgument {
            has_no_value: false,
            location,
            dimensions: Vec::new(),
        });
        outputs.push(OutputSlot {
            position,
            operand,
            operand_type: ty,
            dimensions: vo.dimensions.clone(),
            scale: vo.scale,
            zero_point: vo.zero_point,
            location,
        });
    }

    request
        .pools
        .push(sealed_pool("nnhal-vts-inputs", &input_data)?);
    request
        .pools
        .push(sealed_pool("nnhal-vts-outputs", &vec![0u8; output_size])?);
    Ok(BuiltRequest { request, outputs })
}

/// AOSP's `all_inputs_as_internal` variant of a model: every float32/quant8 tensor model input
/// becomes a temporary written by `ADD(new input, [1]-shaped zero, NONE)` placed before the
/// original operations. The input list keeps its order (the new operand takes the old one's
/// position), so requests built for the original model fit this one unchanged. Gives every
/// single-operation vector a multi-operation graph, which the graph mutations need.
pub fn inputs_as_internal(model: &Model) -> Model {
    let mut out = model.clone();
    let mut adds = Vec::new();
    for pos in 0..out.input_indexes.len() {
        let original = out.input_indexes[pos] as usize;
        let Some(operand) = out.operands.get(original).cloned() else {
            continue;
        };
        let ty = OperandType::from_raw(operand.operand_type);
        if operand.lifetime != OperandLifeTime::ModelInput.raw()
            || !matches!(
                ty,
                Some(OperandType::TensorFloat32 | OperandType::TensorQuant8Asymm)
            )
        {
            continue;
        }
        let new_input = out.operands.len() as u32;
        out.operands.push(operand.clone());

        // The zero has the input's quantization, so ADD is an exact identity.
        let zero_bytes = match ty {
            Some(OperandType::TensorQuant8Asymm) => vec![operand.zero_point.clamp(0, 255) as u8],
            _ => 0f32.to_le_bytes().to_vec(),
        };
        let zero = push_constant(&mut out, &operand, &[1], zero_bytes);
        let act_template = Operand::new(OperandType::Int32, &[], OperandLifeTime::ConstantCopy);
        let act = push_constant(&mut out, &act_template, &[], 0i32.to_le_bytes().to_vec());

        out.operands[original].lifetime = OperandLifeTime::TemporaryVariable.raw();
        out.input_indexes[pos] = new_input;
        adds.push(Operation {
            operation_type: OperationType::Add.raw(),
            inputs: vec![new_input, zero, act],
            outputs: vec![original as u32],
        });
    }
    adds.append(&mut out.operations);
    out.operations = adds;
    count_consumers(&mut out);
    out
}

/// Appends a CONSTANT_COPY operand like `template` with `dims` holding `bytes`.
fn push_constant(model: &mut Model, template: &Operand, dims: &[u32], bytes: Vec<u8>) -> u32 {
    let mut operand = template.clone();
    operand.dimensions = dims.to_vec();
    operand.lifetime = OperandLifeTime::ConstantCopy.raw();
    operand.number_of_consumers = 0;
    operand.location = append_constant(&mut model.operand_values, &bytes);
    model.operands.push(operand);
    (model.operands.len() - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::Vector;
    use std::path::Path;

    fn vector(name: &str) -> Vector {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors");
        Vector::from_file(&dir.join(format!("{name}.json"))).unwrap()
    }

    #[test]
    fn half_precision_round_trips_and_rounds_to_nearest_even() {
        assert_eq!(f16_bits(1.0), 0x3C00);
        assert_eq!(f16_bits(-2.0), 0xC000);
        // The schema's own example: 1.001 is the half 0x3C01.
        assert_eq!(f16_bits(1.001), 0x3C01);
        assert_eq!(f16_bits(65520.0), 0x7C00); // rounds up to infinity
        assert_eq!(f16_bits(5.960_464_5e-8), 0x0001); // smallest subnormal
        assert_eq!(f16_bits(2.980_232_2e-8), 0x0000); // half of it: ties to even
        for h in 0u16..=0xFFFF {
            let v = f16_value(h);
            if !v.is_nan() {
                assert_eq!(f16_bits(v), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn every_quantized_type_encodes_in_its_own_width() {
        let q = |ty, v: &[f64]| encode(ty, v, "t").unwrap();
        assert_eq!(
            q(OperandType::TensorQuant8AsymmSigned, &[-128.0, 127.0]),
            [0x80, 0x7F]
        );
        assert_eq!(
            q(OperandType::TensorQuant16Symm, &[-2.0]),
            (-2i16).to_le_bytes()
        );
        assert_eq!(q(OperandType::TensorQuant16Asymm, &[65535.0]), [0xFF, 0xFF]);
        assert_eq!(q(OperandType::Bool, &[1.0]), [1]);
        assert!(encode(OperandType::TensorQuant8AsymmSigned, &[128.0], "t").is_err());
        assert!(encode(OperandType::Bool, &[2.0], "t").is_err());
        let bytes = q(OperandType::TensorQuant8SymmPerChannel, &[-5.0, 3.0]);
        assert_eq!(
            decode(OperandType::TensorQuant8SymmPerChannel, &bytes),
            [-5.0, 3.0]
        );
    }

    #[test]
    fn copy_mode_inlines_aligned_constants() {
        let v = vector("conv_quant8");
        let m = to_model(&v, ConstantMode::Copy).unwrap();
        assert!(m.pools.is_empty());
        for (i, (o, vo)) in m.operands.iter().zip(&v.model.operands).enumerate() {
            if o.lifetime != OperandLifeTime::ConstantCopy.raw() {
                continue;
            }
            assert_eq!(o.location.offset % 4, 0, "operand {i}");
            let ty = OperandType::from_raw(o.operand_type).unwrap();
            let (start, end) = (o.location.offset as usize, o.location.end() as usize);
            assert_eq!(
                &decode(ty, &m.operand_values[start..end]),
                vo.value.as_ref().unwrap()
            );
        }
        let consumers: u32 = m.operands.iter().map(|o| o.number_of_consumers).sum();
        let appearances: usize = m.operations.iter().map(|op| op.inputs.len()).sum();
        assert_eq!(consumers as usize, appearances);
    }

    #[test]
    fn reference_mode_uses_one_pool_and_restores_omitted_inputs() {
        let v = vector("lstm");
        let copy = to_model(&v, ConstantMode::Copy).unwrap();
        let m = to_model(&v, ConstantMode::Reference).unwrap();
        assert_eq!(m.pools.len(), 1);
        assert!(m.operand_values.is_empty());
        assert_eq!(Some(&m.input_indexes), v.aosp.input_indexes.as_ref());
        for &i in &v.aosp.omitted_inputs {
            assert_eq!(
                m.operands[i as usize].lifetime,
                OperandLifeTime::ModelInput.raw()
            );
            assert_eq!(
                copy.operands[i as usize].lifetime,
                OperandLifeTime::NoValue.raw()
            );
        }
        for (a, b) in m.operands.iter().zip(&copy.operands) {
            if b.lifetime == OperandLifeTime::ConstantCopy.raw() {
                assert_eq!(a.lifetime, OperandLifeTime::ConstantReference.raw());
                assert_eq!(a.location, b.location);
            }
        }
        let r = build_request(&v, ConstantMode::Reference, &v.examples[0]).unwrap();
        let omitted: Vec<bool> = r.request.inputs.iter().map(|a| a.has_no_value).collect();
        let expected: Vec<bool> = m
            .input_indexes
            .iter()
            .map(|i| v.aosp.omitted_inputs.contains(i))
            .collect();
        assert_eq!(omitted, expected);
        let copy_request = build_request(&v, ConstantMode::Copy, &v.examples[0]).unwrap();
        assert_eq!(
            copy_request.request.inputs.len(),
            v.model.input_indexes.len()
        );
    }

    #[test]
    fn requests_are_aligned_and_read_back() {
        let v = vector("add_quant8");
        let r = build_request(&v, ConstantMode::Copy, &v.examples[0]).unwrap();
        assert_eq!(r.request.pools.len(), 2);
        for a in r.request.inputs.iter().chain(&r.request.outputs) {
            assert_eq!(a.location.offset % 4, 0);
            assert!(a.dimensions.is_empty());
        }
        let outputs = r.read_outputs().unwrap();
        assert_eq!(outputs.len(), v.model.output_indexes.len());
        assert!(outputs[0].iter().all(|&b| b == 0));
    }

    #[test]
    fn inputs_as_internal_keeps_the_request_shape() {
        let v = vector("conv_float");
        let m = to_model(&v, ConstantMode::Copy).unwrap();
        let i = inputs_as_internal(&m);
        assert_eq!(i.input_indexes.len(), m.input_indexes.len());
        assert_eq!(i.operations.len(), m.operations.len() + 1);
        assert_eq!(i.operations[0].operation_type, OperationType::Add.raw());
        for (a, b) in i.input_indexes.iter().zip(&m.input_indexes) {
            let (a, b) = (&i.operands[*a as usize], &m.operands[*b as usize]);
            assert_eq!(
                (a.operand_type, &a.dimensions),
                (b.operand_type, &b.dimensions)
            );
        }
    }
}
