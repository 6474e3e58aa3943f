//! Malformed-input classes BI-70 and BI-71 of the bad-input catalogue (`docs/bad-inputs.md`):
//! the run-time errors of the shape and indexing operations (transform and index families).
//! Each model is valid and runs; the request's dimensions or values make one execution
//! malformed, which is `INVALID_ARGUMENT` with a reason (or, past the execution's memory
//! budget, the budget's refusal), never a panic, a huge allocation or a write outside the
//! output; the next well-formed execution runs.

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::*;
use OperandType::*;

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_values(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A single-operation model over `operands`; constants are given as (operand, bytes).
fn single_op(
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

fn pool(data: &[u8], size: u64) -> Memory {
    Memory::shared(create_memfd("test", data, size, true).unwrap(), size)
}

/// A request with each input (bytes, dimensions) in a pool of its own and one output pool
/// per entry of `outs` (its size in bytes), each filled with 0xAB so writes can be seen.
fn request(inputs: &[(Vec<u8>, Vec<u32>)], outs: &[u32]) -> Request {
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
        pools.push(pool(&vec![0xAB; size as usize], u64::from(size)));
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

fn status(prepared: &nnhal::PreparedModel, req: &Request) -> Option<ErrorStatus> {
    prepared.execute(req).err().map(|e| e.status())
}

/// The bytes of output pool `k` of `req` (after its inputs' pools).
fn output(req: &Request, k: usize) -> Vec<u8> {
    let p = &req.pools[req.inputs.len() + k];
    let mapped = MappedPool::map(p, "output").unwrap();
    mapped
        .read_vec(0, req.outputs[k].location.length as usize)
        .unwrap()
}

fn prepare(m: Model) -> std::sync::Arc<nnhal::PreparedModel> {
    let d = Driver::new(2).unwrap();
    let supported = d.supported_operations(&m).unwrap();
    assert_eq!(supported, vec![true]);
    d.prepare_model(m).unwrap()
}

#[test]
fn bi70_gather_index_out_of_range_at_run_time() {
    // GATHER along axis 0 of a constant [3, 2] table; the indices arrive with the request.
    for axis in [0, -2] {
        let m = single_op(
            OperationType::Gather,
            vec![
                Operand::new(TensorFloat32, &[3, 2], ModelInput),
                Operand::new(Int32, &[], ModelInput),
                Operand::new(TensorInt32, &[2], ModelInput),
                Operand::new(TensorFloat32, &[2, 2], ModelOutput),
            ],
            &[
                (0, f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
                (1, i32_bytes(&[axis])),
            ],
            &[0, 1, 2],
            &[3],
        );
        let prepared = prepare(m);
        for bad in [-1, 3, i32::MIN, i32::MAX] {
            let req = request(&[(i32_bytes(&[0, bad]), vec![2])], &[16]);
            assert_eq!(
                status(&prepared, &req),
                Some(ErrorStatus::InvalidArgument),
                "index {bad}"
            );
            assert_eq!(output(&req, 0), vec![0xAB; 16], "nothing is written");
        }
        let req = request(&[(i32_bytes(&[2, 0]), vec![2])], &[16]);
        assert_eq!(status(&prepared, &req), None);
        assert_eq!(f32_values(&output(&req, 0)), [5.0, 6.0, 1.0, 2.0]);
    }
}

#[test]
fn bi71_slice_past_the_input_at_run_time() {
    // SLICE of a [3, 4] input whose begin and size arrive with the request.
    let m = single_op(
        OperationType::Slice,
        vec![
            Operand::new(TensorFloat32, &[3, 4], ModelInput),
            Operand::new(TensorInt32, &[2], ModelInput),
            Operand::new(TensorInt32, &[2], ModelInput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
        ],
        &[],
        &[0, 1, 2],
        &[3],
    );
    let prepared = prepare(m);
    let x: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let input = (f32_bytes(&x), vec![3, 4]);
    for (begin, size) in [
        ([2, 0], [2, 4]),  // begin + size past the rows
        ([0, 4], [1, 1]),  // begin at the end
        ([-1, 0], [1, 1]), // negative begin
        ([0, 0], [1, -2]), // negative size other than -1
        ([0, 1], [1, 0]),  // empty slice
    ] {
        let req = request(
            &[
                input.clone(),
                (i32_bytes(&begin), vec![2]),
                (i32_bytes(&size), vec![2]),
            ],
            &[48],
        );
        assert_eq!(
            status(&prepared, &req),
            Some(ErrorStatus::InvalidArgument),
            "begin {begin:?} size {size:?}"
        );
    }
    // -1: to the end of the axis.
    let req = request(
        &[
            input,
            (i32_bytes(&[1, 1]), vec![2]),
            (i32_bytes(&[2, -1]), vec![2]),
        ],
        &[24],
    );
    assert_eq!(status(&prepared, &req), None);
    assert_eq!(
        f32_values(&output(&req, 0)),
        [5.0, 6.0, 7.0, 9.0, 10.0, 11.0]
    );
}

#[test]
fn bi71_split_not_divisible_at_run_time() {
    // SPLIT into 3 parts along the last axis of an input whose shape arrives with the request.
    let m = single_op(
        OperationType::Split,
        vec![
            Operand::new(TensorInt32, &[0, 0], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(TensorInt32, &[0, 0], ModelOutput),
            Operand::new(TensorInt32, &[0, 0], ModelOutput),
            Operand::new(TensorInt32, &[0, 0], ModelOutput),
        ],
        &[(1, i32_bytes(&[-1])), (2, i32_bytes(&[3]))],
        &[0, 1, 2],
        &[3, 4, 5],
    );
    let prepared = prepare(m);
    let bad = request(&[(i32_bytes(&[0; 8]), vec![2, 4])], &[16; 3]);
    assert_eq!(status(&prepared, &bad), Some(ErrorStatus::InvalidArgument));
    let x: Vec<i32> = (0..6).collect();
    let good = request(&[(i32_bytes(&x), vec![2, 3])], &[8; 3]);
    assert_eq!(status(&prepared, &good), None);
    for (k, want) in [[0, 3], [1, 4], [2, 5]].iter().enumerate() {
        assert_eq!(output(&good, k), i32_bytes(want), "part {k}");
    }
}

#[test]
fn bi71_split_with_another_number_of_outputs_is_refused() {
    // num_splits 3 with two outputs: malformed when num_splits is a constant; at run time
    // when it arrives with the request.
    let operands = || {
        vec![
            Operand::new(TensorFloat32, &[2, 6], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
        ]
    };
    let fixed = single_op(
        OperationType::Split,
        operands(),
        &[(1, i32_bytes(&[1])), (2, i32_bytes(&[3]))],
        &[0, 1, 2],
        &[3, 4],
    );
    let d = Driver::new(2).unwrap();
    assert_eq!(
        d.supported_operations(&fixed).unwrap_err().status(),
        ErrorStatus::InvalidArgument
    );
    let late = single_op(
        OperationType::Split,
        operands(),
        &[(1, i32_bytes(&[1]))],
        &[0, 1, 2],
        &[3, 4],
    );
    let prepared = prepare(late);
    let x = (f32_bytes(&[0.0; 12]), vec![2, 6]);
    let bad = request(&[x.clone(), (i32_bytes(&[3]), vec![])], &[24, 24]);
    assert_eq!(status(&prepared, &bad), Some(ErrorStatus::InvalidArgument));
    let good = request(&[x, (i32_bytes(&[2]), vec![])], &[24, 24]);
    assert_eq!(status(&prepared, &good), None);
}

#[test]
fn bi71_tile_and_fill_sizes_that_overflow_or_exceed_the_budget() {
    // TILE of a [2, 2] input by multiples that arrive with the request.
    let m = single_op(
        OperationType::Tile,
        vec![
            Operand::new(TensorFloat32, &[2, 2], ModelInput),
            Operand::new(TensorInt32, &[2], ModelInput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
        ],
        &[],
        &[0, 1],
        &[2],
    );
    let prepared = prepare(m);
    let x = (f32_bytes(&[1.0, 2.0, 3.0, 4.0]), vec![2, 2]);
    for multiples in [[65536, 65536], [i32::MAX, 1], [0, 1], [-1, 1]] {
        let req = request(&[x.clone(), (i32_bytes(&multiples), vec![2])], &[16]);
        assert_eq!(
            status(&prepared, &req),
            Some(ErrorStatus::InvalidArgument),
            "multiples {multiples:?}"
        );
    }
    let req = request(&[x, (i32_bytes(&[1, 2]), vec![2])], &[32]);
    assert_eq!(status(&prepared, &req), None);
    assert_eq!(
        f32_values(&output(&req, 0)),
        [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]
    );

    // FILL whose output dimensions arrive with the request.
    let m = single_op(
        OperationType::Fill,
        vec![
            Operand::new(TensorInt32, &[2], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
        ],
        &[(1, f32_bytes(&[2.5]))],
        &[0, 1],
        &[2],
    );
    let prepared = prepare(m);
    for dims in [[1 << 20, 1 << 20], [-3, 2], [0, 4]] {
        let req = request(&[(i32_bytes(&dims), vec![2])], &[16]);
        assert_eq!(
            status(&prepared, &req),
            Some(ErrorStatus::InvalidArgument),
            "dims {dims:?}"
        );
    }
    // 1.6·10⁹ elements: a valid count, whose 6.4 GB are past the execution's memory budget;
    // refused before anything of that size is allocated.
    let req = request(&[(i32_bytes(&[40_000, 40_000]), vec![2])], &[16]);
    assert_eq!(status(&prepared, &req), Some(ErrorStatus::GeneralFailure));
    let req = request(&[(i32_bytes(&[2, 2]), vec![2])], &[16]);
    assert_eq!(status(&prepared, &req), None);
    assert_eq!(f32_values(&output(&req, 0)), [2.5; 4]);
}
