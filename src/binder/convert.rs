//! Conversions between the AIDL parcelables of `android.hardware.neuralnetworks` (version 1)
//! and the canonical NNAPI 1.0 types of `nnhal-hal`.
//!
//! Direction AIDL → canonical (the service side) treats every field as hostile: enumerations
//! are carried as their raw `i32` so that validation, not the decoder, reports values outside
//! NNAPI 1.0; signed 32/64-bit counts, indexes, offsets and lengths are narrowed with a range
//! check and a value that does not fit is `INVALID_ARGUMENT`, never truncated. Referenced
//! subgraphs, per-channel parameters and the relaxed flag are carried for validation;
//! extension data is refused (no extension is declared); hardware buffers and driver-managed
//! buffer tokens become an unsupported pool kind.
//!
//! Direction canonical → AIDL serves the client (models, requests, pools) and the service's
//! replies (capabilities, output shapes, status codes).

use super::aidl::android::hardware::common::{
    Ashmem::Ashmem as AidlAshmem, MappableFile::MappableFile as AidlMappableFile,
};
use super::aidl::android::hardware::neuralnetworks::{
    Capabilities::Capabilities as AidlCapabilities, DataLocation::DataLocation as AidlDataLocation,
    ErrorStatus::ErrorStatus as AidlErrorStatus, ExecutionResult::ExecutionResult as AidlResult,
    Memory::Memory as AidlMemory, Model::Model as AidlModel, Operand::Operand as AidlOperand,
    OperandExtraParams::OperandExtraParams as AidlExtraParams,
    OperandLifeTime::OperandLifeTime as AidlLifeTime,
    OperandPerformance::OperandPerformance as AidlOperandPerformance,
    OperandType::OperandType as AidlOperandType, Operation::Operation as AidlOperation,
    OperationType::OperationType as AidlOperationType, OutputShape::OutputShape as AidlOutputShape,
    PerformanceInfo::PerformanceInfo as AidlPerformanceInfo, Request::Request as AidlRequest,
    RequestArgument::RequestArgument as AidlRequestArgument,
    RequestMemoryPool::RequestMemoryPool as AidlRequestMemoryPool,
    Subgraph::Subgraph as AidlSubgraph,
    SymmPerChannelQuantParams::SymmPerChannelQuantParams as AidlChannelQuant,
    Timing::Timing as AidlTiming,
};
use super::ipc::ParcelFileDescriptor;
use crate::driver::ExecutionResult;
use nnhal_hal::{
    Capabilities, ChannelQuant, DataLocation, ErrorStatus, HalError, HalResult, Memory, Model,
    Operand, OperandType, Operation, PerformanceInfo, Request, RequestArgument, Subgraph,
};
use std::os::fd::OwnedFd;
use std::sync::Arc;

fn invalid<T>(message: String) -> HalResult<T> {
    Err(HalError::InvalidArgument(message))
}

/// A non-negative `i32` as `u32`.
fn to_u32(value: i32, what: &dyn Fn() -> String) -> HalResult<u32> {
    u32::try_from(value).or_else(|_| invalid(format!("{} is negative ({value})", what())))
}

/// An `i64` that must fit `u32` (offsets and lengths of NNAPI 1.0 data locations).
fn i64_to_u32(value: i64, what: &dyn Fn() -> String) -> HalResult<u32> {
    u32::try_from(value)
        .or_else(|_| invalid(format!("{} = {value} is outside [0, {}]", what(), u32::MAX)))
}

/// A non-negative `i64` as `u64` (pool sizes and file offsets).
fn i64_to_u64(value: i64, what: &dyn Fn() -> String) -> HalResult<u64> {
    u64::try_from(value).or_else(|_| invalid(format!("{} is negative ({value})", what())))
}

fn u32_list(values: &[i32], what: &dyn Fn(usize) -> String) -> HalResult<Vec<u32>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| to_u32(v, &|| what(i)))
        .collect()
}

fn location(loc: &AidlDataLocation, what: &dyn Fn() -> String) -> HalResult<DataLocation> {
    // `padding` extends a region for drivers that read past its end; NNAPI 1.0 has no such
    // notion, but a malformed value is still refused rather than ignored.
    i64_to_u32(loc.padding, &|| format!("{}.padding", what()))?;
    Ok(DataLocation {
        pool_index: to_u32(loc.poolIndex, &|| format!("{}.poolIndex", what()))?,
        offset: i64_to_u32(loc.offset, &|| format!("{}.offset", what()))?,
        length: i64_to_u32(loc.length, &|| format!("{}.length", what()))?,
    })
}

fn dup_fd(pfd: &Option<ParcelFileDescriptor>, what: &str) -> HalResult<Arc<OwnedFd>> {
    let pfd = pfd
        .as_ref()
        .ok_or_else(|| HalError::InvalidArgument(format!("{what}: file descriptor is null")))?;
    // The parcel owns the received fd; the pool needs its own reference that can outlive it.
    let fd = super::ipc::pfd_fd(pfd)
        .try_clone_to_owned()
        .map_err(|e| HalError::GeneralFailure(format!("{what}: cannot duplicate fd: {e}")))?;
    Ok(Arc::new(fd))
}

/// AIDL `Memory` → canonical pool.
pub fn memory_from_aidl(memory: &AidlMemory, what: &str) -> HalResult<Memory> {
    Ok(match memory {
        AidlMemory::Ashmem(a) => Memory::Ashmem {
            fd: dup_fd(&a.fd, what)?,
            size: i64_to_u64(a.size, &|| format!("{what}.ashmem.size"))?,
        },
        AidlMemory::MappableFile(m) => Memory::MappableFile {
            fd: dup_fd(&m.fd, what)?,
            size: i64_to_u64(m.length, &|| format!("{what}.mappableFile.length"))?,
            prot: m.prot,
            offset: i64_to_u64(m.offset, &|| format!("{what}.mappableFile.offset"))?,
        },
        AidlMemory::HardwareBuffer(hb) => {
            // Decoded whatever it describes: which buffers the driver can use (a BLOB with CPU
            // access, on Android) is the pool's validation (nnhal_hal::ahwb).
            let d = &hb.description;
            let dim = |v: i32, field: &str| to_u32(v, &|| format!("{what}.description.{field}"));
            let fds = hb
                .handle
                .fds
                .iter()
                .map(|pfd| {
                    super::ipc::pfd_fd(pfd).try_clone_to_owned().map_err(|e| {
                        HalError::GeneralFailure(format!("{what}: cannot duplicate fd: {e}"))
                    })
                })
                .collect::<HalResult<Vec<_>>>()?;
            Memory::HardwareBuffer(Arc::new(nnhal_hal::ahwb::HardwareBuffer {
                width: dim(d.width, "width")?,
                height: dim(d.height, "height")?,
                layers: dim(d.layers, "layers")?,
                format: d.format.0,
                usage: d.usage.0 as u64,
                stride: dim(d.stride, "stride")?,
                fds,
                ints: hb.handle.ints.clone(),
            }))
        }
    })
}

fn operand_from_aidl(index: usize, operand: &AidlOperand) -> HalResult<Operand> {
    let what = || format!("operand {index}");
    let channel_quant = match &operand.extraParams {
        None => None,
        Some(AidlExtraParams::ChannelQuant(cq)) => Some(ChannelQuant {
            scales: cq.scales.clone(),
            channel_dim: to_u32(cq.channelDim, &|| format!("{}: channelDim", what()))?,
        }),
        // Extension operand data: this driver declares no extension, so no operand can carry it.
        Some(AidlExtraParams::Extension(_)) => {
            return invalid(format!(
                "{}: extension extraParams, but this driver supports no extension",
                what()
            ))
        }
    };
    Ok(Operand {
        operand_type: operand.r#type.0,
        dimensions: u32_list(&operand.dimensions, &|d| {
            format!("{}: dimension {d}", what())
        })?,
        number_of_consumers: 0,
        scale: operand.scale,
        zero_point: operand.zeroPoint,
        lifetime: operand.lifetime.0,
        location: location(&operand.location, &|| format!("{}.location", what()))?,
        channel_quant,
    })
}

fn operation_from_aidl(index: usize, op: &AidlOperation) -> HalResult<Operation> {
    Ok(Operation {
        operation_type: op.r#type.0,
        inputs: u32_list(&op.inputs, &|i| format!("operation {index}: input {i}"))?,
        outputs: u32_list(&op.outputs, &|i| format!("operation {index}: output {i}"))?,
    })
}

/// AIDL `Subgraph` → canonical operands, operations and index lists.
fn subgraph_from_aidl(sub: &AidlSubgraph, what: &str) -> HalResult<Subgraph> {
    let prefix = |m: String| {
        if what.is_empty() {
            m
        } else {
            format!("{what}: {m}")
        }
    };
    let mut operands = sub
        .operands
        .iter()
        .enumerate()
        .map(|(i, o)| operand_from_aidl(i, o))
        .collect::<HalResult<Vec<_>>>()
        .map_err(|e| HalError::InvalidArgument(prefix(e.message().to_string())))?;
    let operations = sub
        .operations
        .iter()
        .enumerate()
        .map(|(i, op)| operation_from_aidl(i, op))
        .collect::<HalResult<Vec<_>>>()
        .map_err(|e| HalError::InvalidArgument(prefix(e.message().to_string())))?;
    // The AIDL interface dropped `numberOfConsumers`; the canonical model keeps the NNAPI 1.0
    // field, derived from the graph (consistent by construction; out-of-range indexes are
    // skipped here and reported by validation).
    nnhal_hal::builder::count_consumers_in(&mut operands, &operations);
    Ok(Subgraph {
        operands,
        operations,
        input_indexes: u32_list(&sub.inputIndexes, &|i| prefix(format!("model input {i}")))?,
        output_indexes: u32_list(&sub.outputIndexes, &|i| prefix(format!("model output {i}")))?,
    })
}

/// AIDL `Model` → canonical model, referenced subgraphs included.
pub fn model_from_aidl(model: &AidlModel) -> HalResult<Model> {
    // `relaxComputationFloat32toFloat16` allows computing float32 with precision and range
    // *as low as* float16; computing in full float32 always satisfies it, so the flag is
    // carried and has no effect on the kernels. `extensionNameToPrefix` only matters to
    // operand and operation types above 0xFFFF, which validation refuses.
    let main = subgraph_from_aidl(&model.main, "")?;
    let referenced = model
        .referenced
        .iter()
        .enumerate()
        .map(|(k, sub)| subgraph_from_aidl(sub, &format!("referenced subgraph {k}")))
        .collect::<HalResult<Vec<_>>>()?;
    let pools = model
        .pools
        .iter()
        .enumerate()
        .map(|(i, m)| memory_from_aidl(m, &format!("model pool {i}")))
        .collect::<HalResult<Vec<_>>>()?;
    Ok(Model {
        operands: main.operands,
        operations: main.operations,
        input_indexes: main.input_indexes,
        output_indexes: main.output_indexes,
        operand_values: model.operandValues.clone(),
        pools,
        referenced,
        relax_computation_float32_to_float16: model.relaxComputationFloat32toFloat16,
    })
}

fn argument_from_aidl(arg: &AidlRequestArgument, what: &str) -> HalResult<RequestArgument> {
    Ok(RequestArgument {
        has_no_value: arg.hasNoValue,
        location: location(&arg.location, &|| format!("{what}.location"))?,
        dimensions: u32_list(&arg.dimensions, &|d| format!("{what}: dimension {d}"))?,
    })
}

/// AIDL `Request` → canonical request. A pool given as a driver-managed buffer token becomes
/// an unsupported pool: this driver never hands out such buffers, so validation refuses it.
pub fn request_from_aidl(request: &AidlRequest) -> HalResult<Request> {
    let inputs = request
        .inputs
        .iter()
        .enumerate()
        .map(|(i, a)| argument_from_aidl(a, &format!("request input {i}")))
        .collect::<HalResult<Vec<_>>>()?;
    let outputs = request
        .outputs
        .iter()
        .enumerate()
        .map(|(i, a)| argument_from_aidl(a, &format!("request output {i}")))
        .collect::<HalResult<Vec<_>>>()?;
    let pools = request
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            AidlRequestMemoryPool::Pool(m) => memory_from_aidl(m, &format!("request pool {i}")),
            AidlRequestMemoryPool::Token(t) => Ok(Memory::Unsupported(format!(
                "driver-managed buffer (token {t})"
            ))),
        })
        .collect::<HalResult<Vec<_>>>()?;
    Ok(Request {
        inputs,
        outputs,
        pools,
    })
}

/// Performance of operands and operations this driver does not run: the largest finite
/// value, which the runtime reads as "never pick this device for it" and which is still > 0.
pub const NO_PERFORMANCE: PerformanceInfo = PerformanceInfo {
    exec_time: f32::MAX,
    power_usage: f32::MAX,
};

fn perf_to_aidl(p: PerformanceInfo) -> AidlPerformanceInfo {
    AidlPerformanceInfo {
        execTime: p.exec_time,
        powerUsage: p.power_usage,
    }
}

fn perf_from_aidl(p: &AidlPerformanceInfo) -> PerformanceInfo {
    PerformanceInfo {
        exec_time: p.execTime,
        power_usage: p.powerUsage,
    }
}

/// The six NNAPI 1.0 operand types, sorted by value (the AIDL table must be sorted), with the
/// performance this driver reports for each: quantized tensors use the quantized figure,
/// everything else the float32 figure (as the NNAPI 1.0 → 1.2 capability upgrade does).
fn operand_performance(caps: &Capabilities) -> Vec<(OperandType, PerformanceInfo)> {
    [
        OperandType::Float32,
        OperandType::Int32,
        OperandType::UInt32,
        OperandType::TensorFloat32,
        OperandType::TensorInt32,
        OperandType::TensorQuant8Asymm,
    ]
    .into_iter()
    .map(|t| {
        let perf = if t == OperandType::TensorQuant8Asymm {
            caps.quantized8_performance
        } else {
            caps.float32_performance
        };
        (t, perf)
    })
    .collect()
}

/// Canonical capabilities → AIDL. Every number is > 0: relaxed float32 runs at float32 speed
/// (it is computed in float32); IF and WHILE run their subgraphs' plans on the same kernels,
/// so they report the float32 figure too.
pub fn capabilities_to_aidl(caps: &Capabilities) -> AidlCapabilities {
    AidlCapabilities {
        relaxedFloat32toFloat16PerformanceScalar: perf_to_aidl(caps.float32_performance),
        relaxedFloat32toFloat16PerformanceTensor: perf_to_aidl(caps.float32_performance),
        operandPerformance: operand_performance(caps)
            .into_iter()
            .map(|(t, p)| AidlOperandPerformance {
                r#type: AidlOperandType(t.raw()),
                info: perf_to_aidl(p),
            })
            .collect(),
        ifPerformance: perf_to_aidl(caps.float32_performance),
        whilePerformance: perf_to_aidl(caps.float32_performance),
    }
}

/// Every figure of an AIDL `Capabilities`, in canonical units.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCapabilities {
    pub relaxed_float32_to_float16_scalar: PerformanceInfo,
    pub relaxed_float32_to_float16_tensor: PerformanceInfo,
    /// (raw `OperandType`, performance), as reported.
    pub operand_performance: Vec<(i32, PerformanceInfo)>,
    pub if_performance: PerformanceInfo,
    pub while_performance: PerformanceInfo,
}

impl DeviceCapabilities {
    /// The entry for `ty`; [`NO_PERFORMANCE`] when the table has none (the AIDL convention).
    pub fn operand(&self, ty: OperandType) -> PerformanceInfo {
        self.operand_performance
            .iter()
            .find(|(t, _)| *t == ty.raw())
            .map_or(NO_PERFORMANCE, |(_, p)| *p)
    }

    /// The NNAPI 1.0 view: float32 from `TENSOR_FLOAT32`, quantized from
    /// `TENSOR_QUANT8_ASYMM`.
    pub fn to_canonical(&self) -> Capabilities {
        Capabilities {
            float32_performance: self.operand(OperandType::TensorFloat32),
            quantized8_performance: self.operand(OperandType::TensorQuant8Asymm),
        }
    }
}

pub fn capabilities_from_aidl(caps: &AidlCapabilities) -> DeviceCapabilities {
    DeviceCapabilities {
        relaxed_float32_to_float16_scalar: perf_from_aidl(
            &caps.relaxedFloat32toFloat16PerformanceScalar,
        ),
        relaxed_float32_to_float16_tensor: perf_from_aidl(
            &caps.relaxedFloat32toFloat16PerformanceTensor,
        ),
        operand_performance: caps
            .operandPerformance
            .iter()
            .map(|p| (p.r#type.0, perf_from_aidl(&p.info)))
            .collect(),
        if_performance: perf_from_aidl(&caps.ifPerformance),
        while_performance: perf_from_aidl(&caps.whilePerformance),
    }
}

pub fn error_status_to_aidl(status: ErrorStatus) -> AidlErrorStatus {
    AidlErrorStatus(status.raw())
}

/// AIDL status code → canonical error. `NONE` is not an error; codes newer than NNAPI 1.0
/// (missed deadline, resource exhausted) and unknown codes fold into the closest 1.0 kind.
pub fn error_from_code(code: i32, message: String) -> HalError {
    match AidlErrorStatus(code) {
        AidlErrorStatus::INVALID_ARGUMENT => HalError::InvalidArgument(message),
        AidlErrorStatus::OUTPUT_INSUFFICIENT_SIZE => HalError::OutputInsufficientSize(message),
        AidlErrorStatus::DEVICE_UNAVAILABLE
        | AidlErrorStatus::RESOURCE_EXHAUSTED_TRANSIENT
        | AidlErrorStatus::RESOURCE_EXHAUSTED_PERSISTENT => HalError::DeviceUnavailable(message),
        AidlErrorStatus::GENERAL_FAILURE => HalError::GeneralFailure(message),
        _ => HalError::GeneralFailure(format!("status {code}: {message}")),
    }
}

/// `Timing` with both durations unknown.
pub const NO_TIMING: AidlTiming = AidlTiming {
    timeOnDeviceNs: -1,
    timeInDriverNs: -1,
};

fn dims_to_aidl(dims: &[u32], what: &dyn Fn() -> String) -> HalResult<Vec<i32>> {
    dims.iter()
        .map(|&d| {
            i32::try_from(d).map_err(|_| {
                HalError::GeneralFailure(format!(
                    "{}: dimension {d} does not fit the AIDL int",
                    what()
                ))
            })
        })
        .collect()
}

/// A successful canonical execution → AIDL reply.
pub fn execution_result_to_aidl(
    result: &ExecutionResult,
    timing: AidlTiming,
) -> HalResult<AidlResult> {
    let output_shapes = result
        .output_shapes
        .iter()
        .enumerate()
        .map(|(i, dims)| {
            Ok(AidlOutputShape {
                dimensions: dims_to_aidl(dims, &|| format!("output {i}"))?,
                isSufficient: true,
            })
        })
        .collect::<HalResult<Vec<_>>>()?;
    Ok(AidlResult {
        outputSufficientSize: true,
        outputShapes: output_shapes,
        timing,
    })
}

/// The reply for outputs too small for their results: OUTPUT_INSUFFICIENT_SIZE in AIDL's form
/// (`outputSufficientSize` false, every output's shape with `isSufficient`).
pub fn insufficient_result_to_aidl(shapes: &[(Vec<u32>, bool)]) -> HalResult<AidlResult> {
    Ok(AidlResult {
        outputSufficientSize: false,
        outputShapes: shapes
            .iter()
            .enumerate()
            .map(|(i, (dims, sufficient))| {
                Ok(AidlOutputShape {
                    dimensions: dims_to_aidl(dims, &|| format!("output {i}"))?,
                    isSufficient: *sufficient,
                })
            })
            .collect::<HalResult<Vec<_>>>()?,
        timing: NO_TIMING,
    })
}

/// AIDL execution reply → canonical result; an insufficient output is an error.
pub fn execution_result_from_aidl(result: &AidlResult) -> HalResult<ExecutionResult> {
    let shapes = result
        .outputShapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            u32_list(&s.dimensions, &|d| {
                format!("output shape {i}: dimension {d}")
            })
            .map_err(|e| HalError::GeneralFailure(format!("malformed reply: {e}")))
        })
        .collect::<HalResult<Vec<_>>>()?;
    if !result.outputSufficientSize {
        let small: Vec<usize> = result
            .outputShapes
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.isSufficient)
            .map(|(i, _)| i)
            .collect();
        return Err(HalError::OutputInsufficientShapes {
            message: format!("outputs {small:?} are too small; shapes {shapes:?}"),
            shapes: shapes
                .into_iter()
                .zip(result.outputShapes.iter().map(|s| s.isSufficient))
                .collect(),
        });
    }
    Ok(ExecutionResult {
        output_shapes: shapes,
    })
}

// ---- canonical → AIDL (client side) -------------------------------------------------------

/// A canonical value the AIDL wire cannot carry. This is the client's failure, not a verdict
/// on the model: it must not read as the service's INVALID_ARGUMENT.
fn unsendable<T>(message: String) -> HalResult<T> {
    Err(HalError::GeneralFailure(format!("cannot send: {message}")))
}

fn to_i32(value: u32, what: &dyn Fn() -> String) -> HalResult<i32> {
    i32::try_from(value)
        .or_else(|_| unsendable(format!("{} = {value} exceeds the AIDL int", what())))
}

fn to_i64(value: u64, what: &dyn Fn() -> String) -> HalResult<i64> {
    i64::try_from(value)
        .or_else(|_| unsendable(format!("{} = {value} exceeds the AIDL long", what())))
}

fn i32_list(values: &[u32], what: &dyn Fn(usize) -> String) -> HalResult<Vec<i32>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| to_i32(v, &|| what(i)))
        .collect()
}

fn location_to_aidl(loc: &DataLocation, what: &dyn Fn() -> String) -> HalResult<AidlDataLocation> {
    Ok(AidlDataLocation {
        poolIndex: to_i32(loc.pool_index, &|| format!("{}.poolIndex", what()))?,
        offset: i64::from(loc.offset),
        length: i64::from(loc.length),
        padding: 0,
    })
}

fn pfd(fd: &Arc<OwnedFd>, what: &str) -> HalResult<Option<ParcelFileDescriptor>> {
    let dup = fd
        .try_clone()
        .map_err(|e| HalError::GeneralFailure(format!("{what}: cannot duplicate fd: {e}")))?;
    Ok(Some(super::ipc::pfd_new(dup)))
}

/// Canonical pool → AIDL `Memory`. An `Unsupported` pool cannot be sent.
pub fn memory_to_aidl(memory: &Memory, what: &str) -> HalResult<AidlMemory> {
    Ok(match memory {
        Memory::Ashmem { fd, size } => AidlMemory::Ashmem(AidlAshmem {
            fd: pfd(fd, what)?,
            size: to_i64(*size, &|| format!("{what}.size"))?,
        }),
        Memory::MappableFile {
            fd,
            size,
            prot,
            offset,
        } => AidlMemory::MappableFile(AidlMappableFile {
            length: to_i64(*size, &|| format!("{what}.length"))?,
            prot: *prot,
            fd: pfd(fd, what)?,
            offset: to_i64(*offset, &|| format!("{what}.offset"))?,
        }),
        #[cfg(not(feature = "aosp"))]
        Memory::HardwareBuffer(hb) => {
            use super::aidl::android::hardware::common::NativeHandle::NativeHandle;
            use super::aidl::android::hardware::graphics::common::{
                BufferUsage::BufferUsage, HardwareBuffer::HardwareBuffer,
                HardwareBufferDescription::HardwareBufferDescription, PixelFormat::PixelFormat,
            };
            let int = |v: u32, field: &str| {
                i32::try_from(v).or_else(|_| unsendable(format!("{what}.{field} is {v}")))
            };
            let fds = hb
                .fds
                .iter()
                .map(|fd| {
                    let fd = fd.try_clone().map_err(|e| {
                        HalError::GeneralFailure(format!("{what}: cannot duplicate fd: {e}"))
                    })?;
                    Ok(super::ipc::pfd_new(fd))
                })
                .collect::<HalResult<Vec<_>>>()?;
            AidlMemory::HardwareBuffer(HardwareBuffer {
                description: HardwareBufferDescription {
                    width: int(hb.width, "width")?,
                    height: int(hb.height, "height")?,
                    layers: int(hb.layers, "layers")?,
                    format: PixelFormat(hb.format),
                    usage: BufferUsage(hb.usage as i64),
                    stride: int(hb.stride, "stride")?,
                },
                handle: NativeHandle {
                    fds,
                    ints: hb.ints.clone(),
                },
            })
        }
        #[cfg(feature = "aosp")]
        Memory::HardwareBuffer(_) => {
            return unsendable(format!("{what}: the device build sends no hardware buffer"))
        }
        Memory::Unsupported(kind) => {
            return unsendable(format!("{what}: a {kind} pool has no AIDL form"))
        }
    })
}

/// Canonical operands, operations and index lists → AIDL `Subgraph`.
fn subgraph_to_aidl(
    operands: &[Operand],
    operations: &[Operation],
    inputs: &[u32],
    outputs: &[u32],
) -> HalResult<AidlSubgraph> {
    let operands = operands
        .iter()
        .enumerate()
        .map(|(i, o)| {
            Ok(AidlOperand {
                r#type: AidlOperandType(o.operand_type),
                dimensions: i32_list(&o.dimensions, &|d| format!("operand {i}: dimension {d}"))?,
                scale: o.scale,
                zeroPoint: o.zero_point,
                lifetime: AidlLifeTime(o.lifetime),
                location: location_to_aidl(&o.location, &|| format!("operand {i}.location"))?,
                extraParams: match &o.channel_quant {
                    None => None,
                    Some(cq) => Some(AidlExtraParams::ChannelQuant(AidlChannelQuant {
                        scales: cq.scales.clone(),
                        channelDim: to_i32(cq.channel_dim, &|| format!("operand {i}: channelDim"))?,
                    })),
                },
            })
        })
        .collect::<HalResult<Vec<_>>>()?;
    let operations = operations
        .iter()
        .enumerate()
        .map(|(i, op)| {
            Ok(AidlOperation {
                r#type: AidlOperationType(op.operation_type),
                inputs: i32_list(&op.inputs, &|k| format!("operation {i}: input {k}"))?,
                outputs: i32_list(&op.outputs, &|k| format!("operation {i}: output {k}"))?,
            })
        })
        .collect::<HalResult<Vec<_>>>()?;
    Ok(AidlSubgraph {
        operands,
        operations,
        inputIndexes: i32_list(inputs, &|i| format!("model input {i}"))?,
        outputIndexes: i32_list(outputs, &|i| format!("model output {i}"))?,
    })
}

/// Canonical model → AIDL `Model`.
pub fn model_to_aidl(model: &Model) -> HalResult<AidlModel> {
    let pools = model
        .pools
        .iter()
        .enumerate()
        .map(|(i, m)| memory_to_aidl(m, &format!("model pool {i}")))
        .collect::<HalResult<Vec<_>>>()?;
    Ok(AidlModel {
        main: subgraph_to_aidl(
            &model.operands,
            &model.operations,
            &model.input_indexes,
            &model.output_indexes,
        )?,
        referenced: model
            .referenced
            .iter()
            .map(|s| {
                subgraph_to_aidl(
                    &s.operands,
                    &s.operations,
                    &s.input_indexes,
                    &s.output_indexes,
                )
            })
            .collect::<HalResult<Vec<_>>>()?,
        operandValues: model.operand_values.clone(),
        pools,
        relaxComputationFloat32toFloat16: model.relax_computation_float32_to_float16,
        extensionNameToPrefix: Vec::new(),
    })
}

fn argument_to_aidl(arg: &RequestArgument, what: &str) -> HalResult<AidlRequestArgument> {
    Ok(AidlRequestArgument {
        hasNoValue: arg.has_no_value,
        location: location_to_aidl(&arg.location, &|| format!("{what}.location"))?,
        dimensions: i32_list(&arg.dimensions, &|d| format!("{what}: dimension {d}"))?,
    })
}

/// Canonical request → AIDL `Request`.
pub fn request_to_aidl(request: &Request) -> HalResult<AidlRequest> {
    Ok(AidlRequest {
        inputs: request
            .inputs
            .iter()
            .enumerate()
            .map(|(i, a)| argument_to_aidl(a, &format!("request input {i}")))
            .collect::<HalResult<Vec<_>>>()?,
        outputs: request
            .outputs
            .iter()
            .enumerate()
            .map(|(i, a)| argument_to_aidl(a, &format!("request output {i}")))
            .collect::<HalResult<Vec<_>>>()?,
        pools: request
            .pools
            .iter()
            .enumerate()
            .map(|(i, m)| {
                memory_to_aidl(m, &format!("request pool {i}")).map(AidlRequestMemoryPool::Pool)
            })
            .collect::<HalResult<Vec<_>>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nnhal_hal::memory::create_memfd;

    /// The probe ADD model plus one memfd pool, so pool conversion is exercised too.
    fn add_model() -> Model {
        let mut model = nnhal_vts::probe::add_model();
        model.pools.push(Memory::shared(
            create_memfd("c", &[1, 2], 64, true).unwrap(),
            64,
        ));
        model
    }

    #[test]
    fn model_round_trips_and_consumers_are_derived() {
        let model = add_model();
        let aidl = model_to_aidl(&model).unwrap();
        let back = model_from_aidl(&aidl).unwrap();
        assert_eq!(back.operands, model.operands);
        assert_eq!(back.operations, model.operations);
        assert_eq!(back.input_indexes, model.input_indexes);
        assert_eq!(back.output_indexes, model.output_indexes);
        assert_eq!(back.operand_values, model.operand_values);
        assert_eq!(back.pools.len(), 1);
        assert_eq!(back.pools[0].size(), 64);
    }

    #[test]
    fn out_of_range_values_are_invalid_not_truncated() {
        let base = model_to_aidl(&add_model()).unwrap();
        type Mutation = Box<dyn Fn(&mut AidlModel)>;
        let cases: Vec<(&str, Mutation)> = vec![
            (
                "offset",
                Box::new(|m| m.main.operands[2].location.offset = 1 << 32),
            ),
            (
                "negative length",
                Box::new(|m| m.main.operands[2].location.length = -1),
            ),
            (
                "padding",
                Box::new(|m| m.main.operands[2].location.padding = -4),
            ),
            (
                "pool index",
                Box::new(|m| m.main.operands[2].location.poolIndex = -1),
            ),
            (
                "dimension",
                Box::new(|m| m.main.operands[0].dimensions[1] = -2),
            ),
            (
                "op input",
                Box::new(|m| m.main.operations[0].inputs[0] = -1),
            ),
            (
                "model output",
                Box::new(|m| m.main.outputIndexes[0] = i32::MIN),
            ),
            (
                "ashmem size",
                Box::new(|m| {
                    if let AidlMemory::Ashmem(a) = &mut m.pools[0] {
                        a.size = -1;
                    }
                }),
            ),
            (
                "null fd",
                Box::new(|m| {
                    if let AidlMemory::Ashmem(a) = &mut m.pools[0] {
                        a.fd = None;
                    }
                }),
            ),
            (
                "extraParams",
                Box::new(|m| {
                    m.main.operands[0].extraParams = Some(
                    super::super::aidl::android::hardware::neuralnetworks::OperandExtraParams::OperandExtraParams::Extension(vec![1]),
                )
                }),
            ),
        ];
        for (name, mutate) in cases {
            let mut m = model_to_aidl(&add_model()).unwrap();
            mutate(&mut m);
            let err = model_from_aidl(&m).unwrap_err();
            assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{name}: {err}");
        }
        assert!(model_from_aidl(&base).is_ok());
        // Referenced subgraphs are carried for validation (which refuses an empty one).
        let mut m = model_to_aidl(&add_model()).unwrap();
        m.referenced.push(AidlSubgraph::default());
        assert_eq!(model_from_aidl(&m).unwrap().referenced.len(), 1);
    }

    #[test]
    fn unknown_enumerations_pass_through_raw() {
        let mut m = model_to_aidl(&add_model()).unwrap();
        m.main.operands[0].r#type = AidlOperandType::TENSOR_FLOAT16;
        m.main.operands[1].lifetime = AidlLifeTime::SUBGRAPH;
        m.main.operations[0].r#type = AidlOperationType::DIV;
        m.relaxComputationFloat32toFloat16 = true;
        let back = model_from_aidl(&m).unwrap();
        assert_eq!(back.operands[0].operand_type, 8);
        assert_eq!(back.operands[1].lifetime, 6);
        assert_eq!(back.operations[0].operation_type, 30);
    }

    #[test]
    fn request_pools_and_tokens() {
        let fd = create_memfd("r", &[], 32, true).unwrap();
        let request = Request {
            inputs: vec![RequestArgument {
                has_no_value: false,
                location: DataLocation {
                    pool_index: 0,
                    offset: 0,
                    length: 16,
                },
                dimensions: vec![],
            }],
            outputs: vec![],
            pools: vec![Memory::shared(fd, 32)],
        };
        let mut aidl = request_to_aidl(&request).unwrap();
        let back = request_from_aidl(&aidl).unwrap();
        assert_eq!(back.inputs, request.inputs);
        aidl.pools.push(AidlRequestMemoryPool::Token(3));
        let back = request_from_aidl(&aidl).unwrap();
        assert!(matches!(back.pools[1], Memory::Unsupported(_)));
        let hb = memory_from_aidl(&AidlMemory::HardwareBuffer(Default::default()), "p").unwrap();
        assert!(matches!(hb, Memory::HardwareBuffer(_)));
        assert_eq!(
            hb.validate("p").unwrap_err().status(),
            nnhal_hal::ErrorStatus::GeneralFailure
        );
    }

    #[test]
    fn capabilities_are_positive_and_sorted() {
        let caps = Capabilities {
            float32_performance: PerformanceInfo {
                exec_time: 0.5,
                power_usage: 0.6,
            },
            quantized8_performance: PerformanceInfo {
                exec_time: 0.25,
                power_usage: 0.3,
            },
        };
        let aidl = capabilities_to_aidl(&caps);
        let types: Vec<i32> = aidl.operandPerformance.iter().map(|p| p.r#type.0).collect();
        assert_eq!(types, vec![0, 1, 2, 3, 4, 5]);
        for p in &aidl.operandPerformance {
            assert!(p.info.execTime > 0.0 && p.info.powerUsage > 0.0);
        }
        assert!(aidl.ifPerformance.execTime > 0.0 && aidl.whilePerformance.powerUsage > 0.0);
        // IF and WHILE run: a real figure (the float32 one), not "not supported" (FLT_MAX).
        for p in [&aidl.ifPerformance, &aidl.whilePerformance] {
            assert_eq!((p.execTime, p.powerUsage), (0.5, 0.6));
        }
        let back = capabilities_from_aidl(&aidl);
        assert_eq!(back.to_canonical(), caps);
    }

    #[test]
    fn insufficient_output_is_an_error() {
        let r = AidlResult {
            outputSufficientSize: false,
            outputShapes: vec![AidlOutputShape {
                dimensions: vec![2, 2],
                isSufficient: false,
            }],
            timing: NO_TIMING,
        };
        let err = execution_result_from_aidl(&r).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::OutputInsufficientSize);
    }
}
