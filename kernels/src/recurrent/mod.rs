//! The recurrent family of types.hal 1.0 `OperationType`: LSTM (16), RNN (24) and SVDF (27),
//! one time step each, with NNAPI 1.2's layer-normalised LSTM; and NNAPI 1.2's sequence forms
//! (UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN and _LSTM) over the same cells.
//!
//! [`mod@reference`] holds the single-step loops (the oracles, and what runs on weights given
//! at execution); [`sequence`] runs them over the time axis; [`fast`] runs the float32 cells
//! on weights packed at prepare for the GEMM micro-kernels; [`quantized`] is NNAPI 1.2's QUANTIZED_16BIT_LSTM cell, [`qlstm`] NNAPI 1.3's
//! QUANTIZED_LSTM.

pub mod fast;
pub mod qlstm;
pub mod quantized;
pub mod reference;
pub mod sequence;
