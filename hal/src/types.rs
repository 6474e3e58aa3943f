//! The canonical NNAPI 1.0 data model (types.hal 1.0: `OperandType`, `OperationType`,
//! `OperandLifeTime`, `DataLocation`, `Operand`, `Operation`, `Model`, `RequestArgument`,
//! `Request`, `Capabilities`).
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
        )
    }

    pub fn is_oem(self) -> bool {
        matches!(self, OperandType::Oem | OperandType::TensorOemByte)
    }

    /// Bytes per element (per value for scalars); `None` for OEM, whose size is opaque.
    pub fn element_size(self) -> Option<usize> {
        match self {
            OperandType::Float32
            | OperandType::Int32
            | OperandType::UInt32
            | OperandType::TensorFloat32
            | OperandType::TensorInt32 => Some(4),
            OperandType::TensorQuant8Asymm | OperandType::TensorOemByte => Some(1),
            OperandType::Oem => None,
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
        OemOperation = 10000 => "OEM_OPERATION",
    }
);

wire_enum!(
    /// `OperandLifeTime`.
    OperandLifeTime {
        TemporaryVariable = 0 => "TEMPORARY_VARIABLE",
        ModelInput = 1 => "MODEL_INPUT",
        ModelOutput = 2 => "MODEL_OUTPUT",
        ConstantCopy = 3 => "CONSTANT_COPY",
        ConstantReference = 4 => "CONSTANT_REFERENCE",
        NoValue = 5 => "NO_VALUE",
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
        for raw in [-1, 6, 9999, 10002, i32::MIN, i32::MAX] {
            assert_eq!(OperandType::from_raw(raw), None, "{raw}");
        }
        for raw in [-1, 29, 9999, 10001, 0xDEADBEEFu32 as i32] {
            assert_eq!(OperationType::from_raw(raw), None, "{raw}");
        }
        assert_eq!(OperandLifeTime::from_raw(6), None);
        assert_eq!(OperationType::ALL.len(), 30);
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
