//! Malformed-input class BI-72 of the bad-input catalogue (`docs/bad-inputs.md`): a run-time
//! axis or count out of range in the NNAPI 1.2 reductions and the nearest-neighbour resize.
//! Each model is valid and runs; the axis, `k` or output size arrives with the request, and a
//! value out of range makes that execution `INVALID_ARGUMENT` with a reason — never a panic or
//! a write outside the output — while the next well-formed one runs.

mod common;

use nnhal::hal::builder::ModelBuilder;
use nnhal::hal::*;

use common::*;
use OperandType::*;

const X: [f32; 6] = [1.0, 7.0, 3.0, 4.0, 5.0, 2.0];

#[test]
fn bi72_runtime_axis_or_count_out_of_range() {
    // REDUCE_MAX / REDUCE_MIN / REDUCE_PROD / REDUCE_SUM of a [2, 3] float32 input over axes
    // the request supplies: −2…1 address it, 2, −3 and i32::MIN do not.
    for op in [
        OperationType::ReduceMax,
        OperationType::ReduceMin,
        OperationType::ReduceProd,
        OperationType::ReduceSum,
    ] {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[2, 3]);
        let axes = b.input(TensorInt32, &[0]);
        let keep = b.constant(Bool, &[], &[0]);
        let y = b.output(TensorFloat32, &[0]);
        b.operation(op, &[x, axes, keep], &[y]);
        let prepared = prepare(b.finish());
        for (list, want) in [
            (vec![-2], None),
            (vec![1, -1], None),
            (vec![0, 2], Some(ErrorStatus::InvalidArgument)),
            (vec![-3], Some(ErrorStatus::InvalidArgument)),
            (vec![i32::MIN], Some(ErrorStatus::InvalidArgument)),
        ] {
            let n = list.len() as u32;
            let req = request(
                &[(f32_bytes(&X), vec![2, 3]), (i32_bytes(&list), vec![n])],
                &[12],
            );
            assert_eq!(status(&prepared, &req), want, "{op} axes {list:?}");
        }
    }

    // ARGMAX / ARGMIN with the axis a model input.
    for op in [OperationType::Argmax, OperationType::Argmin] {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[2, 3]);
        let axis = b.input(Int32, &[]);
        let y = b.output(TensorInt32, &[0]);
        b.operation(op, &[x, axis], &[y]);
        let prepared = prepare(b.finish());
        for (a, want) in [
            (-1, None),
            (0, None),
            (2, Some(ErrorStatus::InvalidArgument)),
            (-3, Some(ErrorStatus::InvalidArgument)),
            (i32::MAX, Some(ErrorStatus::InvalidArgument)),
        ] {
            let req = request(
                &[(f32_bytes(&X), vec![2, 3]), (i32_bytes(&[a]), vec![])],
                &[12],
            );
            assert_eq!(status(&prepared, &req), want, "{op} axis {a}");
        }
    }

    // TOPK_V2 with k a model input: 1…3 for rows of 3; 0, −1 and 4 are out of range.
    let mut b = ModelBuilder::new();
    let x = b.input(TensorFloat32, &[2, 3]);
    let k = b.input(Int32, &[]);
    let values = b.output(TensorFloat32, &[0, 0]);
    let indices = b.output(TensorInt32, &[0, 0]);
    b.operation(OperationType::TopkV2, &[x, k], &[values, indices]);
    let prepared = prepare(b.finish());
    for (kv, want) in [
        (1, None),
        (3, None),
        (4, Some(ErrorStatus::InvalidArgument)),
        (0, Some(ErrorStatus::InvalidArgument)),
        (-1, Some(ErrorStatus::InvalidArgument)),
    ] {
        let req = request(
            &[(f32_bytes(&X), vec![2, 3]), (i32_bytes(&[kv]), vec![])],
            &[24, 24],
        );
        assert_eq!(status(&prepared, &req), want, "k {kv}");
    }

    // RESIZE_NEAREST_NEIGHBOR with the output size or the scales model inputs: a size ≤ 0, a
    // scale giving no output row, or an output past 2^31 − 1 elements.
    let mut b = ModelBuilder::new();
    let x = b.input(TensorFloat32, &[1, 2, 3, 1]);
    let (w, h) = (b.input(Int32, &[]), b.input(Int32, &[]));
    let layout = b.constant(Bool, &[], &[0]);
    let y = b.output(TensorFloat32, &[0, 0, 0, 0]);
    b.operation(
        OperationType::ResizeNearestNeighbor,
        &[x, w, h, layout],
        &[y],
    );
    let prepared = prepare(b.finish());
    for (size, want) in [
        ((4, 4), None),
        ((0, 4), Some(ErrorStatus::InvalidArgument)),
        ((4, -1), Some(ErrorStatus::InvalidArgument)),
        ((65536, 65536), Some(ErrorStatus::InvalidArgument)),
    ] {
        let req = request(
            &[
                (f32_bytes(&X), vec![1, 2, 3, 1]),
                (i32_bytes(&[size.0]), vec![]),
                (i32_bytes(&[size.1]), vec![]),
            ],
            &[64],
        );
        assert_eq!(status(&prepared, &req), want, "size {size:?}");
    }
    let mut b = ModelBuilder::new();
    let x = b.input(TensorFloat32, &[1, 2, 3, 1]);
    let (w, h) = (b.input(Float32, &[]), b.input(Float32, &[]));
    let layout = b.constant(Bool, &[], &[0]);
    let y = b.output(TensorFloat32, &[0, 0, 0, 0]);
    b.operation(
        OperationType::ResizeNearestNeighbor,
        &[x, w, h, layout],
        &[y],
    );
    let prepared = prepare(b.finish());
    for (scale, want) in [
        ((2.0, 2.0), None),
        ((0.1, 2.0), Some(ErrorStatus::InvalidArgument)),
        ((2.0, -1.0), Some(ErrorStatus::InvalidArgument)),
        ((1e9, 1e9), Some(ErrorStatus::InvalidArgument)),
    ] {
        let req = request(
            &[
                (f32_bytes(&X), vec![1, 2, 3, 1]),
                (f32_bytes(&[scale.0]), vec![]),
                (f32_bytes(&[scale.1]), vec![]),
            ],
            &[96],
        );
        assert_eq!(status(&prepared, &req), want, "scales {scale:?}");
    }
}
