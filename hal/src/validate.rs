//! Model and request validation (types.hal 1.0 `Model`, `Request`; the rules and the
//! malformed-input classes BI-01…BI-56 are catalogued in `docs/bad-inputs.md`).
//!
//! [`validate_model`] checks everything a malformed model can get wrong — enumerations,
//! operand ranks, scales and zero points, lifetimes and locations, the operation signatures,
//! the model input/output lists, the graph (execution order, single writer, exact consumer
//! counts), quantization relationships and, where shapes and parameters are static, shape
//! consistency — and returns a [`ValidModel`] that the planner can trust. [`validate_request`]
//! does the same for a request against a valid model and binds its memory pools.

use crate::error::{HalError, HalResult};
use crate::memory::{MappedPool, PoolCache};
use crate::ops::{self, Arity};
use crate::shape::{self, Arg, InferError, Params};
use crate::types::*;
use std::collections::HashMap;

/// A decoded, validated operand.
#[derive(Clone, Debug)]
pub struct OperandInfo {
    pub ty: OperandType,
    /// As declared (0 = unspecified).
    pub dims: Vec<u32>,
    pub scale: f32,
    pub zero_point: i32,
    pub lifetime: OperandLifeTime,
    pub location: DataLocation,
    pub consumers: u32,
    /// The per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand.
    pub channel_quant: Option<ChannelQuant>,
}

/// A decoded, validated operation.
#[derive(Clone, Debug)]
pub struct OperationInfo {
    pub ty: OperationType,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    /// Validated but never run: OEM_OPERATION, an operation of a later NNAPI version, or an
    /// NNAPI 1.0 operation in a signature a later version added that the 1.0 kernels do not
    /// run.
    pub opaque: bool,
}

/// A model that passed validation.
#[derive(Debug)]
pub struct ValidModel {
    pub operands: Vec<OperandInfo>,
    pub operations: Vec<OperationInfo>,
    /// Operand index of each model input / output.
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    /// The model's pools, mapped (constants are read from here).
    pub pools: Vec<MappedPool>,
    /// Whether this driver runs each operation.
    pub supported: Vec<bool>,
    /// Per operand: consumed only at optional positions (a model input that may be omitted).
    pub omittable: Vec<bool>,
    /// Per operand: fully-specified dimensions known before execution.
    pub static_dims: Vec<Option<Vec<u32>>>,
    /// Per operation: parameters resolved at validation time when everything was static.
    pub static_params: Vec<Option<Params>>,
    /// Per operand: a TENSOR_QUANT8_ASYMM_SIGNED operand of the model as given, validated and
    /// run as its exact TENSOR_QUANT8_ASYMM image (see [`signed_as_unsigned`]); request data
    /// of such a model input or output is shifted by 128 on the way in and out.
    pub signed: Vec<bool>,
    /// Per operand: a TENSOR_FLOAT16 / FLOAT16 operand of the model as given, validated and
    /// run as float32 (see [`float16_as_float32`]); request data of such a model input or
    /// output is binary16 (2 bytes an element), widened on the way in and narrowed on the way
    /// out, and every operation writing one rounds its values to binary16.
    pub half: Vec<bool>,
    /// The referenced subgraphs (IF branches, WHILE conditions and bodies), validated as models
    /// of their own, by `Model::referenced` index; empty in a subgraph itself.
    pub referenced: Vec<ValidModel>,
}

/// How deeply IF and WHILE may nest: a chain of subgraph references longer than this is
/// refused, so an execution's recursion is bounded whatever the model.
pub const MAX_SUBGRAPH_NESTING: usize = 16;

/// The referenced subgraphs an operation list names through its SUBGRAPH inputs.
fn named_subgraphs<'a>(
    operands: &'a [Operand],
    operations: &'a [Operation],
) -> impl Iterator<Item = usize> + 'a {
    operations
        .iter()
        .flat_map(|op| &op.inputs)
        .filter_map(move |&i| operands.get(i as usize))
        .filter(|o| o.lifetime == OperandLifeTime::Subgraph.raw())
        .map(|o| o.location.offset as usize)
}

/// The referenced subgraphs in an order where every subgraph comes after those it names
/// (children first). A cycle of references (a subgraph reaching itself) or a chain deeper
/// than [`MAX_SUBGRAPH_NESTING`] is INVALID_ARGUMENT: either would make an execution
/// recurse without bound.
fn subgraph_order(model: &Model) -> HalResult<Vec<usize>> {
    let n = model.referenced.len();
    let children = |s: usize| -> Vec<usize> {
        let g = &model.referenced[s];
        named_subgraphs(&g.operands, &g.operations)
            .filter(|&c| c < n)
            .collect()
    };
    // 0 = not seen, 1 = on the current path, 2 = done.
    let mut state = vec![0u8; n];
    let mut order = Vec::with_capacity(n);
    let roots: Vec<usize> = named_subgraphs(&model.operands, &model.operations)
        .filter(|&c| c < n)
        .chain(0..n)
        .collect();
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        // Depth-first, with the path kept explicitly: (subgraph, its children, next child).
        let mut path: Vec<(usize, Vec<usize>, usize)> = vec![(root, children(root), 0)];
        state[root] = 1;
        while let Some((s, kids, next)) = path.last_mut() {
            if let Some(&c) = kids.get(*next) {
                *next += 1;
                match state[c] {
                    1 => {
                        let start = path.iter().position(|(p, _, _)| *p == c).unwrap_or(0);
                        let cycle: Vec<String> = path[start..]
                            .iter()
                            .map(|(p, _, _)| p.to_string())
                            .chain(std::iter::once(c.to_string()))
                            .collect();
                        invalid!(
                            "referenced subgraphs name each other in a cycle ({}): IF and WHILE may not recurse",
                            cycle.join(" → ")
                        );
                    }
                    0 => {
                        ensure!(
                            path.len() < MAX_SUBGRAPH_NESTING,
                            "IF/WHILE nest more than {MAX_SUBGRAPH_NESTING} subgraphs deep (through referenced subgraph {c})"
                        );
                        state[c] = 1;
                        let grandchildren = children(c);
                        path.push((c, grandchildren, 0));
                    }
                    _ => {}
                }
            } else {
                state[*s] = 2;
                order.push(*s);
                path.pop();
            }
        }
    }
    Ok(order)
}

/// IF and WHILE run when every operation of every subgraph they name runs.
fn mark_control_flow(valid: &mut ValidModel, runs: &[bool]) {
    for k in 0..valid.operations.len() {
        let op = &valid.operations[k];
        if !matches!(op.ty, OperationType::If | OperationType::While) {
            continue;
        }
        let all = op.inputs.iter().all(|&i| {
            let o = &valid.operands[i];
            o.lifetime != OperandLifeTime::Subgraph
                || runs
                    .get(o.location.offset as usize)
                    .copied()
                    .unwrap_or(false)
        });
        valid.supported[k] = all;
    }
}

/// A request argument bound to a pool region with its resolved, fully-specified dimensions.
#[derive(Clone, Debug)]
pub struct BoundArg {
    pub pool: usize,
    pub offset: u64,
    pub length: u64,
    pub dims: Vec<u32>,
}

/// A request that passed validation, with its pools mapped.
#[derive(Debug)]
pub struct BoundRequest {
    pub pools: Vec<MappedPool>,
    /// `None`: the argument has no value (an omitted optional input).
    pub inputs: Vec<Option<BoundArg>>,
    pub outputs: Vec<BoundArg>,
}

fn fully_specified(dims: &[u32]) -> bool {
    !dims.contains(&0)
}

/// Byte size of an operand of type `ty` with fully-specified `dims`.
pub fn byte_size(ty: OperandType, dims: &[u32]) -> HalResult<u64> {
    let n = shape::element_count(dims).map_err(HalError::InvalidArgument)?;
    Ok(n * ty.element_size().unwrap_or(1) as u64)
}

fn validate_operand(
    i: usize,
    o: &Operand,
    model: &Model,
    in_subgraph: bool,
) -> HalResult<OperandInfo> {
    let ty = OperandType::from_raw(o.operand_type).ok_or_else(|| {
        HalError::InvalidArgument(format!("operand {i}: unknown type {}", o.operand_type))
    })?;
    let lifetime = OperandLifeTime::from_raw(o.lifetime).ok_or_else(|| {
        HalError::InvalidArgument(format!("operand {i}: unknown lifetime {}", o.lifetime))
    })?;
    let constant = matches!(
        lifetime,
        OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference
    );
    if ty.is_tensor() {
        // Later versions allow a tensor of unknown rank where its shape can still be inferred;
        // a constant's shape is always its data's.
        // Inside an IF/WHILE body any non-constant tensor may leave its rank unknown: the
        // shapes flow in from the caller's operands at run time.
        ensure!(
            !o.dimensions.is_empty() || ((!ty.in_nnapi_1_0() || in_subgraph) && !constant),
            "operand {i}: {ty} must have rank ≥ 1"
        );
    } else {
        ensure!(
            o.dimensions.is_empty(),
            "operand {i}: scalar {ty} must have no dimensions, has {:?}",
            o.dimensions
        );
    }
    match ty {
        OperandType::Float32
        | OperandType::Int32
        | OperandType::UInt32
        | OperandType::TensorFloat32 => {
            ensure!(
                o.scale == 0.0,
                "operand {i}: {ty} must have scale 0, has {}",
                o.scale
            );
            ensure!(
                o.zero_point == 0,
                "operand {i}: {ty} must have zero point 0, has {}",
                o.zero_point
            );
        }
        OperandType::TensorInt32 => {
            ensure!(
                o.scale >= 0.0 && o.scale.is_finite(),
                "operand {i}: {ty} scale must be ≥ 0 and finite, is {}",
                o.scale
            );
            ensure!(
                o.zero_point == 0,
                "operand {i}: {ty} must have zero point 0, has {}",
                o.zero_point
            );
        }
        OperandType::TensorQuant8Asymm => {
            ensure!(
                o.scale > 0.0 && o.scale.is_finite(),
                "operand {i}: {ty} scale must be > 0 and finite, is {}",
                o.scale
            );
            ensure!(
                (0..=255).contains(&o.zero_point),
                "operand {i}: {ty} zero point must be 0..255, is {}",
                o.zero_point
            );
        }
        OperandType::Oem | OperandType::TensorOemByte => {}
        // The types later NNAPI versions added (AIDL `OperandType`): their own scale and zero
        // point rules, so a malformed one is refused even though none of them is ever run.
        OperandType::Bool
        | OperandType::Float16
        | OperandType::TensorFloat16
        | OperandType::TensorBool8
        | OperandType::TensorQuant8SymmPerChannel
        | OperandType::Subgraph => {
            ensure!(
                o.scale == 0.0 && o.zero_point == 0,
                "operand {i}: {ty} must have scale 0 and zero point 0, has {} and {}",
                o.scale,
                o.zero_point
            );
        }
        OperandType::TensorQuant8Symm
        | OperandType::TensorQuant16Symm
        | OperandType::TensorQuant16Asymm
        | OperandType::TensorQuant8AsymmSigned => {
            ensure!(
                o.scale > 0.0 && o.scale.is_finite(),
                "operand {i}: {ty} scale must be > 0 and finite, is {}",
                o.scale
            );
            let zero_points = match ty {
                OperandType::TensorQuant16Asymm => 0..=65535,
                OperandType::TensorQuant8AsymmSigned => -128..=127,
                _ => 0..=0,
            };
            ensure!(
                zero_points.contains(&o.zero_point),
                "operand {i}: {ty} zero point must be in {zero_points:?}, is {}",
                o.zero_point
            );
        }
    }
    ensure!(
        (ty == OperandType::Subgraph) == (lifetime == OperandLifeTime::Subgraph),
        "operand {i}: type {ty} cannot have lifetime {lifetime}"
    );
    match (&o.channel_quant, ty) {
        (Some(cq), OperandType::TensorQuant8SymmPerChannel) => {
            let dim = o.dimensions.get(cq.channel_dim as usize).ok_or_else(|| {
                HalError::InvalidArgument(format!(
                    "operand {i}: channelDim {} is not below the rank {}",
                    cq.channel_dim,
                    o.dimensions.len()
                ))
            })?;
            ensure!(
                *dim == 0 || cq.scales.len() == *dim as usize,
                "operand {i}: {} channel scales for a channel dimension of {dim}",
                cq.scales.len()
            );
            ensure!(
                cq.scales.iter().all(|s| *s > 0.0 && s.is_finite()),
                "operand {i}: every channel scale must be > 0 and finite"
            );
        }
        (None, OperandType::TensorQuant8SymmPerChannel) => {
            invalid!("operand {i}: {ty} needs channelQuant parameters")
        }
        (Some(_), _) => invalid!("operand {i}: channelQuant parameters on a {ty} operand"),
        (None, _) => {}
    }
    if fully_specified(&o.dimensions) && ty.element_size().is_some() {
        byte_size(ty, &o.dimensions)
            .map_err(|e| HalError::InvalidArgument(format!("operand {i}: {}", e.message())))?;
    }
    let loc = o.location;
    match lifetime {
        OperandLifeTime::TemporaryVariable
        | OperandLifeTime::ModelInput
        | OperandLifeTime::ModelOutput
        | OperandLifeTime::NoValue => {
            ensure!(
                loc.is_zero(),
                "operand {i}: {lifetime} must have an empty location, has {loc:?}"
            );
        }
        OperandLifeTime::Subgraph => {
            ensure!(
                loc.pool_index == 0 && loc.length == 0,
                "operand {i}: a SUBGRAPH reference has pool 0 and length 0, has {loc:?}"
            );
            ensure!(
                (loc.offset as usize) < model.referenced.len(),
                "operand {i}: names referenced subgraph {} of {}",
                loc.offset,
                model.referenced.len()
            );
        }
        OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference => {
            if lifetime == OperandLifeTime::ConstantCopy {
                ensure!(
                    loc.pool_index == 0,
                    "operand {i}: CONSTANT_COPY must use pool 0, uses {}",
                    loc.pool_index
                );
                ensure!(
                    loc.end() <= model.operand_values.len() as u64,
                    "operand {i}: CONSTANT_COPY region {loc:?} exceeds operandValues ({} bytes)",
                    model.operand_values.len()
                );
            } else {
                let pool = model.pools.get(loc.pool_index as usize).ok_or_else(|| {
                    HalError::InvalidArgument(format!(
                        "operand {i}: CONSTANT_REFERENCE pool {} of {}",
                        loc.pool_index,
                        model.pools.len()
                    ))
                })?;
                ensure!(
                    loc.end() <= pool.size(),
                    "operand {i}: CONSTANT_REFERENCE region {loc:?} exceeds pool {} ({} bytes)",
                    loc.pool_index,
                    pool.size()
                );
            }
            ensure!(
                fully_specified(&o.dimensions),
                "operand {i}: constant with unspecified dimensions {:?}",
                o.dimensions
            );
            if ty.element_size().is_some() {
                let need = byte_size(ty, &o.dimensions)?;
                ensure!(
                    u64::from(loc.length) == need,
                    "operand {i}: constant has {} bytes, {ty} {:?} needs {need}",
                    loc.length,
                    o.dimensions
                );
            }
        }
    }
    Ok(OperandInfo {
        ty,
        dims: o.dimensions.clone(),
        scale: o.scale,
        zero_point: o.zero_point,
        lifetime,
        location: loc,
        consumers: o.number_of_consumers,
        channel_quant: o.channel_quant.clone(),
    })
}

fn check_signature(
    k: usize,
    op: OperationType,
    operation: &Operation,
    operands: &[OperandInfo],
) -> HalResult<()> {
    let ty_in = |i: usize| operands[operation.inputs[i] as usize].ty;
    let ty_out = |i: usize| operands[operation.outputs[i] as usize].ty;
    let got = || {
        let ins: Vec<_> = (0..operation.inputs.len())
            .map(|i| ty_in(i).name())
            .collect();
        let outs: Vec<_> = (0..operation.outputs.len())
            .map(|i| ty_out(i).name())
            .collect();
        format!("({}) -> ({})", ins.join(", "), outs.join(", "))
    };
    match ops::arity(op) {
        Arity::Any => Ok(()),
        Arity::Concatenation(types) => {
            let n = operation.inputs.len();
            let ok = n >= 2
                && operation.outputs.len() == 1
                && ty_in(n - 1) == OperandType::Int32
                && types
                    .iter()
                    .any(|&t| (0..n - 1).all(|i| ty_in(i) == t) && ty_out(0) == t);
            ensure!(
                ok,
                "operation {k} ({op}): operand types {} match no signature",
                got()
            );
            Ok(())
        }
        Arity::Fixed(sigs) | Arity::RepeatOutputs(sigs) => {
            let repeat = matches!(ops::arity(op), Arity::RepeatOutputs(_));
            let ok = sigs.iter().any(|s| {
                let outputs = if repeat {
                    !operation.outputs.is_empty()
                        && (0..operation.outputs.len()).all(|i| ty_out(i) == s.outputs[0])
                } else {
                    s.outputs.len() == operation.outputs.len()
                        && s.outputs.iter().enumerate().all(|(i, &t)| ty_out(i) == t)
                };
                s.inputs.len() == operation.inputs.len()
                    && s.inputs.iter().enumerate().all(|(i, &t)| ty_in(i) == t)
                    && outputs
            });
            ensure!(
                ok,
                "operation {k} ({op}): operand types {} match no signature",
                got()
            );
            Ok(())
        }
    }
}

/// Whether `operation` matches a signature a later NNAPI version added to `op`.
fn matches_later(op: OperationType, operation: &Operation, operands: &[OperandInfo]) -> bool {
    let ty_in = |i: usize| operands[operation.inputs[i] as usize].ty;
    let ty_out = |i: usize| operands[operation.outputs[i] as usize].ty;
    if op == OperationType::Concatenation {
        let n = operation.inputs.len();
        return n >= 2
            && operation.outputs.len() == 1
            && ty_in(n - 1) == OperandType::Int32
            && ops::LATER_CONCATENATION_TYPES
                .iter()
                .any(|&t| (0..n - 1).all(|i| ty_in(i) == t) && ty_out(0) == t);
    }
    ops::later_signatures(op).iter().any(|s| {
        let outputs_match = if s.repeat_outputs {
            !operation.outputs.is_empty()
                && (0..operation.outputs.len()).all(|i| ty_out(i) == s.outputs[0])
        } else {
            s.outputs.len() == operation.outputs.len()
                && s.outputs.iter().enumerate().all(|(i, &t)| ty_out(i) == t)
        };
        s.inputs.len() == operation.inputs.len()
            && s.inputs.iter().enumerate().all(|(i, &t)| ty_in(i) == t)
            && outputs_match
    })
}

/// The platform validator's rank limits ([`ops::rank_rule`]): a known rank above 4 (or
/// other than 4 where exactly 4 is required) is malformed. Rank 0 on a tensor is an unknown
/// rank.
fn check_ranks(
    k: usize,
    op: OperationType,
    operation: &Operation,
    operands: &[OperandInfo],
) -> HalResult<()> {
    let rank = |pos: usize| {
        operation
            .inputs
            .get(pos)
            .map_or(0, |&i| operands[i as usize].dims.len())
    };
    if op == OperationType::Concatenation {
        for pos in 0..operation.inputs.len().saturating_sub(1) {
            ensure!(
                rank(pos) <= 4,
                "operation {k} ({op}): input {pos} has rank {}, at most 4 is allowed",
                rank(pos)
            );
        }
        return Ok(());
    }
    let Some(rule) = ops::rank_rule(op) else {
        return Ok(());
    };
    let known = rule.at_most_4.iter().all(|&pos| rank(pos) > 0);
    if known || !rule.all_known_first {
        for &pos in rule.at_most_4 {
            ensure!(
                rank(pos) <= 4,
                "operation {k} ({op}): input {pos} has rank {}, at most 4 is allowed",
                rank(pos)
            );
        }
    }
    for &pos in rule.exactly_4 {
        ensure!(
            rank(pos) == 0 || rank(pos) == 4,
            "operation {k} ({op}): input {pos} has rank {}, 4 is required",
            rank(pos)
        );
    }
    Ok(())
}

/// IF and WHILE (NNAPI 1.3): their subgraph operands must name referenced subgraphs whose
/// inputs and outputs line up with the operation's, operand for operand (type, scale, zero
/// point, channel quantization, and dimensions where both sides specify them), and the
/// condition must be a TENSOR_BOOL8 of shape [1]. IF takes (condition, then, else, inputs...);
/// WHILE takes (condition model, body model, inputs...), the body's outputs feeding its inputs.
fn check_control_flow(
    k: usize,
    op: OperationType,
    operation: &Operation,
    model: &Model,
) -> HalResult<()> {
    let operands = &model.operands;
    let fail = |why: String| HalError::InvalidArgument(format!("operation {k} ({op}): {why}"));
    ensure!(
        operation.inputs.len() >= 3 && !operation.outputs.is_empty(),
        "operation {k} ({op}): needs at least 3 inputs and 1 output, has {} and {}",
        operation.inputs.len(),
        operation.outputs.len()
    );
    let outer = |i: u32| &operands[i as usize];
    let subgraph = |input: usize| -> HalResult<&Subgraph> {
        let o = outer(operation.inputs[input]);
        ensure!(
            o.operand_type == OperandType::Subgraph.raw(),
            "operation {k} ({op}): input {input} is not a SUBGRAPH operand"
        );
        model
            .referenced
            .get(o.location.offset as usize)
            .ok_or_else(|| fail(format!("input {input} names no referenced subgraph")))
    };
    let inner_in = |g: &Subgraph, i: usize| -> HalResult<Operand> {
        g.input_indexes
            .get(i)
            .and_then(|&x| g.operands.get(x as usize))
            .cloned()
            .ok_or_else(|| fail(format!("subgraph input {i} is not an operand")))
    };
    let inner_out = |g: &Subgraph, i: usize| -> HalResult<Operand> {
        g.output_indexes
            .get(i)
            .and_then(|&x| g.operands.get(x as usize))
            .cloned()
            .ok_or_else(|| fail(format!("subgraph output {i} is not an operand")))
    };
    let compatible = |a: &Operand, b: &Operand, what: String| -> HalResult<()> {
        let dims_agree = a.dimensions.is_empty()
            || b.dimensions.is_empty()
            || a.dimensions.len() == b.dimensions.len()
                && a.dimensions
                    .iter()
                    .zip(&b.dimensions)
                    .all(|(&x, &y)| x == 0 || y == 0 || x == y);
        let same = a.operand_type == b.operand_type
            && dims_agree
            && a.scale == b.scale
            && a.zero_point == b.zero_point
            && a.channel_quant == b.channel_quant;
        ensure!(same, "operation {k} ({op}): {what} do not match");
        Ok(())
    };
    let condition = |o: &Operand, what: &str| -> HalResult<()> {
        ensure!(
            o.operand_type == OperandType::TensorBool8.raw() && o.dimensions == [1],
            "operation {k} ({op}): {what} must be a TENSOR_BOOL8 of shape [1]"
        );
        Ok(())
    };
    let first = if op == OperationType::If { 3 } else { 2 };
    let n_in = operation.inputs.len() - first;
    // Inputs 0..n_in of `g` against the operation's data inputs.
    let inputs_match = |g: &Subgraph, label: &str| -> HalResult<()> {
        for i in 0..n_in {
            let outer_in = outer(operation.inputs[first + i]);
            compatible(&inner_in(g, i)?, outer_in, format!("{label} input {i}"))?;
        }
        Ok(())
    };
    if op == OperationType::If {
        condition(outer(operation.inputs[0]), "the condition")?;
        for branch in [1, 2] {
            let g = subgraph(branch)?;
            ensure!(
                g.input_indexes.len() == n_in && g.output_indexes.len() == operation.outputs.len(),
                "operation {k} ({op}): branch {branch} has {} inputs and {} outputs, the operation {n_in} and {}",
                g.input_indexes.len(),
                g.output_indexes.len(),
                operation.outputs.len()
            );
            inputs_match(g, &format!("branch {branch}"))?;
            for (i, &o) in operation.outputs.iter().enumerate() {
                compatible(
                    &inner_out(g, i)?,
                    outer(o),
                    format!("branch {branch} output {i}"),
                )?;
            }
        }
        return Ok(());
    }
    let cond = subgraph(0)?;
    ensure!(
        cond.input_indexes.len() == n_in && cond.output_indexes.len() == 1,
        "operation {k} ({op}): the condition has {} inputs and {} outputs, needs {n_in} and 1",
        cond.input_indexes.len(),
        cond.output_indexes.len()
    );
    inputs_match(cond, "condition")?;
    condition(&inner_out(cond, 0)?, "the condition's output")?;
    let body = subgraph(1)?;
    let (body_in, body_out) = (body.input_indexes.len(), body.output_indexes.len());
    ensure!(
        body_in == n_in && body_out >= operation.outputs.len() && body_in >= body_out,
        "operation {k} ({op}): the body has {body_in} inputs and {body_out} outputs for {n_in} inputs and {} outputs",
        operation.outputs.len()
    );
    inputs_match(body, "body")?;
    for (i, &o) in operation.outputs.iter().enumerate() {
        compatible(&inner_out(body, i)?, outer(o), format!("body output {i}"))?;
    }
    for i in 0..body_out {
        compatible(
            &inner_in(body, i)?,
            &inner_out(body, i)?,
            format!("body input and output {i}"),
        )?;
    }
    Ok(())
}

/// Quantization relationships between an operation's operands (types.hal text for each op).
/// `Ok(false)`: an output quantization the kernels do not write — valid, but not run. An
/// output multiplier of 1 or more in the convolutions and mixed-scale CONCATENATION inputs run.
fn check_quantization(k: usize, op: &OperationInfo, operands: &[OperandInfo]) -> HalResult<bool> {
    use OperationType::*;
    let input = &operands[op.inputs[0]];
    if input.ty != OperandType::TensorQuant8Asymm
        && op.ty != HashtableLookup
        && op.ty != EmbeddingLookup
    {
        return Ok(true);
    }
    let out = &operands[op.outputs[0]];
    let same = |a: &OperandInfo, b: &OperandInfo, what: &str| -> HalResult<()> {
        ensure!(
            a.scale == b.scale && a.zero_point == b.zero_point,
            "operation {k} ({}): {what} must have scale/zero point ({}, {}), has ({}, {})",
            op.ty,
            a.scale,
            a.zero_point,
            b.scale,
            b.zero_point
        );
        Ok(())
    };
    match op.ty {
        // A per-channel filter's bias scale is input scale × channel scale by definition; the
        // reference derives it rather than reading the operand's.
        Conv2d | DepthwiseConv2d
            if operands[op.inputs[1]].ty == OperandType::TensorQuant8SymmPerChannel => {}
        Conv2d | DepthwiseConv2d | FullyConnected | GroupedConv2d | TransposeConv2d
            if operands[op.inputs[1]].ty == OperandType::TensorQuant8Asymm =>
        {
            let filter = &operands[op.inputs[1]];
            let bias = &operands[op.inputs[2]];
            let product = input.scale * filter.scale;
            ensure!(
                (product - bias.scale).abs() <= 1e-6 * product.min(bias.scale),
                "operation {k} ({}): bias scale {} must equal input scale × filter scale {product}",
                op.ty,
                bias.scale
            );
            // An output multiplier of 1 or more (allowed since NNAPI 1.2) runs on the
            // reference kernels.
        }
        // Inputs of other quantizations than the output's (NNAPI 1.2) are requantized.
        Concatenation => {}
        // The uint8 kernel writes in the NNAPI 1.2 output quantization only.
        Tanh if out.scale != 1.0 / 128.0 || out.zero_point != 128 => return Ok(false),
        // The uint8 kernel interpolates values as stored: only with the input's quantization.
        ResizeBilinear
            if input.ty == OperandType::TensorQuant8Asymm && same(input, out, "").is_err() =>
        {
            return Ok(false);
        }
        // NNAPI 1.1 data movement and MEAN move or average the stored values, as the reference
        // does: run only when the output keeps the input's quantization.
        Pad | Squeeze | Transpose | StridedSlice | SpaceToBatchNd | BatchToSpaceNd | Mean
            if same(input, out, "").is_err() =>
        {
            return Ok(false);
        }
        // NNAPI 1.2's nearest-neighbour resize, REDUCE_MAX / REDUCE_MIN and TOPK_V2's values
        // move stored values; the reference gives the output the input's quantization.
        ResizeNearestNeighbor | ReduceMax | ReduceMin | TopkV2 if same(input, out, "").is_err() => {
            return Ok(false);
        }
        // NNAPI 1.2 data movement and GATHER copy the stored values: likewise (every output of
        // SPLIT).
        PadV2 | ExpandDims | Tile | ChannelShuffle | Slice | Split | Gather
            if op
                .outputs
                .iter()
                .any(|&o| same(input, &operands[o], "").is_err()) =>
        {
            return Ok(false);
        }
        // The platform's quantized HARD_SWISH requires an output multiplier
        // (input scale / 128 / output scale, in float32) below 1 once quantized to Q31.
        HardSwish
            if f64::from(input.scale * (1.0 / 128.0) / out.scale) >= 1.0 - 0.5f64.powi(32) =>
        {
            return Ok(false);
        }
        // The uint8 kernel writes in the NNAPI 1.2 output quantization only.
        L2Normalization
            if input.ty == OperandType::TensorQuant8Asymm
                && (out.scale != 1.0 / 128.0 || out.zero_point != 128) =>
        {
            return Ok(false);
        }
        Logistic | Softmax => {
            ensure!(
                out.scale == 1.0 / 256.0 && out.zero_point == 0,
                "operation {k} ({}): quantized output must have scale 1/256 and zero point 0",
                op.ty
            );
        }
        AveragePool2d | MaxPool2d | Relu | Relu1 | Relu6 | Reshape | DepthToSpace
        | SpaceToDepth => {
            same(input, out, "the output")?;
        }
        EmbeddingLookup => {
            let values = &operands[op.inputs[1]];
            if values.ty == OperandType::TensorQuant8Asymm {
                same(values, out, "the output")?;
            }
        }
        HashtableLookup => {
            let values = &operands[op.inputs[2]];
            if values.ty == OperandType::TensorQuant8Asymm {
                same(values, out, "the output")?;
            }
        }
        _ => {}
    }
    Ok(true)
}

/// Validates `model` completely, its referenced subgraphs (IF/WHILE bodies) included. Model
/// pools are mapped (and kept in the result) so constant parameters can be read for the static
/// shape checks.
pub fn validate_model(model: &Model) -> HalResult<ValidModel> {
    let mut valid = validate_graph(model, false)?;
    let mut referenced = Vec::with_capacity(model.referenced.len());
    for (s, sub) in model.referenced.iter().enumerate() {
        // A subgraph is checked as a model of its own that shares the main model's constants
        // and referenced list.
        let as_model = Model {
            operands: sub.operands.clone(),
            operations: sub.operations.clone(),
            input_indexes: sub.input_indexes.clone(),
            output_indexes: sub.output_indexes.clone(),
            operand_values: model.operand_values.clone(),
            pools: model.pools.clone(),
            referenced: model.referenced.clone(),
            relax_computation_float32_to_float16: model.relax_computation_float32_to_float16,
        };
        referenced.push(validate_graph(&as_model, true).map_err(|e| {
            HalError::InvalidArgument(format!("referenced subgraph {s}: {}", e.message()))
        })?);
    }
    // Children before parents, so a subgraph's IF/WHILE see whether what they name runs.
    let mut runs = vec![false; referenced.len()];
    for s in subgraph_order(model)? {
        mark_control_flow(&mut referenced[s], &runs);
        runs[s] = referenced[s].supported.iter().all(|&x| x);
    }
    mark_control_flow(&mut valid, &runs);
    valid.referenced = referenced;
    Ok(valid)
}

/// The float32 image of a model with TENSOR_FLOAT16 / FLOAT16 operands in its main graph or
/// its referenced subgraphs: float16 is a storage type here (docs/hal-contract.md, "Float16").
/// Each such operand becomes its float32 counterpart and its constant values are widened
/// (exactly: every binary16 value is a binary32 value), so every float32 signature and kernel
/// runs it unchanged; the executor narrows request data at the edges and rounds every float16
/// operation output to binary16 (see [`ValidModel::half`]). Widened constants become
/// CONSTANT_COPY. `None` when there is no float16 operand or a constant cannot be read. The
/// second value marks the retyped operands of the main graph, the third those of each
/// referenced subgraph.
#[allow(clippy::type_complexity)]
pub fn float16_as_float32(model: &Model) -> Option<(Model, Vec<bool>, Vec<Vec<bool>>)> {
    let halves = |operands: &[Operand]| -> Vec<bool> { operands.iter().map(is_half).collect() };
    let half = halves(&model.operands);
    let in_subgraphs: Vec<Vec<bool>> = model
        .referenced
        .iter()
        .map(|g| halves(&g.operands))
        .collect();
    if !half.contains(&true) && !in_subgraphs.iter().any(|h| h.contains(&true)) {
        return None;
    }
    let mut out = model.clone();
    widen_operands(model, &mut out.operands, &mut out.operand_values)?;
    // IF and WHILE hand values to their subgraphs as they are, so the subgraphs' operands
    // move to float32 with the main graph's.
    for g in &mut out.referenced {
        widen_operands(model, &mut g.operands, &mut out.operand_values)?;
    }
    Some((out, half, in_subgraphs))
}

fn is_half(o: &Operand) -> bool {
    o.operand_type == OperandType::TensorFloat16.raw()
        || o.operand_type == OperandType::Float16.raw()
}

/// Moves every float16 operand of `operands` to float32 (see [`float16_as_float32`]),
/// constants widened into `values` as CONSTANT_COPY.
fn widen_operands(model: &Model, operands: &mut [Operand], values: &mut Vec<u8>) -> Option<()> {
    for o in operands.iter_mut() {
        if !is_half(o) {
            continue;
        }
        o.operand_type = if o.operand_type == OperandType::Float16.raw() {
            OperandType::Float32.raw()
        } else {
            OperandType::TensorFloat32.raw()
        };
        let Some(bytes) = constant_of(model, o)? else {
            continue;
        };
        let halves: Vec<half::f16> = bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]))
            .collect();
        let mut wide = vec![0f32; halves.len()];
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(&halves[..], &mut wide);
        let offset = values.len().div_ceil(4) * 4;
        values.resize(offset, 0);
        values.extend(wide.iter().flat_map(|v| v.to_le_bytes()));
        o.lifetime = OperandLifeTime::ConstantCopy.raw();
        o.location = DataLocation {
            pool_index: 0,
            offset: u32::try_from(offset).ok()?,
            // An odd byte count is malformed; the original model's validation refused it.
            length: u32::try_from(wide.len() * 4).ok()?,
        };
    }
    Some(())
}

/// The exact TENSOR_QUANT8_ASYMM image of a model with TENSOR_QUANT8_ASYMM_SIGNED operands in
/// its main graph: each such operand becomes unsigned with zero point + 128 and its constant
/// bytes shifted by 128 (x ⊕ 0x80), so every value it stands for is unchanged and the uint8
/// kernels compute bit-exactly what the signed operation defines (NNAPI 1.3 added the signed
/// type as this mirror image). Constants of shifted operands become CONSTANT_COPY. `None`
/// when there is nothing to shift or a constant cannot be read. The second value marks the
/// shifted operands.
pub fn signed_as_unsigned(model: &Model) -> Option<(Model, Vec<bool>)> {
    let is_signed = |o: &Operand| o.operand_type == OperandType::TensorQuant8AsymmSigned.raw();
    let signed: Vec<bool> = model.operands.iter().map(is_signed).collect();
    let in_subgraphs = model
        .referenced
        .iter()
        .any(|g| g.operands.iter().any(is_signed));
    if !signed.contains(&true) && !in_subgraphs {
        return None;
    }
    let mut out = model.clone();
    shift_operands(model, &mut out.operands, &mut out.operand_values)?;
    // IF and WHILE hand values to their subgraphs as they are, so the subgraphs' operands
    // move to the unsigned image with the main graph's.
    for g in &mut out.referenced {
        shift_operands(model, &mut g.operands, &mut out.operand_values)?;
    }
    Some((out, signed))
}

/// Moves every TENSOR_QUANT8_ASYMM_SIGNED operand of `operands` to its unsigned image (see
/// [`signed_as_unsigned`]), constants re-written into `values` as CONSTANT_COPY.
fn shift_operands(model: &Model, operands: &mut [Operand], values: &mut Vec<u8>) -> Option<()> {
    for o in operands.iter_mut() {
        if o.operand_type != OperandType::TensorQuant8AsymmSigned.raw() {
            continue;
        }
        o.operand_type = OperandType::TensorQuant8Asymm.raw();
        o.zero_point += 128;
        let Some(bytes) = constant_of(model, o)? else {
            continue;
        };
        let offset = values.len().div_ceil(4) * 4;
        values.resize(offset, 0);
        values.extend(bytes.iter().map(|b| b ^ 0x80));
        o.lifetime = OperandLifeTime::ConstantCopy.raw();
        o.location = DataLocation {
            pool_index: 0,
            offset: u32::try_from(offset).ok()?,
            length: u32::try_from(bytes.len()).ok()?,
        };
    }
    Some(())
}

/// The value bytes of operand `o` of `model` when it is a constant (`Some(None)` when it is
/// not one; `None` when its bytes cannot be read), for the images above, which rewrite
/// constants before the model is validated in its new form.
fn constant_of(model: &Model, o: &Operand) -> Option<Option<Vec<u8>>> {
    let loc = o.location;
    Some(Some(match OperandLifeTime::from_raw(o.lifetime) {
        Some(OperandLifeTime::ConstantCopy) => model
            .operand_values
            .get(loc.offset as usize..loc.end() as usize)?
            .to_vec(),
        Some(OperandLifeTime::ConstantReference) => {
            let memory = model.pools.get(loc.pool_index as usize)?;
            MappedPool::map(memory, "model pool")
                .ok()?
                .read_vec(u64::from(loc.offset), loc.length as usize)
                .ok()?
        }
        _ => return Some(None),
    }))
}

/// Validates one graph: the main subgraph of `model` (a referenced subgraph arrives here as
/// the main subgraph of a model that shares the constants).
fn validate_graph(model: &Model, in_subgraph: bool) -> HalResult<ValidModel> {
    ensure!(!model.operations.is_empty(), "model has no operations");
    ensure!(!model.operands.is_empty(), "model has no operands");
    ensure!(!model.input_indexes.is_empty(), "model has no inputs");
    ensure!(!model.output_indexes.is_empty(), "model has no outputs");
    for (p, pool) in model.pools.iter().enumerate() {
        pool.validate(&format!("model pool {p}"))?;
    }
    let operands = model
        .operands
        .iter()
        .enumerate()
        .map(|(i, o)| validate_operand(i, o, model, in_subgraph))
        .collect::<HalResult<Vec<_>>>()?;
    let n = operands.len();

    let mut operations = Vec::with_capacity(model.operations.len());
    for (k, operation) in model.operations.iter().enumerate() {
        let ty = OperationType::from_raw(operation.operation_type).ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "operation {k}: unknown type {}",
                operation.operation_type
            ))
        })?;
        for (what, list) in [("input", &operation.inputs), ("output", &operation.outputs)] {
            for (pos, &i) in list.iter().enumerate() {
                ensure!(
                    (i as usize) < n,
                    "operation {k} ({ty}): {what} {pos} is operand {i} of {n}"
                );
            }
        }
        let mut opaque = matches!(ops::arity(ty), Arity::Any);
        if matches!(ty, OperationType::If | OperationType::While) {
            check_control_flow(k, ty, operation, model)?;
        }
        // A later operation with a signature table must match it.
        if opaque
            && !ops::later_signatures(ty).is_empty()
            && !matches_later(ty, operation, &operands)
        {
            invalid!("operation {k} ({ty}): operand types match no signature of NNAPI 1.1–1.3");
        }
        if !opaque {
            // A signature of the run tables (1.0 types and the few later ones a family runs:
            // per-channel filters, bool8, the symmetric quant8 of DEQUANTIZE) runs; another
            // signature a later version added is valid but not run; anything else is malformed.
            if let Err(e) = check_signature(k, ty, operation, &operands) {
                if !matches_later(ty, operation, &operands) {
                    return Err(e);
                }
                opaque = true;
            }
        }
        check_ranks(k, ty, operation, &operands)?;
        // A per-channel filter is quantized along its output channels: dimension 0 of the
        // [out, h, w, in] convolution filters, dimension 3 of DEPTHWISE_CONV_2D's [1, h, w, out].
        let filter_channel_dim = match ty {
            OperationType::Conv2d
            | OperationType::GroupedConv2d
            | OperationType::TransposeConv2d => Some(0),
            OperationType::DepthwiseConv2d => Some(3),
            _ => None,
        };
        if let (Some(want), Some(&filter)) = (filter_channel_dim, operation.inputs.get(1)) {
            let filter = &model.operands[filter as usize];
            if let Some(cq) = &filter.channel_quant {
                ensure!(
                    cq.channel_dim == want,
                    "operation {k} ({ty}): a per-channel filter must be quantized along dimension {want}, not {}",
                    cq.channel_dim
                );
            }
        }
        for &o in &operation.outputs {
            let lt = operands[o as usize].lifetime;
            ensure!(
                matches!(
                    lt,
                    OperandLifeTime::TemporaryVariable | OperandLifeTime::ModelOutput
                ),
                "operation {k} ({ty}): output operand {o} has lifetime {lt}"
            );
        }
        for (pos, &i) in operation.inputs.iter().enumerate() {
            if operands[i as usize].lifetime == OperandLifeTime::NoValue && !opaque {
                ensure!(
                    ops::is_optional_input(ty, pos),
                    "operation {k} ({ty}): input {pos} is required but operand {i} has no value"
                );
            }
        }
        if ty == OperationType::Mul && operation.inputs.len() == 3 && operation.outputs.len() == 1 {
            // Every version keeps this rule for both 8-bit asymmetric types, whichever
            // signature table the operation matched.
            let [a, b] = [0, 1].map(|i| &operands[operation.inputs[i] as usize]);
            let out = &operands[operation.outputs[0] as usize];
            if matches!(
                a.ty,
                OperandType::TensorQuant8Asymm | OperandType::TensorQuant8AsymmSigned
            ) {
                ensure!(
                    out.scale > a.scale * b.scale,
                    "operation {k} ({ty}): output scale {} must exceed the input scales' product {}",
                    out.scale,
                    a.scale * b.scale
                );
            }
        }
        let mut info = OperationInfo {
            ty,
            inputs: operation.inputs.iter().map(|&i| i as usize).collect(),
            outputs: operation.outputs.iter().map(|&i| i as usize).collect(),
            opaque,
        };
        if !opaque && !check_quantization(k, &info, &operands)? {
            // Valid under the relaxed rules of later versions; not run by the 1.0 kernels.
            info.opaque = true;
        }
        operations.push(info);
    }

    let index_list = |list: &[u32], want: OperandLifeTime, what: &str| -> HalResult<Vec<usize>> {
        let mut seen = vec![false; n];
        list.iter()
            .map(|&i| {
                let i = i as usize;
                ensure!(i < n, "model {what} refers to operand {i} of {n}");
                ensure!(
                    !seen[i],
                    "operand {i} is listed twice among the model {what}s"
                );
                seen[i] = true;
                ensure!(
                    operands[i].lifetime == want,
                    "model {what} operand {i} has lifetime {}",
                    operands[i].lifetime
                );
                Ok(i)
            })
            .collect()
    };
    let inputs = index_list(&model.input_indexes, OperandLifeTime::ModelInput, "input")?;
    let outputs = index_list(
        &model.output_indexes,
        OperandLifeTime::ModelOutput,
        "output",
    )?;
    let listed_in = operands
        .iter()
        .filter(|o| o.lifetime == OperandLifeTime::ModelInput)
        .count();
    let listed_out = operands
        .iter()
        .filter(|o| o.lifetime == OperandLifeTime::ModelOutput)
        .count();
    ensure!(
        listed_in == inputs.len(),
        "a MODEL_INPUT operand is missing from the model inputs"
    );
    ensure!(
        listed_out == outputs.len(),
        "a MODEL_OUTPUT operand is missing from the model outputs"
    );

    // Graph: operations must already be in execution order, each operand written once.
    let mut known: Vec<bool> = operands
        .iter()
        .map(|o| {
            !matches!(
                o.lifetime,
                OperandLifeTime::TemporaryVariable | OperandLifeTime::ModelOutput
            )
        })
        .collect();
    let mut consumers = vec![0u32; n];
    for (k, op) in operations.iter().enumerate() {
        for &i in &op.inputs {
            ensure!(
                known[i],
                "operation {k} ({}) reads operand {i} before it is written (order or cycle)",
                op.ty
            );
            consumers[i] = consumers[i].saturating_add(1);
        }
        for &o in &op.outputs {
            ensure!(
                !known[o],
                "operation {k} ({}) writes operand {o}, which already has a value",
                op.ty
            );
            known[o] = true;
        }
    }
    for (i, o) in operands.iter().enumerate() {
        ensure!(known[i], "operand {i} ({}) is never written", o.lifetime);
        ensure!(
            consumers[i] == o.consumers,
            "operand {i}: numberOfConsumers is {}, but {} operation inputs read it",
            o.consumers,
            consumers[i]
        );
    }

    let pools = model
        .pools
        .iter()
        .enumerate()
        .map(|(p, m)| MappedPool::map(m, &format!("model pool {p}")))
        .collect::<HalResult<Vec<_>>>()?;

    let mut omittable = vec![true; n];
    let mut consumed = vec![false; n];
    for op in &operations {
        for (pos, &i) in op.inputs.iter().enumerate() {
            consumed[i] = true;
            if !ops::is_optional_input(op.ty, pos) {
                omittable[i] = false;
            }
        }
    }
    for (i, o) in omittable.iter_mut().enumerate() {
        *o &= consumed[i];
    }

    let supported = operations
        .iter()
        .map(|op| {
            !op.opaque
                && ops::is_supported(op.ty)
                && op
                    .inputs
                    .iter()
                    .chain(&op.outputs)
                    .all(|&i| !operands[i].ty.is_oem())
        })
        .collect();

    let mut valid = ValidModel {
        operands,
        operations,
        inputs,
        outputs,
        pools,
        supported,
        omittable,
        static_dims: Vec::new(),
        static_params: Vec::new(),
        signed: vec![false; n],
        half: vec![false; n],
        referenced: Vec::new(),
    };
    infer_static(model, &mut valid)?;
    Ok(valid)
}

impl ValidModel {
    /// Bytes of an element of operand `i` in request memory: 2 for a float16 operand held as
    /// float32 (see [`ValidModel::half`]), else its type's size.
    pub fn request_element_size(&self, i: usize) -> usize {
        if self.half.get(i).copied().unwrap_or(false) {
            2
        } else {
            self.operands[i].ty.element_size().unwrap_or(1)
        }
    }

    /// Bytes operand `i` with fully-specified `dims` takes in request memory.
    pub fn request_bytes(&self, i: usize, dims: &[u32]) -> HalResult<u64> {
        let n = shape::element_count(dims).map_err(HalError::InvalidArgument)?;
        Ok(n * self.request_element_size(i) as u64)
    }

    /// The bytes of constant operand `i`.
    pub fn constant_bytes(&self, model: &Model, i: usize) -> HalResult<Vec<u8>> {
        let o = &self.operands[i];
        let loc = o.location;
        match o.lifetime {
            OperandLifeTime::ConstantCopy => {
                Ok(model.operand_values[loc.offset as usize..loc.end() as usize].to_vec())
            }
            OperandLifeTime::ConstantReference => self.pools[loc.pool_index as usize]
                .read_vec(u64::from(loc.offset), loc.length as usize),
            _ => Err(HalError::GeneralFailure(format!(
                "operand {i} is not a constant"
            ))),
        }
    }
}

/// Per operand, whether every operation reading it satisfies `pred`: `None` for an operand no
/// operation reads. One pass over the operations' inputs, so a question about readers costs
/// the model's size once, not once per operand.
pub fn readers_all(
    operations: &[OperationInfo],
    operands: usize,
    pred: impl Fn(OperationType) -> bool,
) -> Vec<Option<bool>> {
    let mut all = vec![None; operands];
    for op in operations {
        let ok = pred(op.ty);
        for &i in &op.inputs {
            if let Some(slot) = all.get_mut(i) {
                *slot = Some(slot.unwrap_or(true) && ok);
            }
        }
    }
    all
}

/// Runs shape inference over every operation whose shapes and parameters are known before
/// execution, rejecting inconsistent models up front and recording shapes for the planner.
fn infer_static(model: &Model, valid: &mut ValidModel) -> HalResult<()> {
    let n = valid.operands.len();
    let mut dims: Vec<Option<Vec<u32>>> = valid
        .operands
        .iter()
        .map(|o| {
            let known = fully_specified(&o.dims) && !(o.ty.is_tensor() && o.dims.is_empty());
            known.then(|| o.dims.clone())
        })
        .collect();
    // Parameter values: scalars and small integer tensors (shape operands) that are constant.
    let mut values: HashMap<usize, Vec<u8>> = HashMap::new();
    let bool_at_prepare = readers_all(&valid.operations, n, ops::bool_params_at_prepare);
    let bool_for_packing = readers_all(&valid.operations, n, ops::bool_params_for_packing);
    for (i, o) in valid.operands.iter().enumerate() {
        let is_const = matches!(
            o.lifetime,
            OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference
        );
        let small =
            !o.ty.is_tensor() || (o.ty == OperandType::TensorInt32 && o.location.length <= 1024);
        // BOOL scalars too where only operations that resolve them at prepare read them
        // (known then, they let the plan pack and place those operations).
        let prepared_bool = o.ty == OperandType::Bool
            && (bool_at_prepare[i] == Some(true) || bool_for_packing[i] == Some(true));
        if is_const && small && (!o.ty.is_opaque() || prepared_bool) {
            values.insert(i, valid.constant_bytes(model, i)?);
        }
    }
    let reads_bool = |op: &OperationInfo| {
        op.inputs
            .iter()
            .any(|&i| valid.operands[i].ty == OperandType::Bool && values.contains_key(&i))
    };
    let mut params = Vec::with_capacity(valid.operations.len());
    for (k, op) in valid.operations.iter().enumerate() {
        if op.opaque {
            params.push(None);
            continue;
        }
        // An optional input that is a model input may or may not be given: decide at execution.
        let deferred = op.inputs.iter().enumerate().any(|(pos, &i)| {
            ops::is_optional_input(op.ty, pos)
                && valid.operands[i].lifetime == OperandLifeTime::ModelInput
        });
        let result = if deferred {
            Err(InferError::Unknown)
        } else {
            let args: Vec<Option<Arg>> = op
                .inputs
                .iter()
                .map(|&i| {
                    let o = &valid.operands[i];
                    (o.lifetime != OperandLifeTime::NoValue).then(|| Arg {
                        ty: o.ty,
                        dims: dims[i].as_deref().unwrap_or(&o.dims),
                        scale: o.scale,
                        zero_point: o.zero_point,
                        value: values.get(&i).map(|v| v.as_slice()),
                    })
                })
                .collect();
            shape::infer(op.ty, &args)
        };
        match result {
            Ok(inferred) => {
                if let Some(counts) = inferred.params.output_counts() {
                    ensure!(
                        counts.contains(&op.outputs.len()),
                        "operation {k} ({}): {} outputs, expected one of {counts:?} with these inputs",
                        op.ty,
                        op.outputs.len()
                    );
                }
                ensure!(
                    inferred.params.output_counts().is_some()
                        || inferred.outputs.len() == op.outputs.len(),
                    "operation {k} ({}): {} outputs, the operation lists {}",
                    op.ty,
                    inferred.outputs.len(),
                    op.outputs.len()
                );
                for (&o, out) in op.outputs.iter().zip(&inferred.outputs) {
                    check_declared(k, op.ty, o, &valid.operands[o].dims, out)?;
                    dims[o] = Some(out.clone());
                }
                params.push(Some(inferred.params));
            }
            // Known only for packing (see `ops::bool_params_for_packing`): left to execution.
            Err(InferError::Invalid(_))
                if ops::bool_params_for_packing(op.ty) && reads_bool(op) =>
            {
                params.push(None)
            }
            Err(InferError::Invalid(why)) => invalid!("operation {k} ({}): {why}", op.ty),
            Err(InferError::Unknown) => params.push(None),
        }
    }
    debug_assert_eq!(dims.len(), n);
    valid.static_dims = dims;
    valid.static_params = params;
    Ok(())
}

/// An inferred output shape must agree with the declared one wherever that is specified.
pub fn check_declared(
    k: usize,
    op: OperationType,
    operand: usize,
    declared: &[u32],
    inferred: &[u32],
) -> HalResult<()> {
    // An empty declaration of a tensor is an unknown rank (allowed inside IF/WHILE bodies).
    let agrees = declared.is_empty()
        || declared.len() == inferred.len()
            && declared
                .iter()
                .zip(inferred)
                .all(|(&d, &i)| d == 0 || d == i);
    ensure!(
        agrees,
        "operation {k} ({op}): output operand {operand} is declared {declared:?} but computes to {inferred:?}"
    );
    Ok(())
}

/// Validates `request` against `model` and maps its pools, through `cache` when given (the
/// prepared model's mappings kept from earlier executions).
pub fn validate_request(
    model: &ValidModel,
    request: &Request,
    cache: Option<&PoolCache>,
) -> HalResult<BoundRequest> {
    ensure!(
        request.inputs.len() == model.inputs.len(),
        "request has {} inputs, the model {}",
        request.inputs.len(),
        model.inputs.len()
    );
    ensure!(
        request.outputs.len() == model.outputs.len(),
        "request has {} outputs, the model {}",
        request.outputs.len(),
        model.outputs.len()
    );
    for (p, pool) in request.pools.iter().enumerate() {
        pool.validate(&format!("request pool {p}"))?;
    }
    let bind = |what: &str,
                pos: usize,
                arg: &RequestArgument,
                operand: usize|
     -> HalResult<Option<BoundArg>> {
        let o = &model.operands[operand];
        if arg.has_no_value {
            ensure!(
                arg.location.is_zero() && arg.dimensions.is_empty(),
                "{what} {pos}: an argument without value must have no location or dimensions"
            );
            ensure!(what == "input", "{what} {pos}: outputs cannot be omitted");
            ensure!(
                model.omittable[operand],
                "{what} {pos}: operand {operand} is required, it cannot be omitted"
            );
            return Ok(None);
        }
        let dims = if arg.dimensions.is_empty() {
            o.dims.clone()
        } else {
            ensure!(
                o.ty.is_tensor(),
                "{what} {pos}: dimensions given for a scalar"
            );
            ensure!(
                arg.dimensions.len() == o.dims.len(),
                "{what} {pos}: rank {} differs from the model's {}",
                arg.dimensions.len(),
                o.dims.len()
            );
            for (d, (&r, &m)) in arg.dimensions.iter().zip(&o.dims).enumerate() {
                ensure!(r != 0, "{what} {pos}: dimension {d} is 0");
                ensure!(
                    m == 0 || r == m,
                    "{what} {pos}: dimension {d} is {r}, the model says {m}"
                );
            }
            arg.dimensions.clone()
        };
        // An output may stay unspecified: its shape is inferred at execution and reported
        // (dynamic output shapes); an input must be known.
        ensure!(
            fully_specified(&dims) || what == "output",
            "{what} {pos}: dimensions {dims:?} are not fully specified"
        );
        let loc = arg.location;
        let pool = request.pools.get(loc.pool_index as usize).ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "{what} {pos}: pool {} of {}",
                loc.pool_index,
                request.pools.len()
            ))
        })?;
        ensure!(loc.length > 0, "{what} {pos}: length is 0");
        ensure!(
            loc.end() <= pool.size(),
            "{what} {pos}: region {loc:?} exceeds pool {} ({} bytes)",
            loc.pool_index,
            pool.size()
        );
        let need = if fully_specified(&dims) {
            model.request_bytes(operand, &dims)?
        } else {
            0
        };
        if u64::from(loc.length) < need {
            if what == "input" {
                invalid!(
                    "{what} {pos}: {} bytes given, {need} needed for {dims:?}",
                    loc.length
                );
            }
            return Err(HalError::OutputInsufficientSize(format!(
                "output {pos}: {} bytes given, {need} needed for {dims:?}",
                loc.length
            )));
        }
        Ok(Some(BoundArg {
            pool: loc.pool_index as usize,
            offset: u64::from(loc.offset),
            length: u64::from(loc.length),
            dims,
        }))
    };
    let inputs = request
        .inputs
        .iter()
        .enumerate()
        .map(|(p, a)| bind("input", p, a, model.inputs[p]))
        .collect::<HalResult<Vec<_>>>()?;
    let outputs = request
        .outputs
        .iter()
        .enumerate()
        .map(|(p, a)| {
            bind("output", p, a, model.outputs[p]).map(|b| b.expect("outputs are never omitted"))
        })
        .collect::<HalResult<Vec<_>>>()?;

    let pools = request
        .pools
        .iter()
        .enumerate()
        .map(|(p, m)| {
            let what = format!("request pool {p}");
            match cache {
                Some(cache) => cache.map(m, &what),
                None => MappedPool::map(m, &what),
            }
        })
        .collect::<HalResult<Vec<_>>>()?;
    for (p, out) in outputs.iter().enumerate() {
        ensure!(
            pools[out.pool].is_writable(),
            "output {p}: pool {} is read-only",
            out.pool
        );
    }
    check_overlaps(&pools, &inputs, &outputs)?;
    Ok(BoundRequest {
        pools,
        inputs,
        outputs,
    })
}

/// Outputs may overlap neither each other nor any input (types.hal `Request`). Regions are
/// compared per underlying file, so two pools naming the same memfd are caught too.
fn check_overlaps(
    pools: &[MappedPool],
    inputs: &[Option<BoundArg>],
    outputs: &[BoundArg],
) -> HalResult<()> {
    // (file key, absolute start, end, is_output, position)
    let key = |a: &BoundArg| -> ((u64, u64), u64) {
        match pools[a.pool].identity() {
            Some((dev, ino, base)) => ((dev, ino), base.saturating_add(a.offset)),
            None => ((u64::MAX, a.pool as u64), a.offset),
        }
    };
    let mut outs: Vec<((u64, u64), u64, u64, usize)> = outputs
        .iter()
        .enumerate()
        .map(|(p, a)| {
            let (k, start) = key(a);
            (k, start, start.saturating_add(a.length), p)
        })
        .collect();
    outs.sort_unstable();
    for w in outs.windows(2) {
        ensure!(
            w[0].0 != w[1].0 || w[0].2 <= w[1].1,
            "outputs {} and {} overlap",
            w[0].3,
            w[1].3
        );
    }
    for (p, a) in inputs.iter().enumerate() {
        let Some(a) = a else { continue };
        let (k, start) = key(a);
        let end = start.saturating_add(a.length);
        // The last output starting before `end` is the only one that can overlap, because
        // outputs of one file are disjoint and sorted.
        let idx = outs.partition_point(|o| (o.0, o.1) < (k, end));
        if idx > 0 {
            let o = &outs[idx - 1];
            ensure!(
                o.0 != k || o.2 <= start,
                "input {p} overlaps output {}",
                o.3
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(ty: OperationType, inputs: &[usize]) -> OperationInfo {
        OperationInfo {
            ty,
            inputs: inputs.to_vec(),
            outputs: vec![],
            opaque: false,
        }
    }

    #[test]
    fn readers_all_tells_unread_uniform_and_mixed_operands_apart() {
        let ops = [
            op(OperationType::Lstm, &[0, 1]),
            op(OperationType::Add, &[1, 2]),
            op(OperationType::Rnn, &[0, 0]),
        ];
        let all = readers_all(&ops, 4, crate::ops::omitted_input_is_absent);
        assert_eq!(all, vec![Some(true), Some(false), Some(false), None]);
        // An index past the operand count (never in a validated model) is ignored.
        assert_eq!(
            readers_all(&[op(OperationType::Add, &[9])], 1, |_| true),
            vec![None]
        );
    }
}
