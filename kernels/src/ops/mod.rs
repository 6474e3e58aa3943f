//! Operator loops of the fast path: each tiles one operation over the micro-kernels of a
//! [`crate::ukernels::Ukernels`] table and splits the tiles over the thread pool. Weights are
//! packed once (at prepare) into the layout the chosen micro-kernel reads. The reference
//! kernels in the family modules at the crate root ([`crate::conv`], [`crate::pool`], …) are the
//! oracles these loops are tested against.
