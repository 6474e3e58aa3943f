//! Every bundled golden vector, in both constant modes, through the in-process driver.

mod common;

use nnhal_vts::runner::run_vectors;

#[test]
fn all_bundled_vectors_pass() {
    let summary = run_vectors(common::device(), common::vectors(), |_| {});
    let (exact, total) = summary.quant8();
    println!("quant8 exact: {exact} of {total} elements");
    println!("{} passed, {} failed", summary.passed(), summary.failed());
    let failures: Vec<String> = summary
        .failures()
        .iter()
        .map(|r| format!("FAIL {}: {}", r.name, r.failure.as_deref().unwrap_or("")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        summary.reports.len(),
        failures.join("\n")
    );
}
