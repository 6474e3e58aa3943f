//! The compiled plan's hot path allocates nothing: once a prepared model has run, further
//! executions of a validated request allocate only the output shapes they return. The models
//! are the float32 MobileNet v1 and its uint8 sibling, so every fast registration (packed
//! convolutions, depthwise, pooling, aliased RESHAPE, SOFTMAX) and the arena pool are on the
//! path, and the float32 LSTM keyword spotter (UNIDIRECTIONAL_SEQUENCE_LSTM on packed gate
//! weights with the plan's step scratch, STRIDED_SLICE, FULLY_CONNECTED, SOFTMAX). This is the
//! only test of its binary: the allocation counter is process-wide.

mod common;

use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::validate::validate_request;
use nnhal::hal::{DataLocation, Model, Request, RequestArgument};
use nnhal::Driver;
use nnhal_vts::vector::model::ConstantMode;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A sealed memfd: mapped by the driver (an unsealed one is read and written with copies).
fn pool(bytes: &[u8], size: u64) -> Memory {
    Memory::shared(create_memfd("steady", bytes, size, true).unwrap(), size)
}

fn arg(pool: u32, length: u32) -> RequestArgument {
    RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: pool,
            offset: 0,
            length,
        },
        dimensions: vec![],
    }
}

/// Runs `model` (inputs and outputs of the given byte sizes) a few times to warm up, then
/// counts the allocations of `runs` more executions of the plan.
fn allocations_per_run(model: Model, inputs: &[u32], outputs: &[u32]) -> usize {
    let prepared = Driver::new(1).unwrap().prepare_model(model).unwrap();
    assert!(prepared.plan().is_static());
    let n = inputs.len() as u32;
    let request = Request {
        inputs: (0..n).zip(inputs).map(|(i, &b)| arg(i, b)).collect(),
        outputs: (n..).zip(outputs).map(|(i, &b)| arg(i, b)).collect(),
        pools: inputs
            .iter()
            .map(|&b| pool(&vec![1u8; b as usize], u64::from(b)))
            .chain(outputs.iter().map(|&b| pool(&[], u64::from(b))))
            .collect(),
    };
    let bound = validate_request(prepared.plan().model(), &request, None).unwrap();
    for _ in 0..2 {
        prepared.plan().run(&bound, None).unwrap();
    }
    let runs = 5;
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..runs {
        let shapes = prepared.plan().run(&bound, None).unwrap();
        assert_eq!(shapes.len(), outputs.len());
    }
    (ALLOCATIONS.load(Ordering::SeqCst) - before) / runs
}

fn vector_model(path: &str) -> Model {
    let vector = nnhal_vts::vector::Vector::from_file(&common::repo_root().join(path)).unwrap();
    nnhal_vts::vector::model::to_model(&vector, ConstantMode::Copy).unwrap()
}

#[test]
fn executions_allocate_only_the_returned_shapes() {
    // One allocation for the list of output shapes and one per shape in it.
    let float = allocations_per_run(
        nnhal_cli::mobilenet::model(),
        &[224 * 224 * 3 * 4],
        &[1001 * 4],
    );
    assert_eq!(float, 2, "float32 MobileNet: allocations per execution");
    let model = vector_model("perf/mobilenet_v1_u8.json");
    let quant = allocations_per_run(model, &[224 * 224 * 3], &[1001]);
    assert_eq!(quant, 2, "uint8 MobileNet: allocations per execution");
    // Features [1, 49, 10] and the two zero states [1, 32]; two [1, 12] outputs.
    let model = vector_model("vts_tests/real/kws_lstm_f32.json");
    let lstm = allocations_per_run(model, &[49 * 10 * 4, 32 * 4, 32 * 4], &[12 * 4, 12 * 4]);
    assert_eq!(
        lstm, 3,
        "float32 LSTM keyword spotter: allocations per execution"
    );
}
