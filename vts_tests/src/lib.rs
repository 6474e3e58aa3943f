//! vts (placeholder)
