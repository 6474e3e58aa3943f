//! The NNAPI 1.1 operations (SUB, DIV, MEAN, PAD, SQUEEZE, STRIDED_SLICE, TRANSPOSE,
//! SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND) through the driver: what the reference defines at its
//! edges (int32 floor division, x/0, the signed mean's truncation, quant8 padding with the
//! output zero point, the omitted permutation), and malformed parameters answered
//! INVALID_ARGUMENT with a reason — from validation when they are constants, from the
//! execution when they arrive with the request or only the running reference refuses them —
//! never a panic.

use nnhal::hal::memory::{create_memfd, MappedPool, Memory};
use nnhal::hal::OperandLifeTime::*;
use nnhal::hal::OperandType::*;
use nnhal::hal::*;
use nnhal::Driver;

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One operand of the operation under test.
enum In {
    /// A model input: type, dimensions, the request's bytes.
    Given(OperandType, Vec<u32>, Vec<u8>),
    /// A constant: type, dimensions, bytes.
    Const(OperandType, Vec<u32>, Vec<u8>),
    /// An omitted optional input of this type.
    Omitted(OperandType),
}

fn int(v: i32) -> In {
    In::Const(Int32, vec![], i32s(&[v]))
}

fn ints(v: &[i32]) -> In {
    In::Const(TensorInt32, vec![v.len() as u32], i32s(v))
}

/// Quant8 operands get scale 0.5 and zero point 3 (signed: −3).
fn operand(ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> Operand {
    let mut o = Operand::new(ty, dims, lifetime);
    match ty {
        TensorQuant8Asymm => (o.scale, o.zero_point) = (0.5, 3),
        TensorQuant8AsymmSigned => (o.scale, o.zero_point) = (0.5, -3),
        _ => {}
    }
    o
}

/// A model of one operation `op` on `ins` with one output of `out_ty`, declared `out_dims`.
fn model(op: OperationType, ins: &[In], out_ty: OperandType, out_dims: &[u32]) -> Model {
    let mut m = Model::default();
    for i in ins {
        let o = match i {
            In::Given(ty, d, _) => {
                m.input_indexes.push(m.operands.len() as u32);
                operand(*ty, d, ModelInput)
            }
            In::Const(ty, d, bytes) => {
                while !m.operand_values.len().is_multiple_of(4) {
                    m.operand_values.push(0);
                }
                let mut o = operand(*ty, d, ConstantCopy);
                o.location = DataLocation {
                    pool_index: 0,
                    offset: m.operand_values.len() as u32,
                    length: bytes.len() as u32,
                };
                m.operand_values.extend_from_slice(bytes);
                o
            }
            In::Omitted(ty) => {
                let mut o = operand(*ty, &[0], NoValue);
                o.location = DataLocation::default();
                o
            }
        };
        let mut o = o;
        o.number_of_consumers = 1;
        m.operands.push(o);
    }
    let n = m.operands.len() as u32;
    m.operands.push(operand(out_ty, out_dims, ModelOutput));
    m.operations = vec![Operation {
        operation_type: op.raw(),
        inputs: (0..n).collect(),
        outputs: vec![n],
    }];
    m.output_indexes = vec![n];
    m
}

/// Prepares `m` (which must be supported) and executes it with the model inputs of `ins`;
/// the output bytes, or the execution's error.
fn run(m: Model, ins: &[In], out_bytes: usize) -> Result<Vec<u8>, HalError> {
    let driver = Driver::new(1).unwrap();
    assert_eq!(driver.supported_operations(&m).unwrap(), vec![true]);
    let prepared = driver.prepare_model(m).unwrap();
    let mut pools = vec![];
    let mut inputs = vec![];
    for i in ins {
        if let In::Given(_, dims, bytes) = i {
            let len = bytes.len().max(1) as u64;
            pools.push(Memory::shared(
                create_memfd("in", bytes, len, true).unwrap(),
                len,
            ));
            inputs.push(RequestArgument {
                has_no_value: false,
                location: DataLocation {
                    pool_index: pools.len() as u32 - 1,
                    offset: 0,
                    length: bytes.len() as u32,
                },
                dimensions: dims.clone(),
            });
        }
    }
    let out = Memory::shared(
        create_memfd("out", &[], out_bytes as u64, false).unwrap(),
        out_bytes as u64,
    );
    pools.push(out.clone());
    let request = Request {
        inputs,
        outputs: vec![RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index: pools.len() as u32 - 1,
                offset: 0,
                length: out_bytes as u32,
            },
            dimensions: vec![],
        }],
        pools,
    };
    prepared.execute(&request)?;
    Ok(MappedPool::map(&out, "out")
        .unwrap()
        .read_vec(0, out_bytes)
        .unwrap())
}

fn assert_invalid(m: &Model, what: &str) {
    match Driver::new(1).unwrap().supported_operations(m) {
        Err(e) => {
            assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{what}: {e}");
            assert!(!e.message().is_empty(), "{what}: no reason");
        }
        Ok(s) => panic!("{what}: supported_operations answered {s:?}"),
    }
}

fn f(dims: &[u32]) -> In {
    In::Given(
        TensorFloat32,
        dims.to_vec(),
        vec![0; dims.iter().product::<u32>() as usize * 4],
    )
}

#[test]
fn bi36_illegal_constant_parameters_of_the_1_1_operations() {
    use OperationType::*;
    let cases: Vec<(&str, Model)> = vec![
        (
            "PAD with a negative padding",
            model(
                Pad,
                &[
                    f(&[2, 2]),
                    In::Const(TensorInt32, vec![2, 2], i32s(&[0, -1, 0, 0])),
                ],
                TensorFloat32,
                &[0, 0],
            ),
        ),
        (
            "PAD with paddings of the wrong shape",
            model(
                Pad,
                &[f(&[2, 2]), ints(&[1, 1, 1, 1])],
                TensorFloat32,
                &[0, 0],
            ),
        ),
        (
            "MEAN over an axis beyond the rank",
            model(Mean, &[f(&[2, 2]), ints(&[2]), int(0)], TensorFloat32, &[0]),
        ),
        (
            "SQUEEZE of an extent other than 1",
            model(Squeeze, &[f(&[2, 1]), ints(&[0])], TensorFloat32, &[0]),
        ),
        (
            "TRANSPOSE with a repeated axis",
            model(
                Transpose,
                &[f(&[2, 3]), ints(&[0, 0])],
                TensorFloat32,
                &[0, 0],
            ),
        ),
        (
            "TRANSPOSE of rank 3 without a permutation",
            model(
                Transpose,
                &[f(&[2, 3, 4]), In::Omitted(TensorInt32)],
                TensorFloat32,
                &[0, 0, 0],
            ),
        ),
        (
            "STRIDED_SLICE with a zero stride",
            model(
                StridedSlice,
                &[
                    f(&[4]),
                    ints(&[0]),
                    ints(&[4]),
                    ints(&[0]),
                    int(0),
                    int(0),
                    int(0),
                ],
                TensorFloat32,
                &[0],
            ),
        ),
        (
            "SPACE_TO_BATCH_ND whose block does not divide the padded image",
            model(
                SpaceToBatchNd,
                &[
                    f(&[1, 3, 4, 1]),
                    ints(&[2, 2]),
                    In::Const(TensorInt32, vec![2, 2], i32s(&[0; 4])),
                ],
                TensorFloat32,
                &[0, 0, 0, 0],
            ),
        ),
        (
            "BATCH_TO_SPACE_ND with a zero block",
            model(
                BatchToSpaceNd,
                &[f(&[4, 1, 1, 1]), ints(&[0, 2])],
                TensorFloat32,
                &[0, 0, 0, 0],
            ),
        ),
        (
            "BATCH_TO_SPACE_ND whose block does not divide the batch",
            model(
                BatchToSpaceNd,
                &[f(&[3, 1, 1, 1]), ints(&[2, 1])],
                TensorFloat32,
                &[0, 0, 0, 0],
            ),
        ),
    ];
    for (what, m) in &cases {
        assert_invalid(m, what);
    }
}

#[test]
fn bi37_parameters_given_at_execution_fail_the_execution() {
    // The same faults, arriving with the request: INVALID_ARGUMENT from the execution.
    let ins = [f(&[2, 3]), In::Given(TensorInt32, vec![2], i32s(&[1, 1]))];
    let m = model(OperationType::Transpose, &ins, TensorFloat32, &[0, 0]);
    let e = run(m, &ins, 24).unwrap_err();
    assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{e}");

    let ins = [
        f(&[2, 2]),
        In::Given(TensorInt32, vec![2, 2], i32s(&[0, 0, -5, 0])),
    ];
    let m = model(OperationType::Pad, &ins, TensorFloat32, &[0, 0]);
    let e = run(m, &ins, 64).unwrap_err();
    assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{e}");
}

#[test]
fn strided_slice_that_the_reference_refuses_running_is_supported_and_fails_at_execution() {
    // Shrinking axis 0 of [2, 3] over two rows: valid, but the reference fails it when it runs.
    let ins = [
        f(&[2, 3]),
        ints(&[0, 0]),
        ints(&[2, 3]),
        ints(&[1, 1]),
        int(0),
        int(0),
        int(1),
    ];
    let m = model(OperationType::StridedSlice, &ins, TensorFloat32, &[3]);
    let e = run(m, &ins, 12).unwrap_err();
    assert_eq!(e.status(), ErrorStatus::InvalidArgument, "{e}");
}

#[test]
fn int32_div_floors_answers_zero_for_x_over_0_and_wraps_min_over_minus_one() {
    let a = [7, -7, 7, -7, 6, 5, i32::MIN, i32::MIN];
    let b = [2, 2, -2, -2, 3, 0, -1, 1];
    let ins = [
        In::Given(TensorInt32, vec![8], i32s(&a)),
        In::Given(TensorInt32, vec![8], i32s(&b)),
        int(0),
    ];
    let m = model(OperationType::Div, &ins, TensorInt32, &[8]);
    let out = run(m, &ins, 32).unwrap();
    assert_eq!(out, i32s(&[3, -4, -4, 3, 2, 0, i32::MIN, i32::MIN]));
}

#[test]
fn signed_quant8_mean_truncates_towards_zero_like_the_reference() {
    // int8 values −1 and −2 (zero point −3): their mean −1.5 truncates to −1. The unsigned
    // image's bytes (127, 126) would floor to 126, i.e. −2.
    let ins = [
        In::Given(TensorQuant8AsymmSigned, vec![2], vec![0xff, 0xfe]),
        ints(&[0]),
        int(1),
    ];
    let m = model(OperationType::Mean, &ins, TensorQuant8AsymmSigned, &[1]);
    assert_eq!(run(m, &ins, 1).unwrap(), vec![0xff]);
}

#[test]
fn quant8_pad_and_space_to_batch_fill_with_the_output_zero_point() {
    let ins = [
        In::Given(TensorQuant8Asymm, vec![1, 2], vec![10, 20]),
        In::Const(TensorInt32, vec![2, 2], i32s(&[0, 0, 1, 2])),
    ];
    let m = model(OperationType::Pad, &ins, TensorQuant8Asymm, &[1, 5]);
    assert_eq!(run(m, &ins, 5).unwrap(), vec![3, 10, 20, 3, 3]);

    // Signed: zero point −3 is the byte 0xfd.
    let ins = [
        In::Given(TensorQuant8AsymmSigned, vec![1, 1, 1, 1], vec![7]),
        ints(&[1, 2]),
        In::Const(TensorInt32, vec![2, 2], i32s(&[0, 0, 1, 0])),
    ];
    let m = model(
        OperationType::SpaceToBatchNd,
        &ins,
        TensorQuant8AsymmSigned,
        &[2, 1, 1, 1],
    );
    assert_eq!(run(m, &ins, 2).unwrap(), vec![0xfd, 7]);
}

#[test]
fn transpose_without_a_permutation_swaps_the_axes_of_a_matrix() {
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let ins = [
        In::Given(
            TensorFloat32,
            vec![2, 3],
            x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        In::Omitted(TensorInt32),
    ];
    let m = model(OperationType::Transpose, &ins, TensorFloat32, &[3, 2]);
    let out = run(m, &ins, 24).unwrap();
    let y: Vec<f32> = out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(y, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}
