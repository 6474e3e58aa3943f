//! The deadline cases of the AIDL VTS `QualityOfServiceTests`, over binder: a deadline that
//! has already passed must not fail `prepareModel`'s launch (the callback carries
//! MISSED_DEADLINE_*), and makes every execution path (synchronous, fenced, burst) answer
//! MISSED_DEADLINE_*; a deadline comfortably ahead changes nothing and the results are exact.

use crate::probe::{self, AddRun};
use nnhal::binder::client::{ExecuteOptions, PrepareOptions, RemoteDevice};
use nnhal::hal::HalResult;

/// AIDL `ErrorStatus` MISSED_DEADLINE_TRANSIENT / _PERSISTENT.
const MISSED: [i32; 2] = [5, 6];

/// One deadline case.
pub struct QosCase {
    pub name: &'static str,
    pub run: fn(&RemoteDevice) -> Result<(), String>,
}

pub const QOS_CASES: &[QosCase] = &[
    QosCase {
        name: "prepare_with_passed_deadline_launches_and_reports_missed_deadline",
        run: prepare_passed,
    },
    QosCase {
        name: "prepare_with_deadline_ahead_succeeds",
        run: prepare_ahead,
    },
    QosCase {
        name: "execute_sync_with_passed_deadline_is_missed_deadline",
        run: sync_passed,
    },
    QosCase {
        name: "execute_fenced_with_passed_deadline_is_missed_deadline",
        run: fenced_passed,
    },
    QosCase {
        name: "burst_with_passed_deadline_is_missed_deadline",
        run: burst_passed,
    },
    QosCase {
        name: "executions_with_deadline_ahead_are_exact",
        run: executions_ahead,
    },
];

/// Every case in order, with its outcome.
pub fn run_all(device: &RemoteDevice) -> Vec<(&'static str, Result<(), String>)> {
    QOS_CASES
        .iter()
        .map(|case| {
            let outcome = crate::runner::guarded(case.name, || (case.run)(device)).and_then(|r| r);
            (case.name, outcome)
        })
        .collect()
}

/// Nanoseconds since boot (the clock of AIDL deadlines), `ahead` seconds from now.
fn boot_time_ns(ahead: i64) -> i64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0);
    now + ahead * 1_000_000_000
}

/// A deadline in the past (1 ns after boot).
const PASSED: i64 = 1;

/// `result` must be an error whose AIDL status is MISSED_DEADLINE_*; the client reports
/// statuses without a canonical kind as "status N".
fn expect_missed<T>(result: HalResult<T>, what: &str) -> Result<(), String> {
    match result {
        Ok(_) => Err(format!("{what}: succeeded, expected MISSED_DEADLINE_*")),
        Err(e)
            if MISSED
                .iter()
                .any(|s| e.message().contains(&format!("status {s}"))) =>
        {
            Ok(())
        }
        Err(e) => Err(format!("{what}: {e}, expected MISSED_DEADLINE_*")),
    }
}

fn add_run() -> Result<AddRun, String> {
    AddRun::new(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0])
        .map_err(|e| format!("cannot create request pools: {e}"))
}

fn check_sum(run: &AddRun, what: &str) -> Result<(), String> {
    let out = run
        .output()
        .map_err(|e| format!("reading the output pool: {e}"))?;
    if out == [11.0, 22.0, 33.0, 44.0] {
        Ok(())
    } else {
        Err(format!("{what}: output {out:?}, expected [11, 22, 33, 44]"))
    }
}

fn prepare_passed(device: &RemoteDevice) -> Result<(), String> {
    let options = PrepareOptions {
        deadline_ns: PASSED,
        ..PrepareOptions::default()
    };
    let pending = device
        .launch_prepare(&probe::add_model(), &options)
        .map_err(|e| format!("cannot send the model: {e}"))?;
    if let Err(e) = pending.launched() {
        return Err(format!(
            "prepareModel itself failed: {e}; VTS wants the launch to succeed"
        ));
    }
    expect_missed(pending.wait(), "prepareModel callback")
}

fn prepare_ahead(device: &RemoteDevice) -> Result<(), String> {
    let options = PrepareOptions {
        deadline_ns: boot_time_ns(60),
        ..PrepareOptions::default()
    };
    device
        .prepare_model_with(&probe::add_model(), &options)
        .map(|_| ())
        .map_err(|e| format!("prepareModel: {e}"))
}

fn sync_passed(device: &RemoteDevice) -> Result<(), String> {
    let prepared = device
        .prepare_model(probe::add_model())
        .map_err(|e| format!("prepareModel: {e}"))?;
    let run = add_run()?;
    let options = ExecuteOptions {
        deadline_ns: PASSED,
        ..ExecuteOptions::default()
    };
    expect_missed(
        prepared.execute_with(&run.request, &options),
        "executeSynchronously",
    )
}

fn fenced_passed(device: &RemoteDevice) -> Result<(), String> {
    let prepared = device
        .prepare_model(probe::add_model())
        .map_err(|e| format!("prepareModel: {e}"))?;
    let run = add_run()?;
    expect_missed(
        prepared.execute_fenced_with(&run.request, Vec::new(), PASSED, -1),
        "executeFenced",
    )
}

fn burst_passed(device: &RemoteDevice) -> Result<(), String> {
    let prepared = device
        .prepare_model(probe::add_model())
        .map_err(|e| format!("prepareModel: {e}"))?;
    let burst = prepared
        .burst()
        .map_err(|e| format!("configureExecutionBurst: {e}"))?;
    let run = add_run()?;
    expect_missed(
        burst.execute_with(&run.request, PASSED),
        "IBurst::executeSynchronously",
    )
}

fn executions_ahead(device: &RemoteDevice) -> Result<(), String> {
    let prepared = device
        .prepare_model(probe::add_model())
        .map_err(|e| format!("prepareModel: {e}"))?;
    let run = add_run()?;
    let ahead = boot_time_ns(60);
    let clear = |run: &AddRun| {
        run.clear_output(-1.0)
            .map_err(|e| format!("clearing the output pool: {e}"))
    };
    clear(&run)?;
    let options = ExecuteOptions {
        deadline_ns: ahead,
        ..ExecuteOptions::default()
    };
    prepared
        .execute_with(&run.request, &options)
        .map_err(|e| format!("executeSynchronously: {e}"))?;
    check_sum(&run, "executeSynchronously")?;
    clear(&run)?;
    prepared
        .execute_fenced_with(&run.request, Vec::new(), ahead, -1)
        .map_err(|e| format!("executeFenced: {e}"))?;
    check_sum(&run, "executeFenced")?;
    clear(&run)?;
    let burst = prepared
        .burst()
        .map_err(|e| format!("configureExecutionBurst: {e}"))?;
    burst
        .execute_with(&run.request, ahead)
        .map_err(|e| format!("IBurst::executeSynchronously: {e}"))?;
    check_sum(&run, "IBurst::executeSynchronously")
}
