//! IF and WHILE (NNAPI 1.3 control flow, `docs/hal-contract.md`): results against values
//! worked out by hand, the loop timeout, and the malformed-input classes BI-77…BI-79 of
//! `docs/bad-inputs.md` in process (BI-77 through a real service is in
//! `cli/tests/binder_service.rs`).

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::*;
use nnhal::Driver;
use nnhal_vts::probe::{while_count_model, WhileRun};
use std::time::{Duration, Instant};

use OperandLifeTime::{ConstantCopy, ModelInput, ModelOutput};
use OperandType::{Int32, TensorBool8, TensorFloat32};

fn driver() -> Driver {
    Driver::new(2).unwrap()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run_while(prepared: &nnhal::PreparedModel, start: f32, limit: f32) -> HalResult<f32> {
    let run = WhileRun::new(start, limit).unwrap();
    prepared.execute(&run.request)?;
    Ok(run.output().unwrap())
}

#[test]
fn while_counts_to_its_limit() {
    let d = driver();
    let m = while_count_model(1);
    assert_eq!(d.supported_operations(&m).unwrap(), vec![true]);
    let prepared = d.prepare_model(m).unwrap();
    assert_eq!(run_while(&prepared, 0.0, 5.0).unwrap(), 5.0);
    // The condition false from the start: the body never runs, the input passes through.
    assert_eq!(run_while(&prepared, 7.0, 5.0).unwrap(), 7.0);
    assert_eq!(run_while(&prepared, -3.5, 0.0).unwrap(), 0.5);
}

#[test]
fn nested_whiles_run_each_level() {
    let d = driver();
    for nesting in [2, 4, validate::MAX_SUBGRAPH_NESTING - 1] {
        let prepared = d.prepare_model(while_count_model(nesting)).unwrap();
        assert_eq!(run_while(&prepared, 1.0, 9.0).unwrap(), 9.0, "{nesting}");
    }
}

/// `IF(condition, then: a + a, else: a * a)` over float32 `[2]`; the then-branch's output
/// is declared `[0]` (known at run time only) when `then_dims` says so.
fn if_model(then_out_dims: &[u32], outer_out_dims: &[u32], doubled: bool) -> Model {
    let op = |ty: OperationType, inputs: Vec<u32>, outputs: Vec<u32>| Operation {
        operation_type: ty.raw(),
        inputs,
        outputs,
    };
    let consumed = |ty, dims: &[u32], lifetime, n| {
        let mut o = Operand::new(ty, dims, lifetime);
        o.number_of_consumers = n;
        o
    };
    let activation = || {
        let mut o = consumed(Int32, &[], ConstantCopy, 1);
        o.location = DataLocation {
            pool_index: 0,
            offset: 0,
            length: 4,
        };
        o
    };
    let branch = |ty: OperationType, out_dims: &[u32]| {
        // CONCATENATION(a, a) makes the then-branch's output twice as long.
        let (operation, operands) = if doubled && ty == OperationType::Add {
            (
                op(OperationType::Concatenation, vec![0, 0, 1], vec![2]),
                vec![
                    consumed(TensorFloat32, &[2], ModelInput, 2),
                    activation(),
                    consumed(TensorFloat32, out_dims, ModelOutput, 0),
                ],
            )
        } else {
            (
                op(ty, vec![0, 0, 1], vec![2]),
                vec![
                    consumed(TensorFloat32, &[2], ModelInput, 2),
                    activation(),
                    consumed(TensorFloat32, out_dims, ModelOutput, 0),
                ],
            )
        };
        Subgraph {
            operands,
            operations: vec![operation],
            input_indexes: vec![0],
            output_indexes: vec![2],
        }
    };
    let mut then = consumed(OperandType::Subgraph, &[], OperandLifeTime::Subgraph, 1);
    then.location.offset = 0;
    let mut otherwise = then.clone();
    otherwise.location.offset = 1;
    Model {
        operands: vec![
            consumed(TensorBool8, &[1], ModelInput, 1),
            then,
            otherwise,
            consumed(TensorFloat32, &[2], ModelInput, 1),
            consumed(TensorFloat32, outer_out_dims, ModelOutput, 0),
        ],
        operations: vec![op(OperationType::If, vec![0, 1, 2, 3], vec![4])],
        input_indexes: vec![0, 3],
        output_indexes: vec![4],
        operand_values: 0i32.to_le_bytes().to_vec(),
        referenced: vec![
            branch(OperationType::Add, then_out_dims),
            branch(OperationType::Mul, &[2]),
        ],
        ..Default::default()
    }
}

/// Runs the IF model: condition and `a` in one pool, the output (`out_len` floats) in another.
fn run_if(
    prepared: &nnhal::PreparedModel,
    condition: bool,
    a: [f32; 2],
    out_len: usize,
) -> HalResult<Vec<f32>> {
    let mut inputs = vec![u8::from(condition), 0, 0, 0];
    inputs.extend(f32_bytes(&a));
    let bytes = out_len as u32 * 4;
    let arg = |pool_index, offset, length| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index,
            offset,
            length,
        },
        dimensions: Vec::new(),
    };
    let output = create_memfd("if-out", &[], u64::from(bytes), true).unwrap();
    let reader = std::fs::File::from(output.try_clone().unwrap());
    let request = Request {
        inputs: vec![arg(0, 0, 1), arg(0, 4, 8)],
        outputs: vec![arg(1, 0, bytes)],
        pools: vec![
            Memory::shared(create_memfd("if-in", &inputs, 12, true).unwrap(), 12),
            Memory::shared(output, u64::from(bytes)),
        ],
    };
    prepared.execute(&request)?;
    let mut out = vec![0u8; bytes as usize];
    std::os::unix::fs::FileExt::read_exact_at(&reader, &mut out, 0).unwrap();
    Ok(out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

#[test]
fn if_runs_the_branch_its_condition_names() {
    let d = driver();
    let m = if_model(&[2], &[2], false);
    assert_eq!(d.supported_operations(&m).unwrap(), vec![true]);
    let prepared = d.prepare_model(m).unwrap();
    assert_eq!(
        run_if(&prepared, true, [3.0, -1.5], 2).unwrap(),
        [6.0, -3.0]
    );
    assert_eq!(
        run_if(&prepared, false, [3.0, -1.5], 2).unwrap(),
        [9.0, 2.25]
    );
}

#[test]
fn if_output_shape_known_only_at_run_time() {
    // The then-branch's output is declared [0]; the IF's output too: the run reports [4].
    let d = driver();
    let prepared = d.prepare_model(if_model(&[0], &[0], true)).unwrap();
    assert_eq!(
        run_if(&prepared, true, [1.0, 2.0], 4).unwrap(),
        [1.0, 2.0, 1.0, 2.0]
    );
}

#[test]
fn bi77_an_endless_while_stops_at_the_loop_timeout_and_the_model_runs_again() {
    let d = driver();
    let prepared = d.prepare_model(while_count_model(1)).unwrap();
    // The default timeout (2 s).
    let started = Instant::now();
    let err = run_while(&prepared, 0.0, f32::INFINITY).unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.status(), ErrorStatus::MissedDeadlineTransient, "{err}");
    assert!(err.message().contains("timeout"), "{err}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(6),
        "{took:?}"
    );
    // A timeout the client gives.
    let run = WhileRun::new(0.0, f32::INFINITY).unwrap();
    let bound = prepared.validate_request(&run.request).unwrap();
    let started = Instant::now();
    let err = prepared
        .execute_bound_with_loop_timeout(&bound, Duration::from_millis(100))
        .unwrap_err();
    assert_eq!(err.status(), ErrorStatus::MissedDeadlineTransient, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Nested loops share the outermost loop's time: no level restarts the clock.
    let nested = d.prepare_model(while_count_model(3)).unwrap();
    let run = WhileRun::new(0.0, f32::INFINITY).unwrap();
    let bound = nested.validate_request(&run.request).unwrap();
    let started = Instant::now();
    let err = nested
        .execute_bound_with_loop_timeout(&bound, Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(err.status(), ErrorStatus::MissedDeadlineTransient, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The prepared model still serves.
    assert_eq!(run_while(&prepared, 0.0, 3.0).unwrap(), 3.0);
}

#[test]
fn bi78_subgraph_reference_cycles_and_deep_nesting_are_invalid() {
    let d = driver();
    // Too deep: a chain of bodies one past the bound.
    let deep = while_count_model(validate::MAX_SUBGRAPH_NESTING + 1);
    for err in [
        d.supported_operations(&deep).unwrap_err(),
        d.prepare_model(deep.clone()).err().unwrap(),
    ] {
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
        assert!(err.message().contains("nest more than"), "{err}");
    }
    // A cycle: the body's WHILE names the body itself (subgraph 1 → 1).
    let mut cycle = while_count_model(2);
    cycle.referenced.truncate(2);
    cycle.referenced[1].operands[1].location.offset = 1;
    for err in [
        d.supported_operations(&cycle).unwrap_err(),
        d.prepare_model(cycle.clone()).err().unwrap(),
    ] {
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
        assert!(err.message().contains("cycle (1 → 1)"), "{err}");
    }
    // A longer cycle through an IF: branch 0 names branch 1, which names branch 0.
    let mut m = if_model(&[2], &[2], false);
    let inner = |target: u32| {
        let mut g = m.referenced[0].clone();
        let mut condition = Operand::new(TensorBool8, &[1], ConstantCopy);
        condition.number_of_consumers = 1;
        condition.location = DataLocation {
            pool_index: 0,
            offset: 0,
            length: 1,
        };
        let mut branch = Operand::new(OperandType::Subgraph, &[], OperandLifeTime::Subgraph);
        branch.number_of_consumers = 2;
        branch.location.offset = target;
        g.operands[1].number_of_consumers = 0;
        g.operands.push(condition);
        g.operands.push(branch);
        g.operands[0].number_of_consumers = 1;
        g.operations = vec![Operation {
            operation_type: OperationType::If.raw(),
            inputs: vec![3, 4, 4, 0],
            outputs: vec![2],
        }];
        g
    };
    m.referenced = vec![inner(1), inner(0)];
    let err = d.supported_operations(&m).unwrap_err();
    assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
    assert!(err.message().contains("cycle (0 → 1 → 0)"), "{err}");
}

#[test]
fn bi79_a_body_output_whose_shape_disagrees_at_run_time_is_an_error() {
    let d = driver();
    // WHILE: the body doubles x's length (CONCATENATION, output declared [0]) while the
    // condition and the body declare x as [1]: the second iteration's input disagrees.
    let mut m = while_count_model(1);
    let body = &mut m.referenced[1];
    body.operands[4].dimensions = vec![0];
    body.operands[0].number_of_consumers = 2;
    body.operations = vec![Operation {
        operation_type: OperationType::Concatenation.raw(),
        inputs: vec![0, 0, 3],
        outputs: vec![4],
    }];
    body.operands[2].number_of_consumers = 0;
    assert_eq!(d.supported_operations(&m).unwrap(), vec![true]);
    let prepared = d.prepare_model(m).unwrap();
    let err = run_while(&prepared, 0.0, 5.0).unwrap_err();
    assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
    assert!(err.message().contains("declared [1]"), "{err}");
    // The condition false at once: the body never runs and the model answers.
    assert_eq!(run_while(&prepared, 6.0, 5.0).unwrap(), 6.0);

    // IF: the branch makes [4] where the IF's output is declared [2].
    let prepared = d.prepare_model(if_model(&[0], &[2], true)).unwrap();
    let err = run_if(&prepared, true, [1.0, 2.0], 4).unwrap_err();
    assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
    assert_eq!(run_if(&prepared, false, [1.0, 2.0], 2).unwrap(), [1.0, 4.0]);
}
