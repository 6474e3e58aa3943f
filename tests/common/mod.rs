//! What the bad-input tests of the later operations share (`bad_inputs_shape.rs`,
//! `bad_inputs_logic.rs`, `bad_inputs_reduce.rs`, `bad_inputs_detection.rs`): little-endian
//! values, one-operation models, requests whose every argument sits in a sealed memfd pool of
//! its own, and the status an execution ends with. Each test crate uses a part of it.
#![allow(dead_code)]

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::*;

pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32_values(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A single-operation model over `operands`; constants are given as (operand, bytes).
pub fn single_op(
    op: OperationType,
    mut operands: Vec<Operand>,
    constants: &[(usize, Vec<u8>)],
    inputs: &[u32],
    outputs: &[u32],
) -> Model {
    let mut values = Vec::new();
    for (i, bytes) in constants {
        while values.len() % 4 != 0 {
            values.push(0);
        }
        operands[*i].lifetime = ConstantCopy.raw();
        operands[*i].location = DataLocation {
            pool_index: 0,
            offset: values.len() as u32,
            length: bytes.len() as u32,
        };
        values.extend_from_slice(bytes);
    }
    for &i in inputs {
        operands[i as usize].number_of_consumers += 1;
    }
    let with = |lt: OperandLifeTime| {
        operands
            .iter()
            .enumerate()
            .filter(|(_, o)| o.lifetime == lt.raw())
            .map(|(i, _)| i as u32)
            .collect::<Vec<_>>()
    };
    Model {
        input_indexes: with(ModelInput),
        output_indexes: with(ModelOutput),
        operations: vec![Operation {
            operation_type: op.raw(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        }],
        operand_values: values,
        operands,
        ..Default::default()
    }
}

pub fn pool(data: &[u8], size: u64) -> Memory {
    Memory::shared(create_memfd("test", data, size, true).unwrap(), size)
}

/// A request with each input (bytes, dimensions) in a pool of its own and one output pool
/// per entry of `outs` (its size in bytes), each filled with 0xAB so writes can be seen.
pub fn request(inputs: &[(Vec<u8>, Vec<u32>)], outs: &[u32]) -> Request {
    let arg = |p: usize, len: usize, dims: Vec<u32>| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: p as u32,
            offset: 0,
            length: len as u32,
        },
        dimensions: dims,
    };
    let mut pools: Vec<Memory> = inputs
        .iter()
        .map(|(b, _)| pool(b, b.len().max(1) as u64))
        .collect();
    for &size in outs {
        pools.push(pool(&vec![0xAB; size as usize], u64::from(size.max(1))));
    }
    Request {
        inputs: inputs
            .iter()
            .enumerate()
            .map(|(p, (b, d))| arg(p, b.len(), d.clone()))
            .collect(),
        outputs: outs
            .iter()
            .enumerate()
            .map(|(k, &size)| arg(inputs.len() + k, size as usize, vec![]))
            .collect(),
        pools,
    }
}

pub fn status(prepared: &nnhal::PreparedModel, req: &Request) -> Option<ErrorStatus> {
    prepared.execute(req).err().map(|e| e.status())
}

/// The bytes of output pool `k` of `req` (after its inputs' pools).
pub fn output(req: &Request, k: usize) -> Vec<u8> {
    let p = &req.pools[req.inputs.len() + k];
    let mapped = MappedPool::map(p, "output").unwrap();
    mapped
        .read_vec(0, req.outputs[k].location.length as usize)
        .unwrap()
}

pub fn prepare(m: Model) -> std::sync::Arc<nnhal::PreparedModel> {
    let d = Driver::new(2).unwrap();
    let supported = d.supported_operations(&m).unwrap();
    assert_eq!(supported, vec![true; m.operations.len()]);
    d.prepare_model(m).unwrap()
}
