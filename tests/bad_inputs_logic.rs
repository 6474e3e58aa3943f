//! Malformed-input classes BI-67…BI-69 of the bad-input catalogue (`docs/bad-inputs.md`): the
//! run-time errors of the math, logic and reduce families. Each model is valid and runs; the
//! request's dimensions or values make one execution malformed, which is `INVALID_ARGUMENT`
//! with a reason, never a panic or a write outside the output.

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::*;
use OperandType::*;

fn driver() -> Driver {
    Driver::new(2).unwrap()
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
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

/// A request with each input (bytes, dimensions) in a pool of its own and one output of
/// `out_bytes` in the last pool.
fn request(inputs: &[(Vec<u8>, Vec<u32>)], out_bytes: u32) -> Request {
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
    pools.push(pool(&[], u64::from(out_bytes)));
    Request {
        inputs: inputs
            .iter()
            .enumerate()
            .map(|(p, (b, d))| arg(p, b.len(), d.clone()))
            .collect(),
        outputs: vec![arg(inputs.len(), out_bytes as usize, vec![])],
        pools,
    }
}

fn status(prepared: &nnhal::PreparedModel, req: &Request) -> Option<ErrorStatus> {
    prepared.execute(req).err().map(|e| e.status())
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
            status(&prepared, &request(&[a.clone(), fits], 6 * out_size)),
            None
        );
        assert_eq!(
            status(&prepared, &request(&[a, clash], 12 * out_size)),
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
        status(&prepared, &request(&[cond.clone(), a.clone(), b], 16)),
        None
    );
    let wide = (i32_bytes(&[5, 6, 7, 8, 9, 10]), vec![2, 3]);
    assert_eq!(
        status(&prepared, &request(&[cond.clone(), a.clone(), wide], 24)),
        Some(ErrorStatus::InvalidArgument)
    );
    let long_cond = (vec![1, 0, 1, 0, 1, 0], vec![3, 2]);
    let b = (i32_bytes(&[5, 6, 7, 8]), vec![2, 2]);
    assert_eq!(
        status(&prepared, &request(&[long_cond, a, b], 24)),
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
        let req = request(&[x.clone(), (i32_bytes(&[axis]), vec![1])], 3);
        assert_eq!(status(&prepared, &req), want, "axis {axis}");
    }
}
