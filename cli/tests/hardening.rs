//! Hardening: each finding of the hardening review as a test through the real path — an
//! `nnhal-service` child on a Unix socket, real memfds, real processes — plus the resource
//! limits of `docs/limits.md` (bad-input classes BI-35, BI-43, BI-51, BI-52, BI-61 and BI-62 in
//! `docs/bad-inputs.md`).

mod common;

use nnhal::binder::{self, ConnectOptions, RemoteDevice};
use nnhal::hal::memory::{create_memfd, Memory};
use nnhal::hal::{DataLocation, ErrorStatus, Model, OperandType};
use nnhal_vts::probe::{self, AddRun};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running `nnhal-service` child with its own socket directory.
struct Service {
    child: Child,
    socket: PathBuf,
    dir: PathBuf,
}

impl Service {
    fn start(args: &[&str]) -> Service {
        Service::start_limited(args, None)
    }

    /// A service whose address space is limited to `address_space` bytes (RLIMIT_AS).
    fn start_limited(args: &[&str], address_space: Option<u64>) -> Service {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nnhal-hardening-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("default.sock");
        let mut command = Command::new(common::service_exe());
        command
            .arg("--socket")
            .arg(&socket)
            .args(["--threads", "2", "--log-level", "error"])
            .args(args)
            .stdin(Stdio::null());
        if let Some(limit) = address_space {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches nothing of the parent.
            unsafe {
                command.pre_exec(move || {
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_AS,
                        limit,
                        limit,
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        let child = command.spawn().expect("start nnhal-service");
        let service = Service { child, socket, dir };
        drop(service.connect());
        service
    }

    fn connect(&self) -> RemoteDevice {
        binder::connect_wait(
            &self.socket,
            &ConnectOptions::default(),
            Duration::from_secs(20),
        )
        .expect("connect to nnhal-service")
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .unwrap()
            .count()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    fn vm_size_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `f` holds, for at most `timeout`.
fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

fn run_add(device: &RemoteDevice) {
    let prepared = device
        .prepare_model(probe::add_model())
        .expect("prepare ADD");
    let run = AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]).unwrap();
    prepared.execute(&run.request).expect("execute ADD");
    assert_eq!(run.output().unwrap(), [11.0, 22.0, 33.0, 44.0]);
}

/// Opens a raw connection and completes the android-13+ connection handshake by hand (a
/// connection header asking for a new session with fds over the socket, the outgoing
/// connection init, then the server's new-session response).
fn raw_session(socket: &Path) -> UnixStream {
    use std::io::Read;
    let mut stream = UnixStream::connect(socket).unwrap();
    let mut header = Vec::new();
    header.extend_from_slice(&2u32.to_le_bytes()); // version
    header.push(0); // options: outgoing
    header.push(1); // fd transport mode: unix
    header.extend_from_slice(&[0; 8]); // reserved
    header.extend_from_slice(&0u16.to_le_bytes()); // no session id: a new session
    header.extend_from_slice(b"cci\0\0\0\0\0");
    stream.write_all(&header).unwrap();
    // A service that never serves the connection fails the test instead of hanging it.
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut response = [0u8; 8];
    stream
        .read_exact(&mut response)
        .expect("the service answers the handshake");
    stream.set_read_timeout(None).unwrap();
    stream
}

/// The finding: under an address-space limit, connections that each announce a 64 MiB frame
/// and send 1 MiB made the frame reader allocate the announced size, and the failed
/// allocation aborted the service. With the reader bounded by the bytes that arrive, 60 such
/// connections cost about 60–120 MiB, and the service goes on serving.
#[test]
fn frame_size_bound_holds_under_an_address_space_limit() {
    // Measure what the service needs at rest, then allow it 1 GiB more: 60 frames of 64 MiB
    // would need nearly 4 GiB.
    let probe = Service::start(&[]);
    let rest = probe.vm_size_kib() * 1024;
    drop(probe);
    let limit = rest + (1 << 30);
    let mut service = Service::start_limited(&["--max-connections", "128"], Some(limit));

    let body = vec![0x5au8; 1 << 20];
    let mut liars = Vec::new();
    for _ in 0..60 {
        let mut stream = raw_session(&service.socket);
        let mut frame = Vec::new();
        frame.extend_from_slice(&0u32.to_le_bytes()); // TRANSACT
        frame.extend_from_slice(&(64u32 << 20).to_le_bytes()); // bodySize: 64 MiB
        frame.extend_from_slice(&[0; 8]);
        stream.write_all(&frame).unwrap();
        stream.write_all(&body).unwrap();
        liars.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(service.alive(), "the service died holding 60 lying frames");
    run_add(&service.connect());
    drop(liars);
    assert!(service.alive());
    run_add(&service.connect());
}

/// The finding: nothing limited connections (1,000 idle connections cost 2,000 threads).
/// With `--max-connections 8`, 40 idle connections leave the thread count bounded, and once
/// their handshake time is up a normal client is served.
#[test]
fn limit_max_connections_caps_the_service() {
    let service = Service::start(&["--max-connections", "8", "--handshake-timeout", "1"]);
    let baseline = service.threads();
    let idle: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&service.socket).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = service.threads();
    assert!(
        during <= baseline + 8 * 2 + 2,
        "{during} threads with 40 idle connections (baseline {baseline}, cap 8)"
    );
    // Idle connections are dropped after their handshake time; a client then gets through.
    let start = Instant::now();
    let device = binder::connect_wait(
        &service.socket,
        &ConnectOptions::default(),
        Duration::from_secs(30),
    )
    .expect("a normal client after the idle ones");
    run_add(&device);
    assert!(start.elapsed() < Duration::from_secs(30));
    drop(device);
    drop(idle);
    assert!(
        eventually(Duration::from_secs(10), || service.threads() <= baseline),
        "threads {} did not return to {baseline}",
        service.threads()
    );
}

/// The finding: the client had no connect timeout, so a service at its limit made `nnhal info`
/// hang. A listener that never answers must fail the connect in time, in words.
#[test]
fn client_connect_times_out_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("nnhal-hardening-mute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("mute.sock");
    // Accepts (the kernel completes connects to a listening socket) and never answers.
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(1),
        ..ConnectOptions::default()
    };
    let start = Instant::now();
    let err = binder::connect_with(&socket, &options)
        .err()
        .expect("connect to a mute socket must fail");
    let took = start.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(err.status(), ErrorStatus::DeviceUnavailable, "{err}");
    assert!(err.message().contains("timed out"), "{err}");

    // The CLI says so too, and exits instead of hanging.
    let dir = std::env::temp_dir().join(format!("nnhal-hardening-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("mute.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(["info", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(stderr.contains("timed out"), "{stderr}");
}

/// The finding: `executeFenced` waited for its fences with no bound. A fence that never
/// signals must end the call by its deadline, or by its duration, and the thread serving it
/// must be free for the next call.
#[test]
fn fenced_wait_is_bounded_by_its_deadline_and_the_thread_released() {
    let service = Service::start(&[]);
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap();
    let baseline = service.threads();

    let boot_ns = || {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).unwrap();
        t.tv_sec() * 1_000_000_000 + t.tv_nsec()
    };
    // A pipe's read end is a fence that never signals while the write end stays open.
    let (fence, _keep_open) = nix::unistd::pipe().unwrap();

    // Deadline 1 s ahead.
    let start = Instant::now();
    let result = prepared.execute_fenced_with(
        &run.request,
        vec![fence.try_clone().unwrap()],
        boot_ns() + 1_000_000_000,
        -1,
    );
    let took = start.elapsed();
    assert!(result.is_err(), "an unsignalled fence cannot complete");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "returned after {took:?} for a 1 s deadline"
    );

    // Duration 500 ms, no deadline.
    let start = Instant::now();
    let result = prepared.execute_fenced_with(
        &run.request,
        vec![fence.try_clone().unwrap()],
        -1,
        500_000_000,
    );
    let took = start.elapsed();
    assert!(result.is_err());
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(4),
        "returned after {took:?} for a 500 ms duration"
    );

    // The same connection (its one server thread) serves the next call at once.
    let start = Instant::now();
    prepared.execute(&run.request).unwrap();
    assert_eq!(run.output().unwrap(), [3.0; 4]);
    assert!(start.elapsed() < Duration::from_secs(2));
    // A fence that is signalled runs the execution.
    let (ready, ready_w) = nix::unistd::pipe().unwrap();
    drop(ready_w);
    prepared
        .execute_fenced_with(&run.request, vec![ready], -1, 2_000_000_000)
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || service.threads() <= baseline),
        "threads {} did not return to {baseline}",
        service.threads()
    );
    drop(fence);
}

fn add_request_with_output(output: Memory) -> nnhal::hal::Request {
    let mut run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap().request;
    run.pools[1] = output;
    run
}

/// The finding: an output pool whose fd is read-only or `O_PATH` was found only after the
/// model had run (GENERAL_FAILURE, "Bad file descriptor"); it is INVALID_ARGUMENT when the
/// request is validated, through the transport as in process. A memfd sealed against writes
/// is the same.
#[test]
fn output_pool_not_writable_is_invalid_argument_at_validation() {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let service = Service::start(&[]);
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();

    let file = |flags: OFlag| -> OwnedFd {
        let memfd = create_memfd("nnhal-out", &[], 16, false).unwrap();
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&memfd));
        open(path.as_str(), flags, Mode::empty()).unwrap()
    };
    let sealed = {
        use nix::sys::memfd::{memfd_create, MFdFlags};
        let memfd = memfd_create(c"nnhal-out-sealed", MFdFlags::MFD_ALLOW_SEALING).unwrap();
        nix::unistd::ftruncate(&memfd, 16).unwrap();
        nix::fcntl::fcntl(
            &memfd,
            nix::fcntl::FcntlArg::F_ADD_SEALS(
                nix::fcntl::SealFlag::F_SEAL_SHRINK | nix::fcntl::SealFlag::F_SEAL_WRITE,
            ),
        )
        .unwrap();
        memfd
    };
    let cases = [
        ("read-only", file(OFlag::O_RDONLY)),
        ("O_PATH", file(OFlag::O_PATH)),
        ("sealed against writes", sealed),
    ];
    for (what, fd) in cases {
        let request = add_request_with_output(Memory::shared(fd, 16));
        let err = prepared
            .execute(&request)
            .expect_err(&format!("{what} output pool"));
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{what}: {err}");
        assert!(
            !err.message().contains("Bad file descriptor"),
            "{what}: {err}"
        );
    }
    // A read-only fd is fine as an input pool.
    let mut request = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap().request;
    let inputs = create_memfd("nnhal-in", &[0u8; 32], 32, false).unwrap();
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&inputs));
    let ro = open(path.as_str(), OFlag::O_RDONLY, Mode::empty()).unwrap();
    request.pools[0] = Memory::shared(ro, 32);
    prepared.execute(&request).expect("read-only input pool");
}

/// The finding: character devices such as /dev/zero were accepted as pools. A pool is taken
/// only when its fd maps as shared memory of the stated size; /dev/zero maps at any length.
#[test]
fn pool_that_is_not_shared_memory_is_refused() {
    let service = Service::start(&[]);
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let zero = || -> OwnedFd {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/zero")
            .unwrap()
            .into()
    };
    let request = add_request_with_output(Memory::shared(zero(), 16));
    let err = prepared
        .execute(&request)
        .expect_err("/dev/zero output pool");
    assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");

    // As a model pool too.
    let mut model = probe::add_model();
    model.pools.push(Memory::shared(zero(), 4096));
    let err = device
        .prepare_model(model)
        .err()
        .expect("/dev/zero model pool");
    assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
    run_add(&device);
}

/// The finding: an mmap that failed for lack of memory on a large legitimate pool was
/// INVALID_ARGUMENT. Under an address-space limit, a 2 GiB shrink-sealed memfd pool cannot be
/// mapped: that is the service's condition, GENERAL_FAILURE.
#[test]
fn mmap_enomem_is_general_failure() {
    let probe_service = Service::start(&[]);
    let rest = probe_service.vm_size_kib() * 1024;
    drop(probe_service);
    let service = Service::start_limited(
        &["--max-execution-bytes", "4294967296"],
        Some(rest + (512 << 20)),
    );
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let big: u64 = 2 << 30;
    let pool = create_memfd("nnhal-big", &[], big, true).unwrap();
    let mut request = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap().request;
    request.pools[1] = Memory::shared(pool, big);
    let err = prepared
        .execute(&request)
        .expect_err("2 GiB pool under 512 MiB");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("memory"), "{err}");
    run_add(&device);
}

/// A model whose constant data (operandValues) is `bytes` long: the ADD probe with padding.
fn add_model_with_constants(bytes: usize) -> Model {
    let mut model = probe::add_model();
    model.operand_values.resize(bytes.max(4), 0);
    model
}

/// `--max-model-bytes`: a valid model declaring more constant bytes is refused before it is
/// prepared; one under the limit is served.
#[test]
fn limit_max_model_bytes_refuses_before_allocating() {
    let service = Service::start(&["--max-model-bytes", "65536"]);
    let device = service.connect();
    let err = device
        .prepare_model(add_model_with_constants(100_000))
        .err()
        .expect("past --max-model-bytes");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("--max-model-bytes"), "{err}");
    let err = device
        .supported_operations(&add_model_with_constants(100_000))
        .expect_err("getSupportedOperations past the limit");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    // The declared size of a pool counts too (a 1 MiB memfd the model does not even read).
    let mut model = probe::add_model();
    let pool = create_memfd("nnhal-pool", &[], 1 << 20, true).unwrap();
    model.pools.push(Memory::shared(pool, 1 << 20));
    let err = device.prepare_model(model).err().expect("pool past limit");
    assert!(err.message().contains("--max-model-bytes"), "{err}");
    device
        .prepare_model(add_model_with_constants(60_000))
        .expect("under the limit");
}

/// `--max-operands`: a model with more operands and operations than allowed is refused.
#[test]
fn limit_max_operands_refuses_a_huge_model() {
    let service = Service::start(&["--max-operands", "100"]);
    let device = service.connect();
    let mut model = probe::add_model();
    for _ in 0..200 {
        model.operands.push(nnhal::hal::Operand::new(
            OperandType::Int32,
            &[],
            nnhal::hal::OperandLifeTime::ConstantCopy,
        ));
        let last = model.operands.last_mut().unwrap();
        last.location = DataLocation {
            pool_index: 0,
            offset: 0,
            length: 4,
        };
    }
    let err = device
        .prepare_model(model)
        .err()
        .expect("past --max-operands");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("--max-operands"), "{err}");
    run_add(&device);
}

/// Validation before limits: a model past `--max-operands` whose extra operands are
/// TEMPORARY_VARIABLEs no operation writes is malformed, and malformed is INVALID_ARGUMENT
/// whatever the size (at the default limit too, with 100,000 of them); the same count of valid
/// extra operands is GENERAL_FAILURE (`limit_max_operands_refuses_a_huge_model`).
#[test]
fn invalid_model_is_invalid_argument_whatever_its_size() {
    for (flags, extra) in [(&["--max-operands", "100"][..], 200), (&[][..], 100_000)] {
        let service = Service::start(flags);
        let device = service.connect();
        let mut model = probe::add_model();
        for _ in 0..extra {
            model.operands.push(nnhal::hal::Operand::new(
                OperandType::TensorFloat32,
                &[1],
                nnhal::hal::OperandLifeTime::TemporaryVariable,
            ));
        }
        let err = device
            .supported_operations(&model)
            .expect_err("an unwritten temporary");
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
        assert!(err.message().contains("never written"), "{err}");
        let err = device.prepare_model(model).err().expect("invalid model");
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{err}");
        run_add(&device);
    }
}

/// A model whose one constant is a float tensor of `elements` values: out = in + weights.
fn add_constant_model(elements: u32) -> Model {
    use nnhal::hal::{Operand, OperandLifeTime as L, Operation, OperationType};
    let dims = [1, elements, 1, 1];
    let mut input = Operand::new(OperandType::TensorFloat32, &dims, L::ModelInput);
    input.number_of_consumers = 1;
    let mut weights = Operand::new(OperandType::TensorFloat32, &dims, L::ConstantCopy);
    weights.number_of_consumers = 1;
    weights.location = DataLocation {
        pool_index: 0,
        offset: 4,
        length: elements * 4,
    };
    let mut activation = Operand::new(OperandType::Int32, &[], L::ConstantCopy);
    activation.number_of_consumers = 1;
    activation.location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 4,
    };
    let output = Operand::new(OperandType::TensorFloat32, &dims, L::ModelOutput);
    let mut values = vec![0u8; 4 + elements as usize * 4];
    for (i, chunk) in values[4..].chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&(i as f32).to_le_bytes());
    }
    Model {
        operands: vec![input, weights, activation, output],
        operations: vec![Operation {
            operation_type: OperationType::Add.raw(),
            inputs: vec![0, 1, 2],
            outputs: vec![3],
        }],
        input_indexes: vec![0],
        output_indexes: vec![3],
        operand_values: values,
        pools: Vec::new(),
        ..Model::default()
    }
}

/// `--max-prepared-bytes` and `--max-prepared-bytes-per-client`: prepared models are charged
/// their estimated memory; past a client's share or the total, preparation is refused with
/// GENERAL_FAILURE, and releasing a model gives its share back.
#[test]
fn limit_max_prepared_bytes_refuses_past_the_budget() {
    // Each model: 1 Mi floats = 4 MiB of constants, charged about 4.2 MB.
    let service = Service::start(&[
        "--max-prepared-bytes-per-client",
        "10000000",
        "--max-prepared-bytes",
        "60000000",
    ]);
    let device = service.connect();
    let first = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    let second = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    let err = device
        .prepare_model(add_constant_model(1 << 20))
        .err()
        .expect("third model past the client's share");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(
        err.message().contains("--max-prepared-bytes-per-client"),
        "{err}"
    );

    // Releasing a model gives its share back.
    drop(second);
    let again = device.prepare_model(add_constant_model(1 << 20));
    assert!(
        again.is_ok(),
        "share given back on release: {:?}",
        again.err()
    );
    drop(first);

    // The total applies whoever holds the memory.
    let service = Service::start(&[
        "--max-prepared-bytes-per-client",
        "100000000",
        "--max-prepared-bytes",
        "10000000",
    ]);
    let device = service.connect();
    let _first = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    let _second = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    let err = device
        .prepare_model(add_constant_model(1 << 20))
        .err()
        .expect("third model past the total");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("(--max-prepared-bytes)"), "{err}");
}

/// `--max-execution-bytes`: a request whose arguments span more bytes is refused before any
/// pool is mapped.
#[test]
fn limit_max_execution_bytes_refuses_a_large_request() {
    let service = Service::start(&["--max-execution-bytes", "16"]);
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap();
    let err = prepared
        .execute(&run.request)
        .expect_err("48 bytes past 16");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("--max-execution-bytes"), "{err}");
}

/// The finding: after a client released 150 large models, 1.7–1.9 GB stayed resident. The
/// memory of released models goes back to the system: RSS after release is close to RSS
/// before preparing.
#[test]
fn released_model_memory_returns_to_the_system() {
    let service = Service::start(&[]);
    let device = service.connect();
    run_add(&device);
    let before = service.rss_kib();
    let mut models = Vec::new();
    for _ in 0..8 {
        // 2 Mi floats: 8 MiB of constants each.
        models.push(device.prepare_model(add_constant_model(2 << 20)).unwrap());
    }
    let held = service.rss_kib();
    assert!(
        held > before + 64 * 1024,
        "8 models of 8 MiB constants hold only {} KiB more",
        held - before
    );
    drop(models);
    let settled = eventually(Duration::from_secs(10), || {
        service.rss_kib() < before + 16 * 1024
    });
    let after = service.rss_kib();
    assert!(
        settled,
        "RSS {before} KiB before, {held} KiB with the models, {after} KiB after release"
    );
}

/// With the default limits, the float32 MobileNet (about 17 MB of constants) still prepares
/// and runs over binder, and matches its reference.
#[test]
fn mobilenet_prepares_and_runs_over_binder_with_default_limits() {
    let out = Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args([
            "bench",
            "--builtin",
            "mobilenet-v1-f32",
            "--transport",
            "rpc",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.contains("\"output_ok\":true"), "{last}");
    assert!(last.contains("mobilenet-v1-f32"), "{last}");
}

/// Found by the `model` fuzz target: the quant8 depthwise kernel sized a scratch row by
/// `output width × stride × channels`, and the stride is the model's word, so a model with a
/// stride of 2^30 made the service allocate gigabytes (an abort where allocation fails). Under
/// an address-space limit, such a model runs, and gives the same answer as with stride 1 (its
/// one output pixel does not depend on the stride).
#[test]
fn depthwise_quant8_with_a_huge_stride_allocates_nothing_large() {
    use nnhal_vts::vector::model::{build_request, to_model, ConstantMode};
    let path = common::repo_root().join("vts_tests/vectors/depthwise_conv2d_quant8.json");
    let vector = nnhal_vts::vector::Vector::from_file(&path).unwrap();
    let mut model = to_model(&vector, ConstantMode::Copy).unwrap();
    // Operand 4 is both strides (the vector's DEPTHWISE_CONV_2D reads it as inputs 7 and 8).
    let op = &model.operations[0];
    assert_eq!((op.inputs[7], op.inputs[8]), (4, 4));
    let at = model.operands[4].location.offset as usize;
    model.operand_values[at..at + 4].copy_from_slice(&(1i32 << 30).to_le_bytes());

    let probe_service = Service::start(&[]);
    let rest = probe_service.vm_size_kib() * 1024;
    drop(probe_service);
    let mut service = Service::start_limited(&[], Some(rest + (512 << 20)));
    let device = service.connect();
    let prepared = device
        .prepare_model(model)
        .expect("prepare the huge-stride model");
    let built = build_request(&vector, ConstantMode::Copy, &vector.examples[0]).unwrap();
    prepared
        .execute(&built.request)
        .expect("execute the huge-stride model");
    assert!(service.alive());
    let got = built.read_outputs().unwrap();
    let expected = vector.examples[0].output(0).unwrap();
    let got: Vec<f64> = got[0].iter().map(|&b| f64::from(b)).collect();
    assert_eq!(got, expected, "stride 2^30 changed the single output pixel");
}

/// Whether the service has closed `stream`: a read sees the end of the stream (or a reset)
/// rather than its timeout.
fn closed_by_service(mut stream: &UnixStream) -> bool {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// `--idle-timeout`: a connection that finished its handshake and then holds nothing is
/// closed once silent that long (it held a slot forever before), and so is a client that
/// holds only the device; a client holding a prepared model stays connected however long it
/// is silent, and its model still runs.
#[test]
fn idle_timeout_closes_connections_holding_nothing_and_keeps_clients_holding_models() {
    let service = Service::start(&["--idle-timeout", "1"]);
    let holder = service.connect();
    let prepared = holder.prepare_model(probe::add_model()).unwrap();
    let device_only = service.connect();
    device_only.ping().unwrap();
    let silent = raw_session(&service.socket);
    let start = Instant::now();
    assert!(
        eventually(Duration::from_secs(10), || closed_by_service(&silent)),
        "a silent connection holding nothing was not closed"
    );
    let closed_after = start.elapsed();
    assert!(
        closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(4),
        "closed after {closed_after:?} with --idle-timeout 1"
    );
    // Well past the timeout for the clients too.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        device_only.ping().is_err(),
        "a client holding only the device is closed when idle"
    );
    let run = AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[1.0; 4]).unwrap();
    prepared
        .execute(&run.request)
        .expect("a client holding a prepared model is never closed as idle");
    assert_eq!(run.output().unwrap(), [2.0, 3.0, 4.0, 5.0]);
    run_add(&holder);
}

/// At `--max-connections`, silent connections holding nothing make room for a waiting client
/// (the one silent longest, once silent 1 s), even with the idle timeout off; a client holding
/// a prepared model is never the one closed, and threads stay bounded.
#[test]
fn at_the_connection_limit_the_longest_silent_connection_makes_room() {
    let service = Service::start(&["--max-connections", "4", "--idle-timeout", "0"]);
    let baseline = service.threads();
    let holder = service.connect();
    let prepared = holder.prepare_model(probe::add_model()).unwrap();
    // Silent connections, each completing its handshake: past the limit each must wait for
    // an eviction to be served at all.
    let silent: Vec<UnixStream> = (0..8).map(|_| raw_session(&service.socket)).collect();
    let threads = service.threads();
    assert!(
        threads <= baseline + 4 * 2 + 2,
        "{threads} threads at a limit of 4 connections (baseline {baseline})"
    );
    let start = Instant::now();
    let newcomer = binder::connect_wait(
        &service.socket,
        &ConnectOptions::default(),
        Duration::from_secs(20),
    )
    .expect("a client at the limit");
    run_add(&newcomer);
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the client at the limit waited {waited:?}"
    );
    let closed = silent.iter().filter(|s| closed_by_service(s)).count();
    assert!(closed >= 6, "only {closed} of 8 silent connections closed");
    let run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    prepared
        .execute(&run.request)
        .expect("the client holding a model keeps its connection at the limit");
    assert_eq!(run.output().unwrap(), [2.0; 4]);
}

/// The per-client share of `--max-prepared-bytes-per-client` is keyed by the caller's process
/// id, which binder RPC takes from the connection's peer credentials (docs/limits.md): two
/// connections (two sessions) of one process share one budget, and another process has its
/// own.
#[test]
fn limit_per_client_budget_is_shared_by_one_process_connections_not_by_another_process() {
    // Each model is charged about 4.2 MB: two fit a 10 MB share, three do not.
    let service = Service::start(&[
        "--max-prepared-bytes-per-client",
        "10000000",
        "--max-prepared-bytes",
        "60000000",
    ]);
    let first = service.connect();
    let second = service.connect();
    let _a = first.prepare_model(add_constant_model(1 << 20)).unwrap();
    let _b = second.prepare_model(add_constant_model(1 << 20)).unwrap();
    for device in [&first, &second] {
        let err = device
            .prepare_model(add_constant_model(1 << 20))
            .err()
            .expect("a third model of this process on either of its connections");
        assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
        assert!(
            err.message().contains("--max-prepared-bytes-per-client"),
            "{err}"
        );
    }
    // Another process prepares two models of its own meanwhile.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "per_client_budget_other_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("NNHAL_BUDGET_SOCKET", &service.socket)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("other process: 2 models prepared"),
        "the other process:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The other process of the test above (run by it, with the service's socket).
#[test]
#[ignore = "run by limit_per_client_budget_is_shared_by_one_process_connections_not_by_another_process"]
fn per_client_budget_other_process() {
    let socket = std::env::var_os("NNHAL_BUDGET_SOCKET").expect("NNHAL_BUDGET_SOCKET");
    let device = binder::connect_wait(
        PathBuf::from(socket),
        &ConnectOptions::default(),
        Duration::from_secs(20),
    )
    .unwrap();
    let _a = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    let _b = device.prepare_model(add_constant_model(1 << 20)).unwrap();
    println!("other process: 2 models prepared");
}

/// A BLOB hardware buffer with CPU access, the pool kind the device build maps through the
/// AHardwareBuffer API, sent through the transport as the AIDL `hardwareBuffer` it is: a host
/// refuses it with GENERAL_FAILURE, as a model pool and as a request pool, and goes on serving.
#[test]
fn hardware_buffer_pool_over_binder_is_a_general_failure_on_a_host() {
    use nnhal::hal::ahwb;
    let blob = || {
        Memory::HardwareBuffer(std::sync::Arc::new(ahwb::HardwareBuffer {
            width: 16,
            height: 1,
            layers: 1,
            format: ahwb::FORMAT_BLOB,
            usage: ahwb::USAGE_CPU_READ_OFTEN | ahwb::USAGE_CPU_WRITE_OFTEN,
            stride: 16,
            fds: vec![create_memfd("blob", &[], 16, true).unwrap()],
            ints: vec![7],
        }))
    };
    let service = Service::start(&[]);
    let device = service.connect();
    let mut model = probe::add_model();
    model.pools.push(blob());
    let err = device
        .prepare_model(model)
        .err()
        .expect("a hardware-buffer model pool");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("hardware buffer"), "{err}");

    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let arg = |offset| nnhal::hal::RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: 0,
            offset,
            length: 16,
        },
        dimensions: Vec::new(),
    };
    let run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    let mut request = run.request.clone();
    request.pools = vec![blob()];
    request.inputs = vec![arg(0), arg(0)];
    request.outputs = vec![arg(0)];
    let err = prepared
        .execute(&request)
        .expect_err("a hardware-buffer request pool");
    assert_eq!(err.status(), ErrorStatus::GeneralFailure, "{err}");
    assert!(err.message().contains("hardware buffer"), "{err}");
    run_add(&device);
}
