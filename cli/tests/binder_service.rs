//! End-to-end tests of the binder service: a real `nnhal-service` child process on a
//! temporary Unix socket, driven through the client library (`docs/transport.md`).

mod common;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use nnhal::binder::{
    self, ConnectOptions, DeviceKind, ExecuteOptions, PrepareOptions, RemoteDevice,
    RemotePreparedModel, WireGarbage,
};
use nnhal::hal::{DataLocation, ErrorStatus, HalError, OperandType};
use nnhal_vts::probe::{self, AddRun};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A private directory for one test's socket, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nnhal-binder-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `nnhal-service` child.
struct Service {
    child: Child,
    socket: PathBuf,
    _dir: TempDir,
}

impl Service {
    fn start() -> Service {
        Service::start_instance("default")
    }

    fn start_instance(instance: &str) -> Service {
        Service::start_logging(instance, Stdio::inherit())
    }

    /// A service whose log (warnings and above) goes to `log`.
    fn start_logging(instance: &str, log: Stdio) -> Service {
        Service::start_logging_with(instance, log, &[])
    }

    /// [`Service::start_logging`] with extra service options.
    fn start_logging_with(instance: &str, log: Stdio, extra: &[&str]) -> Service {
        let dir = TempDir::new();
        let socket = dir.0.join(format!("{instance}.sock"));
        let child = Command::new(common::service_exe())
            .arg("--socket")
            .arg(&socket)
            .args(["--instance", instance, "--threads", "2"])
            .args(["--log-level", "warn,rsbinder=error"])
            .args(extra)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nnhal-service");
        let service = Service {
            child,
            socket,
            _dir: dir,
        };
        // Wait until it accepts.
        drop(service.connect_instance(instance));
        service
    }

    fn connect(&self) -> RemoteDevice {
        self.connect_instance("default")
    }

    fn connect_instance(&self, instance: &str) -> RemoteDevice {
        let options = ConnectOptions {
            instance: instance.into(),
            ..ConnectOptions::default()
        };
        binder::connect_wait(&self.socket, &options, Duration::from_secs(20))
            .expect("connect to nnhal-service")
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }

    /// Waits for the child to exit; true when it exited on its own with status 0.
    fn wait_exit(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Prepares the ADD probe and checks one execution end to end.
fn run_add(device: &RemoteDevice, a: [f32; 4], b: [f32; 4]) {
    let prepared = device
        .prepare_model(probe::add_model())
        .expect("prepare ADD");
    let run = AddRun::new(&a, &b).unwrap();
    run.clear_output(f32::NAN).unwrap();
    let result = prepared.execute(&run.request).expect("execute ADD");
    assert_eq!(result.output_shapes, vec![vec![1, 2, 2, 1]]);
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(run.output().unwrap().to_vec(), want);
}

#[test]
fn device_queries_answer_truthfully() {
    let service = Service::start();
    let device = service.connect();
    let caps = device.capabilities_full().unwrap();
    let all = [
        caps.relaxed_float32_to_float16_scalar,
        caps.relaxed_float32_to_float16_tensor,
        caps.if_performance,
        caps.while_performance,
    ]
    .into_iter()
    .chain(caps.operand_performance.iter().map(|(_, p)| *p));
    for p in all {
        assert!(p.exec_time > 0.0 && p.power_usage > 0.0, "{p:?}");
    }
    let types: Vec<i32> = caps.operand_performance.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        types,
        vec![0, 1, 2, 3, 4, 5],
        "the six NNAPI 1.0 operand types, sorted"
    );
    let canonical = device.capabilities().unwrap();
    assert!(canonical.float32_performance.exec_time > 0.0);
    assert!(canonical.quantized8_performance.power_usage > 0.0);

    assert_eq!(device.device_type().unwrap(), DeviceKind::Cpu);
    let version = device.version_string().unwrap();
    assert!(!version.is_empty());
    assert_eq!(
        version,
        binder::version_string(nnhal_kernels::ukernels::best().isa)
    );
    assert_eq!(device.interface_version().unwrap(), 1);
    assert_eq!(
        device.interface_hash().unwrap(),
        "ae57b48403df6752d8d8d56d215c3e31db74935d"
    );
    assert!(device.supported_extensions().unwrap().is_empty());
    assert_eq!(device.number_of_cache_files().unwrap(), (1, 1));
    device.ping().unwrap();
}

#[test]
fn info_cli_reports_the_device_and_every_operation() {
    let service = Service::start();
    let out = Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .arg("info")
        .arg("--socket")
        .arg(&service.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("type         CPU"), "{text}");
    assert!(
        text.contains("android.hardware.neuralnetworks V1"),
        "{text}"
    );
    assert!(
        text.contains("102 of 102 operations supported (NNAPI 1.0–1.3)"),
        "{text}"
    );
}

/// `nnhal run` on a vector file; (exit status success, stdout).
fn nnhal_run(service: &Service, args: &[&str], vector: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .arg("run")
        .arg("--socket")
        .arg(&service.socket)
        .args(args)
        .arg(vector)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

#[test]
fn run_cli_checks_a_vector_through_the_service() {
    let service = Service::start();
    let vectors = common::repo_root().join("vts_tests/vectors");
    for mode in ["copy", "reference"] {
        let (ok, text) = nnhal_run(
            &service,
            &["--constants", mode],
            &vectors.join("depthwise_conv2d_quant8.json"),
        );
        assert!(ok, "{text}");
        assert!(text.contains("PASS example 0"), "{text}");
        assert!(text.ends_with("1 passed, 0 failed\n"), "{text}");
    }

    // The same vector with one golden value changed must fail, and say where.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vectors.join("add.json")).unwrap()).unwrap();
    let expected = &mut v["examples"][0]["outputs"]["0"][0];
    *expected = serde_json::json!(expected.as_f64().unwrap() + 1.0);
    let dir = TempDir::new();
    let tampered = dir.0.join("add_tampered.json");
    std::fs::write(&tampered, v.to_string()).unwrap();
    let (ok, text) = nnhal_run(&service, &[], &tampered);
    assert!(!ok, "{text}");
    assert!(text.contains("FAIL example 0: output 0: 1 of"), "{text}");
}

#[test]
fn the_instance_name_selects_the_service() {
    let service = Service::start_instance("vendor-cpu");
    let device = service.connect_instance("vendor-cpu");
    assert_eq!(device.device_type().unwrap(), DeviceKind::Cpu);
    let err = binder::connect(&service.socket)
        .err()
        .expect("found a default instance");
    assert_eq!(status_of(err), ErrorStatus::DeviceUnavailable);
}

#[test]
fn add_executes_through_binder() {
    let service = Service::start();
    let device = service.connect();
    assert_eq!(
        device.supported_operations(&probe::add_model()).unwrap(),
        vec![true]
    );
    run_add(&device, [1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 10.0, 0.25]);

    // The same prepared model through the other execution paths.
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap();
    for path in ["timed", "fenced", "burst"] {
        run.clear_output(f32::NAN).unwrap();
        match path {
            "timed" => {
                let (result, timing) = prepared.execute_timed(&run.request).unwrap();
                assert_eq!(result.output_shapes, vec![vec![1, 2, 2, 1]]);
                assert!(timing.in_driver.is_some() && timing.on_device.is_some());
                assert!(timing.on_device <= timing.in_driver);
            }
            "fenced" => prepared.execute_fenced(&run.request).unwrap(),
            _ => {
                let burst = prepared.burst().unwrap();
                for _ in 0..3 {
                    burst.execute(&run.request).unwrap();
                }
            }
        }
        assert_eq!(run.output().unwrap(), [3.0; 4], "{path}");
    }
}

#[test]
fn prepared_model_outlives_its_device_handle() {
    let service = Service::start();
    let device = service.connect();
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    drop(device);
    let run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    prepared.execute(&run.request).unwrap();
    assert_eq!(run.output().unwrap(), [2.0; 4]);
}

fn status_of(err: HalError) -> ErrorStatus {
    err.status()
}

#[test]
fn malformed_input_is_invalid_argument() {
    let service = Service::start();
    let device = service.connect();

    // An operation naming an operand that does not exist.
    let mut model = probe::add_model();
    model.operations[0].inputs[1] = 99;
    let err = device.supported_operations(&model).unwrap_err();
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);
    let err = device
        .prepare_model(model)
        .err()
        .expect("invalid model prepared");
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);

    // A constant whose location lies outside operandValues.
    let mut model = probe::add_model();
    model.operands[2].location = DataLocation {
        pool_index: 0,
        offset: 1 << 20,
        length: 4,
    };
    let err = device
        .prepare_model(model)
        .err()
        .expect("invalid model prepared");
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);

    // A request that names a pool it does not have, and one that reads past its pool.
    let prepared = device.prepare_model(probe::add_model()).unwrap();
    let mut run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    run.request.inputs[0].location.pool_index = 7;
    let err = prepared.execute(&run.request).unwrap_err();
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);
    let mut run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    run.request.inputs[1].location.offset = 64;
    let err = prepared.execute(&run.request).unwrap_err();
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);

    // The service is still healthy.
    run_add(&device, [1.0; 4], [2.0; 4]);
}

#[test]
fn every_prepare_callback_is_notified_exactly_once() {
    let service = Service::start();
    let device = service.connect();
    let options = PrepareOptions::default();
    let mut invalid = probe::add_model();
    invalid.operations[0].inputs[1] = 99;
    let mut counts = Vec::new();
    for (model, valid) in [(invalid, false), (probe::add_model(), true)] {
        let pending = device.launch_prepare(&model, &options).unwrap();
        assert_eq!(pending.launched().is_ok(), valid);
        counts.push(pending.notifications());
        let outcome = pending.wait();
        assert_eq!(outcome.is_ok(), valid);
        if let Err(e) = outcome {
            assert_eq!(status_of(e), ErrorStatus::InvalidArgument);
        }
    }
    // A late second notification would have arrived by now.
    std::thread::sleep(Duration::from_millis(300));
    for n in counts {
        assert_eq!(n.count(), 1);
    }
}

#[test]
fn bi57_null_callback_and_out_of_range_arguments() {
    let service = Service::start();
    let device = service.connect();
    let model = probe::add_model();
    let err = device.prepare_model_null_callback(&model).unwrap_err();
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);
    let bad_prepare = [
        PrepareOptions {
            preference: 3,
            ..PrepareOptions::default()
        },
        PrepareOptions {
            priority: -1,
            ..PrepareOptions::default()
        },
        PrepareOptions {
            deadline_ns: -2,
            ..PrepareOptions::default()
        },
        // The cache token must be exactly 32 bytes.
        PrepareOptions {
            cache_token_len: 31,
            ..PrepareOptions::default()
        },
        PrepareOptions {
            cache_token_len: 0,
            ..PrepareOptions::default()
        },
    ];
    for options in bad_prepare {
        let err = device.prepare_model_with(&model, &options).err().unwrap();
        assert_eq!(status_of(err), ErrorStatus::InvalidArgument, "{options:?}");
    }
    // A deadline already in the past: the launch succeeds (QualityOfServiceTests asserts
    // it), and the callback carries MISSED_DEADLINE_PERSISTENT (AIDL code 6).
    let past = PrepareOptions {
        deadline_ns: 1,
        ..PrepareOptions::default()
    };
    let pending = device.launch_prepare(&model, &past).unwrap();
    assert!(pending.launched().is_ok(), "{:?}", pending.launched());
    let err = pending.wait().err().unwrap();
    assert!(err.message().contains("status 6"), "{err}");

    let prepared = device.prepare_model(model).unwrap();
    let run = AddRun::new(&[1.0; 4], &[1.0; 4]).unwrap();
    let bad_execute = [
        ExecuteOptions {
            deadline_ns: -5,
            ..ExecuteOptions::default()
        },
        ExecuteOptions {
            loop_timeout_ns: 15_000_000_001,
            ..ExecuteOptions::default()
        },
        ExecuteOptions {
            loop_timeout_ns: -3,
            ..ExecuteOptions::default()
        },
    ];
    for options in bad_execute {
        let err = prepared.execute_with(&run.request, &options).unwrap_err();
        assert_eq!(status_of(err), ErrorStatus::InvalidArgument, "{options:?}");
    }
    prepared
        .execute_with(
            &run.request,
            &ExecuteOptions {
                loop_timeout_ns: 15_000_000_000,
                ..ExecuteOptions::default()
            },
        )
        .unwrap();
}

#[test]
fn client_handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RemoteDevice>();
    check::<RemotePreparedModel>();
}

#[test]
fn later_version_types_are_valid_through_binder() {
    let service = Service::start();
    let device = service.connect();
    let mut model = probe::add_model();
    // TENSOR_FLOAT16 (AIDL value 8) is a later version's type: ADD on it runs as its float32
    // image (tests/float16.rs runs such models over binder).
    for &i in &[0usize, 1, 3] {
        model.operands[i].operand_type = OperandType::TensorFloat16.raw();
    }
    assert_eq!(device.supported_operations(&model).unwrap(), vec![true]);
    assert!(device.prepare_model(model.clone()).is_ok());
    // A float16 operand with a scale is malformed, through binder too.
    model.operands[0].scale = 0.5;
    assert_eq!(
        status_of(device.supported_operations(&model).expect_err("refused")),
        ErrorStatus::InvalidArgument
    );
    run_add(&device, [0.0; 4], [1.0; 4]);
}

#[test]
fn concurrent_clients_and_connections() {
    let service = Service::start();
    let socket = service.socket.clone();
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let options = ConnectOptions {
                    outgoing_connections: 2,
                    ..ConnectOptions::default()
                };
                let device = binder::connect_with(&socket, &options).unwrap();
                let prepared = device.prepare_model(probe::add_model()).unwrap();
                std::thread::scope(|s| {
                    for k in 0..2 {
                        let prepared = &prepared;
                        s.spawn(move || {
                            let v = (t * 10 + k) as f32;
                            let run = AddRun::new(&[v; 4], &[1.0; 4]).unwrap();
                            for _ in 0..50 {
                                run.clear_output(f32::NAN).unwrap();
                                prepared.execute(&run.request).unwrap();
                                assert_eq!(run.output().unwrap(), [v + 1.0; 4]);
                            }
                        });
                    }
                });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Starts a client process that executes the ADD probe in a tight loop.
fn looping_client(socket: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(["bench-rpc", "--warmup", "0", "-n", "100000000", "--socket"])
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nnhal bench-rpc")
}

#[test]
fn bi58_client_killed_mid_execution_service_serves_the_next() {
    let service = Service::start();
    for round in 0..3 {
        let mut client = looping_client(&service.socket);
        // Long enough to be past connect and prepare, deep in the execution loop.
        std::thread::sleep(Duration::from_millis(700));
        assert!(
            client.try_wait().unwrap().is_none(),
            "round {round}: the looping client exited early"
        );
        kill(Pid::from_raw(client.id() as i32), Signal::SIGKILL).unwrap();
        client.wait().unwrap();

        // The next client is served correctly.
        let device = service.connect();
        run_add(&device, [round as f32; 4], [0.5; 4]);
    }
}

#[test]
fn sigterm_and_sigint_stop_the_service_and_remove_its_socket() {
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        let mut service = Service::start();
        let device = service.connect();
        device.ping().unwrap();
        assert!(service.socket.exists());
        service.signal(signal);
        assert!(
            service.wait_exit(Duration::from_secs(10)),
            "{signal} did not stop it"
        );
        assert!(!service.socket.exists(), "{signal}: socket left behind");
        // A client of a stopped service sees it unavailable, it does not hang.
        let err = device.ping().unwrap_err();
        assert_eq!(status_of(err), ErrorStatus::DeviceUnavailable);
    }
}

#[test]
fn bi62_transport_garbage_is_refused_and_the_service_goes_on() {
    let service = Service::start();
    let device = service.connect();
    for &kind in WireGarbage::ALL {
        match device.send_garbage(kind) {
            Ok(answer) => eprintln!("{kind:?}: {answer}"),
            Err(e) => panic!("{kind:?}: {e}"),
        }
        // The same session still works.
        assert_eq!(device.device_type().unwrap(), DeviceKind::Cpu, "{kind:?}");
    }
    run_add(&device, [1.0; 4], [2.0; 4]);
    run_add(&service.connect(), [3.0; 4], [4.0; 4]);
}

/// The service's thread count, from procfs.
fn threads_of(service: &Service) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", service.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads: line")
}

/// ADD of a model input and a 16 MiB constant held in a sealed memfd pool: validation maps the
/// pool, preparation copies the constant out, so each preparation takes a while.
fn heavy_add_model() -> nnhal::hal::Model {
    use nnhal::hal::memory::{create_memfd, Memory};
    use nnhal::hal::{OperandLifeTime, OperationType};
    const N: u32 = 4 << 20;
    let mut model = probe::add_model();
    for o in &mut model.operands {
        if o.operand_type == OperandType::TensorFloat32.raw() {
            o.dimensions = vec![N];
        }
    }
    model.operands[1].lifetime = OperandLifeTime::ConstantReference.raw();
    model.operands[1].location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: N * 4,
    };
    model.input_indexes = vec![0];
    let pool = create_memfd("heavy", &[], u64::from(N) * 4, true).unwrap();
    model.pools = vec![Memory::shared(pool, u64::from(N) * 4)];
    assert_eq!(model.operations[0].operation_type, OperationType::Add.raw());
    model
}

#[test]
fn bi61_a_prepare_flood_is_bounded_and_refusals_are_notified() {
    let log_dir = TempDir::new();
    let log_path = log_dir.0.join("service.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // The queue is what is tested: the memory budget (its own test in tests/hardening.rs)
    // would refuse most of 400 models of 16 MiB first.
    let mut service = Service::start_logging_with(
        "default",
        log.into(),
        &[
            "--max-prepared-bytes",
            "1000000000000",
            "--max-prepared-bytes-per-client",
            "1000000000000",
        ],
    );
    let device = service.connect();
    let baseline = threads_of(&service);
    let model = heavy_add_model();
    let options = PrepareOptions::default();
    let mut pending = Vec::new();
    let mut peak = baseline;
    for _ in 0..400 {
        pending.push(device.launch_prepare(&model, &options).unwrap());
        peak = peak.max(threads_of(&service));
    }
    let refused = pending.iter().filter(|p| p.launched().is_err()).count();
    for p in &pending {
        if let Err(e) = p.launched() {
            assert_eq!(e.status(), ErrorStatus::DeviceUnavailable, "{e}");
        }
    }
    // Every preparation ends exactly as launched: accepted ones prepare, refused ones were
    // notified with the refusal's own status (`wait` checks the two agree).
    let mut prepared = 0;
    for p in pending {
        let accepted = p.launched().is_ok();
        match p.wait() {
            Ok(_) => {
                assert!(accepted);
                prepared += 1;
            }
            Err(e) => {
                assert!(!accepted, "an accepted preparation failed: {e}");
                assert_eq!(e.status(), ErrorStatus::DeviceUnavailable, "{e}");
            }
        }
    }
    assert!(refused > 0, "400 launches never filled the queue");
    assert!(prepared >= 64, "only {prepared} preparations completed");
    // A fixed set of preparers: no thread per call.
    assert!(
        peak <= baseline + 4,
        "the service grew from {baseline} to {peak} threads"
    );
    run_add(&device, [1.0; 4], [2.0; 4]);

    // The log: the run of identical refusals is one warning and one summary, not hundreds.
    drop(device);
    service.signal(Signal::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(20)));
    let log = std::fs::read_to_string(&log_path).unwrap();
    let busy: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("already waiting"))
        .collect();
    if refused > 1 {
        assert!(
            busy.len() <= 2 && busy.iter().any(|l| l.contains("repeated")),
            "{refused} refusals logged as:\n{}",
            busy.join("\n")
        );
    }
}

/// BI-48 (request dimensions missing where the model needs them): a fenced execution reports no output shapes, so an
/// output whose dimensions neither the model nor the request specifies is INVALID_ARGUMENT
/// there, while a synchronous execution of the same request runs and reports the shape.
#[test]
fn bi48_fenced_execution_refuses_unspecified_output_dimensions() {
    let service = Service::start();
    let device = service.connect();
    let mut model = probe::add_model();
    let out = model.output_indexes[0] as usize;
    model.operands[out].dimensions = vec![0, 0, 0, 0];
    let prepared = device.prepare_model(model).unwrap();
    let run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap();

    let err = prepared.execute_fenced(&run.request).unwrap_err();
    assert_eq!(status_of(err), ErrorStatus::InvalidArgument);

    let result = prepared.execute(&run.request).unwrap();
    assert_eq!(result.output_shapes, vec![vec![1, 2, 2, 1]]);

    // The request may specify them instead.
    let mut specified = run.request.clone();
    specified.outputs[0].dimensions = vec![1, 2, 2, 1];
    run.clear_output(f32::NAN).unwrap();
    prepared.execute_fenced(&specified).unwrap();
    assert_eq!(run.output().unwrap(), [3.0; 4]);
}

/// BI-77 through a real service: a WHILE that never ends stops at the loop timeout on every
/// execution path — synchronously under the default timeout (2 s) and under one the client
/// gives, fenced, in a burst — with MISSED_DEADLINE_TRANSIENT (AIDL code 5), and the service
/// then serves the same model and another.
#[test]
fn bi77_an_endless_while_times_out_on_every_path_and_the_service_serves_on() {
    use nnhal_vts::probe::{while_count_model, WhileRun};
    let service = Service::start();
    let device = service.connect();
    let prepared = device.prepare_model(while_count_model(1)).unwrap();
    let endless = WhileRun::new(0.0, f32::INFINITY).unwrap();
    let missed = |err: HalError, what: &str, took: Duration, at_most: Duration| {
        assert!(err.message().contains("status 5"), "{what}: {err}");
        assert!(took < at_most, "{what}: took {took:?}");
    };
    let started = Instant::now();
    let err = prepared.execute(&endless.request).unwrap_err();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    missed(err, "default timeout", took, Duration::from_secs(6));

    let started = Instant::now();
    let err = prepared
        .execute_with(
            &endless.request,
            &ExecuteOptions {
                loop_timeout_ns: 100_000_000,
                ..ExecuteOptions::default()
            },
        )
        .unwrap_err();
    missed(
        err,
        "client timeout",
        started.elapsed(),
        Duration::from_secs(2),
    );

    let started = Instant::now();
    let err = prepared.execute_fenced(&endless.request).unwrap_err();
    missed(err, "fenced", started.elapsed(), Duration::from_secs(6));

    let burst = prepared.burst().unwrap();
    let started = Instant::now();
    let err = burst.execute(&endless.request).unwrap_err();
    missed(err, "burst", started.elapsed(), Duration::from_secs(6));

    let finite = WhileRun::new(1.0, 4.0).unwrap();
    prepared.execute(&finite.request).unwrap();
    assert_eq!(finite.output().unwrap(), 4.0);
    run_add(&device, [1.0; 4], [2.0; 4]);
}
