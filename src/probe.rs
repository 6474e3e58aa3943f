//! Tiny built-in workloads for probing a device, in-process or through the service: a
//! one-operation ADD of two `[1, 2, 2, 1]` float32 tensors with its inputs and output in
//! sealed memfd pools (the shape used for the round-trip latency measurement and the
//! end-to-end tests).

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
    }
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
}
