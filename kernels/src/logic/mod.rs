//! The logic family of NNAPI 1.2 (`OperationType` in NeuralNetworks.h): the comparisons
//! EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS and LESS_EQUAL into TENSOR_BOOL8 (one byte
//! per element, 0 or 1), LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT and SELECT.
//!
//! [`mod@reference`] holds the loops; same-shape operands go through the chunked, pooled loops
//! of [`crate::math::fast`], broadcasting ones through [`crate::math::reference::broadcast_map`].

pub mod reference;
