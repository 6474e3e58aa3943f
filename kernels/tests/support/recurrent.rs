//! What the recurrent batteries share: their tolerance and the poisoned wide output that
//! checks a direction writes only its own columns (merge_outputs).

use nnhal_kernels::recurrent::sequence::SeqOutput;

/// Each value within `1e-5 + 1e-4 · |want|`: the sequence loops and the packed cells sum each
/// step's products in their own orders, a few ULP of the sums apart per step.
pub fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// Runs `f` on a `[rows, len + extra]` output whose columns `offset..offset + len` belong to
/// the direction, the others poisoned with NaN; checks the other columns were left alone and
/// returns the direction's.
pub fn in_columns(
    rows: usize,
    len: usize,
    extra: usize,
    f: impl FnOnce(SeqOutput<'_>),
) -> Vec<f32> {
    let width = len + extra;
    let offset = extra / 2;
    let mut data = vec![f32::NAN; rows * width];
    f(SeqOutput {
        data: &mut data,
        width,
        offset,
    });
    let mut mine = Vec::with_capacity(rows * len);
    for row in data.chunks_exact(width) {
        assert!(
            row[..offset].iter().all(|v| v.is_nan()),
            "wrote left of its columns"
        );
        assert!(
            row[offset + len..].iter().all(|v| v.is_nan()),
            "wrote right of its columns"
        );
        mine.extend_from_slice(&row[offset..offset + len]);
    }
    mine
}
