//! Malformed-input classes BI-67…BI-69 of the bad-input catalogue (`docs/bad-inputs.md`): the
//! run-time errors of the math, logic and reduce families. Each model is valid and runs; the
//! request's dimensions or values make one execution malformed, which is `INVALID_ARGUMENT`
//! with a reason, never a panic or a write outside the output.

mod common;

use nnhal::hal::*;
use nnhal::Driver;

use common::*;
use OperandLifeTime::*;
use OperandType::*;

fn driver() -> Driver {
    Driver::new(2).unwrap()
}

#[test]
fn bi67_runtime_shapes_that_do_not_broadcast() {
    // MAXIMUM (float32) and LESS (into TENSOR_BOOL8) of two inputs whose dimensions arrive
    // with the request: [2, 3] against [1, 3] broadcasts, against [4, 3] does not.
    for (op, out_ty, out_size) in [
        (OperationType::Maximum, TensorFloat32, 4u32),
        (OperationType::Less, TensorBool8, 1),
    ] {
        let m = single_op(
            op,
            vec![
                Operand::new(TensorFloat32, &[0, 0], ModelInput),
                Operand::new(TensorFloat32, &[0, 0], ModelInput),
                Operand::new(out_ty, &[0, 0], ModelOutput),
            ],
            &[],
            &[0, 1],
            &[2],
        );
        let d = driver();
        assert_eq!(d.supported_operations(&m).unwrap(), vec![true], "{op}");
        let prepared = d.prepare_model(m).unwrap();
        let a = (f32_bytes(&[1.0; 6]), vec![2, 3]);
        let fits = (f32_bytes(&[2.0; 3]), vec![1, 3]);
        let clash = (f32_bytes(&[2.0; 12]), vec![4, 3]);
        assert_eq!(
            status(&prepared, &request(&[a.clone(), fits], &[6 * out_size])),
            None
        );
        assert_eq!(
            status(&prepared, &request(&[a, clash], &[12 * out_size])),
            Some(ErrorStatus::InvalidArgument),
            "{op}: [2, 3] against [4, 3]"
        );
    }
}

#[test]
fn bi68_select_shapes_that_differ_at_run_time() {
    // SELECT takes a condition and two values of one shape; the request gives the shapes.
    let m = single_op(
        OperationType::Select,
        vec![
            Operand::new(TensorBool8, &[0, 0], ModelInput),
            Operand::new(TensorInt32, &[0, 0], ModelInput),
            Operand::new(TensorInt32, &[0, 0], ModelInput),
            Operand::new(TensorInt32, &[0, 0], ModelOutput),
        ],
        &[],
        &[0, 1, 2],
        &[3],
    );
    let prepared = driver().prepare_model(m).unwrap();
    let cond = (vec![1, 0, 1, 0], vec![2, 2]);
    let a = (i32_bytes(&[1, 2, 3, 4]), vec![2, 2]);
    let b = (i32_bytes(&[5, 6, 7, 8]), vec![2, 2]);
    assert_eq!(
        status(&prepared, &request(&[cond.clone(), a.clone(), b], &[16])),
        None
    );
    let wide = (i32_bytes(&[5, 6, 7, 8, 9, 10]), vec![2, 3]);
    assert_eq!(
        status(&prepared, &request(&[cond.clone(), a.clone(), wide], &[24])),
        Some(ErrorStatus::InvalidArgument)
    );
    let long_cond = (vec![1, 0, 1, 0, 1, 0], vec![3, 2]);
    let b = (i32_bytes(&[5, 6, 7, 8]), vec![2, 2]);
    assert_eq!(
        status(&prepared, &request(&[long_cond, a, b], &[24])),
        Some(ErrorStatus::InvalidArgument)
    );
}

#[test]
fn bi69_reduce_axes_out_of_range_at_run_time() {
    // REDUCE_ANY over axes the request supplies: −2…1 address a rank-2 input, 2 and −3 do
    // not.
    let mut keep = Operand::new(Bool, &[], ConstantCopy);
    keep.lifetime = ConstantCopy.raw();
    let m = single_op(
        OperationType::ReduceAny,
        vec![
            Operand::new(TensorBool8, &[2, 3], ModelInput),
            Operand::new(TensorInt32, &[1], ModelInput),
            keep,
            Operand::new(TensorBool8, &[0], ModelOutput),
        ],
        &[(2, vec![0])],
        &[0, 1, 2],
        &[3],
    );
    let prepared = driver().prepare_model(m).unwrap();
    let x = (vec![0, 0, 1, 0, 0, 0], vec![2, 3]);
    for (axis, want) in [
        (-2, None),
        (1, None),
        (2, Some(ErrorStatus::InvalidArgument)),
        (-3, Some(ErrorStatus::InvalidArgument)),
        (i32::MIN, Some(ErrorStatus::InvalidArgument)),
    ] {
        let req = request(&[x.clone(), (i32_bytes(&[axis]), vec![1])], &[3]);
        assert_eq!(status(&prepared, &req), want, "axis {axis}");
    }
}
