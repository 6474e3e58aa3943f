//! The VTS 1.0 model and request mutators (`ValidateModel.cpp`, `ValidateRequest.cpp`,
//! `BasicTests.cpp` CycleTest, and the Android 8.1 hand-written negative tests), as plain
//! functions from a valid model (and a request builder) to named malformed variants.
//!
//! Every variant carries the bad-input class it belongs to (`docs/bad-inputs.md`, BI-01…
//! BI-26). The expected answer is INVALID_ARGUMENT: for model variants from both
//! `supported_operations` and `prepare_model`, for request variants from `execute`.
//!
//! The mutators follow VTS step by step, quirks included, because the point is to catch on the
//! host what the device run would catch: `removeOperand` drops references without renumbering
//! the remaining indexes (VTS's renumbering is a no-op), `addOperationOutput` gives the new
//! output one consumer, lifetime flips to CONSTANT_COPY point at a zero-filled region at offset 0
//! and are skipped when the operand's size is unknown or the model would outgrow VTS's binder
//! budget. The graph mutations (BI-08…BI-11) need operations that feed each other; single-op
//! vectors get such a graph from [`base_models`], which adds AOSP's `all_inputs_as_internal`
//! form of every vector.

use crate::model::{
    build_request, byte_size, count_consumers, inputs_as_internal, to_model, ConstantMode,
};
use crate::vector::{Vector, VectorError};
use nnhal::hal::{
    DataLocation, Model, Operand, OperandLifeTime, OperandType, Operation, OperationType, Request,
};
use std::sync::Arc;

/// A bad-input class number (BI-xx in `docs/bad-inputs.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bi(pub u8);

impl std::fmt::Display for Bi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BI-{:02}", self.0)
    }
}

/// A malformed model and what it is.
#[derive(Clone, Debug)]
pub struct ModelVariant {
    pub bi: Bi,
    /// What was changed, in VTS's wording (`mutateOperandTypeTest: operand 3 set to value -1`).
    pub name: String,
    pub model: Model,
}

/// A malformed request and what it is.
#[derive(Clone, Debug)]
pub struct RequestVariant {
    pub bi: Bi,
    pub name: String,
    pub request: Request,
}

/// Produces a fresh, valid request for the model a request mutator is given.
pub type RequestBuilder<'a> = &'a dyn Fn() -> Request;

/// A model mutation class.
pub struct ModelMutator {
    pub bi: Bi,
    /// Snake-case class name; the conformance test is `bi<NN>_<name>`.
    pub name: &'static str,
    /// The VTS function (or test) it mirrors.
    pub vts: &'static str,
    pub mutate: fn(&Model) -> Vec<ModelVariant>,
    /// Fixed models of this class that derive from no vector (the VTS CycleTest model).
    pub standalone: fn() -> Vec<ModelVariant>,
    /// The class damages `numberOfConsumers`, a field of the HIDL 1.0 `Operand` that the AIDL
    /// wire does not carry (the service counts consumers itself), so it cannot be sent over
    /// binder: the AIDL VTS has no such test.
    pub hidl_only: bool,
    /// The AIDL VTS's form of the class where it differs from the 1.0 one, applied to the
    /// later (NNAPI 1.1–1.3) vectors, which only the AIDL VTS runs.
    pub aidl: Option<fn(&Model) -> Vec<ModelVariant>>,
}

/// A request mutation class.
pub struct RequestMutator {
    pub bi: Bi,
    pub name: &'static str,
    pub vts: &'static str,
    pub mutate: fn(&Model, RequestBuilder) -> Vec<RequestVariant>,
}

/// Every model class, BI-01…BI-22, in order.
pub const MODEL_MUTATORS: &[ModelMutator] = &[
    ModelMutator {
        bi: Bi(1),
        name: "operand_type_out_of_range",
        vts: "mutateOperandTypeTest",
        mutate: operand_type,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operand_type_aidl),
    },
    ModelMutator {
        bi: Bi(2),
        name: "operand_rank_wrong",
        vts: "mutateOperandRankTest",
        mutate: operand_rank,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operand_rank_aidl),
    },
    ModelMutator {
        bi: Bi(3),
        name: "operand_scale_invalid",
        vts: "mutateOperandScaleTest",
        mutate: operand_scale,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(4),
        name: "operand_zero_point_invalid",
        vts: "mutateOperandZeroPointTest",
        mutate: operand_zero_point,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(5),
        name: "lifetime_contradicts_writer",
        vts: "mutateOperandLifeTimeTest",
        mutate: operand_lifetime,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operand_lifetime_aidl),
    },
    ModelMutator {
        bi: Bi(6),
        name: "lifetime_inconsistent_with_io_lists",
        vts: "mutateOperandInputOutputTest",
        mutate: operand_input_output,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operand_input_output_aidl),
    },
    ModelMutator {
        bi: Bi(7),
        name: "consumer_count_off_by_one",
        vts: "mutateOperandNumberOfConsumersTest",
        mutate: number_of_consumers,
        standalone: no_standalone,
        hidl_only: true,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(8),
        name: "operand_with_two_writers",
        vts: "mutateOperandAddWriterTest",
        mutate: add_writer,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(9),
        name: "operand_without_writer",
        vts: "mutateOperationRemoveWriteTest",
        mutate: remove_write,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(10),
        name: "operations_out_of_order",
        vts: "mutateExecutionOrderTest",
        mutate: execution_order,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(11),
        name: "graph_cycle",
        vts: "CycleTest",
        mutate: cycles,
        standalone: fixed_cycle,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(12),
        name: "operation_operand_type_mismatch",
        vts: "mutateOperationOperandTypeTest",
        mutate: operation_operand_type,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operation_operand_type_aidl),
    },
    ModelMutator {
        bi: Bi(13),
        name: "operation_type_out_of_range",
        vts: "mutateOperationTypeTest",
        mutate: operation_type,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(operation_type_aidl),
    },
    ModelMutator {
        bi: Bi(14),
        name: "operation_input_index_out_of_range",
        vts: "mutateOperationInputOperandIndexTest",
        mutate: operation_input_index,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(15),
        name: "operation_output_index_out_of_range",
        vts: "mutateOperationOutputOperandIndexTest",
        mutate: operation_output_index,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(16),
        name: "model_io_index_out_of_range",
        vts: "8.1 negative test (inputIndexes)",
        mutate: model_io_index,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(17),
        name: "operand_removed",
        vts: "removeOperandTest",
        mutate: remove_operand,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(remove_operand_aidl),
    },
    ModelMutator {
        bi: Bi(18),
        name: "operation_removed",
        vts: "removeOperationTest",
        mutate: remove_operation,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(19),
        name: "operation_input_removed",
        vts: "removeOperationInputTest",
        mutate: remove_operation_input,
        standalone: no_standalone,
        hidl_only: false,
        aidl: Some(remove_operation_input_aidl),
    },
    ModelMutator {
        bi: Bi(20),
        name: "operation_output_removed",
        vts: "removeOperationOutputTest",
        mutate: remove_operation_output,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(21),
        name: "operation_input_added",
        vts: "addOperationInputTest",
        mutate: add_operation_input,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
    ModelMutator {
        bi: Bi(22),
        name: "operation_output_added",
        vts: "addOperationOutputTest",
        mutate: add_operation_output,
        standalone: no_standalone,
        hidl_only: false,
        aidl: None,
    },
];

/// Every request class, BI-23…BI-26, in order.
pub const REQUEST_MUTATORS: &[RequestMutator] = &[
    RequestMutator {
        bi: Bi(23),
        name: "request_input_removed",
        vts: "removeInputTest",
        mutate: remove_request_input,
    },
    RequestMutator {
        bi: Bi(24),
        name: "request_output_removed",
        vts: "removeOutputTest",
        mutate: remove_request_output,
    },
    RequestMutator {
        bi: Bi(25),
        name: "request_pool_index_out_of_range",
        vts: "8.1 negative test (poolIndex)",
        mutate: request_pool_index,
    },
    RequestMutator {
        bi: Bi(26),
        name: "request_dims_conflict",
        vts: "8.1 negative test (dimensions)",
        mutate: request_dims,
    },
];

fn no_standalone() -> Vec<ModelVariant> {
    Vec::new()
}

fn fixed_cycle() -> Vec<ModelVariant> {
    vec![ModelVariant {
        bi: Bi(11),
        name: "CycleTest: 3 = ADD(0, 4, 2), 4 = ADD(1, 3, 2), 5 = ADD(4, 0, 2)".into(),
        model: cycle_model(),
    }]
}

/// The model mutator of class `bi`, if it is a model class.
pub fn model_mutator(bi: u8) -> Option<&'static ModelMutator> {
    MODEL_MUTATORS.iter().find(|m| m.bi == Bi(bi))
}

/// The request mutator of class `bi`, if it is a request class.
pub fn request_mutator(bi: u8) -> Option<&'static RequestMutator> {
    REQUEST_MUTATORS.iter().find(|m| m.bi == Bi(bi))
}

/// A valid model the mutators start from, with a builder for valid requests when the model
/// takes the vector's examples.
#[derive(Clone)]
pub struct BaseModel {
    pub vector: String,
    /// From the later (NNAPI 1.1–1.3) set, which only the AIDL VTS runs.
    pub later: bool,
    /// The vector's `expectFailure`: VTS mutates such a model but not its request.
    pub expect_failure: bool,
    /// `copy`, `reference` or `internal` (AOSP `all_inputs_as_internal`, from the copy model).
    pub label: &'static str,
    pub model: Model,
    pub request: Arc<dyn Fn() -> Request + Send + Sync>,
}

impl BaseModel {
    /// `vector/label`, for reports.
    pub fn id(&self) -> String {
        format!("{}/{}", self.vector, self.label)
    }
}

/// The models the mutation classes start from for one vector: both constant modes and the
/// `all_inputs_as_internal` form (a multi-operation graph, for the graph classes).
pub fn base_models(v: &Vector) -> Result<Vec<BaseModel>, VectorError> {
    let example = v
        .examples
        .first()
        .ok_or_else(|| VectorError::Invalid(format!("{}: no examples", v.name)))?;
    let mut out = Vec::new();
    for mode in ConstantMode::ALL {
        let model = to_model(v, mode)?;
        // Build once here so the builder below cannot fail on the vector's content.
        build_request(v, mode, example)?;
        let shared = Arc::new(v.clone());
        let builder = move || {
            let example = &shared.examples[0];
            build_request(&shared, mode, example)
                .expect("request built once already")
                .request
        };
        let builder: Arc<dyn Fn() -> Request + Send + Sync> = Arc::new(builder);
        // The later files carry AOSP's own `all_inputs_as_internal` variants, which the
        // AIDL VTS does not mutate; only 1.0 vectors get the derived graph.
        let later = v.version.as_deref().is_some_and(|ver| ver != "V1_0");
        if mode == ConstantMode::Copy && !later {
            out.push(BaseModel {
                vector: v.name.clone(),
                later,
                expect_failure: v.expect_failure,
                label: "internal",
                model: inputs_as_internal(&model),
                request: builder.clone(),
            });
        }
        out.push(BaseModel {
            vector: v.name.clone(),
            later,
            expect_failure: v.expect_failure,
            label: match mode {
                ConstantMode::Copy => "copy",
                ConstantMode::Reference => "reference",
            },
            model,
            request: builder,
        });
    }
    // Stable order: copy, reference, internal.
    out.sort_by_key(|b| match b.label {
        "copy" => 0,
        "reference" => 1,
        _ => 2,
    });
    Ok(out)
}

fn variant(bi: u8, name: String, model: &Model, change: impl FnOnce(&mut Model)) -> ModelVariant {
    let mut model = model.clone();
    change(&mut model);
    ModelVariant {
        bi: Bi(bi),
        name,
        model,
    }
}

fn operand_type_of(operand: &Operand) -> Option<OperandType> {
    OperandType::from_raw(operand.operand_type)
}

fn lifetime_of(operand: &Operand) -> Option<OperandLifeTime> {
    OperandLifeTime::from_raw(operand.lifetime)
}

fn lifetime_name(raw: i32) -> String {
    OperandLifeTime::from_raw(raw).map_or_else(|| raw.to_string(), |l| l.name().to_string())
}

// ---------------------------------------------------------------- operand fields (BI-01…04)

/// BI-01: each operand's type set to each value just outside the defined ranges.
pub fn operand_type(model: &Model) -> Vec<ModelVariant> {
    // Just below and above the fundamental range and the OEM range. The 1.0 VTS used
    // TENSOR_QUANT8_ASYMM + 1 as "above"; the driver serves the AIDL interface, where that
    // value is BOOL, so the first value above the AIDL range (SUBGRAPH + 1) is used, as the
    // AIDL VTS does.
    let invalid = [
        OperandType::Float32.raw() - 1,
        OperandType::Subgraph.raw() + 1,
        OperandType::Oem.raw() - 1,
        OperandType::TensorOemByte.raw() + 1,
    ];
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        for raw in invalid {
            out.push(variant(
                1,
                format!("mutateOperandTypeTest: operand {operand} set to value {raw}"),
                model,
                |m| m.operands[operand].operand_type = raw,
            ));
        }
    }
    out
}

/// BI-01 as the AIDL VTS has it: the values just outside the AIDL `OperandType` range (-1 and
/// SUBGRAPH + 1; the AIDL enumeration has no OEM range).
pub fn operand_type_aidl(model: &Model) -> Vec<ModelVariant> {
    let aidl = [-1, OperandType::Subgraph.raw() + 1];
    operand_type(model)
        .into_iter()
        .filter(|v| {
            aidl.iter()
                .any(|raw| v.name.ends_with(&format!(" set to value {raw}")))
        })
        .collect()
}

/// BI-02: scalars given one (unspecified) dimension, tensors given rank 0.
pub fn operand_rank(model: &Model) -> Vec<ModelVariant> {
    use OperandType::*;
    (0..model.operands.len())
        .map(|operand| {
            let rank = match operand_type_of(&model.operands[operand]) {
                Some(Float32 | Int32 | UInt32 | Bool | Float16) => 1,
                _ => 0,
            };
            variant(
                2,
                format!("mutateOperandRankTest: operand {operand} has rank of {rank}"),
                model,
                |m| m.operands[operand].dimensions = vec![0; rank],
            )
        })
        .collect()
}

/// BI-02 as the AIDL VTS has it: scalars only (a tensor of unknown rank is valid since NNAPI
/// 1.2, so tensors are skipped).
pub fn operand_rank_aidl(model: &Model) -> Vec<ModelVariant> {
    operand_rank(model)
        .into_iter()
        .filter(|v| v.name.ends_with("rank of 1"))
        .collect()
}

/// BI-03 (`getInvalidScale`): 1.0 for scalars, float, boolean, per-channel and subgraph
/// operands, -1.0 for TENSOR_INT32, 0.0 for the other quantized types.
pub fn operand_scale(model: &Model) -> Vec<ModelVariant> {
    use OperandType::*;
    (0..model.operands.len())
        .map(|operand| {
            let scale = match operand_type_of(&model.operands[operand]) {
                Some(
                    Float32
                    | Int32
                    | UInt32
                    | Bool
                    | Float16
                    | TensorBool8
                    | TensorFloat16
                    | TensorFloat32
                    | TensorQuant8SymmPerChannel
                    | Subgraph,
                ) => 1.0,
                Some(TensorInt32) => -1.0,
                _ => 0.0,
            };
            variant(
                3,
                format!("mutateOperandScaleTest: operand {operand} has scale of {scale}"),
                model,
                |m| m.operands[operand].scale = scale,
            )
        })
        .collect()
}

/// BI-04 (`getInvalidZeroPoints`): 1 where the zero point must be 0, the values just outside
/// the range of each asymmetric type, and around 0 for the symmetric ones; none for
/// TENSOR_QUANT8_ASYMM_SIGNED (every value in its range is valid) and OEM types.
pub fn operand_zero_point(model: &Model) -> Vec<ModelVariant> {
    use OperandType::*;
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        let points: &[i32] = match operand_type_of(&model.operands[operand]) {
            Some(TensorQuant8Asymm) => &[-1, 256],
            Some(TensorQuant8Symm) => &[-129, -1, 1, 128],
            Some(TensorQuant16Asymm) => &[-1, 65536],
            Some(TensorQuant16Symm) => &[-32769, -1, 1, 32768],
            Some(Oem | TensorOemByte | TensorQuant8AsymmSigned) | None => &[],
            Some(_) => &[1],
        };
        for &zp in points {
            out.push(variant(
                4,
                format!("mutateOperandZeroPointTest: operand {operand} has zero point of {zp}"),
                model,
                |m| m.operands[operand].zero_point = zp,
            ));
        }
    }
    out
}

// ---------------------------------------------------------------- lifetimes (BI-05, BI-06)

/// VTS's estimate of a model's binder representation (`sizeForBinder`): lifetime flips to
/// CONSTANT_COPY are skipped when they would push it past half of the recommended 64 KiB.
pub fn size_for_binder(model: &Model) -> usize {
    let operands: usize = model
        .operands
        .iter()
        .map(|o| 4 + 4 * o.dimensions.len() + 4 + 4 + 4 + 4 + 12)
        .sum();
    let operations: usize = model
        .operations
        .iter()
        .map(|o| 4 + 4 * o.inputs.len() + 4 * o.outputs.len())
        .sum();
    // native_handle_t (12) + one int (4) + the name "ashmem".
    let pools = model.pools.len() * (12 + 4 + 6);
    operands
        + operations
        + 4 * (model.input_indexes.len() + model.output_indexes.len())
        + model.operand_values.len()
        + pools
}

const HALF_MAX_IPC_SIZE: usize = 64 * 1024 / 2;

/// The AIDL VTS's `sizeForBinder` of a model: the AIDL parcelables' fields (an operand's
/// `DataLocation` carries three 64-bit fields and padding, its channel quantization its
/// scales), the referenced subgraphs and a guessed 64 bytes per memory pool.
pub fn size_for_binder_aidl(model: &Model) -> usize {
    let operand = |o: &Operand| {
        let extra = o
            .channel_quant
            .as_ref()
            .map_or(0, |cq| 4 * cq.scales.len() + 4);
        4 + 4 * o.dimensions.len() + 4 + 4 + 4 + 32 + extra
    };
    let operation = |o: &Operation| 4 + 4 * o.inputs.len() + 4 * o.outputs.len();
    let subgraph = |operands: &[Operand], operations: &[Operation], ins: usize, outs: usize| {
        operands.iter().map(operand).sum::<usize>()
            + operations.iter().map(operation).sum::<usize>()
            + 4 * (ins + outs)
    };
    subgraph(
        &model.operands,
        &model.operations,
        model.input_indexes.len(),
        model.output_indexes.len(),
    ) + model
        .referenced
        .iter()
        .map(|g| {
            subgraph(
                &g.operands,
                &g.operations,
                g.input_indexes.len(),
                g.output_indexes.len(),
            )
        })
        .sum::<usize>()
        + model.operand_values.len()
        + 64 * model.pools.len()
        + 1
}

/// The AIDL VTS's budget: half of binder's 1 MiB transaction buffer.
const AIDL_HALF_BUFFER_SIZE: usize = 1024 * 1024 / 2;

/// Which VTS decides the CONSTANT_COPY flips of BI-05 and BI-06: its size estimate and budget.
#[derive(Clone, Copy)]
struct BinderBudget {
    size: fn(&Model) -> usize,
    limit: usize,
}

const HIDL_BUDGET: BinderBudget = BinderBudget {
    size: size_for_binder,
    limit: HALF_MAX_IPC_SIZE,
};
const AIDL_BUDGET: BinderBudget = BinderBudget {
    size: size_for_binder_aidl,
    limit: AIDL_HALF_BUFFER_SIZE,
};

/// Whether VTS would turn this operand into a CONSTANT_COPY: its size must be known and the
/// grown model must stay under the binder budget.
fn can_become_constant_copy(
    model: &Model,
    model_size: usize,
    operand: &Operand,
    limit: usize,
) -> bool {
    let size = byte_size(operand.operand_type, &operand.dimensions).unwrap_or(0);
    let extra = size.saturating_sub(model.operand_values.len());
    size != 0 && model_size + extra <= limit
}

/// VTS `becomeConstantCopy`: a correctly sized region at offset 0 of a zero-padded
/// `operand_values`.
fn become_constant_copy(model: &mut Model, operand: usize) {
    let o = &model.operands[operand];
    let size = byte_size(o.operand_type, &o.dimensions).unwrap_or(0);
    model.operands[operand].location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: size as u32,
    };
    if model.operand_values.len() < size {
        model.operand_values.resize(size, 0);
    }
}

/// BI-05: an operand's lifetime changed between "has a writer" and "has none", with the model
/// input/output lists kept consistent so only writer analysis can tell.
pub fn operand_lifetime(model: &Model) -> Vec<ModelVariant> {
    operand_lifetime_within(model, HIDL_BUDGET)
}

/// BI-05 as the AIDL VTS has it: the CONSTANT_COPY flip is skipped only past its budget (half
/// of 1 MiB by its `sizeForBinder` of the AIDL model, [`size_for_binder_aidl`]).
pub fn operand_lifetime_aidl(model: &Model) -> Vec<ModelVariant> {
    operand_lifetime_within(model, AIDL_BUDGET)
}

fn operand_lifetime_within(model: &Model, budget: BinderBudget) -> Vec<ModelVariant> {
    use OperandLifeTime::*;
    let model_size = (budget.size)(model);
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        let o = &model.operands[operand];
        let mut targets: Vec<OperandLifeTime> = match lifetime_of(o) {
            Some(ModelOutput | TemporaryVariable) => vec![ModelInput, ConstantCopy],
            Some(ConstantCopy | ConstantReference | ModelInput) => {
                vec![TemporaryVariable, ModelOutput]
            }
            Some(NoValue | Subgraph) | None => vec![],
        };
        if !can_become_constant_copy(model, model_size, o, budget.limit) {
            targets.retain(|&t| t != ConstantCopy);
        }
        for target in targets {
            let name = format!(
                "mutateOperandLifetimeTest: operand {operand} has lifetime {} instead of lifetime {}",
                target.name(),
                lifetime_name(o.lifetime)
            );
            out.push(variant(5, name, model, |m| {
                let index = operand as u32;
                match lifetime_of(&m.operands[operand]) {
                    Some(ModelInput) => m.input_indexes.retain(|&i| i != index),
                    Some(ModelOutput) => m.output_indexes.retain(|&i| i != index),
                    _ => {}
                }
                m.operands[operand].lifetime = target.raw();
                m.operands[operand].location = DataLocation::default();
                match target {
                    ConstantCopy => become_constant_copy(m, operand),
                    ModelInput => m.input_indexes.push(index),
                    ModelOutput => m.output_indexes.push(index),
                    _ => {}
                }
            }));
        }
    }
    out
}

/// BI-06: an operand's lifetime changed between input, output and neither while keeping
/// whether it has a writer, and without touching the input/output lists.
pub fn operand_input_output(model: &Model) -> Vec<ModelVariant> {
    operand_input_output_within(model, HIDL_BUDGET)
}

/// BI-06 as the AIDL VTS has it (its binder budget, as for [`operand_lifetime_aidl`]).
pub fn operand_input_output_aidl(model: &Model) -> Vec<ModelVariant> {
    operand_input_output_within(model, AIDL_BUDGET)
}

fn operand_input_output_within(model: &Model, budget: BinderBudget) -> Vec<ModelVariant> {
    use OperandLifeTime::*;
    let model_size = (budget.size)(model);
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        let o = &model.operands[operand];
        let target = match lifetime_of(o) {
            Some(ConstantCopy | ConstantReference) => Some(ModelInput),
            Some(ModelInput) if can_become_constant_copy(model, model_size, o, budget.limit) => {
                Some(ConstantCopy)
            }
            Some(ModelOutput) => Some(TemporaryVariable),
            Some(TemporaryVariable) => Some(ModelOutput),
            _ => None,
        };
        let Some(target) = target else { continue };
        let name = format!(
            "mutateOperandInputOutputTest: operand {operand} has lifetime {} instead of lifetime {}",
            target.name(),
            lifetime_name(o.lifetime)
        );
        out.push(variant(6, name, model, |m| {
            m.operands[operand].lifetime = target.raw();
            m.operands[operand].location = DataLocation::default();
            if target == ConstantCopy {
                become_constant_copy(m, operand);
            }
        }));
    }
    out
}

// ---------------------------------------------------------------- graph (BI-07…BI-11)

/// BI-07: `numberOfConsumers` 0 → 1, n → n − 1 and n + 1.
pub fn number_of_consumers(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        let n = model.operands[operand].number_of_consumers;
        let counts = if n == 0 { vec![1] } else { vec![n - 1, n + 1] };
        for count in counts {
            out.push(variant(
                7,
                format!("mutateOperandNumberOfConsumersTest: operand {operand} numberOfConsumers = {count}"),
                model,
                |m| m.operands[operand].number_of_consumers = count,
            ));
        }
    }
    out
}

/// BI-08: a copy of an operation appended at the end that writes one of its outputs again
/// (its other outputs go to fresh temporaries, its inputs get one more consumer each).
pub fn add_writer(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        for bad in 0..model.operations[operation].outputs.len() {
            let target = model.operations[operation].outputs[bad];
            let name =
                format!("mutateOperandAddWriterTest: operation {operation} writes to {target}");
            out.push(variant(8, name, model, |m| {
                let mut copy = m.operations[operation].clone();
                for &input in &copy.inputs {
                    if let Some(o) = m.operands.get_mut(input as usize) {
                        o.number_of_consumers += 1;
                    }
                }
                for k in 0..copy.outputs.len() {
                    if k == bad {
                        continue;
                    }
                    let Some(mut fresh) = m.operands.get(copy.outputs[k] as usize).cloned() else {
                        continue;
                    };
                    fresh.number_of_consumers = 0;
                    if fresh.lifetime == OperandLifeTime::ModelOutput.raw() {
                        fresh.lifetime = OperandLifeTime::TemporaryVariable.raw();
                    }
                    m.operands.push(fresh);
                    copy.outputs[k] = (m.operands.len() - 1) as u32;
                }
                m.operations.push(copy);
            }));
        }
    }
    out
}

/// BI-09: an operation's output that others read redirected to a fresh unread temporary, so
/// the original operand loses its only writer.
pub fn remove_write(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        for k in 0..model.operations[operation].outputs.len() {
            let target = model.operations[operation].outputs[k];
            let Some(operand) = model.operands.get(target as usize) else {
                continue;
            };
            if operand.number_of_consumers == 0 {
                continue;
            }
            let name =
                format!("mutateOperationRemoveWriteTest: operation {operation} writes to {target}");
            out.push(variant(9, name, model, |m| {
                let mut fresh = m.operands[target as usize].clone();
                fresh.number_of_consumers = 0;
                if fresh.lifetime == OperandLifeTime::ModelOutput.raw() {
                    fresh.lifetime = OperandLifeTime::TemporaryVariable.raw();
                }
                m.operands.push(fresh);
                m.operations[operation].outputs[k] = (m.operands.len() - 1) as u32;
            }));
        }
    }
    out
}

/// BI-10: a reader of another operation's output moved to the front, and a writer of an
/// operand others read moved to the end.
pub fn execution_order(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    let lifetime = |i: u32| model.operands.get(i as usize).map(|o| o.lifetime);
    for operation in 0..model.operations.len() {
        let op = &model.operations[operation];
        let reads_written = op.inputs.iter().any(|&i| {
            lifetime(i) == Some(OperandLifeTime::TemporaryVariable.raw())
                || lifetime(i) == Some(OperandLifeTime::ModelOutput.raw())
        });
        if reads_written {
            out.push(variant(
                10,
                format!("mutateExecutionOrderTest: operation {operation} is a reader"),
                model,
                |m| m.operations[..=operation].rotate_right(1),
            ));
        }
        let writes_read = op.outputs.iter().any(|&o| {
            model
                .operands
                .get(o as usize)
                .is_some_and(|x| x.number_of_consumers > 0)
        });
        if writes_read {
            out.push(variant(
                10,
                format!("mutateExecutionOrderTest: operation {operation} is a writer"),
                model,
                |m| m.operations[operation..].rotate_left(1),
            ));
        }
    }
    out
}

/// The fixed three-operation ADD cycle of VTS's CycleTest:
/// `3 = ADD(0, 4, 2)`, `4 = ADD(1, 3, 2)`, `5 = ADD(4, 0, 2)` with inputs 0, 1, 2 and output 5.
pub fn cycle_model() -> Model {
    let tensor = |consumers, lifetime| Operand {
        number_of_consumers: consumers,
        ..Operand::new(OperandType::TensorFloat32, &[1], lifetime)
    };
    let mut act = Operand::new(OperandType::Int32, &[], OperandLifeTime::ModelInput);
    act.number_of_consumers = 3;
    let add = |inputs: [u32; 3], output: u32| Operation {
        operation_type: OperationType::Add.raw(),
        inputs: inputs.to_vec(),
        outputs: vec![output],
    };
    Model {
        operands: vec![
            tensor(2, OperandLifeTime::ModelInput),
            tensor(1, OperandLifeTime::ModelInput),
            act,
            tensor(1, OperandLifeTime::TemporaryVariable),
            tensor(2, OperandLifeTime::TemporaryVariable),
            tensor(0, OperandLifeTime::ModelOutput),
        ],
        operations: vec![add([0, 4, 2], 3), add([1, 3, 2], 4), add([4, 0, 2], 5)],
        input_indexes: vec![0, 1, 2],
        output_indexes: vec![5],
        operand_values: Vec::new(),
        pools: Vec::new(),
        ..Model::default()
    }
}

/// BI-11 on a given model: each operation made to read its own first output, and, where one
/// operation feeds a later one, the earlier one made to read the later one's output (a
/// two-operation cycle). Consumer counts are kept exact, so only the graph walk can tell.
/// The fixed VTS cycle is [`cycle_model`].
pub fn cycles(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    let rewire = |m: &mut Model, operation: usize, input: usize, source: u32| {
        m.operations[operation].inputs[input] = source;
        count_consumers(m);
    };
    for operation in 0..model.operations.len() {
        let op = &model.operations[operation];
        if op.inputs.is_empty() {
            continue;
        }
        if let Some(&own) = op.outputs.first() {
            out.push(variant(
                11,
                format!("cycle: operation {operation} input 0 reads its own output {own}"),
                model,
                |m| rewire(m, operation, 0, own),
            ));
        }
        for later in operation + 1..model.operations.len() {
            let reader = &model.operations[later];
            let feeds = op.outputs.iter().any(|o| reader.inputs.contains(o));
            if let (true, Some(&back)) = (feeds, reader.outputs.first()) {
                out.push(variant(
                    11,
                    format!(
                        "cycle: operation {operation} input 0 reads operand {back} of operation {later}, which reads operation {operation}"
                    ),
                    model,
                    |m| rewire(m, operation, 0, back),
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------- operations (BI-12…BI-16)

/// VTS `mutateOperand`: retype an operand and adjust dimensions, scale and zero point so the
/// operand on its own stays valid; only its use by the operation is wrong.
fn retype(operand: &mut Operand, ty: OperandType) {
    let old = operand.clone();
    let tensor_dims = if old.dimensions.is_empty() {
        vec![1]
    } else {
        old.dimensions.clone()
    };
    operand.operand_type = ty.raw();
    match ty {
        OperandType::Float32 | OperandType::Int32 | OperandType::UInt32 => {
            operand.dimensions = Vec::new();
            operand.scale = 0.0;
            operand.zero_point = 0;
        }
        OperandType::TensorFloat32 => {
            operand.dimensions = tensor_dims;
            operand.scale = 0.0;
            operand.zero_point = 0;
        }
        OperandType::TensorInt32 => {
            operand.dimensions = tensor_dims;
            operand.zero_point = 0;
        }
        OperandType::TensorQuant8Asymm => {
            operand.dimensions = tensor_dims;
            operand.scale = if old.scale != 0.0 { old.scale } else { 1.0 };
        }
        _ => {}
    }
}

/// BI-12: each operand retyped to every other non-OEM type (LSH_PROJECTION's input 1, which
/// accepts any type, is skipped).
pub fn operation_operand_type(model: &Model) -> Vec<ModelVariant> {
    let lsh = OperationType::LshProjection.raw();
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        let skip = model
            .operations
            .iter()
            .any(|op| op.operation_type == lsh && op.inputs.get(1) == Some(&(operand as u32)));
        if skip {
            continue;
        }
        // The VTS list: the NNAPI 1.0 types. A later type on a 1.0 operation is a signature
        // of a later version (valid, unsupported), not a malformed model.
        for &ty in OperandType::ALL {
            if ty.is_oem() || !ty.in_nnapi_1_0() || ty.raw() == model.operands[operand].operand_type
            {
                continue;
            }
            out.push(variant(
                12,
                format!("mutateOperationOperandTypeTest: operand {operand} set to type {ty}"),
                model,
                |m| retype(&mut m.operands[operand], ty),
            ));
        }
    }
    out
}

/// The AIDL VTS's `mutateOperand`: like [`retype`], over every AIDL operand type. Scalars
/// (BOOL and FLOAT16 too) lose dimensions, scale and zero point; TENSOR_BOOL8 and
/// TENSOR_FLOAT16 are retyped as TENSOR_FLOAT32 is; the symmetric and 16-bit quantized tensors
/// as TENSOR_QUANT8_ASYMM (nonzero scale, zero point kept); TENSOR_QUANT8_SYMM_PER_CHANNEL gets
/// scale 0, zero point 0 and channel 0 quantized with scale 1 per element of dimension 0;
/// TENSOR_QUANT8_ASYMM_SIGNED and SUBGRAPH change the type alone. Channel quantization the
/// operand had is kept (VTS copies the operand and never clears it).
fn retype_aidl(operand: &mut Operand, ty: OperandType) {
    use OperandType::*;
    let old = operand.clone();
    let tensor_dims = if old.dimensions.is_empty() {
        vec![1]
    } else {
        old.dimensions.clone()
    };
    operand.operand_type = ty.raw();
    match ty {
        Float16 | Float32 | Int32 | UInt32 | Bool => {
            operand.dimensions = Vec::new();
            operand.scale = 0.0;
            operand.zero_point = 0;
        }
        TensorBool8 | TensorFloat16 | TensorFloat32 => {
            operand.dimensions = tensor_dims;
            operand.scale = 0.0;
            operand.zero_point = 0;
        }
        TensorInt32 => {
            operand.dimensions = tensor_dims;
            operand.zero_point = 0;
        }
        TensorQuant8Asymm | TensorQuant8Symm | TensorQuant16Asymm | TensorQuant16Symm => {
            operand.dimensions = tensor_dims;
            operand.scale = if old.scale != 0.0 { old.scale } else { 1.0 };
        }
        TensorQuant8SymmPerChannel => {
            operand.dimensions = tensor_dims;
            operand.scale = 0.0;
            operand.zero_point = 0;
            let channels = old.dimensions.first().copied().unwrap_or(0) as usize;
            operand.channel_quant = Some(nnhal::hal::ChannelQuant {
                scales: vec![1.0; channels],
                channel_dim: 0,
            });
        }
        _ => {}
    }
}

/// BI-12 as the AIDL VTS has it (`mutateOperationOperandTypeTest`): each operand retyped to
/// every other AIDL operand type (every type but the OEM ones, which the AIDL interface does
/// not have) with `mutateOperand`'s adjustments (`retype_aidl`), minus
/// `mutateOperationOperandTypeSkip`: LSH_PROJECTION's input 1; with a CAST, ARGMAX or ARGMIN
/// anywhere in the model, any operand to a float, int32 or 8-bit asymmetric tensor; QUANTIZE's
/// input to a float and output to an 8-bit asymmetric tensor; RANDOM_MULTINOMIAL's input to
/// a float tensor; DEQUANTIZE's input to an 8-bit quantized and output to a float tensor; a
/// convolution filter to TENSOR_QUANT8_ASYMM or per-channel; AXIS_ALIGNED_BBOX_TRANSFORM's
/// input 1 to an 8-bit asymmetric tensor; RANK's input to any tensor.
pub fn operation_operand_type_aidl(model: &Model) -> Vec<ModelVariant> {
    use OperandType::*;
    use OperationType::*;
    let skip = |operand: usize, ty: OperandType| -> bool {
        let o = operand as u32;
        if ty.raw() == model.operands[operand].operand_type {
            return true;
        }
        model.operations.iter().any(|op| {
            let input = |k: usize| op.inputs.get(k) == Some(&o);
            let output0 = op.outputs.first() == Some(&o);
            let float = matches!(ty, TensorFloat16 | TensorFloat32);
            let asymm8 = matches!(ty, TensorQuant8Asymm | TensorQuant8AsymmSigned);
            match OperationType::from_raw(op.operation_type) {
                Some(LshProjection) => input(1),
                Some(Cast | Argmax | Argmin) => float || asymm8 || ty == TensorInt32,
                Some(Quantize) => (input(0) && float) || (output0 && asymm8),
                Some(RandomMultinomial) => input(0) && float,
                Some(Dequantize) => {
                    (input(0)
                        && (asymm8 || matches!(ty, TensorQuant8Symm | TensorQuant8SymmPerChannel)))
                        || (output0 && float)
                }
                Some(TransposeConv2d | GroupedConv2d | DepthwiseConv2d | Conv2d) => {
                    input(1) && matches!(ty, TensorQuant8Asymm | TensorQuant8SymmPerChannel)
                }
                Some(AxisAlignedBboxTransform) => input(1) && asymm8,
                Some(Rank) => input(0) && ty.is_tensor(),
                _ => false,
            }
        })
    };
    let mut out = Vec::new();
    for operand in 0..model.operands.len() {
        for &ty in OperandType::ALL {
            if ty.is_oem() || skip(operand, ty) {
                continue;
            }
            out.push(variant(
                12,
                format!("mutateOperationOperandTypeTest: operand {operand} set to type {ty}"),
                model,
                |m| retype_aidl(&mut m.operands[operand], ty),
            ));
        }
    }
    out
}

/// BI-13: each operation's type set to values outside the enum (VTS's four bounds and the
/// 8.1 test's 0xDEADBEEF).
pub fn operation_type(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        // The 1.0 VTS values, except that 29 (ARGMAX in the AIDL interface) becomes the first
        // value past the AIDL range, RANK + 1.
        let past_aidl = OperationType::Rank.raw() + 1;
        for raw in [-1, past_aidl, 9999, 10001, 0xDEAD_BEEF_u32 as i32] {
            out.push(variant(
                13,
                format!("mutateOperationTypeTest: operation {operation} set to value {raw}"),
                model,
                |m| m.operations[operation].operation_type = raw,
            ));
        }
    }
    out
}

/// BI-13 as the AIDL VTS has it: the values just outside the AIDL `OperationType` range (-1
/// and RANK + 1).
pub fn operation_type_aidl(model: &Model) -> Vec<ModelVariant> {
    let aidl = [-1, OperationType::Rank.raw() + 1];
    operation_type(model)
        .into_iter()
        .filter(|v| {
            aidl.iter()
                .any(|raw| v.name.ends_with(&format!(" set to value {raw}")))
        })
        .collect()
}

/// BI-14: each operation input index set to `operands.len()`.
pub fn operation_input_index(model: &Model) -> Vec<ModelVariant> {
    let invalid = model.operands.len() as u32;
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        for input in 0..model.operations[operation].inputs.len() {
            out.push(variant(
                14,
                format!(
                    "mutateOperationInputOperandIndexTest: operation {operation} input {input}"
                ),
                model,
                |m| m.operations[operation].inputs[input] = invalid,
            ));
        }
    }
    out
}

/// BI-15: each operation output index set to `operands.len()`.
pub fn operation_output_index(model: &Model) -> Vec<ModelVariant> {
    let invalid = model.operands.len() as u32;
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        for output in 0..model.operations[operation].outputs.len() {
            out.push(variant(
                15,
                format!(
                    "mutateOperationOutputOperandIndexTest: operation {operation} output {output}"
                ),
                model,
                |m| m.operations[operation].outputs[output] = invalid,
            ));
        }
    }
    out
}

/// BI-16: each entry of the model's input and output lists set to `operands.len()`.
pub fn model_io_index(model: &Model) -> Vec<ModelVariant> {
    let invalid = model.operands.len() as u32;
    let mut out = Vec::new();
    for k in 0..model.input_indexes.len() {
        out.push(variant(
            16,
            format!("model inputIndexes[{k}] set to {invalid}"),
            model,
            |m| m.input_indexes[k] = invalid,
        ));
    }
    for k in 0..model.output_indexes.len() {
        out.push(variant(
            16,
            format!("model outputIndexes[{k}] set to {invalid}"),
            model,
            |m| m.output_indexes[k] = invalid,
        ));
    }
    out
}

// ---------------------------------------------------------------- removals and additions

/// VTS `removeValueAndDecrementGreaterValues`: removes every occurrence of `value`. Its
/// "decrement" step post-decrements a copy and so changes nothing; the stale indexes it leaves
/// are part of what the class tests.
fn remove_value(list: &mut Vec<u32>, value: u32) {
    list.retain(|&v| v != value);
}

/// BI-17: each operand deleted from the operand list and every reference to it dropped.
pub fn remove_operand(model: &Model) -> Vec<ModelVariant> {
    (0..model.operands.len())
        .map(|operand| {
            variant(
                17,
                format!("removeOperandTest: operand {operand}"),
                model,
                |m| {
                    m.operands.remove(operand);
                    let value = operand as u32;
                    for op in &mut m.operations {
                        remove_value(&mut op.inputs, value);
                        remove_value(&mut op.outputs, value);
                    }
                    remove_value(&mut m.input_indexes, value);
                    remove_value(&mut m.output_indexes, value);
                },
            )
        })
        .collect()
}

/// BI-17 as the AIDL VTS has it (`removeOperandSkip`): operands no operation reads are
/// skipped (removing them changes nothing), and so are the outputs of SPLIT and of the
/// sequence RNN/LSTM operations, whose output counts vary.
pub fn remove_operand_aidl(model: &Model) -> Vec<ModelVariant> {
    use OperationType::*;
    let mut consumers = vec![0u32; model.operands.len()];
    for op in &model.operations {
        for &i in &op.inputs {
            if let Some(c) = consumers.get_mut(i as usize) {
                *c += 1;
            }
        }
    }
    let variable_outputs = [
        Split,
        UnidirectionalSequenceLstm,
        UnidirectionalSequenceRnn,
        BidirectionalSequenceLstm,
        BidirectionalSequenceRnn,
    ]
    .map(OperationType::raw);
    remove_operand(model)
        .into_iter()
        .enumerate()
        .filter(|&(operand, _)| {
            consumers.get(operand).is_some_and(|&c| c > 0)
                && !model.operations.iter().any(|op| {
                    variable_outputs.contains(&op.operation_type)
                        && op.outputs.contains(&(operand as u32))
                })
        })
        .map(|(_, v)| v)
        .collect()
}

/// BI-18: each operation deleted (its inputs lose a consumer).
pub fn remove_operation(model: &Model) -> Vec<ModelVariant> {
    (0..model.operations.len())
        .map(|operation| {
            variant(
                18,
                format!("removeOperationTest: operation {operation}"),
                model,
                |m| {
                    for input in m.operations[operation].inputs.clone() {
                        if let Some(o) = m.operands.get_mut(input as usize) {
                            o.number_of_consumers = o.number_of_consumers.saturating_sub(1);
                        }
                    }
                    m.operations.remove(operation);
                },
            )
        })
        .collect()
}

/// BI-19: each operation input removed (consumer count fixed). CONCATENATION inputs other than
/// the axis are skipped when there are more than two, since dropping one leaves a valid model.
pub fn remove_operation_input(model: &Model) -> Vec<ModelVariant> {
    let concat = OperationType::Concatenation.raw();
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        let op = &model.operations[operation];
        for input in 0..op.inputs.len() {
            if op.operation_type == concat && op.inputs.len() > 2 && input != op.inputs.len() - 1 {
                continue;
            }
            out.push(variant(
                19,
                format!("removeOperationInputTest: operation {operation}, input {input}"),
                model,
                |m| {
                    let operand = m.operations[operation].inputs.remove(input);
                    if let Some(o) = m.operands.get_mut(operand as usize) {
                        o.number_of_consumers = o.number_of_consumers.saturating_sub(1);
                    }
                },
            ));
        }
    }
    out
}

/// BI-19 as the AIDL VTS has it (`removeOperationInputSkip`): besides CONCATENATION's
/// tensors, the optional trailing inputs later versions added are skipped (the layout of the
/// convolutions, pools, DEPTH_TO_SPACE / SPACE_TO_DEPTH and the batch/space operations, the
/// resize coordinate flags, the normalisations' axis), since dropping one leaves a valid model.
pub fn remove_operation_input_aidl(model: &Model) -> Vec<ModelVariant> {
    use OperationType::*;
    let skip = |op: &Operation, input: usize| -> bool {
        let n = op.inputs.len();
        match OperationType::from_raw(op.operation_type) {
            Some(Concatenation) => n > 2 && input != n - 1,
            Some(DepthwiseConv2d) => (n, input) == (12, 11) || (n, input) == (9, 8),
            Some(Conv2d | AveragePool2d | MaxPool2d | L2Pool2d) => {
                (n, input) == (11, 10) || (n, input) == (8, 7)
            }
            Some(ResizeBilinear) => n >= 4 && input >= 3,
            Some(ResizeNearestNeighbor) => n >= 5 && input >= 3,
            Some(SpaceToDepth | DepthToSpace | BatchToSpaceNd) => (n, input) == (3, 2),
            Some(SpaceToBatchNd) => (n, input) == (4, 3),
            Some(L2Normalization) => (n, input) == (2, 1),
            Some(LocalResponseNormalization) => (n, input) == (6, 5),
            Some(Softmax) => (n, input) == (3, 2),
            _ => false,
        }
    };
    let mut out = Vec::new();
    for (operation, op) in model.operations.iter().enumerate() {
        for input in 0..op.inputs.len() {
            if skip(op, input) {
                continue;
            }
            out.push(variant(
                19,
                format!("removeOperationInputTest: operation {operation}, input {input}"),
                model,
                |m| {
                    let operand = m.operations[operation].inputs.remove(input);
                    if let Some(o) = m.operands.get_mut(operand as usize) {
                        o.number_of_consumers = o.number_of_consumers.saturating_sub(1);
                    }
                },
            ));
        }
    }
    out
}

/// BI-20: each operation output removed.
pub fn remove_operation_output(model: &Model) -> Vec<ModelVariant> {
    let mut out = Vec::new();
    for operation in 0..model.operations.len() {
        for output in 0..model.operations[operation].outputs.len() {
            out.push(variant(
                20,
                format!("removeOperationOutputTest: operation {operation}, output {output}"),
                model,
                |m| {
                    m.operations[operation].outputs.remove(output);
                },
            ));
        }
    }
    out
}

/// VTS `addOperand(model, lifetime)`: an INT32 scalar with one consumer (even as an output).
fn push_int32_operand(model: &mut Model, lifetime: OperandLifeTime) -> u32 {
    let mut operand = Operand::new(OperandType::Int32, &[], lifetime);
    operand.number_of_consumers = 1;
    model.operands.push(operand);
    (model.operands.len() - 1) as u32
}

/// Operations the AIDL VTS leaves out of addOperationInputTest: one more INT32 input can be
/// their optional `axis` (SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION) or a
/// valid later form (the resize operations below 6 inputs).
fn add_operation_input_skipped(op: &Operation) -> bool {
    let n = op.inputs.len();
    match OperationType::from_raw(op.operation_type) {
        Some(OperationType::L2Normalization) => n == 1,
        Some(OperationType::LocalResponseNormalization) => n == 5,
        Some(OperationType::Softmax) => n == 2,
        Some(OperationType::ResizeBilinear | OperationType::ResizeNearestNeighbor) => n < 6,
        _ => false,
    }
}

/// BI-21: each operation given an extra INT32 MODEL_INPUT input (also added to the inputs).
pub fn add_operation_input(model: &Model) -> Vec<ModelVariant> {
    (0..model.operations.len())
        .filter(|&operation| !add_operation_input_skipped(&model.operations[operation]))
        .map(|operation| {
            variant(
                21,
                format!("addOperationInputTest: operation {operation}"),
                model,
                |m| {
                    let index = push_int32_operand(m, OperandLifeTime::ModelInput);
                    m.operations[operation].inputs.push(index);
                    m.input_indexes.push(index);
                },
            )
        })
        .collect()
}

/// BI-22: each operation given an extra INT32 MODEL_OUTPUT output (also added to the outputs).
pub fn add_operation_output(model: &Model) -> Vec<ModelVariant> {
    (0..model.operations.len())
        .map(|operation| {
            variant(
                22,
                format!("addOperationOutputTest: operation {operation}"),
                model,
                |m| {
                    let index = push_int32_operand(m, OperandLifeTime::ModelOutput);
                    m.operations[operation].outputs.push(index);
                    m.output_indexes.push(index);
                },
            )
        })
        .collect()
}

// ---------------------------------------------------------------- requests (BI-23…BI-26)

fn request_variant(
    bi: u8,
    name: String,
    build: RequestBuilder,
    change: impl FnOnce(&mut Request),
) -> RequestVariant {
    let mut request = build();
    change(&mut request);
    RequestVariant {
        bi: Bi(bi),
        name,
        request,
    }
}

/// BI-23: each request input removed.
pub fn remove_request_input(_model: &Model, build: RequestBuilder) -> Vec<RequestVariant> {
    let n = build().inputs.len();
    (0..n)
        .map(|input| {
            request_variant(23, format!("removeInputTest: input {input}"), build, |r| {
                r.inputs.remove(input);
            })
        })
        .collect()
}

/// BI-24: each request output removed.
pub fn remove_request_output(_model: &Model, build: RequestBuilder) -> Vec<RequestVariant> {
    let n = build().outputs.len();
    (0..n)
        .map(|output| {
            request_variant(
                24,
                format!("removeOutputTest: output {output}"),
                build,
                |r| {
                    r.outputs.remove(output);
                },
            )
        })
        .collect()
}

/// Arguments that carry data: (is input, position). Omitted inputs are left alone; changing
/// them is a different class (BI-49).
fn present_arguments(request: &Request) -> Vec<(bool, usize)> {
    let inputs = request
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.has_no_value)
        .map(|(i, _)| (true, i));
    let outputs = request
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.has_no_value)
        .map(|(i, _)| (false, i));
    inputs.chain(outputs).collect()
}

fn argument(request: &mut Request, input: bool, k: usize) -> &mut nnhal::hal::RequestArgument {
    if input {
        &mut request.inputs[k]
    } else {
        &mut request.outputs[k]
    }
}

fn side(input: bool) -> &'static str {
    if input {
        "input"
    } else {
        "output"
    }
}

/// BI-25: each argument's pool index set to the number of pools.
pub fn request_pool_index(_model: &Model, build: RequestBuilder) -> Vec<RequestVariant> {
    let base = build();
    let pools = base.pools.len() as u32;
    present_arguments(&base)
        .into_iter()
        .map(|(input, k)| {
            request_variant(
                25,
                format!("{} {k} poolIndex set to {pools}", side(input)),
                build,
                |r| argument(r, input, k).location.pool_index = pools,
            )
        })
        .collect()
}

/// BI-26: each argument of a rank-4 operand given eight dimensions (its own four, twice).
pub fn request_dims(model: &Model, build: RequestBuilder) -> Vec<RequestVariant> {
    let base = build();
    present_arguments(&base)
        .into_iter()
        .filter_map(|(input, k)| {
            let list = if input {
                &model.input_indexes
            } else {
                &model.output_indexes
            };
            let operand = model.operands.get(*list.get(k)? as usize)?;
            if operand.dimensions.len() != 4 {
                return None;
            }
            let dims = [operand.dimensions.clone(), operand.dimensions.clone()].concat();
            Some(request_variant(
                26,
                format!(
                    "{} {k} given dimensions {dims:?} for a rank-4 operand",
                    side(input)
                ),
                build,
                |r| argument(r, input, k).dimensions = dims,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::bundled_dir;

    fn model(name: &str) -> Model {
        let v = Vector::from_file(&bundled_dir().join(format!("{name}.json"))).unwrap();
        to_model(&v, ConstantMode::Copy).unwrap()
    }

    #[test]
    fn every_variant_names_its_class() {
        let m = inputs_as_internal(&model("conv_float"));
        for mutator in MODEL_MUTATORS {
            let variants = (mutator.mutate)(&m);
            assert!(!variants.is_empty(), "{} generated nothing", mutator.bi);
            assert!(variants.iter().all(|v| v.bi == mutator.bi));
        }
        assert_eq!(MODEL_MUTATORS.len(), 22);
        assert_eq!(REQUEST_MUTATORS.len(), 4);
    }

    #[test]
    fn remove_operand_leaves_stale_indexes() {
        let m = model("add");
        let variants = remove_operand(&m);
        let first = &variants[0].model;
        assert_eq!(first.operands.len(), m.operands.len() - 1);
        // Operand 0 is gone from ADD's inputs; the others keep their old numbers.
        let expected: Vec<u32> = m.operations[0]
            .inputs
            .iter()
            .copied()
            .filter(|&i| i != 0)
            .collect();
        assert_eq!(first.operations[0].inputs, expected);
    }

    #[test]
    fn execution_order_moves_readers_front_and_writers_back() {
        let m = inputs_as_internal(&model("add"));
        let n = m.operations.len();
        let variants = execution_order(&m);
        let reader = variants
            .iter()
            .find(|v| v.name.ends_with("is a reader"))
            .unwrap();
        assert_eq!(reader.model.operations[0], m.operations[n - 1]);
        let writer = variants
            .iter()
            .find(|v| v.name.ends_with("is a writer"))
            .unwrap();
        assert_eq!(writer.model.operations[n - 1], m.operations[0]);
    }

    #[test]
    fn cycle_model_is_the_vts_one() {
        let m = cycle_model();
        assert_eq!(m.operations.len(), 3);
        let mut counted = m.clone();
        count_consumers(&mut counted);
        let a: Vec<u32> = m.operands.iter().map(|o| o.number_of_consumers).collect();
        let b: Vec<u32> = counted
            .operands
            .iter()
            .map(|o| o.number_of_consumers)
            .collect();
        assert_eq!(a, b);
    }
}
