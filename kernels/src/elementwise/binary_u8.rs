//! ADD, MUL and SUB of two TENSOR_QUANT8_ASYMM tensors of the same shape (types.hal 1.0 ADD,
//! MUL; NNAPI 1.2 quant8 SUB).
//!
//! Both inputs are bytes, so the operation is a function of two 8-bit values once the quantization
//! parameters and the activation are fixed: [`BinaryTableU8`] evaluates the reference arithmetic
//! ([`crate::elementwise::reference::add_u8`] / [`crate::elementwise::reference::mul_u8`]) once for
//! all 65,536 input pairs at prepare, and execution is one table lookup per element. The results
//! are the reference's by construction, whatever its rescaling and rounding steps.

use super::reference::{add_u8, mul_u8, sub_u8};
use crate::parallel::{for_chunks, pays_to_split, speed, threads};
use crate::persist::{self, Persist, PersistError, Source};
use crate::ukernels::Ukernels;
use crate::{Activation, KernelError, QuantParams};

/// The result of an ADD or MUL for every pair of input bytes, `table[a · 256 + b]`.
#[derive(Clone)]
pub struct BinaryTableU8 {
    table: Box<[u8]>,
}

impl std::fmt::Debug for BinaryTableU8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryTableU8").finish_non_exhaustive()
    }
}

/// The image is the table's 65,536 bytes.
impl Persist for BinaryTableU8 {
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_slice(out, &self.table);
    }

    fn restore(_: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        Ok(BinaryTableU8 {
            table: src.vec::<u8>(1 << 16)?.into_boxed_slice(),
        })
    }
}

/// Every pair of bytes, `a` major: the inputs the table is evaluated on.
fn all_pairs() -> (Vec<u8>, Vec<u8>) {
    (0..=u16::MAX).map(|i| ((i >> 8) as u8, i as u8)).unzip()
}

impl BinaryTableU8 {
    /// The table of the reference ADD; fails exactly when the reference would.
    pub fn add(
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::build(|x, y, t, n| add_u8(x, n, a, y, n, b, out, act, t, n))
    }

    /// The table of the reference SUB (NNAPI 1.2); fails exactly when the reference would.
    pub fn sub(
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::build(|x, y, t, n| sub_u8(x, n, a, y, n, b, out, act, t, n))
    }

    /// The table of the reference MUL; fails exactly when the reference would.
    pub fn mul(
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::build(|x, y, t, n| mul_u8(x, n, a, y, n, b, out, act, t, n))
    }

    fn build(
        reference: impl FnOnce(&[u8], &[u8], &mut [u8], &[usize]) -> Result<(), KernelError>,
    ) -> Result<Self, KernelError> {
        let (x, y) = all_pairs();
        let mut table = vec![0u8; x.len()];
        reference(&x, &y, &mut table, &[x.len()])?;
        Ok(Self {
            table: table.into_boxed_slice(),
        })
    }

    /// `out[i] = op(a[i], b[i])` for same-length `a`, `b` and `out`.
    pub fn apply(&self, a: &[u8], b: &[u8], out: &mut [u8]) {
        assert!(
            a.len() == out.len() && b.len() == out.len(),
            "operand lengths"
        );
        let lookup = |a: &[u8], b: &[u8], out: &mut [u8]| {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = self.table[usize::from(x) << 8 | usize::from(y)];
            }
        };
        let n = out.len();
        let parts = if pays_to_split(n, speed::LOOKUP_ELEMENTS) {
            2 * threads()
        } else {
            1
        };
        let chunk = n.div_ceil(parts.max(1));
        for_chunks(out, chunk, |i, o| {
            let start = i * chunk;
            let range = start..start + o.len();
            lookup(&a[range.clone()], &b[range], o);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_the_reference_on_every_pair() {
        let (a, b, out) = (
            QuantParams::new(0.05, 120),
            QuantParams::new(0.11, 3),
            QuantParams::new(0.09, 131),
        );
        let (x, y) = all_pairs();
        for act in [
            Activation::None,
            Activation::Relu,
            Activation::Relu1,
            Activation::Relu6,
        ] {
            let n = [x.len()];
            let mut want = vec![0u8; x.len()];
            let mut got = vec![0u8; x.len()];
            add_u8(&x, &n, a, &y, &n, b, out, act, &mut want, &n).unwrap();
            BinaryTableU8::add(a, b, out, act)
                .unwrap()
                .apply(&x, &y, &mut got);
            assert_eq!(got, want, "ADD {act:?}");
            mul_u8(
                &x,
                &n,
                a,
                &y,
                &n,
                b,
                QuantParams::new(0.7, 10),
                act,
                &mut want,
                &n,
            )
            .unwrap();
            BinaryTableU8::mul(a, b, QuantParams::new(0.7, 10), act)
                .unwrap()
                .apply(&x, &y, &mut got);
            assert_eq!(got, want, "MUL {act:?}");
        }
        // Parameters the reference refuses are refused.
        assert!(BinaryTableU8::mul(a, b, QuantParams::new(0.001, 0), Activation::None).is_err());
    }

    #[test]
    fn split_lookup_matches_in_place() {
        let len = 3 * crate::parallel::MIN_ELEMENTS + 17;
        let a: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let b: Vec<u8> = (0..len).map(|i| (i * 13 % 253) as u8).collect();
        let t = BinaryTableU8::add(
            QuantParams::new(0.5, 128),
            QuantParams::new(0.25, 100),
            QuantParams::new(0.6, 90),
            Activation::Relu6,
        )
        .unwrap();
        let mut seq = vec![0u8; len];
        t.apply(&a, &b, &mut seq);
        let mut par = vec![1u8; len];
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
            .install(|| t.apply(&a, &b, &mut par));
        assert_eq!(seq, par);
    }
}
