//! A fixed set of worker threads behind a bounded queue, for work a caller hands off and does
//! not wait for (model preparation behind `prepareModel`'s callback).
//!
//! Bad-inputs BI-61: a client flooding the device with preparations must not make the service
//! start a thread per call or queue without limit. With a fixed pool the thread count stays
//! put, and when the queue is full [`Workers::submit`] refuses at once, so the caller can
//! answer the client synchronously (DEVICE_UNAVAILABLE) instead of accepting work it cannot
//! start.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a job was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `depth` jobs are already waiting.
    QueueFull { depth: usize },
    /// The workers are gone (only while shutting down).
    Stopped,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::QueueFull { depth } => {
                write!(f, "{depth} requests are already waiting; try again later")
            }
            Refused::Stopped => f.write_str("the workers have stopped"),
        }
    }
}

/// `threads` workers taking jobs from a queue of at most `depth` waiting jobs. Dropping it
/// lets the workers finish the queued jobs, then joins them.
pub struct Workers {
    queue: Option<SyncSender<Job>>,
    depth: usize,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    pub fn new(name: &str, threads: usize, depth: usize) -> std::io::Result<Workers> {
        let (queue, jobs) = mpsc::sync_channel::<Job>(depth);
        let jobs = Arc::new(Mutex::new(jobs));
        let threads = (0..threads.max(1))
            .map(|k| {
                let jobs = Arc::clone(&jobs);
                std::thread::Builder::new()
                    .name(format!("{name}-{k}"))
                    .spawn(move || work(&jobs))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Workers {
            queue: Some(queue),
            depth,
            threads,
        })
    }

    /// Queues `job`, or gives it back refused without blocking.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<(), Refused> {
        let queue = self.queue.as_ref().ok_or(Refused::Stopped)?;
        match queue.try_send(Box::new(job)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(Refused::QueueFull { depth: self.depth }),
            Err(TrySendError::Disconnected(_)) => Err(Refused::Stopped),
        }
    }
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while taking a job, never while running one.
        let job = match jobs.lock() {
            Ok(jobs) => jobs.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            // A job's panic must not take the worker with it (the pool would shrink silently);
            // jobs report their own failures.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn every_queued_job_runs_on_the_fixed_threads() {
        let ran = Arc::new(AtomicUsize::new(0));
        let names = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        {
            let workers = Workers::new("t", 3, 100).unwrap();
            for _ in 0..100 {
                let (ran, names) = (Arc::clone(&ran), Arc::clone(&names));
                workers
                    .submit(move || {
                        let name = std::thread::current().name().unwrap().to_string();
                        names.lock().unwrap().insert(name);
                        ran.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
            }
        }
        assert_eq!(ran.load(Ordering::SeqCst), 100);
        let names = names.lock().unwrap();
        assert!(!names.is_empty() && names.len() <= 3, "{names:?}");
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_recovers() {
        let workers = Workers::new("t", 1, 2).unwrap();
        let gate = Arc::new(Barrier::new(2));
        let g = Arc::clone(&gate);
        // Occupies the only worker until the test lets it go.
        workers
            .submit(move || {
                g.wait();
            })
            .unwrap();
        // Wait until the worker has taken that job off the queue.
        while workers.submit(|| {}).is_ok() {
            std::thread::yield_now();
        }
        assert_eq!(workers.submit(|| {}), Err(Refused::QueueFull { depth: 2 }));
        gate.wait();
        // The queue drains; new work is accepted again.
        let done = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&done);
        loop {
            let d = Arc::clone(&d);
            if workers
                .submit(move || {
                    d.fetch_add(1, Ordering::SeqCst);
                })
                .is_ok()
            {
                break;
            }
            std::thread::yield_now();
        }
        drop(workers);
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_panicking_job_does_not_shrink_the_pool() {
        let workers = Workers::new("t", 1, 4).unwrap();
        workers.submit(|| panic!("job failure")).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        workers
            .submit(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        drop(workers);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
