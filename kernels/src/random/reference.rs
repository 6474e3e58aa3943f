//! RANDOM_MULTINOMIAL (NNAPI 1.2): Philox4x32-10 and the categorical sampler.

use crate::KernelError;

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011): a
/// 128-bit counter encrypted under a 64-bit key by ten rounds of two 32 × 32 → 64-bit
/// multiplications; every block gives four independent 32-bit words.
#[derive(Clone, Debug)]
pub struct Philox {
    counter: [u32; 4],
    key: [u32; 2],
    block: [u32; 4],
    used: usize,
}

impl Philox {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;

    /// The generator the operation's seeds select: the first seed is the key, the second the
    /// high half of the counter (each sign-extended to 64 bits, as the reference widens them).
    pub fn new(seed: i32, seed2: i32) -> Philox {
        let (s, s2) = (i64::from(seed) as u64, i64::from(seed2) as u64);
        Philox {
            counter: [0, 0, s2 as u32, (s2 >> 32) as u32],
            key: [s as u32, (s >> 32) as u32],
            block: [0; 4],
            used: 4,
        }
    }

    fn round(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
        let p0 = Self::M0 * u64::from(ctr[0]);
        let p1 = Self::M1 * u64::from(ctr[2]);
        [
            (p1 >> 32) as u32 ^ ctr[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ ctr[3] ^ key[1],
            p0 as u32,
        ]
    }

    /// The block of the current counter, then the counter moved on by one.
    fn next_block(&mut self) -> [u32; 4] {
        let (mut ctr, mut key) = (self.counter, self.key);
        for _ in 0..9 {
            ctr = Self::round(ctr, key);
            key = [key[0].wrapping_add(Self::W0), key[1].wrapping_add(Self::W1)];
        }
        let out = Self::round(ctr, key);
        for word in &mut self.counter {
            *word = word.wrapping_add(1);
            if *word != 0 {
                break;
            }
        }
        out
    }

    /// The next 32-bit word.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.block = self.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }

    /// A uniform double in [0, 1): 52 random mantissa bits under the exponent of 1.0, less 1.
    pub fn next_f64(&mut self) -> f64 {
        let (hi, lo) = (self.next_u32(), self.next_u32());
        let mantissa = (u64::from(hi & 0x000F_FFFF) << 32) | u64::from(lo);
        f64::from_bits((1023u64 << 52) | mantissa) - 1.0
    }
}

/// RANDOM_MULTINOMIAL: `logits` is `[batches, classes]` of unnormalised log-probabilities, `out`
/// `[batches, samples]` class indices. Each row's weights are `exp(logit − max)` over its
/// finite logits, in double (non-finite logits weigh nothing); a sample is the first class
/// whose cumulative weight exceeds a uniform draw times the row's total. One generator, seeded
/// by `seeds`, serves the rows in order. A row without a finite logit has no weight, and its
/// samples are `classes` (past the last class), as in the reference.
pub fn multinomial(
    logits: &[f32],
    classes: usize,
    seeds: [i32; 2],
    out: &mut [i32],
    samples: usize,
) -> Result<(), KernelError> {
    if classes == 0 || samples == 0 {
        return Err(KernelError::InvalidData(format!(
            "{classes} classes and {samples} samples: both must be positive"
        )));
    }
    if !logits.len().is_multiple_of(classes) || out.len() != logits.len() / classes * samples {
        return Err(KernelError::InvalidData(format!(
            "{} logits of {classes} classes do not match {} samples of {samples}",
            logits.len(),
            out.len()
        )));
    }
    if i32::try_from(classes).is_err() {
        return Err(KernelError::InvalidData(format!(
            "{classes} classes do not fit an INT32 index"
        )));
    }
    let mut rng = Philox::new(seeds[0], seeds[1]);
    let mut cdf = Vec::with_capacity(classes);
    for (row, drawn) in logits
        .chunks_exact(classes)
        .zip(out.chunks_exact_mut(samples))
    {
        let max = row
            .iter()
            .filter(|x| x.is_finite())
            .fold(f32::MIN, |m, &x| m.max(x));
        let max = f64::from(max);
        cdf.clear();
        let mut total = 0.0f64;
        for &x in row {
            if x.is_finite() {
                total += (f64::from(x) - max).exp();
            }
            cdf.push(total);
        }
        for d in drawn {
            let target = rng.next_f64() * total;
            *d = cdf.partition_point(|&c| c <= target) as i32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_published_known_answers() {
        // Random123's kat_vectors for philox4x32_10: a zero counter and key, and all ones.
        let mut zero = Philox {
            counter: [0; 4],
            key: [0; 2],
            block: [0; 4],
            used: 4,
        };
        assert_eq!(
            zero.next_block(),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        let mut ones = Philox {
            counter: [u32::MAX; 4],
            key: [u32::MAX; 2],
            block: [0; 4],
            used: 4,
        };
        assert_eq!(
            ones.next_block(),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
    }

    #[test]
    fn doubles_are_in_the_unit_interval_and_seeds_matter() {
        let mut a = Philox::new(37, 42);
        let mut b = Philox::new(37, 43);
        let xs: Vec<f64> = (0..1000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        assert_ne!(xs[0], b.next_f64());
        // The same seeds give the same stream.
        assert_eq!(Philox::new(37, 42).next_f64(), xs[0]);
    }

    #[test]
    fn samples_follow_the_softmax_of_the_logits() {
        let logits = [
            0.0f32,
            1.0,
            2.0,
            f32::NEG_INFINITY,
            0.5,
            -1.0,
            3.0,
            f32::NAN,
        ];
        let (classes, samples) = (4, 20_000);
        let mut out = vec![0; 2 * samples];
        multinomial(&logits, classes, [1, 2], &mut out, samples).unwrap();
        for (row, drawn) in logits.chunks(classes).zip(out.chunks(samples)) {
            let weights: Vec<f64> = row
                .iter()
                .map(|&x| {
                    if x.is_finite() {
                        f64::from(x).exp()
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f64 = weights.iter().sum();
            for (c, w) in weights.iter().enumerate() {
                let freq = drawn.iter().filter(|&&d| d == c as i32).count() as f64 / samples as f64;
                assert!(
                    (freq - w / total).abs() < 0.015,
                    "class {c}: {freq} vs {}",
                    w / total
                );
            }
        }
        // A class without weight is never drawn.
        assert!(!out[..samples].contains(&3));
        assert!(!out[samples..].contains(&3));
    }

    #[test]
    fn a_row_without_finite_logits_and_bad_sizes() {
        let mut out = vec![0; 3];
        multinomial(&[f32::NAN, f32::INFINITY], 2, [0, 0], &mut out, 3).unwrap();
        assert_eq!(out, [2, 2, 2]);
        assert!(multinomial(&[0.0; 4], 3, [0, 0], &mut out, 3).is_err());
        assert!(multinomial(&[0.0; 4], 2, [0, 0], &mut out, 0).is_err());
    }
}
