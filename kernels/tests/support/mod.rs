//! What the fast-kernel batteries share: a seeded SplitMix64 stream (each battery adds the
//! value generators it needs in its own `impl Rng`), every fused activation, and the
//! micro-kernel table of every level this processor runs.

#![allow(dead_code)]

pub mod recurrent;

use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use nnhal_kernels::Activation;

pub const ACTIVATIONS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu1,
    Activation::Relu6,
];

/// A deterministic SplitMix64 stream.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// The table of every level this processor supports (forced lower levels included).
pub fn tables() -> Vec<&'static Ukernels> {
    Isa::levels()
        .iter()
        .filter(|l| l.is_supported())
        .map(|&l| ukernels::table(l).unwrap())
        .collect()
}
