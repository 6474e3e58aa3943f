//! How the kernels split one operation over threads (docs/design.md §8): at most one
//! fork-join per operation, `parts` pieces dealt out as one contiguous home range per thread
//! (the rest stolen from the back when a thread runs dry), and the sizes below which a split
//! does not pay.
//!
//! A whole model execution runs inside [`with_team`] on a rayon worker. The team borrows the
//! pool's other workers for the duration of that execution and keeps them spinning between
//! operations, so each operation's fork costs a store and a few cache-line transfers instead
//! of waking a sleeping thread (tens of microseconds on a virtual machine, and very variable,
//! paid about thirty times per MobileNet inference). Helpers that never show up — the pool is
//! busy with another execution — cost nothing but speed: the thread that forks claims parts
//! too and finishes every part nobody else took, so nothing ever waits on a helper that has
//! not joined. Until a helper has joined, forks go through rayon, whose wake-ups bring one;
//! and an idle helper runs pending rayon pieces, so code that splits through rayon directly
//! (the reference kernels) is helped as well.
//!
//! Outside a team, [`for_parts`] falls back to rayon (on a pool worker) or runs the parts in
//! order (anywhere else), so the kernels behave the same when called directly; nothing ever
//! falls through to rayon's implicit global pool, which would ignore the driver's threads.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Element-wise passes (one or a few operations per element) shorter than this run on one
/// thread.
pub const MIN_ELEMENTS: usize = 1 << 16;

/// Float32 multiply-adds below which a GEMM-like operation runs on one thread (≈ 5 µs on one
/// core at peak; a wake-up of a sleeping worker costs about as much).
pub const MIN_F32_MACS: usize = 1 << 19;

/// 8-bit multiply-adds below which a quantized GEMM-like operation runs on one thread: the
/// dot-product instructions do four times the work of a float FMA per lane.
pub const MIN_U8_MACS: usize = 1 << 21;

/// Single-thread time, in microseconds, above which an operation is worth splitting when its
/// speed is known ([`pays_to_split`]). While the team's helpers spin, a fork costs a store and
/// a few cache-line transfers (well under a microsecond, see the module docs), so an
/// operation of a few microseconds already gains from running its second half on another
/// core; the thresholds counted in multiply-adds or elements above were set for the GEMMs and
/// leave the slower loops below them on one thread at 20–30 µs.
pub const SPLIT_MICROS: usize = 5;

/// Work units one core runs per microsecond, per kind of operator loop (measured on an AMD
/// EPYC Zen 4 with AVX-512 VNNI, MobileNet's layers; slower processors only split sooner).
pub mod speed {
    /// uint8 depthwise multiply-adds on the byte dot-product kernel (45–65 GOP/s).
    pub const U8_DEPTHWISE_MACS: usize = 25_000;
    /// Elements of a uint8 binary operation through its 64 K-entry table (about 1 ns each:
    /// a random read per element).
    pub const LOOKUP_ELEMENTS: usize = 1_000;
    /// Elements of a uint8 binary operation on its vector kernel (exact rescaling in 32-bit
    /// lanes, about 0.4 ns each).
    pub const LANE_ELEMENTS: usize = 2_500;
    /// Input elements of a MEAN (about 6 per ns: MobileNet v2's 62,720 in 11 µs).
    pub const MEAN_INPUTS: usize = 5_000;
    /// Elements of a QUANTIZE or DEQUANTIZE (about 6 per ns: 62,720 in 10 µs).
    pub const CONVERT_ELEMENTS: usize = 5_000;
    /// Weight bytes a uint8 GEMM of a few rows streams (FULLY_CONNECTED of one row: its
    /// 1.28 MB of MobileNet logits weights in about 54 µs, from beyond the core's caches).
    pub const U8_WEIGHT_BYTES: usize = 20_000;
    /// Elements of a QUANTIZE or DEQUANTIZE on the table's vector loops.
    pub const CONVERT_VECTOR_ELEMENTS: usize = 12_000;
}

/// Whether `units` of work running at `per_micro` units per microsecond on one core take
/// more than [`SPLIT_MICROS`].
#[inline]
pub fn pays_to_split(units: usize, per_micro: usize) -> bool {
    units > SPLIT_MICROS.saturating_mul(per_micro)
}

/// Runs `body` on `units` work units (rows, usually): when `split` and [`threads`] allows,
/// in about two contiguous ranges per thread (one fork-join, the ranges in order so each
/// thread's home range is the same region from one operation to the next); otherwise in one
/// piece on the calling thread.
pub fn split_rows(units: usize, split: bool, body: impl Fn(std::ops::Range<usize>) + Sync) {
    let threads = if split { threads() } else { 1 };
    let chunks = (2 * threads).min(units);
    if threads <= 1 || chunks <= 1 {
        body(0..units);
        return;
    }
    for_parts(chunks, |c| {
        body(c * units / chunks..(c + 1) * units / chunks)
    });
}

/// Helpers spin this long without work before they start yielding the processor between
/// polls; inside one execution the gap between two operations is far shorter.
const SPIN: Duration = Duration::from_micros(200);

/// Team members that get a home range of parts; members past this only steal.
pub(crate) const MAX_HOMES: usize = 8;

/// One fork: a body run once for each part index.
///
/// The parts are dealt out as contiguous home ranges, one per team member in member order
/// (the forking thread is member 0), and each member runs its own range front to back before
/// it steals from the back of the others'. Operators number their parts in memory order (row
/// tiles top to bottom, channel blocks left to right), so in the common case a member
/// computes the same region of every tensor from one operation to the next: what it reads
/// was written by itself and is still in its core's cache, instead of being pulled over from
/// the other core's. Stealing keeps the balance when a member is late or descheduled.
struct Job<'a> {
    body: &'a (dyn Fn(usize) + Sync),
    homes: [Home; MAX_HOMES],
    members: usize,
    panicked: AtomicBool,
}

/// One member's home range and count of finished parts, alone in a cache line: a member
/// claims and counts its own parts without taking the line from the others' cores (on a
/// virtual machine whose processors sit on different dies, a round trip of a line between
/// two cores measured 0.34 µs, against 0.06 µs on one die, and a fork runs a dozen parts).
#[repr(align(64))]
struct Home {
    /// `(next << 32) | end`: claimed from the front by its owner and from the back by
    /// thieves, both with one compare-and-swap.
    range: AtomicU64,
    /// Parts run by the members counted here (member `i` counts in home `i % MAX_HOMES`).
    finished: AtomicUsize,
}

impl<'a> Job<'a> {
    fn new(body: &'a (dyn Fn(usize) + Sync), parts: usize, team: usize) -> Self {
        let members = team.clamp(1, MAX_HOMES).min(parts.max(1));
        let homes = std::array::from_fn(|r| {
            let range = if r < members {
                let (start, end) = (r * parts / members, (r + 1) * parts / members);
                ((start as u64) << 32) | end as u64
            } else {
                0
            };
            Home {
                range: AtomicU64::new(range),
                finished: AtomicUsize::new(0),
            }
        });
        Job {
            body,
            homes,
            members,
            panicked: AtomicBool::new(false),
        }
    }

    /// Takes the front part of home range `r` (`from_back`: its back part), if any is left.
    fn take(&self, r: usize, from_back: bool) -> Option<usize> {
        let home = &self.homes[r].range;
        let mut cur = home.load(SeqCst);
        loop {
            let (next, end) = (cur >> 32, cur & 0xffff_ffff);
            if next >= end {
                return None;
            }
            let (new, part) = if from_back {
                ((next << 32) | (end - 1), end - 1)
            } else {
                (((next + 1) << 32) | end, next)
            };
            match home.compare_exchange_weak(cur, new, SeqCst, SeqCst) {
                Ok(_) => return Some(part as usize),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The next part for member `me`: its own range first, then the others' from the back.
    fn claim(&self, me: usize) -> Option<usize> {
        if me < self.members {
            if let Some(i) = self.take(me, false) {
                return Some(i);
            }
        }
        (1..=self.members)
            .map(|d| (me + d) % self.members)
            .find_map(|r| self.take(r, true))
    }

    /// Claims and runs parts until none is left.
    fn work(&self, me: usize) {
        while let Some(i) = self.claim(me) {
            let body = self.body;
            let ok = in_part(|| catch_unwind(AssertUnwindSafe(|| body(i))).is_ok());
            if !ok {
                self.panicked.store(true, SeqCst);
            }
            self.homes[me % MAX_HOMES].finished.fetch_add(1, SeqCst);
        }
    }

    /// Parts finished so far, by every member.
    fn finished(&self) -> usize {
        self.homes.iter().map(|h| h.finished.load(SeqCst)).sum()
    }
}

/// What the forking thread and its helpers share for one execution.
struct Shared {
    /// The current job (type-erased `*const Job`), or null between forks.
    job: AtomicPtr<()>,
    /// Bumped at every fork, so a helper enters each job once.
    epoch: AtomicUsize,
    /// Helpers currently holding `job`: the forking thread waits for 0 after clearing `job`
    /// before its stack frame (and the job on it) goes away.
    users: AtomicUsize,
    stop: AtomicBool,
    /// Helpers that have started their loop.
    joined: AtomicUsize,
    /// Threads in the team, the forking one included.
    size: usize,
}

impl Shared {
    fn new(size: usize) -> Shared {
        Shared {
            job: AtomicPtr::new(ptr::null_mut()),
            epoch: AtomicUsize::new(0),
            users: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            joined: AtomicUsize::new(0),
            size,
        }
    }
}

thread_local! {
    /// The team whose forking thread this is.
    static TEAM: Cell<*const Shared> = const { Cell::new(ptr::null()) };
    /// Set while this thread runs a part: nested splits run in place.
    static IN_PART: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn in_part<R>(f: impl FnOnce() -> R) -> R {
    let was = IN_PART.with(|p| p.replace(true));
    let r = f();
    IN_PART.with(|p| p.set(was));
    r
}

/// Whether the caller runs on a rayon worker thread.
#[inline]
pub fn in_worker() -> bool {
    rayon::current_thread_index().is_some()
}

/// Runs `f` with the other workers of the current rayon pool spinning as its helpers (see the
/// module docs). Off a pool, or on a one-thread pool, it just runs `f`.
pub fn with_team<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let size = rayon::current_num_threads();
    if !in_worker() || size <= 1 || !TEAM.with(|t| t.get().is_null()) {
        return f();
    }
    let shared = Shared::new(size);
    let shared = &shared;
    rayon::scope(|s| {
        for _ in 1..size {
            s.spawn(move |_| helper(shared));
        }
        TEAM.with(|t| t.set(shared));
        // Stop the helpers however `f` ends, or `scope` would wait for them forever.
        struct Stop<'a>(&'a Shared);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                TEAM.with(|t| t.set(ptr::null()));
                self.0.stop.store(true, SeqCst);
            }
        }
        let _stop = Stop(shared);
        f()
    })
}

/// The kernel thread pool of a driver, and the way an execution uses it.
///
/// An execution whose caller is not a pool worker, while no other execution leads a team on
/// this pool, runs on the calling thread as the team's leader, with the pool's `threads − 1`
/// workers as its helpers ([`Pool::run`]). Handing the whole execution to a worker instead and
/// sleeping until it is done costs two thread wake-ups per execution (some 20 µs out and 40 µs
/// back on a virtual machine); the leader never sleeps, and a helper that wakes late just finds
/// fewer parts left. Executions that overlap one already leading go to a worker as before, so
/// the pool never has more than one caller-led team.
///
/// The pool keeps no worker beyond the helpers: a spare one, woken by rayon whenever a helper
/// is spawned, spun on a core looking for work and took it from the leader or its helper.
/// On two cores that showed as some 2,000 involuntary context switches per thread in six
/// seconds of MobileNet executions, and runs of executions at 6–12 ms instead of 5.5.
pub struct Pool {
    workers: rayon::ThreadPool,
    threads: usize,
    leading: AtomicUsize,
}

impl Pool {
    /// A pool for executions on `threads` threads (0: one per core): `threads − 1` workers
    /// (at least one) named `name-<i>`, the caller being the first thread of a team.
    pub fn new(threads: usize, name: &'static str) -> Result<Pool, rayon::ThreadPoolBuildError> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads((threads - 1).max(1))
            .thread_name(move |i| format!("{name}-{i}"))
            .build()?;
        Ok(Pool {
            workers,
            threads,
            leading: AtomicUsize::new(0),
        })
    }

    /// Threads an execution led by its caller runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` as one execution on this pool's threads (see [`Pool`]); a panic in `f` is
    /// resumed here.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let size = self.threads();
        let free = self.leading.compare_exchange(0, 1, SeqCst, SeqCst).is_ok();
        if !free {
            return self.workers.install(|| with_team(f));
        }
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, SeqCst);
            }
        }
        let _release = Release(&self.leading);
        if in_worker() || size <= 1 || !TEAM.with(|t| t.get().is_null()) {
            return self.workers.install(|| with_team(f));
        }
        let shared = Arc::new(Shared::new(size));
        // One helper per worker, each queued on its own worker: helpers spawned into the
        // shared queue could be picked up by a helper's own `yield_now` and run nested in it,
        // leaving the team a thread short.
        let helpers = Arc::clone(&shared);
        self.workers.spawn_broadcast(move |_| helper(&helpers));
        TEAM.with(|t| t.set(&*shared));
        // Stop the helpers however `f` ends; they hold their own reference to `shared`, so the
        // leader returns without waiting for them.
        struct Stop<'a>(&'a Shared);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                TEAM.with(|t| t.set(ptr::null()));
                self.0.stop.store(true, SeqCst);
            }
        }
        let _stop = Stop(&shared);
        f()
    }
}

/// A helper's loop: enter each new job once, claim parts, until the team stops.
fn helper(shared: &Shared) {
    // Members are numbered in the order they join; the forking thread is member 0.
    let me = shared.joined.fetch_add(1, SeqCst) + 1;
    let mut seen = 0usize;
    let mut idle_since = Instant::now();
    while !shared.stop.load(SeqCst) {
        let epoch = shared.epoch.load(SeqCst);
        if epoch != seen {
            shared.users.fetch_add(1, SeqCst);
            let job = shared.job.load(SeqCst).cast_const().cast::<Job>();
            if !job.is_null() {
                // SAFETY: `job` was published by the forking thread, which clears it and then
                // waits until `users` drops to 0 before the job leaves its stack; this thread
                // counted itself in `users` before loading the pointer, so the job is alive
                // until the `fetch_sub` below.
                unsafe { (*job).work(me) };
            }
            shared.users.fetch_sub(1, SeqCst);
            seen = epoch;
            idle_since = Instant::now();
        } else if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            // Splits that go through rayon inside the execution (the reference kernels, the
            // element-wise loops) still get this thread's help: it runs their pending pieces.
            idle_since = Instant::now();
        } else if idle_since.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Spins until `done`, yielding the processor once the wait gets long (a helper that claimed a
/// part was descheduled), so it is not kept from finishing by this very wait.
fn wait_until(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// How many threads work may be split over here: the team's size on its forking thread, the
/// rayon pool's on a pool worker, 1 inside a part and anywhere else.
pub fn threads() -> usize {
    if IN_PART.with(Cell::get) {
        return 1;
    }
    let team = TEAM.with(Cell::get);
    if !team.is_null() {
        // SAFETY: TEAM is set only while `with_team` runs on this thread, with the `Shared`
        // alive on its stack.
        return unsafe { (*team).size };
    }
    if in_worker() {
        rayon::current_num_threads()
    } else {
        1
    }
}

/// Runs `body(i)` for every `i < parts`: split over the team once a helper has joined it, over
/// the pool on a pool worker, in order otherwise (and always inside a part). Returns when every
/// part has finished; a panic in a part is resumed here.
pub fn for_parts(parts: usize, body: impl Fn(usize) + Sync + Send) {
    if parts <= 1 || IN_PART.with(Cell::get) {
        (0..parts).for_each(body);
        return;
    }
    let team = TEAM.with(Cell::get);
    // SAFETY: TEAM is set only while `with_team` runs on this thread, with the `Shared`
    // alive on its stack.
    let shared = (!team.is_null()).then(|| unsafe { &*team });
    // A worker-led team forks through rayon until a helper has joined (its wake-ups bring
    // one); a caller-led team publishes every job, which a helper joins whenever it arrives.
    let Some(shared) = shared
        .filter(|s| (s.joined.load(SeqCst) > 0 || !in_worker()) && parts <= u32::MAX as usize)
    else {
        if in_worker() && rayon::current_num_threads() > 1 {
            use rayon::prelude::*;
            (0..parts)
                .into_par_iter()
                .with_max_len(1)
                .for_each(|i| in_part(|| body(i)));
        } else {
            (0..parts).for_each(body);
        }
        return;
    };
    let job = Job::new(&body, parts, shared.size);
    shared
        .job
        .store((&job as *const Job).cast_mut().cast(), SeqCst);
    shared.epoch.fetch_add(1, SeqCst);
    job.work(0);
    wait_until(|| job.finished() >= parts);
    shared.job.store(ptr::null_mut(), SeqCst);
    wait_until(|| shared.users.load(SeqCst) == 0);
    if job.panicked.load(SeqCst) {
        panic!("a parallel part of a kernel panicked");
    }
}

/// `body((i, &mut out[i]))` for every element: spread over the pool in runs of at least
/// `min_len` elements when [`threads`] allows, in order on the calling thread otherwise.
pub fn for_each_element<T: Send>(
    out: &mut [T],
    min_len: usize,
    body: impl Fn((usize, &mut T)) + Sync + Send,
) {
    let threads = threads();
    if threads > 1 && out.len() > min_len {
        let len = out.len().div_ceil(4 * threads).max(min_len);
        for_chunks(out, len, |i, chunk| {
            for (j, x) in chunk.iter_mut().enumerate() {
                body((i * len + j, x));
            }
        });
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
    let len = len.max(1);
    if threads() > 1 && out.len() > len {
        let (base, total) = (SharedSlice(out.as_mut_ptr()), out.len());
        for_parts(total.div_ceil(len), |i| {
            let start = i * len;
            let n = len.min(total - start);
            // SAFETY: part i is the i-th run of `len` elements of `out`, which outlives the
            // fork-join; parts are disjoint, and each runs once.
            let chunk = unsafe { std::slice::from_raw_parts_mut(base.at(start), n) };
            body(i, chunk);
        });
    } else {
        out.chunks_mut(len)
            .enumerate()
            .for_each(|(i, c)| body(i, c));
    }
}

/// The start of a slice whose disjoint runs the parts of one fork write.
struct SharedSlice<T>(*mut T);

// SAFETY: only used by `for_chunks`, whose parts touch disjoint runs of a `&mut [T]` that
// outlives them; `T: Send` lets those runs be written from other threads.
unsafe impl<T: Send> Send for SharedSlice<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for SharedSlice<T> {}

impl<T> SharedSlice<T> {
    /// Element `i` (a method, so closures capture the whole `Sync` wrapper).
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::AtomicU64;

    fn pool(n: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    }

    #[test]
    fn every_part_runs_once_in_and_out_of_a_team() {
        for n in [1, 2, 3] {
            let p = pool(n);
            for team in [false, true] {
                let sums: Vec<u64> = p.install(|| {
                    let run = || {
                        (0..50)
                            .map(|round| {
                                let hits: Vec<AtomicU64> =
                                    (0..round % 9 + 1).map(|_| AtomicU64::new(0)).collect();
                                let parts = hits.len();
                                for_parts(parts, |i| {
                                    // Nested splits run in place inside a part of a split.
                                    if parts > 1 && n > 1 {
                                        assert_eq!(threads(), 1);
                                    }
                                    for_parts(3, |_| {
                                        hits[i].fetch_add(1, SeqCst);
                                    });
                                });
                                hits.iter().map(|h| h.load(SeqCst)).sum()
                            })
                            .collect()
                    };
                    if team {
                        with_team(run)
                    } else {
                        run()
                    }
                });
                for (round, s) in sums.iter().enumerate() {
                    assert_eq!(*s, 3 * (round as u64 % 9 + 1), "threads {n} team {team}");
                }
            }
        }
        // Off the pool nothing splits.
        assert_eq!(threads(), 1);
    }

    #[test]
    fn a_team_helper_takes_parts() {
        let (size, helped) = pool(2).install(|| {
            with_team(|| {
                let me = std::thread::current().id();
                let helped = AtomicBool::new(false);
                // Parts long enough that a spinning helper claims some of them, however long a
                // busy machine takes to schedule it.
                let start = Instant::now();
                while !helped.load(SeqCst) && start.elapsed() < Duration::from_secs(20) {
                    for_parts(8, |_| {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(200) {}
                        if std::thread::current().id() != me {
                            helped.store(true, SeqCst);
                        }
                    });
                }
                (threads(), helped.load(SeqCst))
            })
        });
        assert_eq!(size, 2);
        assert!(helped, "no part ran on the helper thread");
    }

    #[test]
    fn a_team_helper_runs_pieces_of_rayon_splits_too() {
        use rayon::prelude::*;
        let helped = pool(2).install(|| {
            with_team(|| {
                let me = std::thread::current().id();
                let helped = AtomicBool::new(false);
                let start = Instant::now();
                while !helped.load(SeqCst) && start.elapsed() < Duration::from_secs(20) {
                    (0..8).into_par_iter().with_max_len(1).for_each(|_| {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(200) {}
                        if std::thread::current().id() != me {
                            helped.store(true, SeqCst);
                        }
                    });
                }
                helped.load(SeqCst)
            })
        });
        assert!(helped, "no rayon piece ran on the helper thread");
    }

    #[test]
    fn a_panicking_part_is_resumed_on_the_forking_thread_and_the_team_ends() {
        let p = pool(2);
        let r = p.install(|| {
            catch_unwind(AssertUnwindSafe(|| {
                with_team(|| {
                    for _ in 0..20 {
                        for_parts(4, |i| assert!(i != 2, "part 2 fails"));
                    }
                })
            }))
        });
        assert!(r.is_err());
        // The pool still works afterwards.
        assert_eq!(p.install(|| with_team(|| 7)), 7);
    }

    #[test]
    fn elements_and_chunks_are_visited_once_on_and_off_the_pool() {
        let mut v = vec![0u32; 3 * MIN_ELEMENTS + 5];
        pool(2).install(|| for_each_element(&mut v, MIN_ELEMENTS, |(i, x)| *x += i as u32));
        for_each_element(&mut v, MIN_ELEMENTS, |(i, x)| *x += i as u32);
        pool(2).install(|| {
            with_team(|| {
                for_chunks(&mut v, 1000, |c, xs| {
                    xs.iter_mut().for_each(|x| *x += c as u32)
                })
            })
        });
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == 2 * i as u32 + (i / 1000) as u32));
    }

    #[test]
    fn split_rows_covers_every_unit_once_split_or_not() {
        let pool = Pool::new(2, "rows-test").unwrap();
        for units in [0, 1, 2, 3, 7, 14, 57] {
            for split in [false, true] {
                let hits: Vec<AtomicU64> = (0..units).map(|_| AtomicU64::new(0)).collect();
                let pieces = AtomicU64::new(0);
                pool.run(|| {
                    split_rows(units, split, |r| {
                        pieces.fetch_add(1, SeqCst);
                        r.for_each(|i| {
                            hits[i].fetch_add(1, SeqCst);
                        });
                    })
                });
                assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "{units} {split}");
                // Unsplit work is one piece; split work is two per thread, at most one per unit.
                let expected = if split { units.clamp(1, 4) } else { 1 };
                assert_eq!(pieces.load(SeqCst), expected as u64, "{units} {split}");
            }
        }
        // The threshold is strict, in units of one core's microseconds.
        assert!(!pays_to_split(SPLIT_MICROS * 1000, 1000));
        assert!(pays_to_split(SPLIT_MICROS * 1000 + 1, 1000));
        assert!(!pays_to_split(usize::MAX, usize::MAX));
    }

    #[test]
    fn the_caller_leads_a_pool_team_and_a_worker_helps() {
        let pool = Pool::new(2, "lead-test").unwrap();
        let caller = std::thread::current().id();
        let (leader, size, helped) = pool.run(|| {
            let me = std::thread::current().id();
            let helped = AtomicBool::new(false);
            let start = Instant::now();
            while !helped.load(SeqCst) && start.elapsed() < Duration::from_secs(20) {
                for_parts(8, |_| {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(200) {}
                    if std::thread::current().id() != me {
                        helped.store(true, SeqCst);
                    }
                });
            }
            (me, threads(), helped.load(SeqCst))
        });
        assert_eq!(
            leader, caller,
            "the execution did not run on the calling thread"
        );
        assert_eq!(size, 2);
        assert!(helped, "no part ran on a pool worker");
    }

    #[test]
    fn a_pool_keeps_no_worker_beyond_the_leaders_helpers() {
        for (threads, workers) in [(1, 1), (2, 1), (3, 2), (4, 3)] {
            let pool = Pool::new(threads, "size-test").unwrap();
            assert_eq!(pool.threads(), threads);
            assert_eq!(pool.workers.install(rayon::current_num_threads), workers);
            let seen = std::sync::Mutex::new(std::collections::HashSet::new());
            pool.run(|| {
                let start = Instant::now();
                while seen.lock().unwrap().len() < threads
                    && start.elapsed() < Duration::from_secs(20)
                {
                    for_parts(4 * threads, |_| {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_micros(100) {}
                        seen.lock().unwrap().insert(std::thread::current().id());
                    });
                }
            });
            assert_eq!(seen.lock().unwrap().len(), threads, "{threads} threads");
        }
    }

    #[test]
    fn overlapping_pool_runs_each_visit_every_part_once() {
        let pool = Pool::new(2, "overlap-test").unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let pool = &pool;
                s.spawn(move || {
                    for round in 0..40 {
                        let n = (t * 7 + round) % 23 + 1;
                        let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                        let mut out = vec![0u32; 5000 + round];
                        pool.run(|| {
                            for_parts(n, |i| {
                                hits[i].fetch_add(1, SeqCst);
                            });
                            for_chunks(&mut out, 300, |i, c| {
                                for (j, x) in c.iter_mut().enumerate() {
                                    *x += (i * 300 + j) as u32 + 1;
                                }
                            });
                        });
                        assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
                        assert!(out.iter().enumerate().all(|(i, &x)| x == i as u32 + 1));
                    }
                });
            }
        });
    }

    #[test]
    fn a_panic_in_a_led_run_is_resumed_and_the_pool_leads_again() {
        let pool = Pool::new(2, "panic-test").unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(|| for_parts(4, |i| assert!(i != 2, "part 2 fails")))
        }));
        assert!(r.is_err());
        let caller = std::thread::current().id();
        assert_eq!(pool.run(|| std::thread::current().id()), caller);
    }
}
