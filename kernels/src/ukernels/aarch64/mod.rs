//! aarch64 micro-kernels, one file per level: NEON (always present on aarch64) and the
//! dot-product extension, detected at run time.

use super::{Isa, Ukernels};

pub mod dotprod;
pub mod neon;

/// Overrides the slots of `t` with the kernels of every level up to `isa`, lowest first.
pub(super) fn apply(t: &mut Ukernels, isa: Isa) {
    if isa >= Isa::Neon {
        neon::fill(t);
    }
    if isa >= Isa::Dotprod {
        dotprod::fill(t);
    }
}
