//! Two generated-model suites of the AIDL VTS that derive new models from the golden vectors:
//!
//! * [`dynamic`] (`DynamicOutputShapeTest`): the model with every output's dimensions
//!   unspecified (zeros, rank kept) must run with the real shapes reported and the golden
//!   values written (GENERAL_FAILURE is allowed and skips); with output 0 one byte short it
//!   must answer OUTPUT_INSUFFICIENT_SIZE with every output's shape, only output 0 marked
//!   insufficient.
//! * [`coupling`] (`QuantizationCouplingTest`): a single-operation model with
//!   TENSOR_QUANT8_ASYMM operands that the driver supports must also be supported, and
//!   correct, with those operands turned TENSOR_QUANT8_ASYMM_SIGNED (zero point − 128, every
//!   value − 128).

use crate::model::{build_request, to_model, ConstantMode};
use crate::runner::{guarded, run_vector};
use crate::transport::Device;
use crate::vector::Vector;
use nnhal::hal::HalError;

/// The outcome of one suite item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// Whether VTS's DynamicOutputShapeTest instantiates `v`: not expecting failure, and no
/// RANK, IF or WHILE (operations whose outputs are scalars or whose shapes VTS cannot zero).
pub fn dynamic_applies(v: &Vector) -> bool {
    let scalar = |ty: &str| matches!(ty, "RANK" | "IF" | "WHILE");
    !v.expect_failure
        && v.derived_from.is_none()
        && !v
            .model
            .operations
            .iter()
            .chain(v.model.referenced.iter().flat_map(|s| &s.operations))
            .any(|op| scalar(&op.operation_type))
}

/// `v` with every model output's dimensions unspecified, as VTS's
/// `makeOutputDimensionsUnspecified` does.
pub fn unspecified_outputs(v: &Vector) -> Vector {
    let mut d = v.clone();
    for &o in &v.model.output_indexes {
        if let Some(op) = d.model.operands.get_mut(o as usize) {
            op.dimensions.iter_mut().for_each(|x| *x = 0);
        }
    }
    d.name = format!("{}_dynamic_output_shape", v.name);
    d
}

/// DynamicOutputShapeTest on one vector.
pub fn dynamic(device: &dyn Device, v: &Vector) -> Outcome {
    if !dynamic_applies(v) {
        return Outcome::Skip("VTS does not derive a dynamic-shape test from it".into());
    }
    let d = unspecified_outputs(v);
    // Unspecified outputs: must run and report the declared shapes.
    let report = run_vector(device, &d);
    if let Some(why) = report.failure {
        return Outcome::Fail(format!("unspecified outputs: {why}"));
    }
    if let Some(why) = report.skipped {
        return Outcome::Skip(why);
    }
    // Output 0 one byte short: OUTPUT_INSUFFICIENT_SIZE.
    let Some(example) = v.examples.first() else {
        return Outcome::Skip("no example".into());
    };
    let outcome = guarded("insufficient output", || -> Result<(), String> {
        let model = to_model(&d, ConstantMode::Copy).map_err(|e| e.to_string())?;
        let mut built =
            build_request(&d, ConstantMode::Copy, example).map_err(|e| e.to_string())?;
        let first = &mut built.request.outputs[0].location;
        if first.length <= 1 {
            return Ok(());
        }
        first.length -= 1;
        let prepared = device
            .prepare_model(model)
            .map_err(|e| format!("prepare_model: {e}"))?;
        match prepared.execute(&built.request) {
            // VTS: every output's shape reported, only output 0 insufficient.
            Err(HalError::OutputInsufficientShapes { shapes, .. }) => {
                let declared: Vec<(Vec<u32>, bool)> = v
                    .model
                    .output_indexes
                    .iter()
                    .enumerate()
                    .map(|(pos, &o)| (v.model.operands[o as usize].dimensions.clone(), pos != 0))
                    .collect();
                if shapes == declared {
                    Ok(())
                } else {
                    Err(format!(
                        "output 0 one byte short: OUTPUT_INSUFFICIENT_SIZE with shapes and \
                         sufficiency {shapes:?}, expected {declared:?}"
                    ))
                }
            }
            Err(e) => Err(format!(
                "output 0 one byte short: {e}, expected OUTPUT_INSUFFICIENT_SIZE"
            )),
            Ok(_) => Err("output 0 one byte short: succeeded, expected \
                          OUTPUT_INSUFFICIENT_SIZE"
                .into()),
        }
    });
    match outcome {
        Ok(Ok(())) => Outcome::Pass,
        Ok(Err(why)) | Err(why) => Outcome::Fail(why),
    }
}

/// Whether VTS's QuantizationCouplingTest instantiates `v`: the vector says so when it names
/// its suites; otherwise (NNAPI 1.0 vectors) one operation with a TENSOR_QUANT8_ASYMM operand,
/// outside the operations VTS leaves out.
/// Whether VTS's ValidationTest (the model and request mutators) instantiates `v`: every
/// generated test model, but not AOSP's `inputs_as_internal` / `all_tensors_as_inputs`
/// variants nor the dynamic-output-shape copies (a test kind, not a model, in VTS).
pub fn validation_applies(v: &Vector) -> bool {
    v.derived_from.is_none()
        && !v.name.contains("inputs_as_internal")
        && !v.name.contains("all_tensors_as_inputs")
}

pub fn coupling_applies(v: &Vector) -> bool {
    if !v.vts_suites.is_empty() || v.version.as_deref().is_some_and(|x| x != "V1_0") {
        return v.vts_suites.iter().any(|s| s == "QuantizationCouplingTest");
    }
    let excluded = [
        "HASHTABLE_LOOKUP",
        "LSH_PROJECTION",
        "PAD_V2",
        "CAST",
        "QUANTIZED_16BIT_LSTM",
    ];
    !v.expect_failure
        && v.model.operations.len() == 1
        && !excluded.contains(&v.model.operations[0].operation_type.as_str())
        && v.model
            .operands
            .iter()
            .any(|o| o.operand_type == "TENSOR_QUANT8_ASYMM")
}

/// `v` with every TENSOR_QUANT8_ASYMM operand (referenced subgraphs' included) turned
/// TENSOR_QUANT8_ASYMM_SIGNED, as VTS's
/// `convertQuant8AsymmOperandsToSigned` does: zero point and every value − 128.
pub fn signed_mirror(v: &Vector) -> Vector {
    let mut s = v.clone();
    let shift = |values: &mut Vec<f64>| values.iter_mut().for_each(|x| *x -= 128.0);
    let mut shifted = Vec::new();
    for (i, o) in s.model.operands.iter_mut().enumerate() {
        if o.operand_type == "TENSOR_QUANT8_ASYMM" {
            o.operand_type = "TENSOR_QUANT8_ASYMM_SIGNED".into();
            o.zero_point -= 128;
            if let Some(values) = &mut o.value {
                shift(values);
            }
            shifted.push(i as u32);
        }
    }
    for example in &mut s.examples {
        for (pos, operand) in v.model.input_indexes.iter().enumerate() {
            if shifted.contains(operand) {
                if let Some(values) = example.inputs.get_mut(&pos.to_string()) {
                    shift(values);
                }
            }
        }
        for (pos, operand) in v.model.output_indexes.iter().enumerate() {
            if shifted.contains(operand) {
                if let Some(values) = example.outputs.get_mut(&pos.to_string()) {
                    shift(values);
                }
            }
        }
    }
    // VTS converts the referenced subgraphs (IF and WHILE bodies) too: values cross into them
    // unchanged, so both sides of the boundary keep one type.
    for g in &mut s.model.referenced {
        for o in &mut g.operands {
            if o.operand_type == "TENSOR_QUANT8_ASYMM" {
                o.operand_type = "TENSOR_QUANT8_ASYMM_SIGNED".into();
                o.zero_point -= 128;
                if let Some(values) = &mut o.value {
                    shift(values);
                }
            }
        }
    }
    s.name = format!("{}_signed", v.name);
    s
}

/// QuantizationCouplingTest on one vector.
pub fn coupling(device: &dyn Device, v: &Vector) -> Outcome {
    if !coupling_applies(v) {
        return Outcome::Skip("VTS does not couple it (not one quant8 operation)".into());
    }
    let base = run_vector(device, v);
    if let Some(why) = base.failure {
        return Outcome::Fail(format!("the TENSOR_QUANT8_ASYMM model: {why}"));
    }
    if let Some(why) = base.skipped {
        return Outcome::Skip(format!("the TENSOR_QUANT8_ASYMM model: {why}"));
    }
    let signed = run_vector(device, &signed_mirror(v));
    match (signed.failure, signed.skipped) {
        (Some(why), _) => Outcome::Fail(format!("the signed model: {why}")),
        (None, Some(why)) => Outcome::Fail(format!(
            "the unsigned model runs but the signed one does not: {why}"
        )),
        (None, None) => Outcome::Pass,
    }
}
