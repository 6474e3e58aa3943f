//! Random raw damage to valid models: field values, indexes, truncations, dimensions, scales and
//! zero points (NaN and infinities included), constant values. Whatever arrives, `supported_operations` and
//! `prepare_model` must not panic; `supported_operations` answers Ok or INVALID_ARGUMENT, and
//! both calls agree on whether the model is invalid. `prepare_model` may also give
//! GENERAL_FAILURE for a model `supported_operations` accepted (unsupported or too large).

mod common;

use nnhal::hal::{ErrorStatus, HalResult, Model};
use nnhal_vts::runner::guarded;
use nnhal_vts::transport::Device;
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Clone, Debug)]
enum Damage {
    OperandType(Index, i32),
    OperandLifetime(Index, i32),
    OperandDims(Index, Vec<u32>),
    OperandScale(Index, f32),
    OperandZeroPoint(Index, i32),
    OperandConsumers(Index, u32),
    OperandLocation(Index, u32, u32, u32),
    OperationType(Index, i32),
    OperationInput(Index, Index, u32),
    OperationOutput(Index, Index, u32),
    TruncateOperationInputs(Index, usize),
    TruncateOperationOutputs(Index, usize),
    PushOperationInput(Index, u32),
    InputIndex(Index, u32),
    OutputIndex(Index, u32),
    TruncateOperands(usize),
    TruncateOperations(usize),
    TruncateOperandValues(usize),
    /// Overwrites one aligned word of `operand_values`: constant scalars (strides, activations,
    /// axes, block sizes) and shape tensors get arbitrary values.
    PokeConstantWord(Index, i32),
    SwapOperations(Index, Index),
}

/// Mostly plausible small values (in and near range), sometimes anything.
fn index_value() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..48, 1 => any::<u32>()]
}

fn raw_enum() -> impl Strategy<Value = i32> {
    prop_oneof![4 => -2i32..32, 1 => 9998i32..10004, 1 => any::<i32>()]
}

fn dims() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(
        prop_oneof![4 => 0u32..8, 1 => Just(u32::MAX), 1 => Just(65536u32), 1 => any::<u32>()],
        0..6,
    )
}

fn scale() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(0.0f32),
        Just(-1.0f32),
        Just(f32::MIN_POSITIVE),
        Just(f32::MAX),
        any::<f32>(),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<Index>(), raw_enum()).prop_map(|(i, v)| Damage::OperandType(i, v)),
        (any::<Index>(), raw_enum()).prop_map(|(i, v)| Damage::OperandLifetime(i, v)),
        (any::<Index>(), dims()).prop_map(|(i, d)| Damage::OperandDims(i, d)),
        (any::<Index>(), scale()).prop_map(|(i, s)| Damage::OperandScale(i, s)),
        (any::<Index>(), prop_oneof![-2i32..260, any::<i32>()])
            .prop_map(|(i, z)| Damage::OperandZeroPoint(i, z)),
        (any::<Index>(), prop_oneof![0u32..4, any::<u32>()])
            .prop_map(|(i, n)| Damage::OperandConsumers(i, n)),
        (any::<Index>(), 0u32..3, index_value(), index_value())
            .prop_map(|(i, p, o, l)| Damage::OperandLocation(i, p, o, l)),
        (any::<Index>(), raw_enum()).prop_map(|(i, v)| Damage::OperationType(i, v)),
        (any::<Index>(), any::<Index>(), index_value())
            .prop_map(|(i, j, v)| Damage::OperationInput(i, j, v)),
        (any::<Index>(), any::<Index>(), index_value())
            .prop_map(|(i, j, v)| Damage::OperationOutput(i, j, v)),
        (any::<Index>(), 0usize..12).prop_map(|(i, n)| Damage::TruncateOperationInputs(i, n)),
        (any::<Index>(), 0usize..4).prop_map(|(i, n)| Damage::TruncateOperationOutputs(i, n)),
        (any::<Index>(), index_value()).prop_map(|(i, v)| Damage::PushOperationInput(i, v)),
        (any::<Index>(), index_value()).prop_map(|(i, v)| Damage::InputIndex(i, v)),
        (any::<Index>(), index_value()).prop_map(|(i, v)| Damage::OutputIndex(i, v)),
        (0usize..40).prop_map(Damage::TruncateOperands),
        (0usize..3).prop_map(Damage::TruncateOperations),
        (0usize..4096).prop_map(Damage::TruncateOperandValues),
        (
            any::<Index>(),
            prop_oneof![
                -2i32..8,
                Just(i32::MIN),
                Just(i32::MAX),
                Just(0x7fc0_0000),
                any::<i32>()
            ]
        )
            .prop_map(|(i, v)| Damage::PokeConstantWord(i, v)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Damage::SwapOperations(a, b)),
    ]
}

fn apply(model: &mut Model, d: &Damage) {
    fn pick<'a, T>(list: &'a mut [T], i: &Index) -> Option<&'a mut T> {
        if list.is_empty() {
            None
        } else {
            let k = i.index(list.len());
            list.get_mut(k)
        }
    }
    match d {
        Damage::OperandType(i, v) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.operand_type = *v;
            }
        }
        Damage::OperandLifetime(i, v) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.lifetime = *v;
            }
        }
        Damage::OperandDims(i, d) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.dimensions = d.clone();
            }
        }
        Damage::OperandScale(i, s) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.scale = *s;
            }
        }
        Damage::OperandZeroPoint(i, z) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.zero_point = *z;
            }
        }
        Damage::OperandConsumers(i, n) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.number_of_consumers = *n;
            }
        }
        Damage::OperandLocation(i, p, off, len) => {
            if let Some(o) = pick(&mut model.operands, i) {
                o.location.pool_index = *p;
                o.location.offset = *off;
                o.location.length = *len;
            }
        }
        Damage::OperationType(i, v) => {
            if let Some(op) = pick(&mut model.operations, i) {
                op.operation_type = *v;
            }
        }
        Damage::OperationInput(i, j, v) => {
            if let Some(op) = pick(&mut model.operations, i) {
                if let Some(slot) = pick(&mut op.inputs, j) {
                    *slot = *v;
                }
            }
        }
        Damage::OperationOutput(i, j, v) => {
            if let Some(op) = pick(&mut model.operations, i) {
                if let Some(slot) = pick(&mut op.outputs, j) {
                    *slot = *v;
                }
            }
        }
        Damage::TruncateOperationInputs(i, n) => {
            if let Some(op) = pick(&mut model.operations, i) {
                op.inputs.truncate(*n);
            }
        }
        Damage::TruncateOperationOutputs(i, n) => {
            if let Some(op) = pick(&mut model.operations, i) {
                op.outputs.truncate(*n);
            }
        }
        Damage::PushOperationInput(i, v) => {
            if let Some(op) = pick(&mut model.operations, i) {
                op.inputs.push(*v);
            }
        }
        Damage::InputIndex(i, v) => {
            if let Some(slot) = pick(&mut model.input_indexes, i) {
                *slot = *v;
            }
        }
        Damage::OutputIndex(i, v) => {
            if let Some(slot) = pick(&mut model.output_indexes, i) {
                *slot = *v;
            }
        }
        Damage::TruncateOperands(n) => model.operands.truncate(*n),
        Damage::TruncateOperations(n) => model.operations.truncate(*n),
        Damage::TruncateOperandValues(n) => model.operand_values.truncate(*n),
        Damage::PokeConstantWord(i, v) => {
            let words = model.operand_values.len() / 4;
            if words > 0 {
                let at = i.index(words) * 4;
                model.operand_values[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        Damage::SwapOperations(a, b) => {
            let len = model.operations.len();
            if len > 0 {
                model.operations.swap(a.index(len), b.index(len));
            }
        }
    }
}

fn status<T>(r: &HalResult<T>) -> ErrorStatus {
    match r {
        Ok(_) => ErrorStatus::None,
        Err(e) => e.status(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Fast enough for every `cargo test`; NNHAL_FUZZ_CASES raises it for a longer soak.
        cases: std::env::var("NNHAL_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn damaged_models_are_rejected_cleanly(
        base in any::<Index>(),
        damages in prop::collection::vec(damage(), 1..6),
    ) {
        let bases = common::bases();
        let base = &bases[base.index(bases.len())];
        let mut model = base.model.clone();
        for d in &damages {
            apply(&mut model, d);
        }
        let device: &dyn Device = common::device();
        let supported = guarded("supported_operations", || device.supported_operations(&model));
        let prepared = guarded("prepare_model", || device.prepare_model(model.clone()));
        let supported = supported.map_err(TestCaseError::fail)?;
        let prepared = prepared.map_err(TestCaseError::fail)?;
        let s = status(&supported);
        let p = status(&prepared);
        prop_assert!(
            matches!(s, ErrorStatus::None | ErrorStatus::InvalidArgument),
            "{}: supported_operations returned {:?} for {:?}", base.id(), supported.err(), damages
        );
        prop_assert!(
            matches!(p, ErrorStatus::None | ErrorStatus::InvalidArgument | ErrorStatus::GeneralFailure),
            "{}: prepare_model returned {:?} for {:?}", base.id(), prepared.err().map(|e| e.to_string()), damages
        );
        prop_assert_eq!(
            s == ErrorStatus::InvalidArgument,
            p == ErrorStatus::InvalidArgument,
            "{}: supported_operations {:?} and prepare_model {:?} disagree on validity for {:?}",
            base.id(), s, p, damages
        );
    }
}
