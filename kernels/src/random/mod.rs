//! The random family of NNAPI 1.2 (NeuralNetworks.h `OperationCode`): RANDOM_MULTINOMIAL (74),
//! samples drawn from the categorical distribution a row of logits defines.
//!
//! The generator is Philox4x32-10, the counter-based generator the platform's reference
//! implementation seeds with the operation's two seeds; a sample is a uniform double in
//! [0, 1) scaled to the row's total weight and looked up in the cumulative weights. There is
//! no separate fast path: the work is one pass over the logits and a binary search per
//! sample, so [`mod@reference`] is what runs.

pub mod reference;
