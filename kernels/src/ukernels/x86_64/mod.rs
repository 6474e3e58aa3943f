//! x86_64 micro-kernels, one file per level. Every kernel here is an `unsafe fn` compiled with
//! `#[target_feature]` for its level; the table only holds it when [`super::Isa::is_supported`]
//! said the processor runs that level.

use super::{Isa, Ukernels};

pub mod avx2;
// AVX-512 intrinsics are stable from Rust 1.89; the AOSP toolchains of the supported range
// start at 1.88, so Soong builds without the `avx512` feature (README, "Release range").
#[cfg(feature = "avx512")]
#[clippy::msrv = "1.89"]
pub mod avx512;
#[cfg(feature = "avx512")]
#[clippy::msrv = "1.89"]
pub mod avx512vnni;
// The tile epilogue uses the AVX-512 requantization of `avx512`.
#[cfg(feature = "avx512")]
#[clippy::msrv = "1.89"]
pub mod amx;

/// Overrides the slots of `t` with the kernels of every level up to `isa`, lowest first.
pub(super) fn apply(t: &mut Ukernels, isa: Isa) {
    if isa >= Isa::Avx2 {
        avx2::fill(t);
    }
    #[cfg(feature = "avx512")]
    if isa >= Isa::Avx512 {
        avx512::fill(t);
        // The AVX-512 level's 16-channel depthwise kernel replaces the AVX2 tap-pair one.
        t.u8_dw2 = None;
    }
    #[cfg(feature = "avx512")]
    if isa >= Isa::Avx512Vnni {
        avx512vnni::fill(t);
    }
    #[cfg(feature = "avx512")]
    if isa >= Isa::Avx512Amx {
        amx::fill(t);
    }
}
