//! The recurrent family of types.hal 1.0 `OperationType`: LSTM (16), RNN (24) and SVDF (27),
//! one time step each, with NNAPI 1.2's layer-normalised LSTM; and NNAPI 1.2's sequence forms
//! (UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN and _LSTM) over the same cells.
//!
//! [`mod@reference`] holds the single-step loops, which are also what runs; [`sequence`]
//! runs them over the time axis; [`quantized`] is NNAPI 1.2's QUANTIZED_16BIT_LSTM cell, [`qlstm`] NNAPI 1.3's
//! QUANTIZED_LSTM.

pub mod qlstm;
pub mod quantized;
pub mod reference;
pub mod sequence;
