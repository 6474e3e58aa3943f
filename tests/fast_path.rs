//! The driver's fast path for small models: request-pool mappings kept between executions (the
//! prepared model's pool cache) and small plans run on the calling thread. Each test checks
//! something the fast path must not change: fresh data through reused mappings, no stale
//! mapping for a replaced file, no write access an fd does not grant, mappings released with
//! the model, and the same results whichever thread runs the plan.

use nnhal::hal::memory::{create_memfd, Memory, PoolCache, PROT_READ};
use nnhal::hal::*;
use nnhal::Driver;
use nnhal_vts::probe::{self, AddRun};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn pool_fd(memory: &Memory) -> Arc<OwnedFd> {
    match memory {
        Memory::Ashmem { fd, .. } | Memory::MappableFile { fd, .. } => fd.clone(),
        other => panic!("unexpected pool {other:?}"),
    }
}

fn writer(memory: &Memory) -> File {
    File::from(pool_fd(memory).try_clone().unwrap())
}

/// Another open of the same file, read-only (a new open file description, as a client with
/// only read access would hold).
fn reopen_read_only(memory: &Memory) -> Arc<OwnedFd> {
    let path = format!("/proc/self/fd/{}", pool_fd(memory).as_raw_fd());
    Arc::new(OwnedFd::from(File::open(path).unwrap()))
}

fn sum(a: &[f32; 4], b: &[f32; 4]) -> [f32; 4] {
    std::array::from_fn(|i| a[i] + b[i])
}

#[test]
fn reused_pools_see_new_inputs_and_outputs() {
    let prepared = Driver::new(2)
        .unwrap()
        .prepare_model(probe::add_model())
        .unwrap();
    let run = AddRun::new(&[0.0; 4], &[0.0; 4]).unwrap();
    let inputs = writer(&run.request.pools[0]);
    for k in 0..5 {
        let a = [k as f32, 1.0, 2.0, 3.0];
        let b = [0.5, -(k as f32), 10.0, 0.25];
        let mut bytes = f32_bytes(&a);
        bytes.extend(f32_bytes(&b));
        inputs.write_all_at(&bytes, 0).unwrap();
        run.clear_output(f32::NAN).unwrap();
        prepared.execute(&run.request).unwrap();
        assert_eq!(run.output().unwrap(), sum(&a, &b), "execution {k}");
    }
    // Both pools were mapped once and kept.
    assert_eq!(prepared.pool_cache().len(), 2);
}

#[test]
fn a_replaced_pool_file_is_not_served_from_a_stale_mapping() {
    let prepared = Driver::new(2)
        .unwrap()
        .prepare_model(probe::add_model())
        .unwrap();
    let (a1, b1) = ([1.0; 4], [2.0; 4]);
    let first = AddRun::new(&a1, &b1).unwrap();
    prepared.execute(&first.request).unwrap();
    assert_eq!(first.output().unwrap(), sum(&a1, &b1));

    // New files behind the same request layout, while the old ones are still cached.
    let (a2, b2) = ([5.0, 6.0, 7.0, 8.0], [0.5; 4]);
    let second = AddRun::new(&a2, &b2).unwrap();
    first.clear_output(f32::NAN).unwrap();
    prepared.execute(&second.request).unwrap();
    assert_eq!(second.output().unwrap(), sum(&a2, &b2));
    assert!(
        first.output().unwrap().iter().all(|x| x.is_nan()),
        "the old output pool was written"
    );

    // The old files closed by the client: fd numbers may be reused, results stay right.
    drop(first);
    let (a3, b3) = ([-1.0; 4], [-2.0; 4]);
    let third = AddRun::new(&a3, &b3).unwrap();
    prepared.execute(&third.request).unwrap();
    assert_eq!(third.output().unwrap(), sum(&a3, &b3));
}

#[test]
fn a_read_only_fd_of_a_cached_output_pool_is_refused() {
    let prepared = Driver::new(2)
        .unwrap()
        .prepare_model(probe::add_model())
        .unwrap();
    let run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    prepared.execute(&run.request).unwrap();
    assert_eq!(run.output().unwrap(), [2.0; 4]);

    // The output file's writable mapping is cached now; the same file through a read-only
    // fd must still be refused as an output, as without the cache.
    let read_only = reopen_read_only(&run.request.pools[1]);
    run.clear_output(f32::NAN).unwrap();
    for pool in [
        Memory::Ashmem {
            fd: read_only.clone(),
            size: 16,
        },
        Memory::MappableFile {
            fd: read_only.clone(),
            size: 16,
            prot: PROT_READ | nnhal::hal::memory::PROT_WRITE,
            offset: 0,
        },
        Memory::MappableFile {
            fd: read_only.clone(),
            size: 16,
            prot: PROT_READ,
            offset: 0,
        },
    ] {
        let mut request = run.request.clone();
        request.pools[1] = pool.clone();
        let err = prepared.execute(&request).unwrap_err();
        assert_eq!(
            err.status(),
            ErrorStatus::InvalidArgument,
            "{pool:?}: {err}"
        );
    }
    assert!(run.output().unwrap().iter().all(|x| x.is_nan()));
    // Reading through a read-only fd stays fine.
    let mut request = run.request.clone();
    let inputs_ro = reopen_read_only(&run.request.pools[0]);
    request.pools[0] = Memory::MappableFile {
        fd: inputs_ro,
        size: 32,
        prot: PROT_READ,
        offset: 0,
    };
    prepared.execute(&request).unwrap();
    assert_eq!(run.output().unwrap(), [2.0; 4]);
}

/// Mappings of memfds named `name` in this process.
fn mappings_of(name: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let needle = format!("/memfd:{name} ");
    maps.lines().filter(|l| l.contains(&needle)).count()
}

#[test]
fn dropping_the_prepared_model_unmaps_its_pools() {
    let prepared = Driver::new(2)
        .unwrap()
        .prepare_model(probe::add_model())
        .unwrap();
    let name = format!("fast-path-drop-{}", std::process::id());
    let input = create_memfd(&name, &f32_bytes(&[1.0; 8]), 32, true).unwrap();
    let output = create_memfd(&name, &[], 16, true).unwrap();
    let mut request = AddRun::new(&[0.0; 4], &[0.0; 4]).unwrap().request;
    request.pools = vec![Memory::shared(input, 32), Memory::shared(output, 16)];
    prepared.execute(&request).unwrap();
    prepared.execute(&request).unwrap();
    assert_eq!(
        mappings_of(&name),
        2,
        "both pools stay mapped between executions"
    );
    drop(prepared);
    assert_eq!(
        mappings_of(&name),
        0,
        "the prepared model took its mappings along"
    );
}

#[test]
fn concurrent_executions_share_one_bounded_cache() {
    let prepared = Driver::new(2)
        .unwrap()
        .prepare_model(probe::add_model())
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let prepared = prepared.clone();
            std::thread::spawn(move || {
                for k in 0..40 {
                    // Each thread alternates between two requests of its own.
                    let a = [t as f32, k as f32, 1.0, 2.0];
                    let b = [0.25; 4];
                    let run = AddRun::new(&a, &b).unwrap();
                    prepared.execute(&run.request).unwrap();
                    assert_eq!(run.output().unwrap(), sum(&a, &b));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let cache = prepared.pool_cache();
    assert!(cache.len() <= PoolCache::DEFAULT_ENTRIES, "{cache:?}");
    assert!(
        cache.mapped_bytes() <= PoolCache::DEFAULT_BYTES,
        "{cache:?}"
    );
}

/// `out = a + b` over two model inputs of `dims` (0 = given by the request).
fn add_model_of(dims: &[u32]) -> Model {
    let mut m = probe::add_model();
    for i in [0, 1, 3] {
        m.operands[i].dimensions = dims.to_vec();
    }
    m
}

#[test]
fn small_static_plans_and_one_thread_drivers_run_inline_and_others_on_the_pool() {
    let driver = Driver::new(2).unwrap();
    let small = driver.prepare_model(probe::add_model()).unwrap();
    assert!(small.runs_inline());
    let large = driver
        .prepare_model(add_model_of(&[1, 256, 256, 1]))
        .unwrap();
    assert!(!large.runs_inline());
    let dynamic = driver.prepare_model(add_model_of(&[1, 0, 0, 1])).unwrap();
    assert!(!dynamic.runs_inline());
    // A one-thread driver runs everything on the calling thread.
    let single = Driver::new(1).unwrap();
    let large_single = single
        .prepare_model(add_model_of(&[1, 256, 256, 1]))
        .unwrap();
    assert!(large_single.runs_inline());

    // The pool path computes the same thing.
    let n = 256 * 256;
    let a: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.5).collect();
    let mut bytes = f32_bytes(&a);
    bytes.extend(f32_bytes(&b));
    let len = (n * 4) as u64;
    let input = create_memfd("fast-path-large", &bytes, 2 * len, true).unwrap();
    let output = create_memfd("fast-path-large", &[], len, true).unwrap();
    let out_file = File::from(output.try_clone().unwrap());
    let arg = |pool_index, offset| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index,
            offset,
            length: len as u32,
        },
        dimensions: Vec::new(),
    };
    let request = Request {
        inputs: vec![arg(0, 0), arg(0, len as u32)],
        outputs: vec![arg(1, 0)],
        pools: vec![Memory::shared(input, 2 * len), Memory::shared(output, len)],
    };
    let want = f32_bytes(&a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<_>>());
    for (prepared, how) in [(&large, "on the pool"), (&large_single, "inline")] {
        prepared.execute(&request).unwrap();
        let mut got = vec![0u8; len as usize];
        out_file.read_exact_at(&mut got, 0).unwrap();
        assert!(got == want, "large ADD {how} differs");
        out_file.write_all_at(&vec![0u8; len as usize], 0).unwrap();
    }
}
