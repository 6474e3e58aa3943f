//! How the kernels split one operation over threads (docs/design.md §8): at most one fork-join per
//! operation, `parts` pieces spread over the rayon pool the execution runs on.
//!
//! The driver runs a whole execution inside its pool (`ThreadPool::install`); kernels ask
//! [`threads`] how many threads they may split over and hand [`for_parts`] the pieces. Inside a
//! piece nothing splits again, and off a pool (tests, the calling thread of a small model)
//! every piece runs in order on the caller: nothing ever falls through to rayon's implicit
//! global pool, which would ignore the driver's thread count. The sizes below which a split
//! does not pay for waking a worker live here too, so the policy has one place.

use std::cell::Cell;

/// Element-wise passes (one or a few operations per element) shorter than this run on one
/// thread.
pub const MIN_ELEMENTS: usize = 1 << 16;

/// Float32 multiply-adds below which a GEMM-like operation runs on one thread (≈ 5 µs on one
/// core at peak; a wake-up of a sleeping worker costs about as much).
pub const MIN_F32_MACS: usize = 1 << 19;

/// 8-bit multiply-adds below which a quantized GEMM-like operation runs on one thread: the
/// dot-product instructions do four times the work of a float FMA per lane.
pub const MIN_U8_MACS: usize = 1 << 21;

thread_local! {
    /// Set while this thread runs a piece of a split: nested splits run in place.
    static IN_PART: Cell<bool> = const { Cell::new(false) };
}

fn in_part<R>(f: impl FnOnce() -> R) -> R {
    let was = IN_PART.with(|p| p.replace(true));
    let r = f();
    IN_PART.with(|p| p.set(was));
    r
}

/// Whether the caller runs on a rayon worker thread, so work may fan out over its pool.
#[inline]
pub fn in_worker() -> bool {
    rayon::current_thread_index().is_some()
}

/// How many threads work may be split over here: the pool's size on a pool worker, 1 inside a
/// piece of a split and anywhere else.
pub fn threads() -> usize {
    if !IN_PART.with(Cell::get) && in_worker() {
        rayon::current_num_threads()
    } else {
        1
    }
}

/// Runs `body(i)` for every `i < parts`, spread over the pool when [`threads`] allows, in
/// order otherwise. Returns when every piece has finished.
pub fn for_parts(parts: usize, body: impl Fn(usize) + Sync + Send) {
    if parts <= 1 || threads() <= 1 {
        (0..parts).for_each(body);
        return;
    }
    use rayon::prelude::*;
    (0..parts)
        .into_par_iter()
        .with_max_len(1)
        .for_each(|i| in_part(|| body(i)));
}

/// `body((i, &mut out[i]))` for every element: spread over the pool in runs of at least
/// `min_len` elements when [`threads`] allows, in order on the calling thread otherwise.
pub fn for_each_element<T: Send>(
    out: &mut [T],
    min_len: usize,
    body: impl Fn((usize, &mut T)) + Sync + Send,
) {
    use rayon::prelude::*;
    if threads() > 1 && out.len() > min_len {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(min_len)
            .for_each(|x| in_part(|| body(x)));
    } else {
        out.iter_mut().enumerate().for_each(body);
    }
}

/// `body(i, chunk)` for the `i`-th run of `len` elements of `out` (the last may be shorter):
/// spread over the pool when [`threads`] allows, in order otherwise.
pub fn for_chunks<T: Send>(
    out: &mut [T],
    len: usize,
    body: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    use rayon::prelude::*;
    let len = len.max(1);
    if threads() > 1 && out.len() > len {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, c)| in_part(|| body(i, c)));
    } else {
        out.chunks_mut(len)
            .enumerate()
            .for_each(|(i, c)| body(i, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

    fn pool(n: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    }

    #[test]
    fn every_part_runs_once_and_nested_splits_run_in_place() {
        for n in [1, 2, 3] {
            let sums: Vec<u64> = pool(n).install(|| {
                assert_eq!(threads(), n);
                (0..30)
                    .map(|round| {
                        let hits: Vec<AtomicU64> =
                            (0..round % 9 + 1).map(|_| AtomicU64::new(0)).collect();
                        let parts = hits.len();
                        for_parts(parts, |i| {
                            if parts > 1 && n > 1 {
                                assert_eq!(threads(), 1, "inside a piece");
                            }
                            for_parts(3, |_| {
                                hits[i].fetch_add(1, SeqCst);
                            });
                        });
                        hits.iter().map(|h| h.load(SeqCst)).sum()
                    })
                    .collect()
            });
            for (round, s) in sums.iter().enumerate() {
                assert_eq!(*s, 3 * (round as u64 % 9 + 1), "threads {n}");
            }
        }
        // Off the pool nothing splits.
        assert_eq!(threads(), 1);
    }

    #[test]
    fn elements_are_visited_once_on_and_off_the_pool() {
        let mut v = vec![0u32; 3 * MIN_ELEMENTS + 5];
        pool(2).install(|| for_each_element(&mut v, MIN_ELEMENTS, |(i, x)| *x += i as u32));
        for_each_element(&mut v, MIN_ELEMENTS, |(i, x)| *x += i as u32);
        assert!(v.iter().enumerate().all(|(i, &x)| x == 2 * i as u32));
    }
}
