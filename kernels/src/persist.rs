//! Byte images of packed weights, for a compilation cache that restores a plan without
//! packing again.
//!
//! Every packed-weight type with a [`Persist`] implementation writes its geometry and its
//! buffers (in memory order, so the image only reads back on a machine of the same byte
//! order, which the cache binds through the kernel level), never a function pointer: reading
//! an image back takes the micro-kernels from the current [`Ukernels`] table and checks every
//! buffer length against the geometry and that table's tile sizes. An image is untrusted
//! input: a forged one may hold wrong values, but any length, count or quantization
//! parameter the kernels depend on for memory safety is checked, and reading never allocates
//! past the bytes it is given.

use crate::aligned::{bytes_of, bytes_of_mut, AlignedBuf, Plain, Region};
use crate::conv::FilterShape;
use crate::quant::RequantizeAny;
use crate::ukernels::quant8::Requant8;
use crate::ukernels::Ukernels;
use crate::{Activation, QuantParams};

/// Why an image cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("packed-weight image: {0}")]
pub struct PersistError(pub String);

fn err<T>(why: impl Into<String>) -> Result<T, PersistError> {
    Err(PersistError(why.into()))
}

/// Packed weights that can be written as an image and read back for a kernel table.
pub trait Persist: Sized {
    /// Appends the image of `self` to `out`.
    fn persist(&self, out: &mut Vec<u8>);
    /// Reads an image written by [`Persist::persist`] for a table with the same tile sizes.
    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError>;
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_usize(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u64).to_le_bytes());
}

/// Appends 4 little-endian bytes.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a length and the values' bytes.
pub fn put_slice<T: Plain>(out: &mut Vec<u8>, v: &[T]) {
    put_usize(out, v.len());
    out.extend_from_slice(bytes_of(v));
}

pub(crate) fn put_shape(out: &mut Vec<u8>, s: FilterShape) {
    for v in [s.out_c, s.kh, s.kw, s.in_c] {
        put_usize(out, v);
    }
}

pub(crate) fn put_quant(out: &mut Vec<u8>, q: QuantParams) {
    put_u32(out, q.scale.to_bits());
    put_u32(out, q.zero_point as u32);
}

pub(crate) fn put_act(out: &mut Vec<u8>, a: Activation) {
    out.push(match a {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Relu1 => 2,
        Activation::Relu6 => 3,
    });
}

pub(crate) fn put_requant8(out: &mut Vec<u8>, rq: &Requant8) {
    for v in [rq.multiplier, rq.shift as i32, rq.zero_point, rq.lo, rq.hi] {
        put_u32(out, v as u32);
    }
}

pub(crate) fn put_requantize_any(out: &mut Vec<u8>, r: &RequantizeAny) {
    for v in [
        r.multiplier,
        r.left_shift,
        r.right_shift,
        r.zero_point,
        r.min,
        r.max,
    ] {
        put_u32(out, v as u32);
    }
}

/// Where a [`Source`] reads an image from when it is not in memory: a file read in order,
/// straight into the buffers its values end in.
pub trait Stream {
    /// Fills `dst` with the stream's next bytes; fails when the stream ends first.
    fn read_exact(&mut self, dst: &mut [u8]) -> Result<(), PersistError>;

    /// Where [`Source::buf`] carves its buffers from, if the stream has a region for them
    /// (one mapping for a whole file's buffers); `None`: each buffer is allocated on its own.
    fn region(&mut self) -> Option<&mut Region> {
        None
    }
}

enum Input<'a> {
    Bytes(&'a [u8]),
    Stream {
        stream: &'a mut dyn Stream,
        left: usize,
    },
}

/// A bounds-checked reader over an image, in memory or streamed: every read checks the
/// bytes left first, so a forged length never allocates past the image.
pub struct Source<'a> {
    input: Input<'a>,
}

impl<'a> Source<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Source {
            input: Input::Bytes(bytes),
        }
    }

    /// The next `len` bytes of `stream`.
    pub fn streamed(stream: &'a mut dyn Stream, len: usize) -> Self {
        Source {
            input: Input::Stream { stream, left: len },
        }
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        match &self.input {
            Input::Bytes(b) => b.len(),
            Input::Stream { left, .. } => *left,
        }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.left() == 0
    }

    /// Fills `dst` with the next bytes.
    pub fn fill(&mut self, dst: &mut [u8]) -> Result<(), PersistError> {
        let n = dst.len();
        if n > self.left() {
            return err(format!("{n} bytes wanted, {} left", self.left()));
        }
        match &mut self.input {
            Input::Bytes(b) => {
                let (head, rest) = b.split_at(n);
                dst.copy_from_slice(head);
                *b = rest;
            }
            Input::Stream { stream, left } => {
                stream.read_exact(dst)?;
                *left -= n;
            }
        }
        Ok(())
    }

    /// The next `n` bytes as a source of their own (an image within a larger file).
    pub fn take(&mut self, n: usize) -> Result<Source<'_>, PersistError> {
        if n > self.left() {
            return err(format!("{n} bytes wanted, {} left", self.left()));
        }
        Ok(match &mut self.input {
            Input::Bytes(b) => {
                let (head, rest) = b.split_at(n);
                *b = rest;
                Source::new(head)
            }
            Input::Stream { stream, left } => {
                *left -= n;
                Source::streamed(&mut **stream, n)
            }
        })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PersistError> {
        let mut a = [0u8; N];
        self.fill(&mut a)?;
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, PersistError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u32(&mut self) -> Result<u32, PersistError> {
        self.array().map(u32::from_le_bytes)
    }

    pub fn i32(&mut self) -> Result<i32, PersistError> {
        self.u32().map(|v| v as i32)
    }

    /// A size, refused past `u32::MAX` (no tensor extent the HAL accepts is larger).
    pub fn usize(&mut self) -> Result<usize, PersistError> {
        let v = u64::from_le_bytes(self.array()?);
        if v > u64::from(u32::MAX) {
            return err(format!("size {v}"));
        }
        Ok(v as usize)
    }

    /// The byte length of `len` values of `T`, refused when the bytes left cannot hold them.
    fn values_bytes<T: Plain>(&self, len: usize) -> Result<usize, PersistError> {
        len.checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= self.left())
            .ok_or_else(|| PersistError(format!("{len} values past the end")))
    }

    /// The length prefix of a slice of `T`s, checked to be `len` values that the bytes left
    /// hold.
    fn prefix<T: Plain>(&mut self, len: usize) -> Result<(), PersistError> {
        let stored = self.usize()?;
        if stored != len {
            return err(format!(
                "{stored} values stored where the geometry needs {len}"
            ));
        }
        self.values_bytes::<T>(len).map(|_| ())
    }

    /// An aligned buffer of exactly `len` values, read straight into it: carved from the
    /// stream's region when it has one with room left, allocated on its own otherwise.
    pub fn buf<T: Plain>(&mut self, len: usize) -> Result<AlignedBuf<T>, PersistError> {
        self.prefix::<T>(len)?;
        let carved = match &mut self.input {
            Input::Stream { stream, .. } => stream.region().and_then(|r| r.carve(len)),
            Input::Bytes(_) => None,
        };
        let mut b = match carved {
            Some(b) => b,
            None => AlignedBuf::try_zeroed(len)
                .ok_or_else(|| PersistError(format!("cannot allocate {len} values")))?,
        };
        self.fill(b.as_bytes_mut())?;
        Ok(b)
    }

    /// `len` values read straight into a new vector (the bytes left checked first).
    fn values<T: Plain>(&mut self, len: usize) -> Result<Vec<T>, PersistError> {
        self.values_bytes::<T>(len)?;
        let mut v = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| PersistError(format!("cannot allocate {len} values")))?;
        v.resize(len, T::default());
        self.fill(bytes_of_mut(&mut v))?;
        Ok(v)
    }

    /// A vector of exactly `len` values.
    pub fn vec<T: Plain>(&mut self, len: usize) -> Result<Vec<T>, PersistError> {
        self.prefix::<T>(len)?;
        self.values(len)
    }

    /// A vector of as many values as its length prefix says, refused when the bytes left
    /// cannot hold them.
    pub fn vec_any<T: Plain>(&mut self) -> Result<Vec<T>, PersistError> {
        let len = self.usize()?;
        self.values(len)
    }

    /// A filter shape with every extent at least 1 and `out_c · taps` representable.
    pub(crate) fn shape(&mut self) -> Result<FilterShape, PersistError> {
        let s = FilterShape {
            out_c: self.usize()?,
            kh: self.usize()?,
            kw: self.usize()?,
            in_c: self.usize()?,
        };
        let product = [s.kh, s.kw, s.in_c]
            .iter()
            .try_fold(s.out_c, |n, &d| n.checked_mul(d));
        if [s.out_c, s.kh, s.kw, s.in_c].contains(&0) || product.is_none_or(|n| n > 1 << 40) {
            return err(format!("filter shape {s:?}"));
        }
        Ok(s)
    }

    pub(crate) fn quant(&mut self) -> Result<QuantParams, PersistError> {
        Ok(QuantParams::new(f32::from_bits(self.u32()?), self.i32()?))
    }

    pub(crate) fn act(&mut self) -> Result<Activation, PersistError> {
        Ok(match self.u8()? {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::Relu1,
            3 => Activation::Relu6,
            v => return err(format!("activation {v}")),
        })
    }

    /// A requantizer within the ranges its kernels assume (a non-negative Q31 multiplier,
    /// a right shift of at most 31, a byte zero point, bounds within the bytes).
    pub(crate) fn requant8(&mut self) -> Result<Requant8, PersistError> {
        let rq = Requant8 {
            multiplier: self.i32()?,
            shift: self.u32()?,
            zero_point: self.i32()?,
            lo: self.i32()?,
            hi: self.i32()?,
        };
        let multiplier_ok = rq.multiplier >= 0;
        // The bounds are checked only after the zero point: negating an arbitrary i32 could
        // overflow.
        let zp_ok = (0..=255).contains(&rq.zero_point);
        let bounds_ok =
            || -rq.zero_point <= rq.lo && rq.lo <= rq.hi && rq.hi <= 255 - rq.zero_point;
        if !(multiplier_ok && rq.shift <= 31 && zp_ok && bounds_ok()) {
            return err(format!("requantizer {rq:?}"));
        }
        Ok(rq)
    }

    /// A requantizer [`RequantizeAny::apply`] can run: shifts within an int32, a
    /// non-negative multiplier, bounds in order.
    pub(crate) fn requantize_any(&mut self) -> Result<RequantizeAny, PersistError> {
        let r = RequantizeAny {
            multiplier: self.i32()?,
            left_shift: self.i32()?,
            right_shift: self.i32()?,
            zero_point: self.i32()?,
            min: self.i32()?,
            max: self.i32()?,
        };
        if r.multiplier < 0
            || !(0..=30).contains(&r.left_shift)
            || !(0..=31).contains(&r.right_shift)
            || r.min > r.max
        {
            return err(format!("requantizer {r:?}"));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::dw_f32::PackedDwF32;
    use crate::conv::dw_u8::PackedDwU8;
    use crate::conv::f32::PackedConvF32;
    use crate::conv::grouped::PackedGrouped;
    use crate::conv::transpose::{PackedTransposeF32, PackedTransposeU8};
    use crate::conv::u8::{ConvQuant, PackedConvU8};
    use crate::conv::FilterQuant;
    use crate::elementwise::binary_u8::PackedBinaryU8;
    use crate::quant::ChannelRequant;
    use crate::ukernels;
    use crate::{Nhwc, Padding, Window};

    /// Writes `packed`, reads it back for `uk` and writes it again: the same image, and
    /// every cut of the image fails to read (never panics).
    fn round_trip<P: Persist>(uk: &Ukernels, packed: &P) -> P {
        let mut image = Vec::new();
        packed.persist(&mut image);
        let mut src = Source::new(&image);
        let back = P::restore(uk, &mut src).expect("read back");
        assert!(src.is_empty(), "bytes left after the image");
        let mut again = Vec::new();
        back.persist(&mut again);
        assert_eq!(image, again, "the image read back writes another image");
        for cut in [0, 1, image.len() / 2, image.len() - 1] {
            assert!(
                P::restore(uk, &mut Source::new(&image[..cut])).is_err(),
                "cut {cut}"
            );
        }
        back
    }

    fn seq_f32(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i % 13) as f32 * 0.25 - 1.5).collect()
    }

    fn seq_u8(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 37 % 251) as u8).collect()
    }

    /// Every packed-weight type the plan stores, at every kernel level this machine runs.
    #[test]
    fn every_packed_type_round_trips() {
        let shape = FilterShape {
            out_c: 5,
            kh: 3,
            kw: 2,
            in_c: 3,
        };
        let n = shape.out_c * shape.taps();
        let q = ConvQuant {
            input: QuantParams::new(0.5, 120),
            filter: QuantParams::new(0.25, 130),
            output: QuantParams::new(1.0, 100),
            act: Activation::Relu6,
        };
        let bias: Vec<i32> = (0..shape.out_c as i32).map(|c| c * 7 - 9).collect();
        for &level in ukernels::Isa::levels() {
            let Ok(uk) = ukernels::table(level) else {
                continue;
            };
            let conv = PackedConvF32::pack(uk, shape, &seq_f32(n), &seq_f32(shape.out_c));
            assert_eq!(round_trip(uk, &conv).shape(), shape);
            let dw = PackedDwF32::pack(uk, 3, 3, 20, &seq_f32(180), &seq_f32(20));
            assert_eq!(round_trip(uk, &dw).dims(), (3, 3, 20));
            let u8_fast = PackedConvU8::pack(uk, shape, &seq_u8(n), &bias, q).unwrap();
            round_trip(uk, &u8_fast);
            // A multiplier the fast kernels cannot take keeps the reference form.
            let slow = ConvQuant {
                output: QuantParams::new(0.01, 100),
                ..q
            };
            if let Ok(reference) = PackedConvU8::pack(uk, shape, &seq_u8(n), &bias, slow) {
                round_trip(uk, &reference);
            }
            let scales: Vec<f32> = (0..shape.out_c).map(|c| 0.01 * (c + 1) as f32).collect();
            let rq = ChannelRequant::per_channel(q.input, &scales, q.output, q.act).unwrap();
            round_trip(uk, &rq);
            if let Some(channels) =
                PackedConvU8::pack_channels(uk, shape, &seq_u8(n), &bias, q.input, &rq)
            {
                round_trip(uk, &channels);
            }
            // The depthwise packings rebuild their byte dot-product form (per-channel
            // constants included) on reading: the same kernel and the same outputs.
            let dw_window = Window {
                input: Nhwc::new(1, 4, 5, 5),
                output: Nhwc::new(1, 4, 5, 5),
                filter_h: 3,
                filter_w: 2,
                stride_h: 1,
                stride_w: 1,
                padding: Padding {
                    top: 1,
                    bottom: 1,
                    left: 1,
                    right: 0,
                },
            };
            let dw_input = seq_u8(dw_window.input.len());
            let same_outputs = |a: &PackedDwU8, b: &PackedDwU8| {
                assert_eq!(a.kernel_name(), b.kernel_name());
                let mut outs = [vec![0u8; 100], vec![1u8; 100]];
                for (p, out) in [a, b].into_iter().zip(&mut outs) {
                    crate::conv::dw_u8::depthwise_conv2d_u8(&dw_window, 1, p, &dw_input, out);
                }
                assert_eq!(outs[0], outs[1], "{}", a.kernel_name());
            };
            let dw_u8 = PackedDwU8::pack(uk, 3, 2, 5, &seq_u8(30), &bias, q).unwrap();
            let back = round_trip(uk, &dw_u8);
            assert_eq!(back.dims(), (3, 2, 5));
            same_outputs(&dw_u8, &back);
            if let Some(dw_ch) =
                PackedDwU8::pack_channels(uk, 3, 2, 5, &seq_u8(30), &bias, q.input, &rq)
            {
                same_outputs(&dw_ch, &round_trip(uk, &dw_ch));
            }
            // The vector form where the level has the kernel, the table otherwise.
            for pack in [
                PackedBinaryU8::add,
                PackedBinaryU8::sub,
                PackedBinaryU8::mul,
            ] {
                let binary = pack(uk, q.input, q.filter, q.output, q.act).unwrap();
                let back = round_trip(uk, &binary);
                assert_eq!(back.kernel_name(), binary.kernel_name());
            }
            let g_shape = FilterShape { in_c: 1, ..shape };
            let g_n = g_shape.out_c * g_shape.taps();
            let grouped = PackedGrouped::pack_f32(uk, g_shape, 5, &seq_f32(g_n), &seq_f32(5));
            assert_eq!(round_trip(uk, &grouped).groups(), 5);
            if let Some(grouped_u8) = PackedGrouped::pack_u8(uk, g_shape, 5, &seq_u8(g_n), &bias, q)
            {
                round_trip(uk, &grouped_u8);
            }
            let t = PackedTransposeF32::pack(uk, shape, &seq_f32(n), &seq_f32(shape.out_c));
            assert_eq!(round_trip(uk, &t).shape(), shape);
            let tu = PackedTransposeU8::pack(
                uk,
                shape,
                &seq_u8(n),
                FilterQuant::Tensor(q.filter),
                &bias,
                q.input,
                q.output,
                q.act,
            )
            .unwrap();
            assert_eq!(round_trip(uk, &tu).shape(), shape);
        }
    }

    #[test]
    fn forged_requantizers_and_geometry_are_refused() {
        let uk = ukernels::best();
        let mut out = Vec::new();
        put_requant8(
            &mut out,
            &Requant8 {
                multiplier: 1 << 30,
                shift: 40,
                zero_point: 0,
                lo: 0,
                hi: 255,
            },
        );
        assert!(Source::new(&out).requant8().is_err());
        // A zero point whose negation does not fit an i32 is refused, not overflowed.
        let mut out = Vec::new();
        put_requant8(
            &mut out,
            &Requant8 {
                multiplier: 1 << 30,
                shift: 1,
                zero_point: i32::MIN,
                lo: 0,
                hi: 255,
            },
        );
        assert!(Source::new(&out).requant8().is_err());
        let mut out = Vec::new();
        put_requantize_any(
            &mut out,
            &RequantizeAny {
                multiplier: 1,
                left_shift: 0,
                right_shift: 0,
                zero_point: 0,
                min: 10,
                max: 5,
            },
        );
        assert!(Source::new(&out).requantize_any().is_err());
        // A float32 GEMM image whose panel length disagrees with its shape.
        let conv = crate::conv::f32::PackedConvF32::pack(
            uk,
            FilterShape {
                out_c: 1,
                kh: 1,
                kw: 1,
                in_c: 1,
            },
            &[1.0],
            &[0.0],
        );
        let mut image = Vec::new();
        conv.persist(&mut image);
        image[32] += 1;
        assert!(crate::conv::f32::PackedConvF32::restore(uk, &mut Source::new(&image)).is_err());
    }

    #[test]
    fn lengths_are_checked_before_allocating() {
        let mut out = Vec::new();
        put_slice(&mut out, &[1.5f32, -2.0]);
        assert_eq!(
            Source::new(&out).buf::<f32>(2).unwrap().as_slice(),
            &[1.5, -2.0]
        );
        assert!(Source::new(&out).buf::<f32>(3).is_err());
        assert!(Source::new(&out[..out.len() - 1]).vec::<f32>(2).is_err());
        let mut huge = Vec::new();
        put_usize(&mut huge, u32::MAX as usize);
        assert!(Source::new(&huge).vec::<u8>(u32::MAX as usize).is_err());
    }
}
