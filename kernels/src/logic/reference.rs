//! Reference loops of the logic family (see [`crate::logic`]).

use crate::QuantParams;

/// One of the six comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Equal,
    NotEqual,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

impl Comparison {
    /// The comparison of `a` with `b` as a TENSOR_BOOL8 byte.
    #[inline]
    pub fn test<T: PartialOrd>(self, a: T, b: T) -> u8 {
        u8::from(match self {
            Comparison::Equal => a == b,
            Comparison::NotEqual => a != b,
            Comparison::Greater => a > b,
            Comparison::GreaterEqual => a >= b,
            Comparison::Less => a < b,
            Comparison::LessEqual => a <= b,
        })
    }
}

/// The real value of a quant8 element as the platform's comparisons compute it: the centred
/// integer times the scale, in float32. Comparing real values makes the result independent of
/// each input's quantization (and exact for the signed image, whose centred integers are the
/// same).
#[inline]
pub fn real(q: u8, p: QuantParams) -> f32 {
    (i32::from(q) - p.zero_point) as f32 * p.scale
}

/// LOGICAL_AND / LOGICAL_OR / LOGICAL_NOT on bytes (nonzero is true), writing 0 or 1.
#[inline]
pub fn and(a: u8, b: u8) -> u8 {
    u8::from(a != 0 && b != 0)
}

#[inline]
pub fn or(a: u8, b: u8) -> u8 {
    u8::from(a != 0 || b != 0)
}

#[inline]
pub fn not(a: u8) -> u8 {
    u8::from(a == 0)
}

/// SELECT: `a[i]` where `condition[i]` is true, `b[i]` elsewhere; `pick` maps the chosen value
/// (the identity, or a requantization to the output's scale).
pub fn select<T: Copy, U>(
    condition: &[u8],
    a: &[T],
    b: &[T],
    out: &mut [U],
    pick: impl Fn(T) -> U,
) {
    for (((o, &c), &x), &y) in out.iter_mut().zip(condition).zip(a).zip(b) {
        *o = pick(if c != 0 { x } else { y });
    }
}
