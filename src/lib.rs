//! nnhal driver (placeholder)
