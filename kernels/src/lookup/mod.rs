//! The lookup family of types.hal 1.0 `OperationType`: EMBEDDING_LOOKUP (7),
//! HASHTABLE_LOOKUP (10) and LSH_PROJECTION (15).
//!
//! [`mod@reference`] holds the loops, which are also what runs.

pub mod reference;
