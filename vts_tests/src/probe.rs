//! Tiny built-in workloads for probing a device, in-process or through the service:
//!
//! - a one-operation ADD of two `[1, 2, 2, 1]` float32 tensors with its inputs and output in
//!   sealed memfd pools (the round-trip latency measurement and the end-to-end tests);
//! - [`operation_probes`]: one small valid model per operation of the interface (OEM aside), to
//!   ask `getSupportedOperations` about each: built here for the NNAPI 1.0 operations, and for
//!   the later ones the smallest conformance model of each (`vts_tests/probes/later.tsv`,
//!   written by `tests/later_vectors.rs`'s `write_operation_probes`).

use nnhal_hal::memory::create_memfd;
use nnhal_hal::{
    DataLocation, Memory, Model, Operand, OperandLifeTime, OperandType, Operation, OperationType,
    Request, RequestArgument,
};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Elements of one `[1, 2, 2, 1]` tensor.
pub const ADD_LEN: usize = 4;
const ADD_DIMS: [u32; 4] = [1, 2, 2, 1];
const ADD_BYTES: u32 = (ADD_LEN * 4) as u32;

/// `out = a + b` (fused activation NONE), all `[1, 2, 2, 1]` float32.
pub fn add_model() -> Model {
    let tensor = |lifetime| Operand::new(OperandType::TensorFloat32, &ADD_DIMS, lifetime);
    let mut a = tensor(OperandLifeTime::ModelInput);
    a.number_of_consumers = 1;
    let mut b = tensor(OperandLifeTime::ModelInput);
    b.number_of_consumers = 1;
    let mut activation = Operand::new(OperandType::Int32, &[], OperandLifeTime::ConstantCopy);
    activation.number_of_consumers = 1;
    activation.location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 4,
    };
    Model {
        operands: vec![a, b, activation, tensor(OperandLifeTime::ModelOutput)],
        operations: vec![Operation {
            operation_type: OperationType::Add.raw(),
            inputs: vec![0, 1, 2],
            outputs: vec![3],
        }],
        input_indexes: vec![0, 1],
        output_indexes: vec![3],
        operand_values: 0i32.to_le_bytes().to_vec(),
        pools: Vec::new(),
        ..Model::default()
    }
}

/// The canonical builder with the probes' conventions: quant8 operands get scale 1, and a
/// probe is finished by its one operation.
#[derive(Default)]
struct ModelBuilder {
    b: nnhal_hal::builder::ModelBuilder,
}

impl ModelBuilder {
    fn quantized(&mut self, i: u32, ty: OperandType) -> u32 {
        if ty == OperandType::TensorQuant8Asymm {
            self.b.operand_mut(i).scale = 1.0;
        }
        i
    }

    fn input(&mut self, ty: OperandType, dims: &[u32]) -> u32 {
        let i = self.b.input(ty, dims);
        self.quantized(i, ty)
    }

    fn output(&mut self, ty: OperandType, dims: &[u32]) -> u32 {
        let i = self.b.output(ty, dims);
        self.quantized(i, ty)
    }

    fn no_value(&mut self) -> u32 {
        self.b.no_value()
    }

    fn constant(&mut self, ty: OperandType, dims: &[u32], bytes: &[u8]) -> u32 {
        let i = self.b.constant(ty, dims, bytes);
        self.quantized(i, ty)
    }

    fn int(&mut self, v: i32) -> u32 {
        self.b.int(v)
    }

    fn float(&mut self, v: f32) -> u32 {
        self.b.float(v)
    }

    fn op(mut self, ty: OperationType, inputs: &[u32], outputs: &[u32]) -> Model {
        self.b.operation(ty, inputs, outputs);
        self.b.finish()
    }
}

/// One small valid model per NNAPI 1.0 operation (float32 where the operation has a float
/// form), each with a single operation. OEM_OPERATION has no defined semantics to probe.
pub fn operation_probes() -> Vec<(OperationType, Model)> {
    use OperandType::{TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q};
    use OperationType::*;
    const T: [u32; 4] = [1, 2, 2, 1];
    let mut probes = Vec::new();
    let b = ModelBuilder::default;

    for op in [Add, Mul] {
        let mut m = b();
        let (x, y, act) = (m.input(F, &T), m.input(F, &T), m.int(0));
        let out = m.output(F, &T);
        probes.push((op, m.op(op, &[x, y, act], &[out])));
    }
    for op in [Floor, Relu, Relu1, Relu6, Logistic, Tanh, L2Normalization] {
        let mut m = b();
        let x = m.input(F, &T);
        let out = m.output(F, &T);
        probes.push((op, m.op(op, &[x], &[out])));
    }
    {
        let mut m = b();
        let x = m.input(Q, &T);
        let out = m.output(F, &T);
        probes.push((Dequantize, m.op(Dequantize, &[x], &[out])));
    }
    {
        let mut m = b();
        let x = m.input(F, &T);
        let (radius, bias, alpha, beta) = (m.int(1), m.float(1.0), m.float(1.0), m.float(0.5));
        let out = m.output(F, &T);
        let op = LocalResponseNormalization;
        probes.push((op, m.op(op, &[x, radius, bias, alpha, beta], &[out])));
    }
    {
        let mut m = b();
        let (x, beta) = (m.input(F, &[1, 4]), m.float(1.0));
        let out = m.output(F, &[1, 4]);
        probes.push((Softmax, m.op(Softmax, &[x, beta], &[out])));
    }
    {
        let mut m = b();
        let x = m.input(F, &T);
        let shape: Vec<u8> = [1i32, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape = m.constant(I, &[2], &shape);
        let out = m.output(F, &[1, 4]);
        probes.push((Reshape, m.op(Reshape, &[x, shape], &[out])));
    }
    {
        let mut m = b();
        let (x, y, axis) = (m.input(F, &T), m.input(F, &T), m.int(3));
        let out = m.output(F, &[1, 2, 2, 2]);
        probes.push((Concatenation, m.op(Concatenation, &[x, y, axis], &[out])));
    }
    {
        let mut m = b();
        let (x, block) = (m.input(F, &[1, 1, 1, 4]), m.int(2));
        let out = m.output(F, &T);
        probes.push((DepthToSpace, m.op(DepthToSpace, &[x, block], &[out])));
    }
    {
        let mut m = b();
        let (x, block) = (m.input(F, &T), m.int(2));
        let out = m.output(F, &[1, 1, 1, 4]);
        probes.push((SpaceToDepth, m.op(SpaceToDepth, &[x, block], &[out])));
    }
    for op in [AveragePool2d, MaxPool2d, L2Pool2d] {
        // Implicit padding SAME, stride 1, 1×1 filter, no activation.
        let mut m = b();
        let x = m.input(F, &T);
        let params: Vec<u32> = [1, 1, 1, 1, 1, 0].iter().map(|&v| m.int(v)).collect();
        let out = m.output(F, &T);
        let mut inputs = vec![x];
        inputs.extend(params);
        probes.push((op, m.op(op, &inputs, &[out])));
    }
    {
        let mut m = b();
        let (x, w, h) = (m.input(F, &T), m.int(4), m.int(4));
        let out = m.output(F, &[1, 4, 4, 1]);
        probes.push((ResizeBilinear, m.op(ResizeBilinear, &[x, w, h], &[out])));
    }
    {
        let mut m = b();
        let (x, w, bias, act) = (
            m.input(F, &[1, 4]),
            m.input(F, &[2, 4]),
            m.input(F, &[2]),
            m.int(0),
        );
        let out = m.output(F, &[1, 2]);
        probes.push((
            FullyConnected,
            m.op(FullyConnected, &[x, w, bias, act], &[out]),
        ));
    }
    for op in [Conv2d, DepthwiseConv2d] {
        // Implicit padding SAME, stride 1, 1×1 filter (depth multiplier 1), no activation.
        let mut m = b();
        let (x, filter, bias) = (m.input(F, &T), m.input(F, &[1, 1, 1, 1]), m.input(F, &[1]));
        let mut params = vec![1, 1, 1];
        if op == DepthwiseConv2d {
            params.push(1);
        }
        params.push(0);
        let params: Vec<u32> = params.iter().map(|&v| m.int(v)).collect();
        let out = m.output(F, &T);
        let mut inputs = vec![x, filter, bias];
        inputs.extend(params);
        probes.push((op, m.op(op, &inputs, &[out])));
    }
    {
        let mut m = b();
        let (lookups, values) = (m.input(I, &[1]), m.input(F, &[2, 2]));
        let out = m.output(F, &[1, 2]);
        probes.push((
            EmbeddingLookup,
            m.op(EmbeddingLookup, &[lookups, values], &[out]),
        ));
    }
    {
        let mut m = b();
        let (lookups, keys, values) = (m.input(I, &[1]), m.input(I, &[2]), m.input(F, &[2, 2]));
        let (out, hits) = (m.output(F, &[1, 2]), m.output(Q, &[1]));
        let op = HashtableLookup;
        probes.push((op, m.op(op, &[lookups, keys, values], &[out, hits])));
    }
    {
        // Sparse projection: 2 hash functions of 2 bits over 2 int inputs.
        let mut m = b();
        let (hash, x, weight, kind) = (
            m.input(F, &[2, 2]),
            m.input(I, &[2]),
            m.input(F, &[2]),
            m.int(1),
        );
        let out = m.output(I, &[2]);
        probes.push((
            LshProjection,
            m.op(LshProjection, &[hash, x, weight, kind], &[out]),
        ));
    }
    {
        // batch 1, input 2, units 2, ReLU.
        let mut m = b();
        let (x, w, rw, bias, h) = (
            m.input(F, &[1, 2]),
            m.input(F, &[2, 2]),
            m.input(F, &[2, 2]),
            m.input(F, &[2]),
            m.input(F, &[1, 2]),
        );
        let act = m.int(1);
        let (h_out, out) = (m.output(F, &[1, 2]), m.output(F, &[1, 2]));
        probes.push((Rnn, m.op(Rnn, &[x, w, rw, bias, h, act], &[h_out, out])));
    }
    {
        // batch 1, input 2, units 2, rank 1, memory 2.
        let mut m = b();
        let (x, wf, wt, bias, state) = (
            m.input(F, &[1, 2]),
            m.input(F, &[2, 2]),
            m.input(F, &[2, 2]),
            m.input(F, &[2]),
            m.input(F, &[1, 2]),
        );
        let (rank, act) = (m.int(1), m.int(0));
        let (state_out, out) = (m.output(F, &[1, 2]), m.output(F, &[1, 2]));
        let inputs = [x, wf, wt, bias, state, rank, act];
        probes.push((Svdf, m.op(Svdf, &inputs, &[state_out, out])));
    }
    {
        // batch 1, input 2, units 2; no CIFG, peephole or projection; no clipping.
        let mut m = b();
        let mut inputs = vec![m.input(F, &[1, 2])];
        for _ in 0..4 {
            inputs.push(m.input(F, &[2, 2])); // input-to-gate weights
        }
        for _ in 0..4 {
            inputs.push(m.input(F, &[2, 2])); // recurrent-to-gate weights
        }
        for _ in 0..3 {
            inputs.push(m.no_value()); // peephole
        }
        for _ in 0..4 {
            inputs.push(m.input(F, &[2])); // gate biases
        }
        inputs.push(m.no_value()); // projection weights
        inputs.push(m.no_value()); // projection bias
        inputs.push(m.input(F, &[1, 2])); // output state in
        inputs.push(m.input(F, &[1, 2])); // cell state in
        inputs.push(m.int(0));
        inputs.push(m.float(0.0));
        inputs.push(m.float(0.0));
        let outputs = [
            m.output(F, &[1, 8]),
            m.output(F, &[1, 2]),
            m.output(F, &[1, 2]),
            m.output(F, &[1, 2]),
        ];
        probes.push((Lstm, m.op(Lstm, &inputs, &outputs)));
    }
    probes.extend(later_probes());
    probes.sort_by_key(|(op, _)| op.raw());
    probes
}

/// The conformance models that probe the operations beyond NNAPI 1.0: one line per operation,
/// its name, a tab and the vector's JSON.
const LATER_PROBES: &str = include_str!("../probes/later.tsv");

/// One model per operation beyond NNAPI 1.0, from [`LATER_PROBES`]. The file is part of this
/// crate, so a line that does not parse is a build defect, reported by the crate's tests.
fn later_probes() -> Vec<(OperationType, Model)> {
    LATER_PROBES
        .lines()
        .filter_map(|line| {
            let (name, json) = line.split_once('\t')?;
            let op = OperationType::from_name(name)?;
            let v = crate::vector::Vector::from_json(json, std::path::Path::new(name)).ok()?;
            let model =
                crate::vector::model::to_model(&v, crate::vector::model::ConstantMode::Copy)
                    .ok()?;
            Some((op, model))
        })
        .collect()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A request for [`add_model`]: `a` and `b` in one sealed memfd pool, the output in another.
pub struct AddRun {
    pub request: Request,
    output: File,
}

impl AddRun {
    pub fn new(a: &[f32; ADD_LEN], b: &[f32; ADD_LEN]) -> std::io::Result<AddRun> {
        let mut inputs = f32_bytes(a);
        inputs.extend(f32_bytes(b));
        let input_pool = create_memfd("nnhal-add-in", &inputs, inputs.len() as u64, true)?;
        let output_pool = create_memfd("nnhal-add-out", &[], u64::from(ADD_BYTES), true)?;
        let output = File::from(output_pool.try_clone()?);
        let arg = |pool_index, offset| RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index,
                offset,
                length: ADD_BYTES,
            },
            dimensions: Vec::new(),
        };
        Ok(AddRun {
            request: Request {
                inputs: vec![arg(0, 0), arg(0, ADD_BYTES)],
                outputs: vec![arg(1, 0)],
                pools: vec![
                    Memory::shared(input_pool, u64::from(2 * ADD_BYTES)),
                    Memory::shared(output_pool, u64::from(ADD_BYTES)),
                ],
            },
            output,
        })
    }

    /// The output tensor as it is now in the output pool.
    pub fn output(&self) -> std::io::Result<[f32; ADD_LEN]> {
        let mut bytes = [0u8; ADD_LEN * 4];
        self.output.read_exact_at(&mut bytes, 0)?;
        let mut out = [0f32; ADD_LEN];
        for (o, chunk) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Ok(out)
    }

    /// Overwrites the output pool (to tell a fresh result from a stale one).
    pub fn clear_output(&self, value: f32) -> std::io::Result<()> {
        self.output.write_all_at(&f32_bytes(&[value; ADD_LEN]), 0)
    }
}

/// Median and 99th percentile of a set of samples (sorted in place).
pub fn median_p99(samples: &mut [f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// A counting loop (NNAPI 1.3 WHILE): `x = start; while x < limit { x = x + 1 }`, float32 `[1]`
/// values, model inputs `start` and `limit`, output the final `x`. With `nesting` > 1 the
/// body is itself such a WHILE, `nesting` subgraphs deep (the innermost body is the ADD).
/// A limit of +∞ never ends: `x` stops growing at 2²⁴, where `x + 1` rounds back to `x`.
///
/// Referenced subgraphs: 0 is the condition `x < limit`, `k + 1` the body at depth `k`.
pub fn while_count_model(nesting: usize) -> Model {
    use OperandLifeTime::{ConstantCopy, ModelInput, ModelOutput};
    use OperandType::{Int32, TensorBool8, TensorFloat32};
    let nesting = nesting.max(1);
    let one = |ty, dims: &[u32], lifetime, consumers| {
        let mut o = Operand::new(ty, dims, lifetime);
        o.number_of_consumers = consumers;
        o
    };
    let subgraph = |k: u32| {
        let mut o = one(OperandType::Subgraph, &[], OperandLifeTime::Subgraph, 1);
        o.location.offset = k;
        o
    };
    // Constants shared by every body: 1.0 at offset 0, activation NONE at offset 4.
    let mut values = 1.0f32.to_le_bytes().to_vec();
    values.extend(0i32.to_le_bytes());
    let constant = |ty, dims: &[u32], offset| {
        let mut o = one(ty, dims, ConstantCopy, 1);
        o.location = DataLocation {
            pool_index: 0,
            offset,
            length: 4,
        };
        o
    };
    // (x, limit) → WHILE(condition, body k) → x'
    let while_graph = |body: u32, x_lifetime, out_lifetime| {
        (
            vec![
                subgraph(0),
                subgraph(body),
                one(TensorFloat32, &[1], x_lifetime, 1),
                one(TensorFloat32, &[1], x_lifetime, 1),
                one(TensorFloat32, &[1], out_lifetime, 0),
            ],
            vec![Operation {
                operation_type: OperationType::While.raw(),
                inputs: vec![0, 1, 2, 3],
                outputs: vec![4],
            }],
        )
    };
    let condition = nnhal_hal::Subgraph {
        operands: vec![
            one(TensorFloat32, &[1], ModelInput, 1),
            one(TensorFloat32, &[1], ModelInput, 1),
            one(TensorBool8, &[1], ModelOutput, 0),
        ],
        operations: vec![Operation {
            operation_type: OperationType::Less.raw(),
            inputs: vec![0, 1],
            outputs: vec![2],
        }],
        input_indexes: vec![0, 1],
        output_indexes: vec![2],
    };
    let mut referenced = vec![condition];
    for depth in 1..nesting {
        let (operands, operations) = while_graph(depth as u32 + 1, ModelInput, ModelOutput);
        referenced.push(nnhal_hal::Subgraph {
            operands,
            operations,
            input_indexes: vec![2, 3],
            output_indexes: vec![4],
        });
    }
    // The innermost body: x + 1 (the limit is read by the condition only).
    referenced.push(nnhal_hal::Subgraph {
        operands: vec![
            one(TensorFloat32, &[1], ModelInput, 1),
            one(TensorFloat32, &[1], ModelInput, 0),
            constant(TensorFloat32, &[1], 0),
            constant(Int32, &[], 4),
            one(TensorFloat32, &[1], ModelOutput, 0),
        ],
        operations: vec![Operation {
            operation_type: OperationType::Add.raw(),
            inputs: vec![0, 2, 3],
            outputs: vec![4],
        }],
        input_indexes: vec![0, 1],
        output_indexes: vec![4],
    });
    let (operands, operations) = while_graph(1, ModelInput, ModelOutput);
    Model {
        operands,
        operations,
        input_indexes: vec![2, 3],
        output_indexes: vec![4],
        operand_values: values,
        referenced,
        ..Model::default()
    }
}

/// One execution of [`while_count_model`]: `start` and `limit` in one sealed memfd pool, the
/// final `x` in another.
pub struct WhileRun {
    pub request: Request,
    output: File,
}

impl WhileRun {
    pub fn new(start: f32, limit: f32) -> std::io::Result<WhileRun> {
        let inputs = f32_bytes(&[start, limit]);
        let input_pool = create_memfd("nnhal-while-in", &inputs, 8, true)?;
        let output_pool = create_memfd("nnhal-while-out", &[], 4, true)?;
        let output = File::from(output_pool.try_clone()?);
        let arg = |pool_index, offset| RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index,
                offset,
                length: 4,
            },
            dimensions: Vec::new(),
        };
        Ok(WhileRun {
            request: Request {
                inputs: vec![arg(0, 0), arg(0, 4)],
                outputs: vec![arg(1, 0)],
                pools: vec![
                    Memory::shared(input_pool, 8),
                    Memory::shared(output_pool, 4),
                ],
            },
            output,
        })
    }

    /// The final `x` of the last execution.
    pub fn output(&self) -> std::io::Result<f32> {
        let mut bytes = [0u8; 4];
        self.output.read_exact_at(&mut bytes, 0)?;
        Ok(f32::from_le_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_request_pools_hold_the_inputs() {
        let run = AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[0.5; 4]).unwrap();
        assert_eq!(run.request.pools[0].size(), 32);
        run.clear_output(7.0).unwrap();
        assert_eq!(run.output().unwrap(), [7.0; 4]);
        let m = add_model();
        assert_eq!(m.operands.len(), 4);
        let (med, p99) = median_p99(&mut [3.0, 1.0, 2.0]);
        assert_eq!((med, p99), (2.0, 3.0));
    }

    #[test]
    fn every_probe_is_a_valid_model() {
        let probes = operation_probes();
        let ops: Vec<OperationType> = probes.iter().map(|(op, _)| *op).collect();
        let expected: Vec<OperationType> = OperationType::ALL
            .iter()
            .copied()
            .filter(|op| *op != OperationType::OemOperation)
            .collect();
        assert_eq!(ops, expected, "one probe per operation of the interface");
        for (op, model) in &probes {
            if let Err(e) = nnhal_hal::validate::validate_model(model) {
                panic!("{op} probe: {e}");
            }
        }
    }
}
