//! Load and fault suites against a service over binder RPC (`nnhal-vts stress`,
//! `nnhal-vts faults`): what the service's limits (`docs/limits.md`) and the lifecycle and
//! transport classes BI-58…BI-62 (`docs/bad-inputs.md`) promise, measured from outside.
//!
//! Both read the service's resident size, threads and open fds from `/proc/<pid>` (the pid is
//! the socket peer's, so any service this user runs can be measured), and both require the
//! threads and fds to come back to what they were at rest after the load or the fault.

use crate::compare::compare;
use crate::model::{build_request, to_model, ConstantMode};
use crate::transport::{Device, Prepared, RpcDevice, TransportOptions};
use crate::vector::{bundled_dir, Vector};
use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::{
    DataLocation, Model, Operand, OperandLifeTime, OperandType, Operation, OperationType, Request,
    RequestArgument,
};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// What `/proc` says about a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    pub rss_kib: u64,
    pub threads: usize,
    pub fds: usize,
}

impl std::fmt::Display for ProcStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RSS {:.1} MB, {} threads, {} fds",
            self.rss_kib as f64 / 1024.0,
            self.threads,
            self.fds
        )
    }
}

/// Reads `pid`'s resident size, thread count and open fds.
pub fn proc_stats(pid: u32) -> std::io::Result<ProcStats> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok(ProcStats {
        rss_kib: field("VmRSS:"),
        threads: field("Threads:") as usize,
        fds,
    })
}

/// The pid of the process listening on `socket` (the peer's credentials of a connection). The
/// connection is closed at once; the service drops it as a client that never spoke.
pub fn service_pid(socket: &Path) -> std::io::Result<u32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let stream = UnixStream::connect(socket)?;
    let cred = getsockopt(&stream, PeerCredentials).map_err(std::io::Error::from)?;
    Ok(cred.pid() as u32)
}

/// Waits (up to `timeout`) until `pid` has no more threads and fds than `base`; the last
/// reading, and whether it got there.
pub fn settle(pid: u32, base: ProcStats, timeout: Duration) -> (bool, ProcStats) {
    let start = Instant::now();
    loop {
        let now = proc_stats(pid).unwrap_or_default();
        if now.threads <= base.threads && now.fds <= base.fds {
            return (true, now);
        }
        if start.elapsed() >= timeout {
            return (false, now);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The vectors a stress client runs: float, quant8 and recurrent operations.
pub const STRESS_VECTORS: &[&str] = &[
    "add",
    "conv_float",
    "fully_connected_float",
    "conv_quant8",
    "depthwise_conv2d_quant8",
    "softmax_quant8_1",
    "lstm",
    "rnn",
    "svdf",
];

/// A job of the stress mix: a bundled vector, or the two-operation model below.
enum Job {
    Vector(Box<Vector>),
    MultiOp,
}

impl Job {
    fn name(&self) -> &str {
        match self {
            Job::Vector(v) => &v.name,
            Job::MultiOp => "add_then_mul",
        }
    }

    fn model(&self, mode: ConstantMode) -> Result<Model, String> {
        match self {
            Job::Vector(v) => to_model(v, mode).map_err(|e| e.to_string()),
            Job::MultiOp => Ok(multi_op_model()),
        }
    }
}

const MULTI_DIMS: [u32; 4] = [1, 2, 3, 1];
const MULTI_LEN: usize = 6;

/// `out = (a + b) * c`, float32: two operations through a temporary.
fn multi_op_model() -> Model {
    let tensor = |lifetime| Operand::new(OperandType::TensorFloat32, &MULTI_DIMS, lifetime);
    let mut none = Operand::new(OperandType::Int32, &[], OperandLifeTime::ConstantCopy);
    none.location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 4,
    };
    let mut model = Model {
        operands: vec![
            tensor(OperandLifeTime::ModelInput),        // 0 a
            tensor(OperandLifeTime::ModelInput),        // 1 b
            none.clone(),                               // 2 activation
            tensor(OperandLifeTime::TemporaryVariable), // 3 a + b
            tensor(OperandLifeTime::ModelInput),        // 4 c
            none,                                       // 5 activation
            tensor(OperandLifeTime::ModelOutput),       // 6 out
        ],
        operations: vec![
            Operation {
                operation_type: OperationType::Add.raw(),
                inputs: vec![0, 1, 2],
                outputs: vec![3],
            },
            Operation {
                operation_type: OperationType::Mul.raw(),
                inputs: vec![3, 4, 5],
                outputs: vec![6],
            },
        ],
        input_indexes: vec![0, 1, 4],
        output_indexes: vec![6],
        operand_values: 0i32.to_le_bytes().to_vec(),
        pools: Vec::new(),
        ..Model::default()
    };
    crate::vector::model::count_consumers(&mut model);
    model
}

/// Runs the multi-operation model once with inputs derived from `seed`, and checks the output
/// against the same arithmetic done here.
fn run_multi_op(prepared: &dyn Prepared, seed: usize) -> Result<(), String> {
    let value = |k: usize, i: usize| ((seed * 31 + k * 7 + i) % 17) as f32 * 0.25 - 2.0;
    let mut inputs = Vec::new();
    for k in 0..3 {
        for i in 0..MULTI_LEN {
            inputs.extend_from_slice(&value(k, i).to_le_bytes());
        }
    }
    let bytes = (MULTI_LEN * 4) as u32;
    let input_pool =
        create_memfd("stress-in", &inputs, inputs.len() as u64, true).map_err(|e| e.to_string())?;
    let output_pool =
        create_memfd("stress-out", &[], u64::from(bytes), true).map_err(|e| e.to_string())?;
    let output = std::fs::File::from(output_pool.try_clone().map_err(|e| e.to_string())?);
    let arg = |pool_index, offset| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index,
            offset,
            length: bytes,
        },
        dimensions: Vec::new(),
    };
    let request = Request {
        inputs: vec![arg(0, 0), arg(0, bytes), arg(0, 2 * bytes)],
        outputs: vec![arg(1, 0)],
        pools: vec![
            Memory::shared(input_pool, inputs.len() as u64),
            Memory::shared(output_pool, u64::from(bytes)),
        ],
    };
    prepared
        .execute(&request)
        .map_err(|e| format!("execute: {e}"))?;
    let mut out = vec![0u8; MULTI_LEN * 4];
    std::os::unix::fs::FileExt::read_exact_at(&output, &mut out, 0).map_err(|e| e.to_string())?;
    for i in 0..MULTI_LEN {
        let want = (value(0, i) + value(1, i)) * value(2, i);
        let got = f32::from_le_bytes(out[i * 4..i * 4 + 4].try_into().unwrap());
        if (got - want).abs() > 1e-5 * want.abs().max(1.0) {
            return Err(format!("element {i}: {got}, expected {want}"));
        }
    }
    Ok(())
}

/// Runs every example of `v` on `prepared` and compares each output with its golden values.
fn run_vector_once(
    prepared: &dyn Prepared,
    v: &Vector,
    mode: ConstantMode,
    example: usize,
) -> Result<(), String> {
    let example = &v.examples[example % v.examples.len()];
    let built = build_request(v, mode, example).map_err(|e| e.to_string())?;
    prepared
        .execute(&built.request)
        .map_err(|e| format!("execute: {e}"))?;
    let actual = built.read_outputs().map_err(|e| e.to_string())?;
    for (slot, bytes) in built.outputs.iter().zip(&actual) {
        if v.tolerance.ignored_outputs.contains(&slot.position) {
            continue;
        }
        let Some(expected) = example.output(slot.position) else {
            continue;
        };
        let c = compare(slot.operand_type, expected, bytes, &v.tolerance);
        if !c.passed() {
            return Err(format!("output {}: {}", slot.position, c.describe()));
        }
    }
    Ok(())
}

fn load_jobs() -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for name in STRESS_VECTORS {
        let path = bundled_dir().join(format!("{name}.json"));
        let v = Vector::from_file(&path).map_err(|e| e.to_string())?;
        jobs.push(Job::Vector(Box::new(v)));
    }
    jobs.push(Job::MultiOp);
    Ok(jobs)
}

fn execute_job(
    job: &Job,
    prepared: &dyn Prepared,
    mode: ConstantMode,
    n: usize,
) -> Result<(), String> {
    match job {
        Job::Vector(v) => run_vector_once(prepared, v, mode, n),
        Job::MultiOp => run_multi_op(prepared, n),
    }
}

/// One stress client (a process of its own, `nnhal-vts stress-client`): prepares the mix once
/// (shared by its two threads), then runs `executions` executions split over the threads,
/// every eighth on a model the thread prepares for itself and releases (private). Returns
/// the executions that matched their golden values; a mismatch or error is an `Err`.
pub fn stress_client(
    socket: &Path,
    instance: &str,
    executions: usize,
    index: usize,
    until: Option<Instant>,
) -> Result<usize, String> {
    let jobs = load_jobs()?;
    let device = RpcDevice::open(&TransportOptions {
        socket: Some(socket.to_path_buf()),
        instance: Some(instance.to_string()),
        ..TransportOptions::default()
    })
    .map_err(|e| format!("connect: {e}"))?;
    let shared: Vec<Box<dyn Prepared>> = jobs
        .iter()
        .map(|j| {
            let model = j.model(ConstantMode::Copy)?;
            device
                .prepare_model(model)
                .map_err(|e| format!("{}: prepare: {e}", j.name()))
        })
        .collect::<Result<_, _>>()?;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let threads = 2;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (jobs, shared, device, done) = (&jobs, &shared, &device, &done);
                s.spawn(move || -> Result<(), String> {
                    let mut i = t;
                    while i < executions {
                        if until.is_some_and(|u| Instant::now() >= u) {
                            break;
                        }
                        let k = (index * 7 + i) % jobs.len();
                        let job = &jobs[k];
                        let result = if i % 8 == 7 {
                            let model = job.model(ConstantMode::Reference)?;
                            let private = device
                                .prepare_model(model)
                                .map_err(|e| format!("{}: prepare: {e}", job.name()))?;
                            execute_job(job, private.as_ref(), ConstantMode::Reference, i)
                        } else {
                            execute_job(job, shared[k].as_ref(), ConstantMode::Copy, i)
                        };
                        result.map_err(|e| format!("{} (execution {i}): {e}", job.name()))?;
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        i += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| "a stress thread panicked".to_string())??;
        }
        Ok::<(), String>(())
    })?;
    Ok(done.into_inner())
}

/// A normal client's check: connect, prepare ADD, execute it, compare.
pub fn check_next_client(socket: &Path, instance: &str, wait: Duration) -> Result<(), String> {
    // One connection that waits its turn (a service at its connection limit serves clients
    // in the order they came); retried only when it fails at once.
    let options = nnhal::binder::ConnectOptions {
        instance: instance.to_string(),
        connect_timeout: wait,
        ..nnhal::binder::ConnectOptions::default()
    };
    let device = nnhal::binder::connect_wait(socket, &options, wait)
        .map_err(|e| format!("the next client cannot connect: {e}"))?;
    let prepared = device
        .prepare_model(crate::probe::add_model())
        .map_err(|e| format!("the next client cannot prepare: {e}"))?;
    let run =
        crate::probe::AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[0.5; 4]).map_err(|e| e.to_string())?;
    prepared
        .execute(&run.request)
        .map_err(|e| format!("the next client cannot execute: {e}"))?;
    let out = run.output().map_err(|e| e.to_string())?;
    if out != [1.5, 2.5, 3.5, 4.5] {
        return Err(format!("the next client got {out:?}"));
    }
    Ok(())
}

/// One line of a suite: a name and what went wrong, if anything.
pub type Outcome = (String, Result<String, String>);

/// How `stress` and `faults` reach their service, and how they start their own clients.
pub struct Target {
    pub socket: std::path::PathBuf,
    pub instance: String,
    pub pid: u32,
    /// This executable, re-run as the client processes.
    pub exe: std::path::PathBuf,
}

impl Target {
    fn stats(&self) -> ProcStats {
        proc_stats(self.pid).unwrap_or_default()
    }

    fn client(&self, args: &[String]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.exe);
        command
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .args(["--instance", &self.instance])
            .stdin(std::process::Stdio::null());
        command
    }
}

/// `nnhal-vts stress`: a warm-up client, then `clients` processes × `executions` executions
/// (or until `duration`), every output compared with its golden values; the service's
/// resident size, threads and fds before, during (peak) and after. Fails on any mismatch, when
/// threads or fds do not come back to the warm-up baseline, or when the resident size after
/// the run exceeds the one after warm-up by more than 10 %.
pub fn stress(
    target: &Target,
    clients: usize,
    executions: usize,
    duration: Option<Duration>,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let initial = target.stats();
    println!("service at rest: {initial}");
    let run_clients = |n: usize, per_client: usize| -> Vec<Outcome> {
        let mut args = vec![
            "stress-client".to_string(),
            "--executions".into(),
            per_client.to_string(),
        ];
        if let Some(d) = duration {
            args.extend(["--duration".into(), d.as_secs_f64().to_string()]);
        }
        let children: Vec<_> = (0..n)
            .map(|k| {
                let mut a = args.clone();
                a.extend(["--index".into(), k.to_string()]);
                target
                    .client(&a)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
            })
            .collect();
        children
            .into_iter()
            .enumerate()
            .map(|(k, child)| {
                let name = format!("stress client {k}");
                let result = child
                    .and_then(|c| c.wait_with_output())
                    .map_err(|e| format!("cannot run the client: {e}"))
                    .and_then(|o| {
                        let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
                        if o.status.success() {
                            Ok(text)
                        } else {
                            Err(format!(
                                "{text} {} ({})",
                                String::from_utf8_lossy(&o.stderr).trim(),
                                o.status
                            ))
                        }
                    });
                (name, result)
            })
            .collect()
    };

    // Warm-up: as many clients as the run, each preparing and running every model, so the
    // service has had as many connections and threads at once, and the allocator its working
    // set, before the baseline is taken.
    // A fifth of the run (at least every model twice) reaches the code paths the run takes.
    let warm = run_clients(
        clients,
        (executions / 5).max(2 * (STRESS_VECTORS.len() + 1)),
    );
    let warm_ok = warm.iter().all(|(_, r)| r.is_ok());
    out.extend(warm.into_iter().map(|(n, r)| (format!("warm-up ({n})"), r)));
    if !warm_ok {
        return out;
    }
    let (_, _) = settle(target.pid, initial, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let base = target.stats();
    println!("after warm-up:   {base}");

    // The run, with a sampler for the peak.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let start = Instant::now();
    let (results, peak) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = base;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let now = target.stats();
                peak.rss_kib = peak.rss_kib.max(now.rss_kib);
                peak.threads = peak.threads.max(now.threads);
                peak.fds = peak.fds.max(now.fds);
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        });
        let results = run_clients(clients, executions);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (results, sampler.join().unwrap_or_default())
    });
    let took = start.elapsed();
    let total: usize = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .filter_map(|t| t.split_whitespace().next()?.parse::<usize>().ok())
        .sum();
    out.extend(results);
    println!(
        "during (peak):   {peak}; {total} executions checked in {:.1} s ({:.0}/s)",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64().max(1e-9)
    );
    let (settled, after) = settle(target.pid, base, Duration::from_secs(20));
    println!("after:           {after}");
    out.push((
        "threads and fds back to the warm-up baseline".into(),
        if settled {
            Ok(format!("{after}"))
        } else {
            Err(format!("baseline {base}, after {after}"))
        },
    ));
    let rss_limit = base.rss_kib + base.rss_kib / 10;
    out.push((
        "resident size within 10 % of the warm-up's".into(),
        if after.rss_kib <= rss_limit {
            Ok(format!(
                "{} KiB after, {} KiB after warm-up",
                after.rss_kib, base.rss_kib
            ))
        } else {
            Err(format!(
                "{} KiB after, {} KiB after warm-up (limit {rss_limit})",
                after.rss_kib, base.rss_kib
            ))
        },
    ));
    out
}

/// What a fault client process does before it is killed (`nnhal-vts fault-client`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultAction {
    /// Prepares large models, one after another, until killed.
    Prepare,
    /// Executes, one after another, until killed.
    Execute,
    /// Launches a preparation and exits at once: its callback is dead before the notify.
    LaunchAndExit,
}

/// A float model with `elements` constant weights (`out = in + weights`): large to transfer
/// and to prepare.
fn large_model(elements: u32) -> Model {
    let dims = [1, elements, 1, 1];
    let mut input = Operand::new(
        OperandType::TensorFloat32,
        &dims,
        OperandLifeTime::ModelInput,
    );
    input.number_of_consumers = 1;
    let mut weights = Operand::new(
        OperandType::TensorFloat32,
        &dims,
        OperandLifeTime::ConstantCopy,
    );
    weights.number_of_consumers = 1;
    weights.location = DataLocation {
        pool_index: 0,
        offset: 4,
        length: elements * 4,
    };
    let mut none = Operand::new(OperandType::Int32, &[], OperandLifeTime::ConstantCopy);
    none.number_of_consumers = 1;
    none.location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 4,
    };
    Model {
        operands: vec![
            input,
            weights,
            none,
            Operand::new(
                OperandType::TensorFloat32,
                &dims,
                OperandLifeTime::ModelOutput,
            ),
        ],
        operations: vec![Operation {
            operation_type: OperationType::Add.raw(),
            inputs: vec![0, 1, 2],
            outputs: vec![3],
        }],
        input_indexes: vec![0],
        output_indexes: vec![3],
        operand_values: vec![0u8; 4 + elements as usize * 4],
        pools: Vec::new(),
        ..Model::default()
    }
}

/// The fault client's body; it only returns on an error (it is meant to be killed).
pub fn fault_client(socket: &Path, instance: &str, action: FaultAction) -> Result<(), String> {
    let options = nnhal::binder::ConnectOptions {
        instance: instance.to_string(),
        ..nnhal::binder::ConnectOptions::default()
    };
    let device = nnhal::binder::connect_with(socket, &options).map_err(|e| e.to_string())?;
    match action {
        FaultAction::Prepare => loop {
            drop(device.prepare_model(large_model(1 << 20)));
        },
        FaultAction::Execute => {
            let prepared = device
                .prepare_model(multi_op_model())
                .map_err(|e| e.to_string())?;
            let prepared = RemotePrepared(prepared);
            let mut n = 0;
            loop {
                run_multi_op(&prepared, n)?;
                n += 1;
            }
        }
        FaultAction::LaunchAndExit => {
            let pending = device
                .launch_prepare(&large_model(1 << 20), &Default::default())
                .map_err(|e| e.to_string())?;
            // Leave without waiting for (or releasing) anything: the callback dies with us.
            std::mem::forget(pending);
            std::mem::forget(device);
            std::process::exit(0);
        }
    }
}

struct RemotePrepared(nnhal::binder::RemotePreparedModel);

impl Prepared for RemotePrepared {
    fn execute(&self, request: &Request) -> nnhal::hal::HalResult<nnhal::ExecutionResult> {
        self.0.execute(request)
    }
}

/// The android-13+ connection handshake by hand, for faults that write straight into the
/// socket.
fn raw_session(socket: &Path) -> std::io::Result<UnixStream> {
    use std::io::{Read, Write};
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut header = Vec::new();
    header.extend_from_slice(&2u32.to_le_bytes());
    header.extend_from_slice(&[0, 1]);
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(b"cci\0\0\0\0\0");
    stream.write_all(&header)?;
    let mut response = [0u8; 8];
    stream.read_exact(&mut response)?;
    Ok(stream)
}

/// One relayed connection: what the client sent through it, the service's end, and whether
/// the relay has stopped reading what the service sends back.
struct RelayedConnection {
    sent: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    upstream: UnixStream,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// A byte relay between a real client session and the service, so that one of the session's
/// connections can be made to stop reading while the client library stays as it is.
struct Relay {
    path: std::path::PathBuf,
    dir: std::path::PathBuf,
    connections: std::sync::Arc<std::sync::Mutex<Vec<RelayedConnection>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Every socket the relay holds, shut down at the end so that no pump stays blocked.
    sockets: std::sync::Arc<std::sync::Mutex<Vec<UnixStream>>>,
}

impl Relay {
    fn start(service: &Path) -> std::io::Result<Relay> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nnhal-vts-relay-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("relay.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        let relay = Relay {
            path,
            dir,
            connections: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            sockets: Arc::new(Mutex::new(Vec::new())),
        };
        let (connections, stop, sockets) = (
            Arc::clone(&relay.connections),
            Arc::clone(&relay.stop),
            Arc::clone(&relay.sockets),
        );
        let service = service.to_path_buf();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                let Ok(upstream) = UnixStream::connect(&service) else {
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let sent = Arc::new(Mutex::new(Vec::new()));
                let frozen = Arc::new(AtomicBool::new(false));
                let clones = (|| {
                    Some((
                        client.try_clone().ok()?,
                        client.try_clone().ok()?,
                        upstream.try_clone().ok()?,
                        upstream.try_clone().ok()?,
                        upstream.try_clone().ok()?,
                    ))
                })();
                let Some((mut c_read, mut c_write, mut u_read, mut u_write, u_keep)) = clones
                else {
                    continue;
                };
                sockets.lock().unwrap().extend([client, upstream]);
                // Client to service: recorded, always forwarded.
                let record = Arc::clone(&sent);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n @ 1..) = c_read.read(&mut buf) {
                        record.lock().unwrap().extend_from_slice(&buf[..n]);
                        if u_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
                // Service to client: forwarded until frozen, then never read again.
                let freeze = Arc::clone(&frozen);
                let halt = Arc::clone(&stop);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = vec![0u8; 64 << 10];
                    while !freeze.load(Ordering::SeqCst) {
                        match u_read.read(&mut buf) {
                            Ok(n @ 1..) if !freeze.load(Ordering::SeqCst) => {
                                if c_write.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                            Ok(1..) => break,
                            _ => return,
                        }
                    }
                    while !halt.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                });
                connections.lock().unwrap().push(RelayedConnection {
                    sent,
                    upstream: u_keep,
                    frozen,
                });
            }
        });
        Ok(relay)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for socket in self.sockets.lock().unwrap().iter() {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The complete binder RPC frames (16-byte header: command, body size, reserved) in `bytes`
/// whose command is TRANSACT (0).
fn transact_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while bytes.len() >= at + 16 {
        let command = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let body = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        let Some(end) = (at + 16)
            .checked_add(body)
            .filter(|&end| end <= bytes.len())
        else {
            break;
        };
        if command == 0 {
            out.push(&bytes[at..end]);
        }
        at = end;
    }
    out
}

/// The fault "a client that never reads its replies": a real client session (the client
/// library, through a [`Relay`]) makes one `getSupportedOperations` call; the relay then writes
/// that same valid call again and again on the same connection and stops reading, until the
/// kernel's buffers are full both ways and the service's thread is blocked sending a reply.
/// Meanwhile a normal client must be served, and the service must end the stuck session in
/// bounded time (`--send-timeout`), giving back its thread and fds.
fn unread_replies(target: &Target) -> Result<String, String> {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::sync::atomic::Ordering;
    let relay = Relay::start(&target.socket).map_err(|e| format!("relay: {e}"))?;
    let options = nnhal::binder::ConnectOptions {
        instance: target.instance.clone(),
        ..nnhal::binder::ConnectOptions::default()
    };
    let device = nnhal::binder::connect_with(&relay.path, &options).map_err(|e| e.to_string())?;
    let model = crate::probe::add_model();
    let (upstream, frozen, frame) = {
        let connections = relay.connections.lock().unwrap();
        let first = connections
            .first()
            .ok_or("the client opened no connection through the relay")?;
        let before = first.sent.lock().unwrap().len();
        device
            .supported_operations(&model)
            .map_err(|e| format!("the call through the relay: {e}"))?;
        let sent = first.sent.lock().unwrap();
        let frame = transact_frames(&sent[before..])
            .last()
            .map(|f| f.to_vec())
            .ok_or("no transaction frame recorded for the call")?;
        (
            first.upstream.try_clone().map_err(|e| e.to_string())?,
            std::sync::Arc::clone(&first.frozen),
            frame,
        )
    };
    frozen.store(true, Ordering::SeqCst);
    let mut upstream = upstream;
    upstream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut written = 0usize;
    while written < 200_000 && upstream.write_all(&frame).is_ok() {
        written += 1;
    }
    let blocked = Instant::now();
    if written == 200_000 {
        return Err("200,000 calls written and the socket never filled".into());
    }
    // The service is stuck sending to this client; others are served meanwhile.
    check_next_client(&target.socket, &target.instance, Duration::from_secs(20))
        .map_err(|e| format!("while one client does not read: {e}"))?;
    // Bounded write: the service ends the session, which closes its end of the socket.
    // POLLHUP is reported without being asked for: both directions of the socket closed.
    let mut fds = [nix::poll::PollFd::new(
        upstream.as_fd(),
        nix::poll::PollFlags::empty(),
    )];
    let mut ended = None;
    while ended.is_none() && blocked.elapsed() < Duration::from_secs(120) {
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u16));
        if fds[0]
            .revents()
            .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLHUP))
        {
            ended = Some(blocked.elapsed());
        }
    }
    drop(device);
    drop(relay);
    let ended =
        ended.ok_or("the service never ended the session of a client that reads nothing")?;
    Ok(format!(
        "{written} valid getSupportedOperations calls written, no reply read; the service \
         ended that session {:.1} s after the socket filled",
        ended.as_secs_f64()
    ))
}

fn wire_header(command: u32, body: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&command.to_le_bytes());
    h[4..8].copy_from_slice(&body.to_le_bytes());
    h
}

/// Raises this process's open-file limit to its hard limit (for the idle connections).
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// `nnhal-vts faults`: each fault, then a normal client that must be served correctly, and
/// the service's threads and fds back to their baseline.
pub fn faults(target: &Target, idle_connections: usize) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = Vec::new();
    if let Err(e) = check_next_client(&target.socket, &target.instance, Duration::from_secs(20)) {
        out.push(("warm-up client".into(), Err(e)));
        return out;
    }
    std::thread::sleep(Duration::from_millis(500));
    let base = target.stats();
    println!("service at rest: {base}");

    type Fault<'a> = (&'a str, Box<dyn Fn() -> Result<String, String> + 'a>);
    let kill_after = |action: FaultAction, after: Duration| -> Result<String, String> {
        let mut child = target
            .client(&[
                "fault-client".into(),
                "--action".into(),
                clap::ValueEnum::to_possible_value(&action)
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut exited = None;
        while start.elapsed() < after && exited.is_none() {
            std::thread::sleep(Duration::from_millis(20));
            exited = child.try_wait().map_err(|e| e.to_string())?;
        }
        let _ = child.kill();
        let _ = child.wait();
        Ok(match exited {
            Some(status) => format!("client ended by itself ({status})"),
            None => format!("client killed after {} ms", after.as_millis()),
        })
    };
    let faults: Vec<Fault<'_>> = vec![
        (
            "client killed (SIGKILL) mid-prepare",
            Box::new(|| kill_after(FaultAction::Prepare, Duration::from_millis(700))),
        ),
        (
            "client killed (SIGKILL) mid-execute",
            Box::new(|| kill_after(FaultAction::Execute, Duration::from_millis(700))),
        ),
        (
            "callback dies before notify",
            Box::new(|| kill_after(FaultAction::LaunchAndExit, Duration::from_secs(10))),
        ),
        (
            "client that never reads its replies",
            Box::new(|| unread_replies(target)),
        ),
        (
            "prepared model released while executions run",
            Box::new(|| {
                let device = nnhal::binder::connect(&target.socket).map_err(|e| e.to_string())?;
                let prepared = device
                    .prepare_model(multi_op_model())
                    .map_err(|e| e.to_string())?;
                let burst = prepared.burst().map_err(|e| e.to_string())?;
                drop(prepared);
                struct BurstPrepared(nnhal::binder::RemoteBurst);
                impl Prepared for BurstPrepared {
                    fn execute(
                        &self,
                        request: &Request,
                    ) -> nnhal::hal::HalResult<nnhal::ExecutionResult> {
                        self.0.execute(request)
                    }
                }
                let burst = BurstPrepared(burst);
                for n in 0..100 {
                    run_multi_op(&burst, n)?;
                }
                Ok("100 executions after the release, all correct".into())
            }),
        ),
        (
            "request pool (unsealed memfd) shrunk while executions read it",
            Box::new(|| {
                let device = nnhal::binder::connect(&target.socket).map_err(|e| e.to_string())?;
                let prepared = device
                    .prepare_model(large_model(1 << 18))
                    .map_err(|e| e.to_string())?;
                let len = 4u64 << 18;
                let input = create_memfd("fault-in", &[], len, false).map_err(|e| e.to_string())?;
                let output =
                    create_memfd("fault-out", &[], len, true).map_err(|e| e.to_string())?;
                let shrinker = std::fs::File::from(input.try_clone().map_err(|e| e.to_string())?);
                let arg = |pool_index| RequestArgument {
                    has_no_value: false,
                    location: DataLocation {
                        pool_index,
                        offset: 0,
                        length: len as u32,
                    },
                    dimensions: Vec::new(),
                };
                let request = Request {
                    inputs: vec![arg(0)],
                    outputs: vec![arg(1)],
                    pools: vec![Memory::shared(input, len), Memory::shared(output, len)],
                };
                let stop = std::sync::atomic::AtomicBool::new(false);
                let (ok, failed) = std::thread::scope(|s| {
                    s.spawn(|| {
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let _ = shrinker.set_len(0);
                            let _ = shrinker.set_len(len);
                        }
                    });
                    let (mut ok, mut failed) = (0, 0);
                    for _ in 0..200 {
                        match prepared.execute(&request) {
                            Ok(_) => ok += 1,
                            Err(_) => failed += 1,
                        }
                    }
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    (ok, failed)
                });
                Ok(format!(
                    "{ok} executions completed, {failed} refused, no signal"
                ))
            }),
        ),
        (
            "idle connections, then a normal client",
            Box::new(|| {
                raise_fd_limit();
                let socket = target.socket.clone();
                // Each connection completes its handshake (a session the service serves) and
                // then says nothing: past the handshake deadline, only the idle eviction
                // (docs/limits.md) frees their slots.
                let opener = std::thread::spawn(move || {
                    let start = Instant::now();
                    let mut idle = Vec::new();
                    let mut failed = 0usize;
                    while idle.len() < idle_connections && start.elapsed() < Duration::from_secs(90)
                    {
                        match raw_session(&socket) {
                            Ok(s) => idle.push(s),
                            Err(_) => {
                                failed += 1;
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        }
                    }
                    (idle, failed, start.elapsed())
                });
                let (idle, failed, opening) = opener
                    .join()
                    .map_err(|_| "the opener panicked".to_string())?;
                let opened = idle.len();
                let start = Instant::now();
                let during = target.stats();
                check_next_client(&target.socket, &target.instance, Duration::from_secs(120))?;
                let waited = start.elapsed();
                drop(idle);
                if opened < idle_connections {
                    return Err(format!(
                        "only {opened} of {idle_connections} connections completed their \
                         handshake in {:.1} s ({failed} failed)",
                        opening.as_secs_f64()
                    ));
                }
                if waited > Duration::from_secs(10) {
                    return Err(format!(
                        "after {opened} idle connections the normal client waited {:.1} s",
                        waited.as_secs_f64()
                    ));
                }
                Ok(format!(
                    "{opened} connections completed their handshake and stayed silent (opened \
                     in {:.1} s; {during} meanwhile); the normal client was served after {:.2} s",
                    opening.as_secs_f64(),
                    waited.as_secs_f64()
                ))
            }),
        ),
        (
            "garbage bytes and lying length fields written into the socket",
            Box::new(|| {
                use std::io::Write;
                let mut seed = 0x9e3779b97f4a7c15u64;
                let mut garbage = vec![0u8; 64 << 10];
                for b in &mut garbage {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    *b = seed as u8;
                }
                let mut notes = Vec::new();
                // Garbage instead of a handshake.
                if let Ok(mut s) = UnixStream::connect(&target.socket) {
                    notes.push(format!("garbage: {:?}", s.write_all(&garbage).is_ok()));
                }
                // A truncated handshake.
                if let Ok(mut s) = UnixStream::connect(&target.socket) {
                    let _ = s.write_all(&2u32.to_le_bytes());
                }
                // After a valid handshake: 64 MiB announced, 1 KiB sent; then 4 GiB announced;
                // then a header of an unknown command; then garbage.
                for (command, body, send) in [
                    (0u32, 64u32 << 20, 1024usize),
                    (0, u32::MAX, 16),
                    (0xdead, 8, 8),
                    (1, 100, 100),
                ] {
                    let mut s = raw_session(&target.socket).map_err(|e| e.to_string())?;
                    let _ = s.write_all(&wire_header(command, body));
                    let _ = s.write_all(&garbage[..send]);
                }
                let mut s = raw_session(&target.socket).map_err(|e| e.to_string())?;
                let _ = s.write_all(&garbage);
                std::thread::sleep(Duration::from_millis(300));
                Ok("6 hostile connections".into())
            }),
        ),
    ];

    for (name, fault) in faults {
        let result = fault().and_then(|note| {
            check_next_client(&target.socket, &target.instance, Duration::from_secs(60))?;
            let (settled, after) = settle(target.pid, base, Duration::from_secs(30));
            if settled {
                Ok(format!("{note}; next client served; {after}"))
            } else {
                Err(format!(
                    "{note}; next client served, but threads/fds stay at {after} (baseline {base})"
                ))
            }
        });
        out.push((name.to_string(), result));
    }
    println!("service at the end: {}", target.stats());
    out
}
