//! The detection family of NNAPI 1.2 (NeuralNetworks.h `OperationCode`): BOX_WITH_NMS_LIMIT
//! (44), ROI_ALIGN (81) and ROI_POOLING (82), the region stages of a two-stage detector.
//!
//! [`mod@reference`] holds the loops written from the specification; they are also what runs
//! (the work is a few hundred boxes and one small bilinear crop per region). Float32 models run
//! them directly; quant8 scores and TENSOR_QUANT16_ASYMM boxes (scale 0.125, zero point 0) are
//! dequantized for the selection, and ROI_ALIGN quant8 accumulates integer sample weights as
//! the platform's reference does, so the quantized goldens match bit for bit.

pub mod reference;
