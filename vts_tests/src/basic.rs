//! The basic device tests of the NN HAL VTS (`BasicTests`, and the argument checks of the AIDL
//! suite), run against the service over binder: the device answers, its status and
//! capabilities are sane, a cyclic model is refused, and null or out-of-range arguments get
//! INVALID_ARGUMENT (`docs/bad-inputs.md`; BI-57).
//!
//! Every check is a named [`BasicCase`] returning `Err(reason)` on failure, so the binary can
//! print one `PASS`/`FAIL` line each and the integration test can assert on all of them.

use crate::probe::{self, AddRun};
use nnhal::binder::{DeviceKind, ExecuteOptions, PrepareOptions, RemoteDevice, NO_PERFORMANCE};
use nnhal::hal::{
    DataLocation, ErrorStatus, HalError, HalResult, Model, Operand, OperandLifeTime, OperandType,
    Operation, OperationType, PerformanceInfo,
};

/// One basic check.
pub struct BasicCase {
    pub name: &'static str,
    pub run: fn(&RemoteDevice) -> Result<(), String>,
}

/// Every basic check, in the order they are reported.
pub const BASIC_CASES: &[BasicCase] = &[
    BasicCase {
        name: "create_device",
        run: create_device,
    },
    BasicCase {
        name: "status",
        run: status,
    },
    BasicCase {
        name: "capabilities_are_positive_and_sorted",
        run: capabilities,
    },
    BasicCase {
        name: "no_extensions_and_one_file_of_each_cache_kind",
        run: extensions_and_cache,
    },
    BasicCase {
        name: "cycle_is_invalid",
        run: cycle,
    },
    BasicCase {
        name: "valid_model_prepares_and_executes",
        run: valid_model,
    },
    BasicCase {
        name: "null_prepare_callback_is_invalid",
        run: null_callback,
    },
    BasicCase {
        name: "out_of_range_prepare_arguments_are_invalid",
        run: bad_prepare_arguments,
    },
    BasicCase {
        name: "out_of_range_execute_arguments_are_invalid",
        run: bad_execute_arguments,
    },
    BasicCase {
        name: "fenced_and_burst_executions_agree",
        run: fenced_and_burst,
    },
    BasicCase {
        name: "prepare_from_cache_without_files_and_allocate_are_refused",
        run: cache_and_allocate,
    },
];

/// The outcome of every case, in order: `(name, Err(reason))` for the failures.
pub fn run_all(device: &RemoteDevice) -> Vec<(&'static str, Result<(), String>)> {
    BASIC_CASES
        .iter()
        .map(|case| {
            let outcome =
                crate::runner::guarded(case.name, || (case.run)(device)).and_then(|result| result);
            (case.name, outcome)
        })
        .collect()
}

fn check(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> Result<T, String> {
    result.map_err(|e| format!("{what}: {e}"))
}

/// `result` must be an error with `status`.
fn expect_status<T>(result: HalResult<T>, status: ErrorStatus, what: &str) -> Result<(), String> {
    match result {
        Ok(_) => Err(format!("{what}: succeeded, expected {}", status.name())),
        Err(e) if e.status() == status => Ok(()),
        Err(e) => Err(format!(
            "{what}: {} ({e}), expected {}",
            e.status().name(),
            status.name()
        )),
    }
}

fn create_device(device: &RemoteDevice) -> Result<(), String> {
    ok(device.ping(), "bare call")
}

/// AIDL has no `getStatus`; the device is available when it answers its identity calls with
/// the values the frozen interface fixes.
fn status(device: &RemoteDevice) -> Result<(), String> {
    let kind = ok(device.device_type(), "getType")?;
    check(kind == DeviceKind::Cpu, || {
        format!("getType is {kind}, expected CPU")
    })?;
    let version = ok(device.version_string(), "getVersionString")?;
    check(!version.trim().is_empty(), || "empty version string".into())?;
    let interface = ok(device.interface_version(), "getInterfaceVersion")?;
    check(interface == 1, || {
        format!("interface version {interface}, expected 1")
    })?;
    let hash = ok(device.interface_hash(), "getInterfaceHash")?;
    check(!hash.is_empty() && hash != "notfrozen", || {
        format!("interface hash {hash:?} is not a frozen hash")
    })
}

fn capabilities(device: &RemoteDevice) -> Result<(), String> {
    let caps = ok(device.capabilities_full(), "getCapabilities")?;
    let positive = |p: &PerformanceInfo| p.exec_time > 0.0 && p.power_usage > 0.0;
    let named = [
        (
            "relaxedFloat32toFloat16PerformanceScalar",
            &caps.relaxed_float32_to_float16_scalar,
        ),
        (
            "relaxedFloat32toFloat16PerformanceTensor",
            &caps.relaxed_float32_to_float16_tensor,
        ),
        ("ifPerformance", &caps.if_performance),
        ("whilePerformance", &caps.while_performance),
    ];
    for (name, p) in named {
        check(positive(p), || format!("{name} is not positive: {p:?}"))?;
    }
    for (ty, p) in &caps.operand_performance {
        check(positive(p), || {
            format!("operandPerformance[{ty}] is not positive: {p:?}")
        })?;
        // SUBGRAPH has no performance of its own.
        check(*ty != OperandType::Subgraph.raw(), || {
            "operandPerformance lists SUBGRAPH".into()
        })?;
    }
    let types: Vec<i32> = caps.operand_performance.iter().map(|(t, _)| *t).collect();
    check(types.windows(2).all(|w| w[0] < w[1]), || {
        format!("operandPerformance is not sorted by type without repeats: {types:?}")
    })?;
    // The NNAPI 1.0 types this driver runs must be listed with real figures.
    for ty in [OperandType::TensorFloat32, OperandType::TensorQuant8Asymm] {
        let p = caps.operand(ty);
        check(p != NO_PERFORMANCE, || {
            format!("{ty} has no performance entry")
        })?;
    }
    Ok(())
}

fn extensions_and_cache(device: &RemoteDevice) -> Result<(), String> {
    let ext = ok(device.supported_extensions(), "getSupportedExtensions")?;
    check(ext.is_empty(), || format!("unexpected extensions {ext:?}"))?;
    let files = ok(
        device.number_of_cache_files(),
        "getNumberOfCacheFilesNeeded",
    )?;
    check(files == (1, 1), || {
        format!("cache files {files:?}, expected (1, 1)")
    })
}

fn tensor(lifetime: OperandLifeTime) -> Operand {
    Operand::new(OperandType::TensorFloat32, &[1], lifetime)
}

/// The VTS cycle model: three ADDs where operations 0 and 1 feed each other.
fn cycle_model() -> Model {
    let mut operands = vec![
        tensor(OperandLifeTime::ModelInput),
        tensor(OperandLifeTime::ModelInput),
        Operand::new(OperandType::Int32, &[], OperandLifeTime::ModelInput),
        tensor(OperandLifeTime::TemporaryVariable),
        tensor(OperandLifeTime::TemporaryVariable),
        tensor(OperandLifeTime::ModelOutput),
    ];
    let add = |inputs: [u32; 3], output: u32| Operation {
        operation_type: OperationType::Add.raw(),
        inputs: inputs.to_vec(),
        outputs: vec![output],
    };
    let operations = vec![add([0, 4, 2], 3), add([1, 3, 2], 4), add([4, 0, 2], 5)];
    for op in &operations {
        for &i in &op.inputs {
            operands[i as usize].number_of_consumers += 1;
        }
    }
    for o in &mut operands {
        o.location = DataLocation::default();
    }
    Model {
        operands,
        operations,
        input_indexes: vec![0, 1, 2],
        output_indexes: vec![5],
        operand_values: Vec::new(),
        pools: Vec::new(),
        ..Model::default()
    }
}

fn cycle(device: &RemoteDevice) -> Result<(), String> {
    let model = cycle_model();
    expect_status(
        device.supported_operations(&model),
        ErrorStatus::InvalidArgument,
        "getSupportedOperations",
    )?;
    expect_status(
        device.prepare_model(model),
        ErrorStatus::InvalidArgument,
        "prepareModel",
    )
}

fn add_and_check(
    run: &AddRun,
    exec: impl FnOnce() -> HalResult<()>,
    what: &str,
) -> Result<(), String> {
    ok(run.clear_output(-1.0), "clearing the output pool")?;
    ok(exec(), what)?;
    let out = ok(run.output(), "reading the output pool")?;
    check(out == [11.0, 22.0, 33.0, 44.0], || {
        format!("{what}: output {out:?}, expected [11, 22, 33, 44]")
    })
}

fn add_run() -> Result<AddRun, String> {
    AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0])
        .map_err(|e| format!("cannot create request pools: {e}"))
}

fn valid_model(device: &RemoteDevice) -> Result<(), String> {
    let model = probe::add_model();
    let supported = ok(
        device.supported_operations(&model),
        "getSupportedOperations",
    )?;
    check(supported == vec![true], || {
        format!("ADD reported as {supported:?}")
    })?;
    let prepared = ok(device.prepare_model(model), "prepareModel")?;
    let run = add_run()?;
    add_and_check(
        &run,
        || prepared.execute(&run.request).map(|_| ()),
        "executeSynchronously",
    )
}

fn null_callback(device: &RemoteDevice) -> Result<(), String> {
    expect_status(
        device.prepare_model_null_callback(&probe::add_model()),
        ErrorStatus::InvalidArgument,
        "prepareModel(callback = null)",
    )
}

fn bad_prepare_arguments(device: &RemoteDevice) -> Result<(), String> {
    let model = probe::add_model();
    let cases = [
        (
            "preference = -1",
            PrepareOptions {
                preference: -1,
                ..Default::default()
            },
        ),
        (
            "preference = 3",
            PrepareOptions {
                preference: 3,
                ..Default::default()
            },
        ),
        (
            "priority = -1",
            PrepareOptions {
                priority: -1,
                ..Default::default()
            },
        ),
        (
            "priority = 3",
            PrepareOptions {
                priority: 3,
                ..Default::default()
            },
        ),
        (
            "deadlineNs = -2",
            PrepareOptions {
                deadline_ns: -2,
                ..Default::default()
            },
        ),
    ];
    for (what, options) in cases {
        expect_status(
            device.prepare_model_with(&model, &options),
            ErrorStatus::InvalidArgument,
            &format!("prepareModel({what})"),
        )?;
    }
    Ok(())
}

fn bad_execute_arguments(device: &RemoteDevice) -> Result<(), String> {
    let prepared = ok(device.prepare_model(probe::add_model()), "prepareModel")?;
    let run = add_run()?;
    let cases = [
        (
            "deadlineNs = -2",
            ExecuteOptions {
                deadline_ns: -2,
                ..Default::default()
            },
        ),
        (
            "loopTimeoutDurationNs = -2",
            ExecuteOptions {
                loop_timeout_ns: -2,
                ..Default::default()
            },
        ),
        (
            "loopTimeoutDurationNs above 15 s",
            ExecuteOptions {
                loop_timeout_ns: 15_000_000_001,
                ..Default::default()
            },
        ),
    ];
    for (what, options) in cases {
        expect_status(
            prepared.execute_with(&run.request, &options),
            ErrorStatus::InvalidArgument,
            &format!("executeSynchronously({what})"),
        )?;
    }
    // A refused call must not have touched the output, and the model must still work.
    ok(run.clear_output(-1.0), "clearing the output pool")?;
    let out = ok(run.output(), "reading the output pool")?;
    check(out == [-1.0; 4], || {
        format!("a refused execution wrote {out:?}")
    })?;
    add_and_check(
        &run,
        || prepared.execute(&run.request).map(|_| ()),
        "executeSynchronously after refusals",
    )
}

fn fenced_and_burst(device: &RemoteDevice) -> Result<(), String> {
    let prepared = ok(device.prepare_model(probe::add_model()), "prepareModel")?;
    let run = add_run()?;
    add_and_check(
        &run,
        || prepared.execute_fenced(&run.request),
        "executeFenced",
    )?;
    let burst = ok(prepared.burst(), "configureExecutionBurst")?;
    for k in 0..3 {
        add_and_check(
            &run,
            || burst.execute(&run.request).map(|_| ()),
            &format!("IBurst::executeSynchronously #{k}"),
        )?;
    }
    Ok(())
}

fn cache_and_allocate(device: &RemoteDevice) -> Result<(), String> {
    match device.prepare_model_from_cache() {
        Ok(_) => return Err("prepareModelFromCache succeeded without cache files".into()),
        Err(e) if e.status() == ErrorStatus::GeneralFailure => {}
        Err(e) => {
            return Err(format!(
                "prepareModelFromCache: {e}, expected GENERAL_FAILURE"
            ))
        }
    }
    match device.allocate_empty() {
        Ok(()) => Err("allocate succeeded; this driver has no device buffers".into()),
        Err(HalError::GeneralFailure(_)) => Ok(()),
        Err(e) => Err(format!("allocate: {e}, expected GENERAL_FAILURE")),
    }
}
