//! Models that use what later NNAPI versions added to the AIDL interface: operations past
//! TANH and operand types past TENSOR_QUANT8_ASYMM. They are valid requests that this NNAPI 1.0
//! driver cannot run, so `supported_operations` answers `false` for those operations (never
//! INVALID_ARGUMENT), preparation fails with GENERAL_FAILURE, and a malformed use of the same
//! types is still INVALID_ARGUMENT.

use nnhal::hal::*;
use nnhal::Driver;

use OperandLifeTime::*;
use OperandType::*;

fn operand(ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> Operand {
    let mut o = Operand::new(ty, dims, lifetime);
    if matches!(ty, TensorQuant8Asymm | TensorQuant8AsymmSigned) {
        o.scale = 0.5;
    }
    o
}

/// `op(inputs…) -> output` on one-dimensional operands of `ty`, plus the INT32 activation
/// scalar that binary arithmetic takes.
fn one_op(op: OperationType, ty: OperandType, tensors_in: usize, activation: bool) -> Model {
    let mut operands: Vec<Operand> = (0..tensors_in)
        .map(|_| operand(ty, &[4], ModelInput))
        .collect();
    let mut inputs: Vec<u32> = (0..tensors_in as u32).collect();
    let mut operand_values = Vec::new();
    if activation {
        let mut act = operand(Int32, &[], ConstantCopy);
        act.location = DataLocation {
            pool_index: 0,
            offset: 0,
            length: 4,
        };
        operand_values.extend_from_slice(&0i32.to_le_bytes());
        operands.push(act);
        inputs.push(tensors_in as u32);
    }
    operands.push(operand(ty, &[4], ModelOutput));
    let output = operands.len() as u32 - 1;
    for &i in &inputs {
        operands[i as usize].number_of_consumers += 1;
    }
    Model {
        operands,
        operations: vec![Operation {
            operation_type: op.raw(),
            inputs,
            outputs: vec![output],
        }],
        input_indexes: (0..tensors_in as u32).collect(),
        output_indexes: vec![output],
        operand_values,
        pools: Vec::new(),
        ..Model::default()
    }
}

fn status<T>(result: HalResult<T>) -> ErrorStatus {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.status(),
    }
}

#[test]
fn float16_on_a_1_0_operation_runs_as_its_float32_image() {
    let driver = Driver::new(1).unwrap();
    let model = one_op(OperationType::Add, TensorFloat16, 2, true);
    assert_eq!(driver.supported_operations(&model).unwrap(), vec![true]);
    assert!(driver.prepare_model(model).is_ok());
}

#[test]
fn int32_add_runs() {
    let driver = Driver::new(1).unwrap();
    let model = one_op(OperationType::Add, TensorInt32, 2, true);
    assert_eq!(driver.supported_operations(&model).unwrap(), vec![true]);
    assert!(driver.prepare_model(model).is_ok());
}

#[test]
fn signed_quant8_on_a_1_0_operation_runs_as_its_unsigned_image() {
    let driver = Driver::new(1).unwrap();
    let model = one_op(OperationType::Add, TensorQuant8AsymmSigned, 2, true);
    assert_eq!(driver.supported_operations(&model).unwrap(), vec![true]);
    assert!(driver.prepare_model(model).is_ok());
}

#[test]
fn a_cast_to_float16_after_a_1_0_operation_runs() {
    // ADD (1.0) writes a temporary that CAST (1.2) turns into float16: both run, the CAST as
    // its float32 image (an identity whose output is rounded to float16).
    let mut model = one_op(OperationType::Add, TensorFloat32, 2, true);
    let add_out = model.output_indexes[0];
    model.operands[add_out as usize].lifetime = TemporaryVariable.raw();
    model.operands[add_out as usize].number_of_consumers = 1;
    model
        .operands
        .push(operand(TensorFloat16, &[4], ModelOutput));
    let out = model.operands.len() as u32 - 1;
    model.operations.push(Operation {
        operation_type: OperationType::Cast.raw(),
        inputs: vec![add_out],
        outputs: vec![out],
    });
    model.output_indexes = vec![out];
    let driver = Driver::new(1).unwrap();
    assert_eq!(
        driver.supported_operations(&model).unwrap(),
        vec![true, true]
    );
}

#[test]
fn malformed_uses_of_later_types_are_still_invalid() {
    let driver = Driver::new(1).unwrap();
    let check = |model: Model, what: &str| {
        assert_eq!(
            status(driver.supported_operations(&model)),
            ErrorStatus::InvalidArgument,
            "{what}"
        );
        assert_eq!(
            status(driver.prepare_model(model)),
            ErrorStatus::InvalidArgument,
            "{what}"
        );
    };

    let mut m = one_op(OperationType::Add, TensorQuant8AsymmSigned, 2, true);
    m.operands[0].zero_point = 200;
    check(m, "signed quant8 zero point outside -128..127");

    let mut m = one_op(OperationType::Add, TensorFloat16, 2, true);
    m.operands[1].scale = 0.25;
    check(m, "float16 tensor with a scale");

    let m = one_op(OperationType::Add, TensorBool8, 2, true);
    check(m, "ADD on boolean tensors");

    // VTS's mutateOperandTypeTest: one ADD input float16 beside a float32 one.
    let mut m = one_op(OperationType::Add, TensorFloat32, 2, true);
    m.operands[1].operand_type = TensorFloat16.raw();
    check(m, "ADD of float32 and float16");

    // A reference to a subgraph the model does not have.
    let mut m = one_op(OperationType::Abs, TensorFloat32, 1, false);
    let mut sub = operand(OperandType::Subgraph, &[], OperandLifeTime::Subgraph);
    sub.location.offset = 0;
    m.operands.push(sub);
    check(m, "SUBGRAPH operand naming a missing referenced subgraph");

    let mut m = one_op(OperationType::Abs, TensorFloat32, 1, false);
    m.operations[0].inputs = vec![7];
    check(m, "later operation reading a missing operand");

    let mut m = one_op(OperationType::Abs, TensorFloat32, 1, false);
    m.operations[0].outputs = vec![0];
    check(m, "later operation writing a model input");

    let mut m = one_op(OperationType::Abs, TensorFloat32, 1, false);
    m.operations[0].operation_type = OperationType::Rank.raw() + 1;
    check(m, "operation type past the AIDL range");

    let mut m = one_op(OperationType::Abs, TensorFloat32, 1, false);
    m.operands[0].operand_type = OperandType::Subgraph.raw() + 1;
    check(m, "operand type past the AIDL range");
}

#[test]
fn hardware_buffer_pools_are_a_general_failure_on_a_host() {
    let driver = Driver::new(1).unwrap();
    // A BLOB with CPU read/write access: what the device build maps, refused on a host.
    let hardware_buffer = || {
        use nnhal::hal::ahwb;
        nnhal::hal::memory::Memory::HardwareBuffer(std::sync::Arc::new(ahwb::HardwareBuffer {
            width: 64,
            height: 1,
            layers: 1,
            format: ahwb::FORMAT_BLOB,
            usage: ahwb::USAGE_CPU_READ_OFTEN | ahwb::USAGE_CPU_WRITE_OFTEN,
            stride: 64,
            fds: vec![std::fs::File::open("/dev/null").unwrap().into()],
            ints: Vec::new(),
        }))
    };
    let mut model = one_op(OperationType::Add, TensorFloat32, 2, true);
    model.pools.push(hardware_buffer());
    assert_eq!(
        status(driver.supported_operations(&model)),
        ErrorStatus::GeneralFailure
    );
    assert_eq!(
        status(driver.prepare_model(model)),
        ErrorStatus::GeneralFailure
    );
    let prepared = driver
        .prepare_model(one_op(OperationType::Add, TensorFloat32, 2, true))
        .unwrap();
    let request = Request {
        inputs: vec![RequestArgument::default(); 2],
        outputs: vec![RequestArgument::default()],
        pools: vec![hardware_buffer()],
    };
    assert_eq!(
        status(prepared.execute(&request)),
        ErrorStatus::GeneralFailure
    );
}
