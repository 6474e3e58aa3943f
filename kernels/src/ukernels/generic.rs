//! Portable micro-kernels: plain Rust, every platform, and the fallback of every table slot.

pub mod f32_small;
