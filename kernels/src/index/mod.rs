//! The indexing family of NNAPI 1.2–1.3 (NeuralNetworks.h `OperationCode`): GATHER (51) and
//! FILL (100); RANK (101) reads only a shape and needs no loop.
//!
//! [`mod@reference`] holds the oracles written from the specification, one output element
//! at a time; [`fast`] the operator loops that run, block copies split over the pool.

pub mod fast;
pub mod reference;

use crate::KernelError;

/// Every index must address one of the `extent` slices of the gathered axis; the message
/// names the first that does not.
fn check_indices(indices: &[i32], extent: usize) -> Result<(), KernelError> {
    match indices
        .iter()
        .enumerate()
        .find(|(_, &i)| i < 0 || i as usize >= extent)
    {
        Some((at, &i)) => Err(KernelError::InvalidData(format!(
            "GATHER index {i} (entry {at}) is outside 0..{extent}"
        ))),
        None => Ok(()),
    }
}
