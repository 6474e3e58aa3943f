//! The compiled plan: a fully static model runs in an arena planned from operand lifetimes
//! (values not live at the same time share bytes, RESHAPE aliases its input), a model with an
//! unspecified dimension runs the per-execution path, and both give the same results, also with
//! more concurrent executions than the plan keeps arenas for.

use nnhal::hal::memory::{create_memfd, MappedPool, Memory};
use nnhal::hal::OperandLifeTime::*;
use nnhal::hal::OperandType::*;
use nnhal::hal::*;
use nnhal::Driver;
use std::sync::Arc;

const LEN: usize = 8 * 8 * 4;

fn operand(ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> Operand {
    Operand::new(ty, dims, lifetime)
}

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

/// `out = reshape(logistic(reshape(relu(a + b) + relu(a + b)))) + a` on `[1,8,8,4]`: five
/// temporaries of 1 KiB, two of them RESHAPE outputs. `batch` 0 leaves the batch dimension of
/// the inputs, temporaries and output unspecified (known only at execution).
fn chain_model(batch: u32) -> Model {
    let t = |l| operand(TensorFloat32, &[batch, 8, 8, 4], l);
    let mut m = Model {
        operands: vec![
            t(ModelInput),                                            // 0 a
            t(ModelInput),                                            // 1 b
            operand(Int32, &[], ConstantCopy),                        // 2 FUSED_NONE
            operand(Int32, &[], ConstantCopy),                        // 3 FUSED_RELU
            t(TemporaryVariable),                                     // 4 a + b
            t(TemporaryVariable),                                     // 5 relu(t4 + t4)
            operand(TensorInt32, &[2], ConstantCopy),                 // 6 shape [1, 256]
            operand(TensorFloat32, &[batch, 256], TemporaryVariable), // 7 reshape
            operand(TensorFloat32, &[batch, 256], TemporaryVariable), // 8 logistic
            operand(TensorInt32, &[4], ConstantCopy),                 // 9 shape [1, 8, 8, 4]
            t(TemporaryVariable),                                     // 10 reshape back
            t(ModelOutput),                                           // 11 out
        ],
        operations: vec![
            op(OperationType::Add, &[0, 1, 2], &[4]),
            op(OperationType::Add, &[4, 4, 3], &[5]),
            op(OperationType::Reshape, &[5, 6], &[7]),
            op(OperationType::Logistic, &[7], &[8]),
            op(OperationType::Reshape, &[8, 9], &[10]),
            op(OperationType::Add, &[10, 0, 2], &[11]),
        ],
        input_indexes: vec![0, 1],
        output_indexes: vec![11],
        ..Default::default()
    };
    set_constant(&mut m, 2, &i32_bytes(&[0]));
    set_constant(&mut m, 3, &i32_bytes(&[1]));
    set_constant(&mut m, 6, &i32_bytes(&[-1, 256]));
    set_constant(&mut m, 9, &i32_bytes(&[-1, 8, 8, 4]));
    count_consumers(&mut m);
    m
}

fn count_consumers(m: &mut Model) {
    for o in &mut m.operands {
        o.number_of_consumers = 0;
    }
    for o in m.operations.clone() {
        for i in o.inputs {
            m.operands[i as usize].number_of_consumers += 1;
        }
    }
}

/// `out = relu(concat(b, b))` with `b = relu(relu(x))`, `x` of `[1,256]`: the 2 KiB `concat`
/// starts the step after `relu(x)` was last read, and being bigger it is placed first.
fn widening_model() -> Model {
    let mut m = Model {
        operands: vec![
            operand(TensorFloat32, &[1, 256], ModelInput), // 0 x
            operand(TensorFloat32, &[1, 256], TemporaryVariable), // 1 relu(x)
            operand(TensorFloat32, &[1, 256], TemporaryVariable), // 2 b
            operand(Int32, &[], ConstantCopy),             // 3 axis 0
            operand(TensorFloat32, &[2, 256], TemporaryVariable), // 4 concat
            operand(TensorFloat32, &[2, 256], ModelOutput), // 5 out
        ],
        operations: vec![
            op(OperationType::Relu, &[0], &[1]),
            op(OperationType::Relu, &[1], &[2]),
            op(OperationType::Concatenation, &[2, 2, 3], &[4]),
            op(OperationType::Relu, &[4], &[5]),
        ],
        input_indexes: vec![0],
        output_indexes: vec![5],
        ..Default::default()
    };
    set_constant(&mut m, 3, &i32_bytes(&[0]));
    count_consumers(&mut m);
    m
}

fn op(ty: OperationType, inputs: &[u32], outputs: &[u32]) -> Operation {
    Operation {
        operation_type: ty.raw(),
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
    }
}

fn expected(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let s = ((x + y) + (x + y)).max(0.0);
            1.0 / (1.0 + (-s).exp()) + x
        })
        .collect()
}

fn inputs(seed: u32) -> (Vec<f32>, Vec<f32>) {
    let a = (0..LEN)
        .map(|i| ((i as u32 * 37 + seed * 11) % 101) as f32 / 25.0 - 2.0)
        .collect();
    let b = (0..LEN)
        .map(|i| ((i as u32 * 53 + seed * 7) % 97) as f32 / 30.0 - 1.5)
        .collect();
    (a, b)
}

/// Runs one execution with fresh memfd pools; the request gives full dimensions.
fn execute(prepared: &nnhal::PreparedModel, a: &[f32], b: &[f32]) -> Vec<f32> {
    let bytes = (LEN * 4) as u32;
    let mut data = f32_bytes(a);
    data.extend(f32_bytes(b));
    let input = Memory::shared(
        create_memfd("in", &data, data.len() as u64, true).unwrap(),
        data.len() as u64,
    );
    let output = Memory::shared(
        create_memfd("out", &[], bytes as u64, false).unwrap(),
        bytes as u64,
    );
    let arg = |pool, offset| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: pool,
            offset,
            length: bytes,
        },
        dimensions: vec![1, 8, 8, 4],
    };
    let request = Request {
        inputs: vec![arg(0, 0), arg(0, bytes)],
        outputs: vec![arg(1, 0)],
        pools: vec![input, output.clone()],
    };
    let result = prepared.execute(&request).unwrap();
    assert_eq!(result.output_shapes, vec![vec![1, 8, 8, 4]]);
    let out = MappedPool::map(&output, "out")
        .unwrap()
        .read_vec(0, LEN * 4)
        .unwrap();
    out.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The static chain model prepared on a driver of `threads` kernel threads.
fn static_chain(threads: usize) -> Arc<nnhal::PreparedModel> {
    Driver::new(threads)
        .unwrap()
        .prepare_model(chain_model(1))
        .unwrap()
}

fn assert_close(got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn static_model_runs_in_a_shared_arena_with_aliased_reshapes() {
    let prepared = static_chain(1);
    let plan = prepared.plan();
    assert!(plan.is_static());
    // Eight tensors of 1 KiB (two inputs, five temporaries, one output): the two RESHAPE
    // outputs alias their inputs, and values never live at the same time share bytes.
    // Live at once at most: a, b, a+b (step 1); a, a+b, relu (step 2); a, logistic input and
    // output (step 4); a, reshape, out (step 6).
    assert!(
        plan.arena_bytes() <= 4 * 1024,
        "arena {} bytes",
        plan.arena_bytes()
    );
    assert!(
        plan.arena_bytes() >= 3 * 1024,
        "arena {} bytes",
        plan.arena_bytes()
    );
    for seed in 0..3 {
        let (a, b) = inputs(seed);
        assert_close(&execute(&prepared, &a, &b), &expected(&a, &b));
    }
}

#[test]
fn dynamic_model_matches_the_static_plan() {
    let driver = Driver::new(1).unwrap();
    let fixed = driver.prepare_model(chain_model(1)).unwrap();
    let open = driver.prepare_model(chain_model(0)).unwrap();
    assert!(fixed.plan().is_static());
    assert!(!open.plan().is_static());
    assert_eq!(open.plan().arena_bytes(), 0);
    let (a, b) = inputs(5);
    let (x, y) = (execute(&fixed, &a, &b), execute(&open, &a, &b));
    assert_eq!(x, y, "both paths run the same kernels on the same values");
    assert_close(&x, &expected(&a, &b));
}

#[test]
fn more_concurrent_executions_than_pooled_arenas() {
    let prepared = static_chain(2);
    let threads: Vec<_> = (0..12u32)
        .map(|t| {
            let prepared = prepared.clone();
            std::thread::spawn(move || {
                for k in 0..20 {
                    let (a, b) = inputs(t * 100 + k);
                    assert_close(&execute(&prepared, &a, &b), &expected(&a, &b));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn on_several_threads_a_freed_region_rests_one_step() {
    // At one thread `relu` (step 2) may take the bytes `b` freed after step 1, the warmest
    // place to write; with a kernel team it must not, so the arena grows by one tensor.
    let one = static_chain(1);
    let two = static_chain(2);
    assert_eq!(one.plan().arena_bytes(), 3 * 1024);
    assert_eq!(two.plan().arena_bytes(), 4 * 1024);
    let (a, b) = inputs(9);
    assert_eq!(execute(&one, &a, &b), execute(&two, &a, &b));
}

#[test]
fn the_rest_holds_for_a_bigger_value_placed_before_a_smaller_one() {
    // At one thread `concat` may take the bytes of `relu(x)`, whose last read was the step
    // before, and the arena is 4 KiB. With a kernel team `relu(x)` must stay off the bytes
    // `concat` takes one step after it is freed, whichever of the two is placed first (the
    // tight packing places `concat` first, being bigger; the slots go by time): 5 KiB.
    let arena = |threads| {
        Driver::new(threads)
            .unwrap()
            .prepare_model(widening_model())
            .unwrap()
            .plan()
            .arena_bytes()
    };
    assert_eq!(arena(1), 4 * 1024);
    assert_eq!(arena(2), 5 * 1024);
}
