//! The canonical NNAPI 1.0 data model (types.hal 1.0: `OperandType`, `OperationType`,
//! `OperandLifeTime`, `DataLocation`, `Operand`, `Operation`, `Model`, `RequestArgument`,
//! `Request`, `Capabilities`). `OperandType` and `OperationType` also name the values later
//! versions added to the AIDL interface, so validation can tell "valid but not run by this
//! driver" from "not a value at all".
//!
//! Structures keep enumerations as the raw `i32` that arrived on the wire: any integer can arrive
//! there, and an unknown value is a validation error, not something a decoder may assume away.
//! The `from_raw` decoders return `None` for values outside the defined set; validation turns
//! that into `INVALID_ARGUMENT`.

use crate::memory::Memory;

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $value:expr => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant,)* }

        impl $name {
            /// Every defined value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// Decodes a wire value; `None` for anything outside the defined set.
            pub fn from_raw(raw: i32) -> Option<Self> {
                match raw {
                    $($value => Some($name::$variant),)*
                    _ => None,
                }
            }

            pub fn raw(self) -> i32 {
                match self { $($name::$variant => $value,)* }
            }

            /// The spelling used by types.hal.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// Parses the types.hal spelling.
            pub fn from_name(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum!(
    /// `OperandType`.
    OperandType {
        Float32 = 0 => "FLOAT32",
        Int32 = 1 => "INT32",
        UInt32 = 2 => "UINT32",
        TensorFloat32 = 3 => "TENSOR_FLOAT32",
        TensorInt32 = 4 => "TENSOR_INT32",
        TensorQuant8Asymm = 5 => "TENSOR_QUANT8_ASYMM",
        // Added by later NNAPI versions; part of the AIDL interface, never run by this driver.
        Bool = 6 => "BOOL",
        TensorQuant16Symm = 7 => "TENSOR_QUANT16_SYMM",
        TensorFloat16 = 8 => "TENSOR_FLOAT16",
        TensorBool8 = 9 => "TENSOR_BOOL8",
        Float16 = 10 => "FLOAT16",
        TensorQuant8SymmPerChannel = 11 => "TENSOR_QUANT8_SYMM_PER_CHANNEL",
        TensorQuant16Asymm = 12 => "TENSOR_QUANT16_ASYMM",
        TensorQuant8Symm = 13 => "TENSOR_QUANT8_SYMM",
        TensorQuant8AsymmSigned = 14 => "TENSOR_QUANT8_ASYMM_SIGNED",
        Subgraph = 15 => "SUBGRAPH",
        Oem = 10000 => "OEM",
        TensorOemByte = 10001 => "TENSOR_OEM_BYTE",
    }
);

impl OperandType {
    pub fn is_tensor(self) -> bool {
        matches!(
            self,
            OperandType::TensorFloat32
                | OperandType::TensorInt32
                | OperandType::TensorQuant8Asymm
                | OperandType::TensorOemByte
                | OperandType::TensorQuant16Symm
                | OperandType::TensorFloat16
                | OperandType::TensorBool8
                | OperandType::TensorQuant8SymmPerChannel
                | OperandType::TensorQuant16Asymm
                | OperandType::TensorQuant8Symm
                | OperandType::TensorQuant8AsymmSigned
        )
    }

    pub fn is_oem(self) -> bool {
        matches!(self, OperandType::Oem | OperandType::TensorOemByte)
    }

    /// One of the six types of NNAPI 1.0 `types.hal` (OEM types included).
    pub fn in_nnapi_1_0(self) -> bool {
        (0..=5).contains(&self.raw()) || self.is_oem()
    }

    /// A type this driver never interprets: OEM data, or a type newer than NNAPI 1.0.
    /// Operations touching one are valid or not by structure alone and are unsupported.
    pub fn is_opaque(self) -> bool {
        !(0..=5).contains(&self.raw())
    }

    /// Bytes per element (per value for scalars); `None` for OEM, whose size is opaque, and
    /// SUBGRAPH, which is a reference rather than data.
    pub fn element_size(self) -> Option<usize> {
        match self {
            OperandType::Float32
            | OperandType::Int32
            | OperandType::UInt32
            | OperandType::TensorFloat32
            | OperandType::TensorInt32 => Some(4),
            OperandType::TensorQuant8Asymm
            | OperandType::TensorOemByte
            | OperandType::Bool
            | OperandType::TensorBool8
            | OperandType::TensorQuant8SymmPerChannel
            | OperandType::TensorQuant8Symm
            | OperandType::TensorQuant8AsymmSigned => Some(1),
            OperandType::TensorQuant16Symm
            | OperandType::TensorFloat16
            | OperandType::Float16
            | OperandType::TensorQuant16Asymm => Some(2),
            OperandType::Oem | OperandType::Subgraph => None,
        }
    }
}

wire_enum!(
    /// `OperationType`.
    OperationType {
        Add = 0 => "ADD",
        AveragePool2d = 1 => "AVERAGE_POOL_2D",
        Concatenation = 2 => "CONCATENATION",
        Conv2d = 3 => "CONV_2D",
        DepthwiseConv2d = 4 => "DEPTHWISE_CONV_2D",
        DepthToSpace = 5 => "DEPTH_TO_SPACE",
        Dequantize = 6 => "DEQUANTIZE",
        EmbeddingLookup = 7 => "EMBEDDING_LOOKUP",
        Floor = 8 => "FLOOR",
        FullyConnected = 9 => "FULLY_CONNECTED",
        HashtableLookup = 10 => "HASHTABLE_LOOKUP",
        L2Normalization = 11 => "L2_NORMALIZATION",
        L2Pool2d = 12 => "L2_POOL_2D",
        LocalResponseNormalization = 13 => "LOCAL_RESPONSE_NORMALIZATION",
        Logistic = 14 => "LOGISTIC",
        LshProjection = 15 => "LSH_PROJECTION",
        Lstm = 16 => "LSTM",
        MaxPool2d = 17 => "MAX_POOL_2D",
        Mul = 18 => "MUL",
        Relu = 19 => "RELU",
        Relu1 = 20 => "RELU1",
        Relu6 = 21 => "RELU6",
        Reshape = 22 => "RESHAPE",
        ResizeBilinear = 23 => "RESIZE_BILINEAR",
        Rnn = 24 => "RNN",
        Softmax = 25 => "SOFTMAX",
        SpaceToDepth = 26 => "SPACE_TO_DEPTH",
        Svdf = 27 => "SVDF",
        Tanh = 28 => "TANH",
        // Added by later NNAPI versions; part of the AIDL interface, never run by this driver.
        BatchToSpaceNd = 29 => "BATCH_TO_SPACE_ND",
        Div = 30 => "DIV",
        Mean = 31 => "MEAN",
        Pad = 32 => "PAD",
        SpaceToBatchNd = 33 => "SPACE_TO_BATCH_ND",
        Squeeze = 34 => "SQUEEZE",
        StridedSlice = 35 => "STRIDED_SLICE",
        Sub = 36 => "SUB",
        Transpose = 37 => "TRANSPOSE",
        Abs = 38 => "ABS",
        Argmax = 39 => "ARGMAX",
        Argmin = 40 => "ARGMIN",
        AxisAlignedBboxTransform = 41 => "AXIS_ALIGNED_BBOX_TRANSFORM",
        BidirectionalSequenceLstm = 42 => "BIDIRECTIONAL_SEQUENCE_LSTM",
        BidirectionalSequenceRnn = 43 => "BIDIRECTIONAL_SEQUENCE_RNN",
        BoxWithNmsLimit = 44 => "BOX_WITH_NMS_LIMIT",
        Cast = 45 => "CAST",
        ChannelShuffle = 46 => "CHANNEL_SHUFFLE",
        DetectionPostprocessing = 47 => "DETECTION_POSTPROCESSING",
        Equal = 48 => "EQUAL",
        Exp = 49 => "EXP",
        ExpandDims = 50 => "EXPAND_DIMS",
        Gather = 51 => "GATHER",
        GenerateProposals = 52 => "GENERATE_PROPOSALS",
        Greater = 53 => "GREATER",
        GreaterEqual = 54 => "GREATER_EQUAL",
        GroupedConv2d = 55 => "GROUPED_CONV_2D",
        HeatmapMaxKeypoint = 56 => "HEATMAP_MAX_KEYPOINT",
        InstanceNormalization = 57 => "INSTANCE_NORMALIZATION",
        Less = 58 => "LESS",
        LessEqual = 59 => "LESS_EQUAL",
        Log = 60 => "LOG",
        LogicalAnd = 61 => "LOGICAL_AND",
        LogicalNot = 62 => "LOGICAL_NOT",
        LogicalOr = 63 => "LOGICAL_OR",
        LogSoftmax = 64 => "LOG_SOFTMAX",
        Maximum = 65 => "MAXIMUM",
        Minimum = 66 => "MINIMUM",
        Neg = 67 => "NEG",
        NotEqual = 68 => "NOT_EQUAL",
        PadV2 = 69 => "PAD_V2",
        Pow = 70 => "POW",
        Prelu = 71 => "PRELU",
        Quantize = 72 => "QUANTIZE",
        Quantized16bitLstm = 73 => "QUANTIZED_16BIT_LSTM",
        RandomMultinomial = 74 => "RANDOM_MULTINOMIAL",
        ReduceAll = 75 => "REDUCE_ALL",
        ReduceAny = 76 => "REDUCE_ANY",
        ReduceMax = 77 => "REDUCE_MAX",
        ReduceMin = 78 => "REDUCE_MIN",
        ReduceProd = 79 => "REDUCE_PROD",
        ReduceSum = 80 => "REDUCE_SUM",
        RoiAlign = 81 => "ROI_ALIGN",
        RoiPooling = 82 => "ROI_POOLING",
        Rsqrt = 83 => "RSQRT",
        Select = 84 => "SELECT",
        Sin = 85 => "SIN",
        Slice = 86 => "SLICE",
        Split = 87 => "SPLIT",
        Sqrt = 88 => "SQRT",
        Tile = 89 => "TILE",
        TopkV2 = 90 => "TOPK_V2",
        TransposeConv2d = 91 => "TRANSPOSE_CONV_2D",
        UnidirectionalSequenceLstm = 92 => "UNIDIRECTIONAL_SEQUENCE_LSTM",
        UnidirectionalSequenceRnn = 93 => "UNIDIRECTIONAL_SEQUENCE_RNN",
        ResizeNearestNeighbor = 94 => "RESIZE_NEAREST_NEIGHBOR",
        QuantizedLstm = 95 => "QUANTIZED_LSTM",
        If = 96 => "IF",
        While = 97 => "WHILE",
        Elu = 98 => "ELU",
        HardSwish = 99 => "HARD_SWISH",
        Fill = 100 => "FILL",
        Rank = 101 => "RANK",
        OemOperation = 10000 => "OEM_OPERATION",
    }
);

impl OperationType {
    /// One of the operations of NNAPI 1.0 `types.hal` (OEM_OPERATION included).
    pub fn in_nnapi_1_0(self) -> bool {
        (0..=28).contains(&self.raw()) || self == OperationType::OemOperation
    }
}

wire_enum!(
    /// `OperandLifeTime`.
    OperandLifeTime {
        TemporaryVariable = 0 => "TEMPORARY_VARIABLE",
        ModelInput = 1 => "MODEL_INPUT",
        ModelOutput = 2 => "MODEL_OUTPUT",
        ConstantCopy = 3 => "CONSTANT_COPY",
        ConstantReference = 4 => "CONSTANT_REFERENCE",
        NoValue = 5 => "NO_VALUE",
        // AIDL `OperandLifeTime::SUBGRAPH`: the operand names one of `Model::referenced`.
        Subgraph = 6 => "SUBGRAPH",
    }
);

wire_enum!(
    /// `FusedActivationFunc`.
    FusedActivationFunc {
        None = 0 => "NONE",
        Relu = 1 => "RELU",
        Relu1 = 2 => "RELU1",
        Relu6 = 3 => "RELU6",
    }
);

wire_enum!(
    /// `ErrorStatus`.
    ErrorStatus {
        None = 0 => "NONE",
        DeviceUnavailable = 1 => "DEVICE_UNAVAILABLE",
        GeneralFailure = 2 => "GENERAL_FAILURE",
        OutputInsufficientSize = 3 => "OUTPUT_INSUFFICIENT_SIZE",
        InvalidArgument = 4 => "INVALID_ARGUMENT",
        MissedDeadlineTransient = 5 => "MISSED_DEADLINE_TRANSIENT",
    }
);

wire_enum!(
    /// `DeviceStatus`.
    DeviceStatus {
        Available = 0 => "AVAILABLE",
        Busy = 1 => "BUSY",
        Offline = 2 => "OFFLINE",
        Unknown = 3 => "UNKNOWN",
    }
);

/// Where a value lives: `poolIndex` selects a pool (or `operandValues` for CONSTANT_COPY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataLocation {
    pub pool_index: u32,
    pub offset: u32,
    pub length: u32,
}

impl DataLocation {
    pub fn is_zero(&self) -> bool {
        *self == DataLocation::default()
    }

    /// The exclusive end of the region, computed without 32-bit wrap-around.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.length)
    }
}

/// `SymmPerChannelQuantParams`: the per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL
/// operand (AIDL `OperandExtraParams::channelQuant`).
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelQuant {
    pub scales: Vec<f32>,
    pub channel_dim: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// Raw `OperandType`.
    pub operand_type: i32,
    /// Extents; empty for scalars; 0 means "not specified".
    pub dimensions: Vec<u32>,
    pub number_of_consumers: u32,
    pub scale: f32,
    pub zero_point: i32,
    /// Raw `OperandLifeTime`.
    pub lifetime: i32,
    pub location: DataLocation,
    /// Per-channel quantization (AIDL `extraParams.channelQuant`); `None` everywhere else.
    pub channel_quant: Option<ChannelQuant>,
}

impl Operand {
    pub fn new(operand_type: OperandType, dimensions: &[u32], lifetime: OperandLifeTime) -> Self {
        Self {
            operand_type: operand_type.raw(),
            dimensions: dimensions.to_vec(),
            number_of_consumers: 0,
            scale: 0.0,
            zero_point: 0,
            lifetime: lifetime.raw(),
            location: DataLocation::default(),
            channel_quant: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Raw `OperationType`.
    pub operation_type: i32,
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
}

/// A referenced subgraph (AIDL `Subgraph`): the body of an IF branch or a WHILE condition or
/// body. Its MODEL_INPUT / MODEL_OUTPUT operands are the subgraph's own inputs and outputs;
/// its constants live in the model's `operand_values` and `pools`.
#[derive(Clone, Debug, Default)]
pub struct Subgraph {
    pub operands: Vec<Operand>,
    pub operations: Vec<Operation>,
    pub input_indexes: Vec<u32>,
    pub output_indexes: Vec<u32>,
}

/// A model: operations are listed in execution order.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub operands: Vec<Operand>,
    pub operations: Vec<Operation>,
    pub input_indexes: Vec<u32>,
    pub output_indexes: Vec<u32>,
    /// Backing store of CONSTANT_COPY operands.
    pub operand_values: Vec<u8>,
    /// Backing store of CONSTANT_REFERENCE operands.
    pub pools: Vec<Memory>,
    /// Subgraphs named by SUBGRAPH operands (AIDL `Model.referenced`).
    pub referenced: Vec<Subgraph>,
    /// AIDL `relaxComputationFloat32toFloat16`: float32 may be computed with float16 range and
    /// precision. Computing in float32 always satisfies it.
    pub relax_computation_float32_to_float16: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestArgument {
    pub has_no_value: bool,
    pub location: DataLocation,
    /// Empty: use the model's dimensions; otherwise must agree with them.
    pub dimensions: Vec<u32>,
}

/// One execution's inputs and outputs; `inputs[i]` binds `Model::input_indexes[i]`.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub inputs: Vec<RequestArgument>,
    pub outputs: Vec<RequestArgument>,
    pub pools: Vec<Memory>,
}

/// Performance relative to the platform CPU path; lower is better.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerformanceInfo {
    pub exec_time: f32,
    pub power_usage: f32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capabilities {
    pub float32_performance: PerformanceInfo,
    pub quantized8_performance: PerformanceInfo,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoders_reject_values_outside_the_enum() {
        for raw in [-1, 16, 9999, 10002, i32::MIN, i32::MAX] {
            assert_eq!(OperandType::from_raw(raw), None, "{raw}");
        }
        for raw in [-1, 102, 9999, 10001, 0xDEADBEEFu32 as i32] {
            assert_eq!(OperationType::from_raw(raw), None, "{raw}");
        }
        assert_eq!(OperandLifeTime::from_raw(7), None);
        // The AIDL enumerations: 0..=101 and OEM_OPERATION; 0..=15 and the two OEM types.
        assert_eq!(OperationType::ALL.len(), 103);
        assert_eq!(OperandType::ALL.len(), 18);
        let v1_0 = |raw: i32| OperationType::from_raw(raw).unwrap().in_nnapi_1_0();
        assert!(v1_0(28) && !v1_0(29) && v1_0(10000));
        let t1_0 = |raw: i32| OperandType::from_raw(raw).unwrap().in_nnapi_1_0();
        assert!(t1_0(5) && !t1_0(6) && !t1_0(15) && t1_0(10001));
        for op in OperationType::ALL {
            assert_eq!(OperationType::from_raw(op.raw()), Some(*op));
            assert_eq!(OperationType::from_name(op.name()), Some(*op));
        }
    }

    #[test]
    fn location_end_does_not_wrap() {
        let loc = DataLocation {
            pool_index: 0,
            offset: u32::MAX,
            length: u32::MAX,
        };
        assert_eq!(loc.end(), 2 * u64::from(u32::MAX));
    }
}
