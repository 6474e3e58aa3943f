//! The recurrent family of types.hal 1.0 `OperationType`: LSTM (16), RNN (24) and SVDF (27),
//! one time step each, with NNAPI 1.2's layer-normalised LSTM; the family NNAPI 1.2 extends
//! with the sequence forms.
//!
//! [`mod@reference`] holds the loops, which are also what runs.

pub mod reference;
