//! x86_64 micro-kernels, one file per level. Every kernel here is an `unsafe fn` compiled with
//! `#[target_feature]` for its level; the table only holds it when [`super::Isa::is_supported`]
//! said the processor runs that level.

use super::{Isa, Ukernels};

pub mod avx2;
pub mod avx512;
pub mod avx512vnni;

/// Overrides the slots of `t` with the kernels of every level up to `isa`, lowest first.
pub(super) fn apply(t: &mut Ukernels, isa: Isa) {
    if isa >= Isa::Avx2 {
        avx2::fill(t);
    }
    if isa >= Isa::Avx512 {
        avx512::fill(t);
    }
    if isa >= Isa::Avx512Vnni {
        avx512vnni::fill(t);
    }
}
