//! ADD, MUL and SUB of two TENSOR_QUANT8_ASYMM tensors of the same shape (types.hal 1.0 ADD,
//! MUL; NNAPI 1.2 quant8 SUB).
//!
//! [`PackedBinaryU8`] holds one of two forms, chosen at prepare:
//!
//! - Where the kernel table has a vector kernel ([`Ukernels::u8_binary`]), the reference's
//!   integer arithmetic ([`crate::elementwise::reference::add_u8`],
//!   [`crate::elementwise::reference::sub_u8`], [`crate::elementwise::reference::mul_u8`]) with
//!   its multipliers derived once ([`U8Binary`]): each input rescaled in int32 lanes, summed
//!   (or multiplied) and requantized, a few vector instructions per element and nothing to
//!   build but the constants.
//! - Otherwise a table: both inputs are bytes, so the operation is a function of two 8-bit
//!   values once the quantization parameters and the activation are fixed; the reference is
//!   evaluated once for all 65,536 input pairs and execution is one lookup per element, the
//!   reference's results by construction.

use super::reference::{add_sub_multipliers, add_u8, mul_multiplier, mul_u8, sub_u8};
use crate::parallel::{for_chunks, pays_to_split, speed, threads};
use crate::persist::{self, Persist, PersistError, Source};
use crate::ukernels::quant8::{Requant8, U8Binary, U8BinaryKernel, U8BinaryOp};
use crate::ukernels::Ukernels;
use crate::{Activation, KernelError, QuantParams};

/// A same-shape quant8 ADD, SUB or MUL, packed at prepare.
#[derive(Clone)]
pub struct PackedBinaryU8 {
    form: Form,
}

#[derive(Clone)]
enum Form {
    /// The result for every pair of input bytes, `table[a · 256 + b]`.
    Table(Box<[u8]>),
    /// The constants of the arithmetic and the vector kernel that runs them (`None` only for
    /// an image read back for a table without one: then the scalar form runs).
    Lanes(U8Binary, Option<U8BinaryKernel>),
}

impl std::fmt::Debug for PackedBinaryU8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedBinaryU8")
            .field("kernel", &self.kernel_name())
            .finish_non_exhaustive()
    }
}

/// The image is a tag, then the table's 65,536 bytes (0) or the constants of [`U8Binary`]
/// (1: the operation, the input zero points, multipliers and shifts, the output
/// requantizer), each checked against the ranges the kernels assume.
impl Persist for PackedBinaryU8 {
    fn persist(&self, out: &mut Vec<u8>) {
        match &self.form {
            Form::Table(table) => {
                out.push(0);
                persist::put_slice(out, table);
            }
            Form::Lanes(p, _) => {
                out.push(1);
                out.push(match p.op {
                    U8BinaryOp::AddSub => 0,
                    U8BinaryOp::Mul => 1,
                });
                for v in [p.a_zp, p.b_zp, p.a_mult, p.a_shift as i32, p.b_mult] {
                    persist::put_u32(out, v as u32);
                }
                persist::put_u32(out, p.b_shift);
                persist::put_requant8(out, &p.out);
            }
        }
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let bad = |what: String| Err(PersistError(format!("quant8 binary {what}")));
        match src.u8()? {
            0 => Ok(Self {
                form: Form::Table(src.vec::<u8>(1 << 16)?.into_boxed_slice()),
            }),
            1 => {
                let op = match src.u8()? {
                    0 => U8BinaryOp::AddSub,
                    1 => U8BinaryOp::Mul,
                    v => return bad(format!("operation {v}")),
                };
                let (a_zp, b_zp, a_mult) = (src.i32()?, src.i32()?, src.i32()?);
                let (a_shift, b_mult, b_shift) = (src.u32()?, src.i32()?, src.u32()?);
                let out = src.requant8()?;
                let p = U8Binary {
                    op,
                    a_zp,
                    b_zp,
                    a_mult,
                    a_shift,
                    b_mult,
                    b_shift,
                    out,
                };
                let byte = |z: i32| (0..=255).contains(&z);
                if !(byte(a_zp) && byte(b_zp) && a_shift <= 31 && b_shift <= 31) {
                    return bad(format!("constants {p:?}"));
                }
                Ok(Self {
                    form: Form::Lanes(p, uk.u8_binary),
                })
            }
            tag => bad(format!("form {tag}")),
        }
    }
}

/// Every pair of bytes, `a` major: the inputs the table is evaluated on.
fn all_pairs() -> (Vec<u8>, Vec<u8>) {
    (0..=u16::MAX).map(|i| ((i >> 8) as u8, i as u8)).unzip()
}

/// The output requantizer of a [`U8Binary`], when the kernels can represent it: byte zero
/// points, a non-empty activation range within the bytes.
fn output_requant(
    a: QuantParams,
    b: QuantParams,
    out: QuantParams,
    act: Activation,
    (multiplier, shift): (i32, i32),
) -> Option<Requant8> {
    let (min, max) = act.range_u8(out);
    let byte = |z: i32| (0..=255).contains(&z);
    let fits = byte(a.zero_point)
        && byte(b.zero_point)
        && byte(out.zero_point)
        && byte(min)
        && byte(max)
        && min <= max
        && multiplier >= 0
        && (0..=31).contains(&shift);
    fits.then(|| Requant8 {
        multiplier,
        shift: shift as u32,
        zero_point: out.zero_point,
        lo: min - out.zero_point,
        hi: max - out.zero_point,
    })
}

impl PackedBinaryU8 {
    /// The reference ADD; fails exactly when the reference would.
    pub fn add(
        uk: &Ukernels,
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::add_sub(uk, false, a, b, out, act)
    }

    /// The reference SUB (NNAPI 1.2); fails exactly when the reference would.
    pub fn sub(
        uk: &Ukernels,
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::add_sub(uk, true, a, b, out, act)
    }

    fn add_sub(
        uk: &Ukernels,
        negate: bool,
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        let op = if negate { "SUB" } else { "ADD" };
        let [(a_mult, a_shift), (b_mult, b_shift), o] = add_sub_multipliers(op, negate, a, b, out)?;
        let lanes = uk.u8_binary.zip(output_requant(a, b, out, act, o));
        if let Some((kernel, rq)) = lanes {
            if (0..=31).contains(&a_shift) && (0..=31).contains(&b_shift) {
                return Ok(Self::lanes(
                    U8Binary {
                        op: U8BinaryOp::AddSub,
                        a_zp: a.zero_point,
                        b_zp: b.zero_point,
                        a_mult,
                        a_shift: a_shift as u32,
                        b_mult,
                        b_shift: b_shift as u32,
                        out: rq,
                    },
                    kernel,
                ));
            }
        }
        if negate {
            Self::table(|x, y, t, n| sub_u8(x, n, a, y, n, b, out, act, t, n))
        } else {
            Self::table(|x, y, t, n| add_u8(x, n, a, y, n, b, out, act, t, n))
        }
    }

    /// The reference MUL; fails exactly when the reference would.
    pub fn mul(
        uk: &Ukernels,
        a: QuantParams,
        b: QuantParams,
        out: QuantParams,
        act: Activation,
    ) -> Result<Self, KernelError> {
        let o = mul_multiplier(a, b, out)?;
        if let Some((kernel, rq)) = uk.u8_binary.zip(output_requant(a, b, out, act, o)) {
            return Ok(Self::lanes(
                U8Binary {
                    op: U8BinaryOp::Mul,
                    a_zp: a.zero_point,
                    b_zp: b.zero_point,
                    a_mult: 0,
                    a_shift: 0,
                    b_mult: 0,
                    b_shift: 0,
                    out: rq,
                },
                kernel,
            ));
        }
        Self::table(|x, y, t, n| mul_u8(x, n, a, y, n, b, out, act, t, n))
    }

    fn lanes(p: U8Binary, kernel: U8BinaryKernel) -> Self {
        Self {
            form: Form::Lanes(p, Some(kernel)),
        }
    }

    fn table(
        reference: impl FnOnce(&[u8], &[u8], &mut [u8], &[usize]) -> Result<(), KernelError>,
    ) -> Result<Self, KernelError> {
        let (x, y) = all_pairs();
        let mut table = vec![0u8; x.len()];
        reference(&x, &y, &mut table, &[x.len()])?;
        Ok(Self {
            form: Form::Table(table.into_boxed_slice()),
        })
    }

    /// The kernel that runs this operation: the vector kernel's name, `table` or `scalar`.
    pub fn kernel_name(&self) -> &'static str {
        match &self.form {
            Form::Table(_) => "table",
            Form::Lanes(_, Some(k)) => k.name,
            Form::Lanes(_, None) => "scalar",
        }
    }

    /// `out[i] = op(a[i], b[i])` for same-length `a`, `b` and `out`.
    pub fn apply(&self, a: &[u8], b: &[u8], out: &mut [u8]) {
        assert!(
            a.len() == out.len() && b.len() == out.len(),
            "operand lengths"
        );
        let run = |a: &[u8], b: &[u8], out: &mut [u8]| match &self.form {
            Form::Table(table) => {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = table[usize::from(x) << 8 | usize::from(y)];
                }
            }
            // SAFETY: `a`, `b` and `out` hold `out.len()` bytes each (checked above, and
            // the chunks below cut all three alike); the kernel comes from a table for this
            // processor.
            Form::Lanes(p, Some(k)) => unsafe {
                (k.kernel)(a.as_ptr(), b.as_ptr(), out.as_mut_ptr(), out.len(), p)
            },
            Form::Lanes(p, None) => {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = p.apply(x, y);
                }
            }
        };
        let n = out.len();
        let per_micro = match &self.form {
            Form::Lanes(_, Some(_)) => speed::LANE_ELEMENTS,
            _ => speed::LOOKUP_ELEMENTS,
        };
        let parts = if pays_to_split(n, per_micro) {
            2 * threads()
        } else {
            1
        };
        let chunk = n.div_ceil(parts.max(1));
        for_chunks(out, chunk, |i, o| {
            let start = i * chunk;
            let range = start..start + o.len();
            run(&a[range.clone()], &b[range], o);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ukernels::{self, Isa};

    type Reference = fn(
        &[u8],
        &[usize],
        QuantParams,
        &[u8],
        &[usize],
        QuantParams,
        QuantParams,
        Activation,
        &mut [u8],
        &[usize],
    ) -> Result<(), KernelError>;

    type Pack = fn(
        &Ukernels,
        QuantParams,
        QuantParams,
        QuantParams,
        Activation,
    ) -> Result<PackedBinaryU8, KernelError>;

    const ACTS: [Activation; 4] = [
        Activation::None,
        Activation::Relu,
        Activation::Relu1,
        Activation::Relu6,
    ];

    /// Every kernel table this processor runs.
    fn tables() -> Vec<&'static Ukernels> {
        Isa::levels()
            .iter()
            .filter_map(|&l| ukernels::table(l).ok())
            .collect()
    }

    /// The packed operation at every level against the reference on all 65,536 pairs;
    /// returns how many levels ran the vector form.
    fn check_all_pairs(
        name: &str,
        reference: Reference,
        pack: Pack,
        (a, b, out): (QuantParams, QuantParams, QuantParams),
        act: Activation,
    ) -> usize {
        let (x, y) = all_pairs();
        let n = [x.len()];
        let mut want = vec![0u8; x.len()];
        let refused = reference(&x, &n, a, &y, &n, b, out, act, &mut want, &n).is_err();
        let mut vector = 0;
        for uk in tables() {
            let packed = pack(uk, a, b, out, act);
            assert_eq!(packed.is_err(), refused, "{name} {a:?} {b:?} {out:?}");
            let Ok(packed) = packed else { continue };
            let mut got = vec![0u8; x.len()];
            packed.apply(&x, &y, &mut got);
            if got != want {
                let i = (0..x.len()).find(|&i| got[i] != want[i]).unwrap();
                panic!(
                    "{name} {act:?} {a:?} {b:?} {out:?} at {} ({}): a {} b {}: {} != {}",
                    uk.isa,
                    packed.kernel_name(),
                    x[i],
                    y[i],
                    got[i],
                    want[i]
                );
            }
            vector += usize::from(packed.kernel_name() != "table");
        }
        vector
    }

    /// Zero points (input 0, input 1, output): the ends and the middle of the bytes, and
    /// TENSOR_QUANT8_ASYMM_SIGNED ones in their unsigned view (−1, −5, −128 and 127, 0, −1
    /// plus 128).
    const ZERO_POINTS: [(i32, i32, i32); 6] = [
        (0, 0, 0),
        (128, 128, 128),
        (255, 0, 128),
        (0, 255, 255),
        (127, 123, 0),
        (255, 128, 127),
    ];

    /// Input 1's scale over input 0's, 10^−3 to 10^3.
    const RATIOS: [f32; 5] = [1e-3, 0.07, 1.0, 1.3, 1e3];

    #[test]
    fn add_and_sub_are_the_reference_on_every_pair() {
        let mut vector = 0;
        let mut cases = 0;
        for r in RATIOS {
            let (sa, sb) = (0.02f32, 0.02 * r);
            let big = sa.max(sb);
            for k in [0.37, 4.1] {
                for (za, zb, zo) in ZERO_POINTS {
                    for act in ACTS {
                        let q = (
                            QuantParams::new(sa, za),
                            QuantParams::new(sb, zb),
                            QuantParams::new(big * k, zo),
                        );
                        vector += check_all_pairs("ADD", add_u8, PackedBinaryU8::add, q, act);
                        vector += check_all_pairs("SUB", sub_u8, PackedBinaryU8::sub, q, act);
                        cases += 2;
                    }
                }
            }
        }
        // Every level with the vector kernel ran it on every case.
        let levels = tables().iter().filter(|t| t.u8_binary.is_some()).count();
        assert_eq!(vector, levels * cases);
    }

    #[test]
    fn mul_is_the_reference_on_every_pair() {
        let mut vector = 0;
        let mut cases = 0;
        for r in RATIOS {
            let (sa, sb) = (0.02f32, 0.02 * r);
            for k in [1.01, 37.0, 5000.0] {
                for (za, zb, zo) in ZERO_POINTS {
                    for act in ACTS {
                        let q = (
                            QuantParams::new(sa, za),
                            QuantParams::new(sb, zb),
                            QuantParams::new(sa * sb * k, zo),
                        );
                        vector += check_all_pairs("MUL", mul_u8, PackedBinaryU8::mul, q, act);
                        cases += 1;
                    }
                }
            }
        }
        let levels = tables().iter().filter(|t| t.u8_binary.is_some()).count();
        assert_eq!(vector, levels * cases);
    }

    #[test]
    fn refused_and_edge_parameters() {
        let (a, b) = (QuantParams::new(0.05, 120), QuantParams::new(0.11, 3));
        for uk in tables() {
            // Parameters the reference refuses are refused.
            assert!(
                PackedBinaryU8::mul(uk, a, b, QuantParams::new(0.001, 0), Activation::None)
                    .is_err()
            );
            assert!(
                PackedBinaryU8::add(uk, a, b, QuantParams::new(0.0, 0), Activation::None).is_err()
            );
        }
        // An output scale so large that every sum rescales to zero (a shift past 31), and an
        // output zero point outside the bytes, which the vector form does not take.
        let huge = (a, b, QuantParams::new(1e9, 7));
        check_all_pairs("ADD", add_u8, PackedBinaryU8::add, huge, Activation::Relu);
        check_all_pairs("MUL", mul_u8, PackedBinaryU8::mul, huge, Activation::Relu6);
        let odd = (a, b, QuantParams::new(0.3, 300));
        assert_eq!(
            check_all_pairs("ADD", add_u8, PackedBinaryU8::add, odd, Activation::None),
            0
        );
    }

    #[test]
    fn split_run_matches_in_place() {
        let len = 3 * crate::parallel::MIN_ELEMENTS + 17;
        let a: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let b: Vec<u8> = (0..len).map(|i| (i * 13 % 253) as u8).collect();
        for uk in tables() {
            let t = PackedBinaryU8::add(
                uk,
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
            assert_eq!(seq, par, "{}", uk.isa);
            // Every length up to two vector steps and a tail, at every offset.
            for n in 0..70 {
                let mut part = vec![0u8; n + 3];
                t.apply(&a[3..n + 3], &b[3..n + 3], &mut part[..n]);
                assert_eq!(part[..n], seq[3..n + 3], "{} length {n}", uk.isa);
                assert_eq!(part[n..], [0, 0, 0], "{} wrote past {n}", uk.isa);
            }
        }
    }

    /// The vector kernels against [`U8Binary::apply`] on all 65,536 pairs for constants the
    /// quantization parameters above do not reach: input multipliers of both signs at the
    /// ends of their range (and 0), every input shift class from 0 to 31, output multipliers
    /// and shifts at their ends, zero points 0/128/255 and narrow and full activation bounds.
    #[test]
    fn vector_kernels_match_the_scalar_form_at_the_edges() {
        let mults = [
            0,
            1 << 30,
            -(1 << 30),
            i32::MAX,
            -i32::MAX,
            i32::MIN,
            0x5A5A_5A5B,
            -0x4321_0FED,
        ];
        let outs = [
            (1 << 30, 0, 0, 0, 255),
            (i32::MAX, 31, 128, -128, 127),
            (0x6000_0001, 7, 255, -255, 0),
            (1 << 30, 1, 3, 0, 6),
            (0x7654_3210, 12, 128, -1, 1),
        ];
        let (x, y) = all_pairs();
        let mut checked = 0;
        for uk in tables().into_iter().filter(|t| t.u8_binary.is_some()) {
            for (i, &(multiplier, shift, zero_point, lo, hi)) in outs.iter().enumerate() {
                let out = Requant8 {
                    multiplier,
                    shift,
                    zero_point,
                    lo,
                    hi,
                };
                let zps = [(0, 255), (128, 128), (255, 0)][i % 3];
                let mut ps = vec![U8Binary {
                    op: U8BinaryOp::Mul,
                    a_zp: zps.0,
                    b_zp: zps.1,
                    a_mult: 0,
                    a_shift: 0,
                    b_mult: 0,
                    b_shift: 0,
                    out,
                }];
                for (j, &a_mult) in mults.iter().enumerate() {
                    for a_shift in [0, 1, 2, 11, 30, 31] {
                        ps.push(U8Binary {
                            op: U8BinaryOp::AddSub,
                            a_mult,
                            a_shift,
                            b_mult: mults[(j + 3) % mults.len()],
                            b_shift: [31, 0, 5, 1, 19, 2][a_shift as usize % 6],
                            ..ps[0]
                        });
                    }
                }
                for p in ps {
                    let vector = PackedBinaryU8 {
                        form: Form::Lanes(p, uk.u8_binary),
                    };
                    let mut got = vec![0u8; x.len()];
                    vector.apply(&x, &y, &mut got);
                    for (k, &g) in got.iter().enumerate() {
                        assert_eq!(
                            g,
                            p.apply(x[k], y[k]),
                            "{} {p:?} at {}, {}",
                            uk.isa,
                            x[k],
                            y[k]
                        );
                    }
                    checked += 1;
                }
            }
        }
        let levels = tables().iter().filter(|t| t.u8_binary.is_some()).count();
        assert_eq!(checked, levels * 5 * (1 + 8 * 6));
    }

    /// On x86_64 every level from AVX2 up has a vector kernel, so the tests above run it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_and_up_have_the_vector_kernel() {
        for uk in tables() {
            assert_eq!(uk.u8_binary.is_some(), uk.isa >= Isa::Avx2, "{}", uk.isa);
        }
    }

    #[test]
    fn scalar_form_is_the_reference() {
        let q = (
            QuantParams::new(0.05, 120),
            QuantParams::new(0.11, 3),
            QuantParams::new(0.09, 131),
        );
        let packs: [Pack; 3] = [
            PackedBinaryU8::add,
            PackedBinaryU8::sub,
            PackedBinaryU8::mul,
        ];
        for uk in tables().into_iter().filter(|t| t.u8_binary.is_some()) {
            for pack in packs {
                let packed = pack(uk, q.0, q.1, q.2, Activation::Relu).unwrap();
                let Form::Lanes(p, _) = packed.form else {
                    panic!("{}: not the vector form", uk.isa);
                };
                let scalar = PackedBinaryU8 {
                    form: Form::Lanes(p, None),
                };
                let (x, y) = all_pairs();
                let (mut v, mut s) = (vec![0u8; x.len()], vec![1u8; x.len()]);
                packed.apply(&x, &y, &mut v);
                scalar.apply(&x, &y, &mut s);
                assert_eq!(v, s, "{}", uk.isa);
            }
        }
    }
}
