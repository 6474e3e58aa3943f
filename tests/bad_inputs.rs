//! Malformed-input classes BI-27…BI-60 of the bad-input catalogue (`docs/bad-inputs.md`; the
//! ones outside the VTS mutators, which vts_tests covers), exercised through the in-process
//! driver with real memfd pools. Each test is named after its class and asserts the catalogued
//! result, and that the driver neither panicked nor disturbed later executions.

use nnhal::hal::memory::{create_memfd, Memory, PROT_READ};
use nnhal::hal::*;
use nnhal::Driver;
use std::os::fd::OwnedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use OperandLifeTime::*;
use OperandType::*;

fn driver() -> Driver {
    Driver::new(2).unwrap()
}

fn operand(ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> Operand {
    let mut o = Operand::new(ty, dims, lifetime);
    if ty == TensorQuant8Asymm {
        o.scale = 0.5;
    }
    o
}

/// Appends `bytes` to `operand_values` at a 4-byte boundary and points `operand` at them.
fn set_constant(m: &mut Model, operand: usize, bytes: &[u8]) {
    while !m.operand_values.len().is_multiple_of(4) {
        m.operand_values.push(0);
    }
    let offset = m.operand_values.len() as u32;
    m.operand_values.extend_from_slice(bytes);
    m.operands[operand].lifetime = ConstantCopy.raw();
    m.operands[operand].location = DataLocation {
        pool_index: 0,
        offset,
        length: bytes.len() as u32,
    };
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Recomputes every operand's consumer count from the operations.
fn fix_consumers(m: &mut Model) {
    for o in &mut m.operands {
        o.number_of_consumers = 0;
    }
    for op in m.operations.clone() {
        for i in op.inputs {
            if let Some(o) = m.operands.get_mut(i as usize) {
                o.number_of_consumers += 1;
            }
        }
    }
}

/// A single-operation model: `inputs` are operand specs (the caller makes some constant).
fn single_op(op: OperationType, operands: Vec<Operand>, inputs: &[u32], outputs: &[u32]) -> Model {
    let mut m = Model {
        input_indexes: operands
            .iter()
            .enumerate()
            .filter(|(_, o)| o.lifetime == ModelInput.raw())
            .map(|(i, _)| i as u32)
            .collect(),
        output_indexes: operands
            .iter()
            .enumerate()
            .filter(|(_, o)| o.lifetime == ModelOutput.raw())
            .map(|(i, _)| i as u32)
            .collect(),
        operands,
        operations: vec![Operation {
            operation_type: op.raw(),
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
        }],
        ..Default::default()
    };
    fix_consumers(&mut m);
    m
}

/// ADD of two float [1,2,2,1] model inputs with a constant activation.
fn add_model(act: i32) -> Model {
    let mut m = single_op(
        OperationType::Add,
        vec![
            operand(TensorFloat32, &[1, 2, 2, 1], ModelInput),
            operand(TensorFloat32, &[1, 2, 2, 1], ModelInput),
            operand(Int32, &[], ModelInput),
            operand(TensorFloat32, &[1, 2, 2, 1], ModelOutput),
        ],
        &[0, 1, 2],
        &[3],
    );
    set_constant(&mut m, 2, &i32_bytes(&[act]));
    m.input_indexes = vec![0, 1];
    m
}

fn pool(data: &[u8], size: u64) -> Memory {
    Memory::shared(create_memfd("test", data, size, true).unwrap(), size)
}

fn arg(pool: u32, offset: u32, length: u32) -> RequestArgument {
    RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: pool,
            offset,
            length,
        },
        dimensions: vec![],
    }
}

/// Inputs `a` and `b` (4 floats each) in pool 0, one 16-byte output in pool 1.
fn add_request(a: &[f32], b: &[f32]) -> (Request, Memory) {
    let mut input = f32_bytes(a);
    input.extend(f32_bytes(b));
    let out = pool(&[], 16);
    let req = Request {
        inputs: vec![arg(0, 0, 16), arg(0, 16, 16)],
        outputs: vec![arg(1, 0, 16)],
        pools: vec![pool(&input, 32), out.clone()],
    };
    (req, out)
}

fn read_f32(mem: &Memory, offset: u64, n: usize) -> Vec<f32> {
    let p = MappedPool::map(mem, "out").unwrap();
    let b = p.read_vec(offset, n * 4).unwrap();
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Asserts that the model is rejected as malformed by both entry points, without panicking.
#[track_caller]
fn assert_model_invalid(m: &Model, why: &str) {
    let d = driver();
    let r = catch_unwind(AssertUnwindSafe(|| {
        (
            d.supported_operations(m),
            d.prepare_model(m.clone()).map(|_| ()),
        )
    }));
    let (s, p) = r.unwrap_or_else(|_| panic!("{why}: driver panicked"));
    assert_eq!(
        s.err().map(|e| e.status()),
        Some(ErrorStatus::InvalidArgument),
        "{why}: supported_operations"
    );
    assert_eq!(
        p.err().map(|e| e.status()),
        Some(ErrorStatus::InvalidArgument),
        "{why}: prepare_model"
    );
}

/// Prepares a valid model, then asserts `request` fails with `want`, and that a good request
/// still works afterwards on the same prepared model.
#[track_caller]
fn assert_request_status(m: &Model, request: &Request, want: ErrorStatus, why: &str) {
    let d = driver();
    let prepared = d.prepare_model(m.clone()).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| prepared.execute(request)));
    let r = r.unwrap_or_else(|_| panic!("{why}: driver panicked"));
    assert_eq!(r.err().map(|e| e.status()), Some(want), "{why}");
}

fn assert_add_works(m: &Model) {
    let prepared = driver().prepare_model(m.clone()).unwrap();
    let (req, out) = add_request(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]);
    prepared.execute(&req).unwrap();
    assert_eq!(read_f32(&out, 0, 4), vec![11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn baseline_add_model_is_valid_and_correct() {
    assert_add_works(&add_model(0));
}

#[test]
fn bi27_constant_copy_location_outside_operand_values() {
    let mut m = add_model(0);
    m.operands[2].location.offset = 1000;
    assert_model_invalid(&m, "offset past operandValues");
    let mut m = add_model(0);
    m.operands[2].location.offset = u32::MAX - 1; // offset + length wraps in 32 bits
    assert_model_invalid(&m, "wrapping offset");
    let mut m = add_model(0);
    m.operands[2].location.pool_index = 1;
    assert_model_invalid(&m, "CONSTANT_COPY with pool index 1");
}

#[test]
fn bi28_constant_reference_outside_pool() {
    let mut m = add_model(0);
    m.operands[2].lifetime = ConstantReference.raw();
    m.operands[2].location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 4,
    };
    assert_model_invalid(&m, "no pools at all");
    m.pools.push(pool(&i32_bytes(&[0]), 4));
    assert_add_works(&m);
    m.operands[2].location.offset = 2;
    assert_model_invalid(&m, "region past the pool");
    m.operands[2].location = DataLocation {
        pool_index: 1,
        offset: 0,
        length: 4,
    };
    assert_model_invalid(&m, "pool index out of range");
}

#[test]
fn bi29_constant_length_mismatch() {
    let mut m = add_model(0);
    m.operands[2].location.length = 3;
    assert_model_invalid(&m, "3-byte INT32");
    let mut m = add_model(0);
    m.operand_values.extend([0; 8]);
    m.operands[2].location.length = 8;
    assert_model_invalid(&m, "8-byte INT32");
}

#[test]
fn bi30_location_on_a_non_constant_operand() {
    for (operand, what) in [(0, "model input"), (3, "model output")] {
        let mut m = add_model(0);
        m.operands[operand].location = DataLocation {
            pool_index: 0,
            offset: 0,
            length: 4,
        };
        assert_model_invalid(&m, what);
    }
}

#[test]
fn bi31_constant_with_unspecified_dimension() {
    let mut m = add_model(0);
    m.operands[1].dimensions = vec![1, 0, 2, 1];
    set_constant(&mut m, 1, &f32_bytes(&[0.0; 2]));
    m.input_indexes = vec![0];
    assert_model_invalid(&m, "constant [1,0,2,1]");
}

#[test]
fn bi32_lifetime_out_of_range() {
    for bad in [-1, 6, 100] {
        let mut m = add_model(0);
        m.operands[3].lifetime = bad;
        assert_model_invalid(&m, &format!("lifetime {bad}"));
    }
}

#[test]
fn bi33_duplicate_model_inputs_or_outputs() {
    let mut m = add_model(0);
    m.input_indexes = vec![0, 0, 1];
    assert_model_invalid(&m, "input listed twice");
    let mut m = add_model(0);
    m.output_indexes = vec![3, 3];
    assert_model_invalid(&m, "output listed twice");
    let mut m = add_model(0);
    m.output_indexes = vec![3, 0];
    assert_model_invalid(&m, "operand both input and output");
}

#[test]
fn bi34_empty_model() {
    assert_model_invalid(&Model::default(), "nothing at all");
    let mut m = add_model(0);
    m.operations.clear();
    fix_consumers(&mut m);
    assert_model_invalid(&m, "no operations");
    let mut m = add_model(0);
    m.input_indexes.clear();
    assert_model_invalid(&m, "no inputs");
    let mut m = add_model(0);
    m.output_indexes.clear();
    assert_model_invalid(&m, "no outputs");
}

#[test]
fn bi35_model_pool_unusable() {
    let with_pool = |p: Memory| {
        let mut m = add_model(0);
        m.pools.push(p);
        m
    };
    assert_model_invalid(
        &with_pool(Memory::Unsupported("hardware_buffer_blob".into())),
        "hardware buffer",
    );
    assert_model_invalid(&with_pool(pool(&[], 0)), "size 0");
    let (r, _w) = nix::unistd::pipe().unwrap();
    assert_model_invalid(&with_pool(Memory::shared(r, 64)), "pipe fd");
    let fd = Arc::new(create_memfd("t", &[], 64, true).unwrap());
    assert_model_invalid(
        &with_pool(Memory::MappableFile {
            fd: fd.clone(),
            size: 64,
            prot: 0x4 | PROT_READ,
            offset: 0,
        }),
        "PROT_EXEC",
    );
    assert_model_invalid(
        &with_pool(Memory::MappableFile {
            fd,
            size: 64,
            prot: PROT_READ,
            offset: 4096,
        }),
        "past EOF",
    );
}

/// An AVERAGE_POOL_2D (implicit padding) over a [1,4,4,1] input with the given parameters.
fn avg_pool_model(scheme: i32, stride: i32, filter: i32, act: i32) -> Model {
    let mut ops = vec![operand(TensorFloat32, &[1, 4, 4, 1], ModelInput)];
    ops.extend((0..6).map(|_| operand(Int32, &[], ModelInput)));
    ops.push(operand(TensorFloat32, &[1, 0, 0, 1], ModelOutput));
    let mut m = single_op(
        OperationType::AveragePool2d,
        ops,
        &[0, 1, 2, 3, 4, 5, 6],
        &[7],
    );
    for (i, v) in [scheme, stride, stride, filter, filter, act]
        .into_iter()
        .enumerate()
    {
        set_constant(&mut m, i + 1, &i32_bytes(&[v]));
    }
    m.input_indexes = vec![0];
    m
}

#[test]
fn bi36_illegal_constant_scalar_parameter() {
    assert_model_invalid(&add_model(4), "activation 4");
    assert_model_invalid(&add_model(-1), "activation -1");
    assert!(driver().prepare_model(avg_pool_model(1, 1, 2, 0)).is_ok());
    assert_model_invalid(&avg_pool_model(3, 1, 2, 0), "padding scheme 3");
    assert_model_invalid(&avg_pool_model(1, 0, 2, 0), "stride 0");
    assert_model_invalid(&avg_pool_model(1, -2, 2, 0), "negative stride");
    assert_model_invalid(&avg_pool_model(1, 1, 0, 0), "filter 0");
    // SOFTMAX beta ≤ 0 or NaN.
    for beta in [0.0f32, -1.0, f32::NAN, f32::INFINITY] {
        let mut m = single_op(
            OperationType::Softmax,
            vec![
                operand(TensorFloat32, &[1, 4], ModelInput),
                operand(Float32, &[], ModelInput),
                operand(TensorFloat32, &[1, 4], ModelOutput),
            ],
            &[0, 1],
            &[2],
        );
        set_constant(&mut m, 1, &f32_bytes(&[beta]));
        m.input_indexes = vec![0];
        assert_model_invalid(&m, &format!("softmax beta {beta}"));
    }
    // DEPTH_TO_SPACE block 0, CONCATENATION axis out of range.
    let mut m = single_op(
        OperationType::DepthToSpace,
        vec![
            operand(TensorFloat32, &[1, 1, 1, 4], ModelInput),
            operand(Int32, &[], ModelInput),
            operand(TensorFloat32, &[1, 2, 2, 1], ModelOutput),
        ],
        &[0, 1],
        &[2],
    );
    set_constant(&mut m, 1, &i32_bytes(&[0]));
    m.input_indexes = vec![0];
    assert_model_invalid(&m, "block size 0");
    let mut m = single_op(
        OperationType::Concatenation,
        vec![
            operand(TensorFloat32, &[1, 2], ModelInput),
            operand(TensorFloat32, &[1, 2], ModelInput),
            operand(Int32, &[], ModelInput),
            operand(TensorFloat32, &[2, 2], ModelOutput),
        ],
        &[0, 1, 2],
        &[3],
    );
    set_constant(&mut m, 2, &i32_bytes(&[2]));
    m.input_indexes = vec![0, 1];
    assert_model_invalid(&m, "concat axis 2 of rank 2");
}

#[test]
fn bi37_statically_inconsistent_shapes() {
    let mut m = add_model(0);
    m.operands[1].dimensions = vec![1, 3, 2, 1];
    assert_model_invalid(&m, "ADD of non-broadcastable shapes");
    let mut m = add_model(0);
    m.operands[3].dimensions = vec![1, 2, 2, 2];
    assert_model_invalid(&m, "output declared with a wrong shape");
    let mut m = add_model(0);
    for i in [0, 1, 3] {
        m.operands[i].dimensions = vec![1, 1, 1, 1, 2];
    }
    assert_model_invalid(&m, "ADD of rank 5");
    // RESHAPE to a different element count.
    let mut m = single_op(
        OperationType::Reshape,
        vec![
            operand(TensorFloat32, &[2, 3], ModelInput),
            operand(TensorInt32, &[2], ModelInput),
            operand(TensorFloat32, &[4, 2], ModelOutput),
        ],
        &[0, 1],
        &[2],
    );
    set_constant(&mut m, 1, &i32_bytes(&[4, 2]));
    m.input_indexes = vec![0];
    assert_model_invalid(&m, "reshape 6 → 8 elements");
}

/// A quant8 LOGISTIC whose output has the given parameters.
fn quant_logistic(out_scale: f32, out_zp: i32) -> Model {
    let mut out = operand(TensorQuant8Asymm, &[1, 4], ModelOutput);
    out.scale = out_scale;
    out.zero_point = out_zp;
    single_op(
        OperationType::Logistic,
        vec![operand(TensorQuant8Asymm, &[1, 4], ModelInput), out],
        &[0],
        &[1],
    )
}

#[test]
fn bi38_quantization_relationships_violated() {
    assert!(driver()
        .prepare_model(quant_logistic(1.0 / 256.0, 0))
        .is_ok());
    assert_model_invalid(
        &quant_logistic(1.0 / 128.0, 0),
        "LOGISTIC output scale 1/128",
    );
    assert_model_invalid(
        &quant_logistic(1.0 / 256.0, 3),
        "LOGISTIC output zero point 3",
    );
    let mut m = single_op(
        OperationType::Relu,
        vec![
            operand(TensorQuant8Asymm, &[4], ModelInput),
            operand(TensorQuant8Asymm, &[4], ModelOutput),
        ],
        &[0],
        &[1],
    );
    m.operands[1].zero_point = 7;
    assert_model_invalid(&m, "RELU output params differ from input");
    // FULLY_CONNECTED whose output scale does not exceed input × weights.
    let mut ops = vec![
        operand(TensorQuant8Asymm, &[1, 2], ModelInput),
        operand(TensorQuant8Asymm, &[1, 2], ModelInput),
        operand(TensorInt32, &[1], ModelInput),
        operand(Int32, &[], ModelInput),
        operand(TensorQuant8Asymm, &[1, 1], ModelOutput),
    ];
    ops[2].scale = 0.25;
    ops[4].scale = 0.25;
    let mut m = single_op(OperationType::FullyConnected, ops, &[0, 1, 2, 3], &[4]);
    set_constant(&mut m, 3, &i32_bytes(&[0]));
    m.input_indexes = vec![0, 1, 2];
    // NNAPI 1.0 required output scale > input × weights; NNAPI 1.2 dropped the rule, so the
    // model is valid, and the reference requantization runs it.
    assert_eq!(driver().supported_operations(&m).unwrap(), vec![true]);
    assert!(
        driver().prepare_model(m.clone()).is_ok(),
        "FC output scale = input × weights"
    );
    m.operands[4].scale = 0.5;
    assert!(driver().prepare_model(m.clone()).is_ok());
    m.operands[2].scale = 0.3;
    assert_model_invalid(&m, "bias scale ≠ input × weights");
}

#[test]
fn bi39_nan_or_infinite_scale() {
    for bad in [f32::NAN, f32::INFINITY, -0.0] {
        let mut m = quant_logistic(1.0 / 256.0, 0);
        m.operands[0].scale = bad;
        assert_model_invalid(&m, &format!("quant8 scale {bad}"));
    }
    let mut m = add_model(0);
    m.operands[0].scale = f32::NAN;
    assert_model_invalid(&m, "NaN scale on a float tensor");
}

#[test]
fn bi40_optional_operand_misuse() {
    let mut m = add_model(0);
    m.operands[1].lifetime = NoValue.raw();
    m.input_indexes = vec![0];
    assert_model_invalid(&m, "ADD input without value");
}

#[test]
fn bi41_oem_content_is_valid_but_unsupported() {
    let mut m = single_op(
        OperationType::OemOperation,
        vec![
            operand(TensorOemByte, &[4], ModelInput),
            operand(TensorOemByte, &[4], ModelOutput),
        ],
        &[0],
        &[1],
    );
    let d = driver();
    assert_eq!(d.supported_operations(&m).unwrap(), vec![false]);
    assert_eq!(
        d.prepare_model(m.clone()).err().map(|e| e.status()),
        Some(ErrorStatus::GeneralFailure)
    );
    // An OEM operand inside a regular operation fails the signature instead.
    m.operations[0].operation_type = OperationType::Relu.raw();
    assert_model_invalid(&m, "RELU over TENSOR_OEM_BYTE");
}

#[test]
fn bi42_element_count_overflow() {
    let mut m = add_model(0);
    for i in [0, 1, 3] {
        m.operands[i].dimensions = vec![65536, 65536, 2];
    }
    assert_model_invalid(&m, "[65536, 65536, 2] floats");
    // Through request dimensions: the model leaves them open, the request overflows.
    let mut m = add_model(0);
    for i in [0, 1, 3] {
        m.operands[i].dimensions = vec![0, 0, 0, 0];
    }
    let prepared = driver().prepare_model(m).unwrap();
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    for a in req.inputs.iter_mut().chain(req.outputs.iter_mut()) {
        a.dimensions = vec![65536, 65536, 65536, 65536];
    }
    assert_eq!(
        prepared.execute(&req).err().map(|e| e.status()),
        Some(ErrorStatus::InvalidArgument)
    );
}

#[test]
fn bi43_allocation_bomb_fails_without_allocating() {
    // RESIZE_BILINEAR of a tiny input to a 20000×20000×4 temporary (6.4 GB, representable),
    // then back down: the execution must fail cleanly against the memory budget.
    let mut m = Model {
        operands: vec![
            operand(TensorFloat32, &[1, 1, 1, 4], ModelInput),
            operand(Int32, &[], ModelInput),
            operand(TensorFloat32, &[1, 20000, 20000, 4], TemporaryVariable),
            operand(Int32, &[], ModelInput),
            operand(TensorFloat32, &[1, 1, 1, 4], ModelOutput),
        ],
        operations: vec![
            Operation {
                operation_type: OperationType::ResizeBilinear.raw(),
                inputs: vec![0, 1, 1],
                outputs: vec![2],
            },
            Operation {
                operation_type: OperationType::ResizeBilinear.raw(),
                inputs: vec![2, 3, 3],
                outputs: vec![4],
            },
        ],
        input_indexes: vec![0],
        output_indexes: vec![4],
        ..Default::default()
    };
    set_constant(&mut m, 1, &i32_bytes(&[20000]));
    set_constant(&mut m, 3, &i32_bytes(&[1]));
    fix_consumers(&mut m);
    let prepared = driver().prepare_model(m).unwrap();
    let req = Request {
        inputs: vec![arg(0, 0, 16)],
        outputs: vec![arg(1, 0, 16)],
        pools: vec![pool(&[0; 16], 16), pool(&[], 16)],
    };
    assert_eq!(
        prepared.execute(&req).err().map(|e| e.status()),
        Some(ErrorStatus::GeneralFailure)
    );
    // The model keeps working for requests that fit (here: the same one fails the same way,
    // and a small model on the same driver is unaffected).
    assert_add_works(&add_model(0));
}

#[test]
fn bi44_degenerate_shapes() {
    // A VALID window of 8 over a 4×4 input computes an empty output.
    assert_model_invalid(&avg_pool_model(2, 1, 8, 0), "window larger than the input");
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0].dimensions = vec![1, 0, 2, 1];
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "request dimension 0",
    );
}

#[test]
fn bi45_unaligned_constant_offsets_are_fine() {
    let mut m = add_model(0);
    m.operands[1].lifetime = ConstantCopy.raw();
    m.operand_values = vec![0; 5];
    m.operand_values
        .extend(f32_bytes(&[10.0, 20.0, 30.0, 40.0]));
    m.operands[1].location = DataLocation {
        pool_index: 0,
        offset: 5,
        length: 16,
    };
    m.operands[2].location.offset = 1;
    m.operand_values[1..5].copy_from_slice(&i32_bytes(&[0]));
    m.input_indexes = vec![0];
    let prepared = driver().prepare_model(m).unwrap();
    let out = pool(&[], 16);
    let req = Request {
        inputs: vec![arg(0, 3, 16)],
        outputs: vec![arg(1, 0, 16)],
        pools: vec![
            pool(
                &[[0u8; 3].as_slice(), &f32_bytes(&[1.0, 2.0, 3.0, 4.0])].concat(),
                19,
            ),
            out.clone(),
        ],
    };
    prepared.execute(&req).unwrap();
    assert_eq!(read_f32(&out, 0, 4), vec![11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn bi46_request_region_beyond_pool() {
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[1].location.offset = 20;
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "input past the pool",
    );
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.outputs[0].location.offset = u32::MAX - 4;
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "wrapping output offset",
    );
}

#[test]
fn bi47_argument_length_mismatch() {
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0].location.length = 12;
    assert_request_status(&m, &req, ErrorStatus::InvalidArgument, "short input");
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0].location.length = 0;
    assert_request_status(&m, &req, ErrorStatus::InvalidArgument, "length 0");
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.outputs[0].location.length = 8;
    assert_request_status(
        &m,
        &req,
        ErrorStatus::OutputInsufficientSize,
        "short output",
    );
}

#[test]
fn bi48_request_dimension_problems() {
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0].dimensions = vec![1, 2, 2, 2];
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "dimension differs from the model",
    );
    // Model leaves dims open and the request gives none.
    let mut open = add_model(0);
    open.operands[0].dimensions = vec![1, 0, 2, 1];
    let (req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    assert_request_status(
        &open,
        &req,
        ErrorStatus::InvalidArgument,
        "unspecified and not given",
    );
    // Dimensions for a scalar model input.
    let mut m = add_model(0);
    m.operands[2].lifetime = ModelInput.raw();
    m.operands[2].location = DataLocation::default();
    m.operand_values.clear();
    m.input_indexes = vec![0, 1, 2];
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs.push(RequestArgument {
        dimensions: vec![1],
        ..arg(2, 0, 4)
    });
    req.pools.push(pool(&i32_bytes(&[0]), 4));
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "dimensions for a scalar",
    );
}

#[test]
fn bi49_has_no_value_misuse() {
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0] = RequestArgument {
        has_no_value: true,
        ..Default::default()
    };
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "required input omitted",
    );
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.outputs[0].has_no_value = true;
    req.outputs[0].location = DataLocation::default();
    assert_request_status(&m, &req, ErrorStatus::InvalidArgument, "output omitted");
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.inputs[0].has_no_value = true;
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "omitted with a location",
    );
}

#[test]
fn bi50_request_pool_malformed() {
    let m = add_model(0);
    for (bad, what) in [
        (
            Memory::Unsupported("hardware_buffer".into()),
            "hardware buffer",
        ),
        (pool(&[], 0), "size 0"),
        (
            Memory::MappableFile {
                fd: Arc::new(create_memfd("t", &[], 64, true).unwrap()),
                size: 64,
                prot: 0x8 | PROT_READ,
                offset: 0,
            },
            "stray prot bits",
        ),
    ] {
        let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
        req.pools.push(bad);
        assert_request_status(&m, &req, ErrorStatus::InvalidArgument, what);
    }
}

#[test]
fn bi51_unmappable_request_pool() {
    let m = add_model(0);
    let (r, _w) = nix::unistd::pipe().unwrap();
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.pools[1] = Memory::shared(r, 16);
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "pipe as output pool",
    );
}

#[test]
fn bi52_output_in_read_only_pool() {
    let m = add_model(0);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    let fd = Arc::new(create_memfd("t", &[], 16, true).unwrap());
    req.pools[1] = Memory::MappableFile {
        fd,
        size: 16,
        prot: PROT_READ,
        offset: 0,
    };
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "read-only output pool",
    );
}

#[test]
fn bi53_overlapping_regions() {
    let mut m = add_model(0);
    m.operands
        .push(operand(TensorFloat32, &[1, 2, 2, 1], ModelOutput));
    m.operations.push(Operation {
        operation_type: OperationType::Add.raw(),
        inputs: vec![0, 1, 2],
        outputs: vec![4],
    });
    m.output_indexes.push(4);
    fix_consumers(&mut m);
    let two_outputs = |o1: u32, o2: u32| {
        let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
        req.outputs = vec![arg(1, o1, 16), arg(1, o2, 16)];
        req.pools[1] = pool(&[], 64);
        req
    };
    let d = driver();
    let prepared = d.prepare_model(m.clone()).unwrap();
    prepared.execute(&two_outputs(0, 16)).unwrap();
    assert_request_status(
        &m,
        &two_outputs(0, 8),
        ErrorStatus::InvalidArgument,
        "outputs overlap",
    );
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.outputs = vec![arg(0, 8, 16), arg(1, 0, 16)];
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "output over an input",
    );
    // Two pools naming the same memfd.
    let fd: OwnedFd = create_memfd("t", &[0; 64], 64, true).unwrap();
    let shared = Arc::new(fd);
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.pools[1] = Memory::Ashmem {
        fd: shared.clone(),
        size: 64,
    };
    req.pools.push(Memory::Ashmem {
        fd: shared,
        size: 64,
    });
    req.outputs = vec![arg(1, 0, 16), arg(2, 8, 16)];
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "outputs overlap across aliasing pools",
    );
}

#[test]
fn bi54_pool_shrunk_before_execution() {
    let m = add_model(0);
    let fd = create_memfd("t", &[0; 64], 64, false).unwrap();
    let file = std::fs::File::from(fd.try_clone().unwrap());
    let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
    req.pools[1] = Memory::shared(fd, 64);
    file.set_len(8).unwrap();
    assert_request_status(
        &m,
        &req,
        ErrorStatus::InvalidArgument,
        "output pool truncated",
    );
}

#[test]
fn bi55_client_rewrites_inputs_during_execution() {
    let m = add_model(0);
    let prepared = driver().prepare_model(m).unwrap();
    let input_fd = Arc::new(create_memfd("t", &f32_bytes(&[1.0; 8]), 32, false).unwrap());
    let writer = std::fs::File::from(input_fd.try_clone().unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scribbler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            let mut x = 0u8;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_add(37);
                let _ = writer.write_all_at(&[x; 32], 0);
            }
        })
    };
    for _ in 0..200 {
        let req = Request {
            inputs: vec![arg(0, 0, 16), arg(0, 16, 16)],
            outputs: vec![arg(1, 0, 16)],
            pools: vec![
                Memory::Ashmem {
                    fd: input_fd.clone(),
                    size: 32,
                },
                pool(&[], 16),
            ],
        };
        prepared.execute(&req).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    scribbler.join().unwrap();
}

#[test]
fn bi56_illegal_runtime_values() {
    // The activation comes from the request and is out of range.
    let mut m = add_model(0);
    m.operands[2].lifetime = ModelInput.raw();
    m.operands[2].location = DataLocation::default();
    m.operand_values.clear();
    m.input_indexes = vec![0, 1, 2];
    let prepared = driver().prepare_model(m).unwrap();
    for (act, want) in [(0, None), (7, Some(ErrorStatus::InvalidArgument))] {
        let (mut req, _) = add_request(&[0.0; 4], &[0.0; 4]);
        req.inputs.push(arg(2, 0, 4));
        req.pools.push(pool(&i32_bytes(&[act]), 4));
        assert_eq!(
            prepared.execute(&req).err().map(|e| e.status()),
            want,
            "activation {act}"
        );
    }
    // EMBEDDING_LOOKUP with an index outside the table.
    let m = single_op(
        OperationType::EmbeddingLookup,
        vec![
            operand(TensorInt32, &[2], ModelInput),
            operand(TensorFloat32, &[3, 2], ModelInput),
            operand(TensorFloat32, &[2, 2], ModelOutput),
        ],
        &[0, 1],
        &[2],
    );
    let prepared = driver().prepare_model(m).unwrap();
    for (index, want) in [
        (2, None),
        (3, Some(ErrorStatus::InvalidArgument)),
        (-1, Some(ErrorStatus::InvalidArgument)),
    ] {
        let req = Request {
            inputs: vec![arg(0, 0, 8), arg(0, 8, 24)],
            outputs: vec![arg(1, 0, 16)],
            pools: vec![
                pool(&[i32_bytes(&[0, index]), f32_bytes(&[0.0; 6])].concat(), 32),
                pool(&[], 16),
            ],
        };
        assert_eq!(
            prepared.execute(&req).err().map(|e| e.status()),
            want,
            "lookup index {index}"
        );
    }
}

#[test]
fn bi59_prepared_model_dropped_while_executing() {
    let prepared = driver().prepare_model(add_model(0)).unwrap();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let p = prepared.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let (req, out) = add_request(&[1.0; 4], &[2.0; 4]);
                    p.execute(&req).unwrap();
                    assert_eq!(read_f32(&out, 0, 4), vec![3.0; 4]);
                }
            })
        })
        .collect();
    drop(prepared);
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn bi60_concurrent_executions_each_get_their_own_result() {
    let d = driver();
    let prepared = d.prepare_model(add_model(1)).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let p = &prepared;
            s.spawn(move || {
                for k in 0..50 {
                    let a = (t * 100 + k) as f32;
                    let (req, out) = add_request(&[a, -a, a, -a], &[1.0; 4]);
                    p.execute(&req).unwrap();
                    // RELU clamps the negative half.
                    assert_eq!(
                        read_f32(&out, 0, 4),
                        vec![a + 1.0, (1.0 - a).max(0.0), a + 1.0, (1.0 - a).max(0.0)]
                    );
                }
            });
        }
    });
}
