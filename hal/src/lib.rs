//! hal (placeholder)
