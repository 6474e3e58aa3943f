//! The one typed error of the driver. Everything below the binder edge returns [`HalError`];
//! the edge maps it to `ErrorStatus` once (types.hal `ErrorStatus`).

use crate::types::ErrorStatus;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HalError {
    /// The model, request or an argument is malformed or violates the specification.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An output buffer is smaller than the result.
    #[error("output insufficient size: {0}")]
    OutputInsufficientSize(String),
    /// Output buffers smaller than their results, found after the shapes were computed: every
    /// output's shape and whether its buffer sufficed, which the AIDL reply reports.
    #[error("output insufficient size: {message}")]
    OutputInsufficientShapes {
        message: String,
        shapes: Vec<(Vec<u32>, bool)>,
    },
    /// A valid input the driver could not process (unsupported operation, resources).
    #[error("general failure: {0}")]
    GeneralFailure(String),
    /// The device cannot take work now.
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// The execution ran out of time: a WHILE loop past its `loopTimeoutDurationNs`
    /// (AIDL `ErrorStatus::MISSED_DEADLINE_TRANSIENT`, what the platform's CPU executor returns).
    #[error("missed deadline: {0}")]
    MissedDeadline(String),
}

impl HalError {
    pub fn status(&self) -> ErrorStatus {
        match self {
            HalError::InvalidArgument(_) => ErrorStatus::InvalidArgument,
            HalError::OutputInsufficientSize(_) | HalError::OutputInsufficientShapes { .. } => {
                ErrorStatus::OutputInsufficientSize
            }
            HalError::GeneralFailure(_) => ErrorStatus::GeneralFailure,
            HalError::DeviceUnavailable(_) => ErrorStatus::DeviceUnavailable,
            HalError::MissedDeadline(_) => ErrorStatus::MissedDeadlineTransient,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            HalError::InvalidArgument(m)
            | HalError::OutputInsufficientSize(m)
            | HalError::GeneralFailure(m)
            | HalError::DeviceUnavailable(m)
            | HalError::MissedDeadline(m)
            | HalError::OutputInsufficientShapes { message: m, .. } => m,
        }
    }
}

pub type HalResult<T> = Result<T, HalError>;

/// `return Err(HalError::InvalidArgument(format!(..)))`.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::HalError::InvalidArgument(format!($($arg)*)))
    };
}

/// `if !cond { invalid!(..) }`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::invalid!($($arg)*);
        }
    };
}
