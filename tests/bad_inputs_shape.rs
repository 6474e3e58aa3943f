//! Malformed-input classes BI-70 and BI-71 of the bad-input catalogue (`docs/bad-inputs.md`):
//! the run-time errors of the shape and indexing operations (transform and index families).
//! Each model is valid and runs; the request's dimensions or values make one execution
//! malformed, which is `INVALID_ARGUMENT` with a reason (or, past the execution's memory
//! budget, the budget's refusal), never a panic, a huge allocation or a write outside the
//! output; the next well-formed execution runs.

mod common;

use nnhal::hal::*;
use nnhal::Driver;

use common::*;
use OperandLifeTime::*;
use OperandType::*;

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
