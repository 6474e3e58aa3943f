//! The normalization family of types.hal 1.0 `OperationType`: L2_NORMALIZATION (11),
//! LOCAL_RESPONSE_NORMALIZATION (13) and SOFTMAX (25), along the last axis or NNAPI 1.2's
//! `axis`; the family NNAPI 1.2 extends with INSTANCE_NORMALIZATION and LOG_SOFTMAX.
//!
//! [`mod@reference`] holds the loops (the test oracles, and what runs but float32 SOFTMAX, whose
//! vector loop sits with the element-wise ones in [`crate::elementwise::f32`]).

pub mod reference;
