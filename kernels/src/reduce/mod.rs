//! The reduce family of NNAPI 1.2 (`OperationType` in NeuralNetworks.h): REDUCE_ALL and
//! REDUCE_ANY of TENSOR_BOOL8 tensors over a set of axes.

pub mod reference;
