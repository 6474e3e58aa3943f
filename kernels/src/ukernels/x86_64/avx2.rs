//! AVX2 micro-kernels.

use crate::ukernels::Ukernels;

pub mod f32_small;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    f32_small::fill_f32_small(t);
}
