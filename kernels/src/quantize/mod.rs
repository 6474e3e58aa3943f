//! The quantization family: QUANTIZE (NNAPI 1.2, `OperationType` 72: TENSOR_FLOAT32 to
//! TENSOR_QUANT8_ASYMM, and to TENSOR_QUANT8_ASYMM_SIGNED through its unsigned image) and
//! DEQUANTIZE (types.hal 1.0 `OperationType` 6: from TENSOR_QUANT8_ASYMM, and from NNAPI 1.2's
//! TENSOR_QUANT8_SYMM and TENSOR_QUANT8_SYMM_PER_CHANNEL) to TENSOR_FLOAT32.
//!
//! [`mod@reference`] holds the loops in the reference's arithmetic, element by element;
//! [`fast`] runs QUANTIZE and DEQUANTIZE from and to bytes on the kernel table's vector loops,
//! equal to them bit for bit. Both chunk long tensors over the kernel pool.

pub mod fast;
pub mod reference;
