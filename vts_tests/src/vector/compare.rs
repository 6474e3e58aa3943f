//! The AOSP harness comparison rule (`TestHarness.h` `compare`), applied to one output.
//!
//! * TENSOR_FLOAT32: `|e − a| ≤ atol + rtol·|e|`, evaluated in float32 exactly as the harness
//!   does (so a result that passes there passes here and vice versa); NaN never passes.
//! * TENSOR_QUANT8_ASYMM: `|e − a| ≤ maxAbsDiff` in uint8 units. Exact matches are counted as
//!   well: the ±1 allowance hides rounding differences, and the count shows how many there are.
//! * TENSOR_QUANT8_ASYMM_SIGNED likewise (and counted as quant8); the other quantized types
//!   with their own `maxAbsDiff` (1 by default); TENSOR_FLOAT16 with the float16 limits;
//!   TENSOR_BOOL8 exactly.
//! * TENSOR_INT32 (and the other integer types): `|e − a| ≤ maxAbsDiff`, 0 by default (exact).

use super::model::decode;
use super::Tolerance;
use nnhal_hal::OperandType;

/// How many mismatching elements a comparison keeps for its report (the harness prints 10).
pub const MAX_REPORTED: usize = 10;

/// One element outside the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub expected: f64,
    pub actual: f64,
}

/// The result of comparing one output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Elements compared.
    pub elements: usize,
    /// Elements outside the tolerance (all of them, not just the reported ones).
    pub mismatches: usize,
    /// The first [`MAX_REPORTED`] mismatches.
    pub first: Vec<Mismatch>,
    /// Quant8 elements compared / equal to the expected value exactly.
    pub quant8_total: usize,
    pub quant8_exact: usize,
    /// Largest absolute difference seen (useful when tuning kernels).
    pub max_abs_diff: f64,
    /// Set when the output had the wrong number of bytes for its element count.
    pub size_error: Option<String>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.mismatches == 0 && self.size_error.is_none()
    }

    /// One-line description of the failure (empty when passed).
    pub fn describe(&self) -> String {
        if let Some(e) = &self.size_error {
            return e.clone();
        }
        if self.passed() {
            return String::new();
        }
        let shown: Vec<String> = self
            .first
            .iter()
            .map(|m| format!("[{}] expected {} got {}", m.index, m.expected, m.actual))
            .collect();
        format!(
            "{} of {} elements out of tolerance (max |diff| {}): {}",
            self.mismatches,
            self.elements,
            self.max_abs_diff,
            shown.join(", ")
        )
    }
}

/// Whether `actual` is within the float32 harness tolerance of `expected`.
pub fn float_within(expected: f32, actual: f32, atol: f32, rtol: f32) -> bool {
    (expected - actual).abs() <= atol + rtol * expected.abs()
}

/// Compares the raw bytes `actual` of an output of type `ty` with the `expected` values.
pub fn compare(ty: OperandType, expected: &[f64], actual: &[u8], tol: &Tolerance) -> Comparison {
    let mut c = Comparison::default();
    let elem = ty.element_size().unwrap_or(1);
    if actual.len() != expected.len() * elem {
        c.size_error = Some(format!(
            "output has {} bytes, expected {} elements of {} bytes",
            actual.len(),
            expected.len(),
            elem
        ));
        return c;
    }
    let got = decode(ty, actual);
    c.elements = expected.len();
    for (index, (&e, &a)) in expected.iter().zip(&got).enumerate() {
        let ok = match ty {
            OperandType::Float32 | OperandType::TensorFloat32 => {
                float_within(e as f32, a as f32, tol.float32.atol, tol.float32.rtol)
            }
            OperandType::Float16 | OperandType::TensorFloat16 => {
                float_within(e as f32, a as f32, tol.float16.atol, tol.float16.rtol)
            }
            OperandType::TensorQuant8Asymm | OperandType::TensorQuant8AsymmSigned => {
                c.quant8_total += 1;
                if e == a {
                    c.quant8_exact += 1;
                }
                let limit = if ty == OperandType::TensorQuant8Asymm {
                    tol.quant8.max_abs_diff
                } else {
                    tol.quant8_signed.max_abs_diff
                };
                (e - a).abs() <= limit as f64
            }
            OperandType::TensorQuant8Symm | OperandType::TensorQuant8SymmPerChannel => {
                (e - a).abs() <= tol.quant8_symm.max_abs_diff as f64
            }
            OperandType::TensorQuant16Asymm => {
                (e - a).abs() <= tol.quant16_asymm.max_abs_diff as f64
            }
            OperandType::TensorQuant16Symm => (e - a).abs() <= tol.quant16_symm.max_abs_diff as f64,
            OperandType::Bool | OperandType::TensorBool8 => e == a,
            _ => (e - a).abs() <= tol.int32.max_abs_diff as f64,
        };
        let diff = (e - a).abs();
        if diff > c.max_abs_diff || diff.is_nan() {
            c.max_abs_diff = diff;
        }
        if !ok {
            c.mismatches += 1;
            if c.first.len() < MAX_REPORTED {
                c.first.push(Mismatch {
                    index,
                    expected: e,
                    actual: a,
                });
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn float_rule_uses_absolute_and_relative_terms() {
        let tol = Tolerance::default();
        let c = compare(
            OperandType::TensorFloat32,
            &[1.0, 1000.0, 0.0],
            &f32_bytes(&[1.000_005, 1_000.000_5, 2e-5]),
            &tol,
        );
        assert_eq!(c.mismatches, 1, "{c:?}");
        assert_eq!(c.first[0].index, 2);
        let nan = compare(
            OperandType::TensorFloat32,
            &[1.0],
            &f32_bytes(&[f32::NAN]),
            &tol,
        );
        assert!(!nan.passed());
    }

    #[test]
    fn quant8_allows_one_and_counts_exact() {
        let tol = Tolerance::default();
        let c = compare(
            OperandType::TensorQuant8Asymm,
            &[10.0, 20.0, 30.0],
            &[10, 21, 32],
            &tol,
        );
        assert_eq!((c.quant8_total, c.quant8_exact, c.mismatches), (3, 1, 1));
    }

    #[test]
    fn int32_is_exact_and_sizes_are_checked() {
        let tol = Tolerance::default();
        let bytes: Vec<u8> = [5i32, -3].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert!(compare(OperandType::TensorInt32, &[5.0, -3.0], &bytes, &tol).passed());
        assert!(!compare(OperandType::TensorInt32, &[5.0, -2.0], &bytes, &tol).passed());
        assert!(compare(OperandType::TensorInt32, &[5.0], &bytes, &tol)
            .size_error
            .is_some());
    }
}

/// RANDOM_MULTINOMIAL's check: `logits` is `[batches, classes]`, `drawn` the output's
/// little-endian INT32 class indices, `[batches, samples]`. Per row, each class's share of the
/// samples must be within `tolerance` of its softmax probability (computed in double with the
/// row's maximum subtracted); an index outside `0..classes` fails at once.
pub fn check_multinomial(
    logits: &[f64],
    classes: usize,
    drawn: &[u8],
    tolerance: f64,
) -> Result<(), String> {
    if classes == 0 || logits.is_empty() || !logits.len().is_multiple_of(classes) {
        return Err(format!(
            "{} logits do not form rows of {classes}",
            logits.len()
        ));
    }
    let batches = logits.len() / classes;
    let values: Vec<i32> = drawn
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if values.is_empty() || !drawn.len().is_multiple_of(4) || !values.len().is_multiple_of(batches)
    {
        return Err(format!(
            "{} output bytes do not hold samples for {batches} rows",
            drawn.len()
        ));
    }
    let samples = values.len() / batches;
    for (b, (row, picks)) in logits
        .chunks_exact(classes)
        .zip(values.chunks_exact(samples))
        .enumerate()
    {
        let mut counts = vec![0usize; classes];
        for &p in picks {
            match usize::try_from(p).ok().filter(|&p| p < classes) {
                Some(p) => counts[p] += 1,
                None => return Err(format!("row {b}: class {p} is outside 0..{classes}")),
            }
        }
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = row.iter().map(|&x| (x - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        for (c, (&n, w)) in counts.iter().zip(&weights).enumerate() {
            let (freq, p) = (n as f64 / samples as f64, w / total);
            if (freq - p).abs() > tolerance {
                return Err(format!(
                    "row {b}, class {c}: drawn {n} of {samples} times ({freq:.4}), softmax {p:.4}, beyond {tolerance}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod multinomial_tests {
    use super::check_multinomial;

    fn bytes(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Draws `n` samples per row that follow the softmax exactly in proportion.
    fn proportional(logits: &[f64], classes: usize, n: usize) -> Vec<i32> {
        let mut out = Vec::new();
        for row in logits.chunks(classes) {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = row.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = w.iter().sum();
            let mut drawn = 0;
            for (c, wc) in w.iter().enumerate() {
                let k = if c + 1 == classes {
                    n - drawn
                } else {
                    (wc / total * n as f64).round() as usize
                };
                out.extend(std::iter::repeat_n(c as i32, k));
                drawn += k;
            }
        }
        out
    }

    #[test]
    fn the_softmax_distribution_passes_and_wrong_ones_fail() {
        // Two rows of skewed logits, 200 samples each.
        let logits = [0.0, 2.0, 4.0, 1.0, 3.0, 0.0, 0.0, -1.0];
        let good = proportional(&logits, 4, 200);
        assert_eq!(check_multinomial(&logits, 4, &bytes(&good), 0.025), Ok(()));
        // All zeros: class 0 every time.
        let zeros = vec![0; 400];
        assert!(check_multinomial(&logits, 4, &bytes(&zeros), 0.025).is_err());
        // A uniform draw: every class a quarter of the time.
        let uniform: Vec<i32> = (0..400).map(|i| i % 4).collect();
        let err = check_multinomial(&logits, 4, &bytes(&uniform), 0.025).unwrap_err();
        assert!(err.contains("row 0"), "{err}");
        // An index outside the classes.
        let mut bad = good.clone();
        bad[7] = 4;
        assert!(check_multinomial(&logits, 4, &bytes(&bad), 0.025).is_err());
        // Output bytes that do not fill the rows.
        assert!(check_multinomial(&logits, 4, &bytes(&good[..399]), 0.025).is_err());
    }
}
