//! The quantization family: QUANTIZE (NNAPI 1.2, `OperationType` 72: TENSOR_FLOAT32 to
//! TENSOR_QUANT8_ASYMM, and to TENSOR_QUANT8_ASYMM_SIGNED through its unsigned image) and
//! DEQUANTIZE (types.hal 1.0 `OperationType` 6: from TENSOR_QUANT8_ASYMM, and from NNAPI 1.2's
//! TENSOR_QUANT8_SYMM and TENSOR_QUANT8_SYMM_PER_CHANNEL) to TENSOR_FLOAT32.
//!
//! [`mod@reference`] holds the loops; they are element-wise maps, chunked over the kernel pool
//! for long tensors, with no faster form to test them against.

pub mod reference;
