//! The compiled plan's hot path allocates nothing: once a prepared model has run, further
//! executions of a validated request allocate only the output shapes they return. The model
//! is the float32 MobileNet v1 and its uint8 sibling, so every fast registration (packed
//! convolutions, depthwise, pooling, aliased RESHAPE, SOFTMAX) and the arena pool are on the
//! path. This is the only test of its binary: the allocation counter is process-wide.

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

/// Runs `model` (one input, one output of the given byte sizes) a few times to warm up, then
/// counts the allocations of `runs` more executions of the plan.
fn allocations_per_run(model: Model, input_bytes: u32, output_bytes: u32) -> usize {
    let prepared = Driver::new(1).unwrap().prepare_model(model).unwrap();
    assert!(prepared.plan().is_static());
    let request = Request {
        inputs: vec![arg(0, input_bytes)],
        outputs: vec![arg(1, output_bytes)],
        pools: vec![
            pool(&vec![1u8; input_bytes as usize], input_bytes as u64),
            pool(&[], output_bytes as u64),
        ],
    };
    let bound = validate_request(prepared.plan().model(), &request, None).unwrap();
    for _ in 0..2 {
        prepared.plan().run(&bound, None).unwrap();
    }
    let runs = 5;
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..runs {
        let shapes = prepared.plan().run(&bound, None).unwrap();
        assert_eq!(shapes.len(), 1);
    }
    (ALLOCATIONS.load(Ordering::SeqCst) - before) / runs
}

#[test]
fn executions_allocate_only_the_returned_shapes() {
    // One allocation for the list of output shapes and one for the single shape in it.
    let float = allocations_per_run(nnhal_cli::mobilenet::model(), 224 * 224 * 3 * 4, 1001 * 4);
    assert_eq!(float, 2, "float32 MobileNet: allocations per execution");
    let vector = nnhal_vts::vector::Vector::from_file(
        &common::repo_root().join("perf/mobilenet_v1_u8.json"),
    )
    .unwrap();
    let model = nnhal_vts::vector::model::to_model(&vector, ConstantMode::Copy).unwrap();
    let quant = allocations_per_run(model, 224 * 224 * 3, 1001);
    assert_eq!(quant, 2, "uint8 MobileNet: allocations per execution");
}
