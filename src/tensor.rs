//! Operand values inside one execution: typed, owned, aligned buffers decoded from the
//! little-endian bytes of the model's constants and the request's pools (and encoded back for
//! outputs). Copying at this boundary is what lets kernels take `&[f32]` safely: nothing typed
//! ever points into shared memory.

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use nnhal_hal::{HalError, HalResult, MappedPool, OperandType};

/// A 4-byte value type stored little-endian in pools (`f32`, `i32`).
pub trait LeWord: bytemuck::Pod {
    fn from_le(bytes: [u8; 4]) -> Self;
    fn to_le(&self) -> [u8; 4];
}

impl LeWord for f32 {
    fn from_le(bytes: [u8; 4]) -> Self {
        f32::from_le_bytes(bytes)
    }
    fn to_le(&self) -> [u8; 4] {
        self.to_le_bytes()
    }
}

impl LeWord for i32 {
    fn from_le(bytes: [u8; 4]) -> Self {
        i32::from_le_bytes(bytes)
    }
    fn to_le(&self) -> [u8; 4] {
        self.to_le_bytes()
    }
}

/// Fills `out` with the little-endian values stored in `pool` from `offset` on. On
/// little-endian targets the encodings are the same, so the bytes go over as they are, at
/// memcpy speed (a decoding loop runs at about half of it).
pub fn read_words<T: LeWord>(pool: &MappedPool, offset: u64, out: &mut [T]) -> HalResult<()> {
    if cfg!(target_endian = "little") {
        pool.read(offset, bytemuck::cast_slice_mut(out))
    } else {
        pool.read_values(offset, out, T::from_le)
    }
}

/// Fills `out` with the little-endian 16-bit values stored in `pool` from `offset` on (the
/// TENSOR_QUANT16 types), like [`read_words`].
pub fn read_halves(pool: &MappedPool, offset: u64, out: &mut [i16]) -> HalResult<()> {
    if cfg!(target_endian = "little") {
        pool.read(offset, bytemuck::cast_slice_mut(out))
    } else {
        pool.read_values(offset, out, i16::from_le_bytes)
    }
}

/// Stores 16-bit `values` little-endian into `pool` from `offset` on.
pub fn write_halves(pool: &MappedPool, offset: u64, values: &[i16]) -> HalResult<()> {
    if cfg!(target_endian = "little") {
        pool.write(offset, bytemuck::cast_slice(values))
    } else {
        pool.write_values(offset, values, |v| v.to_le_bytes())
    }
}

/// Stores `values` little-endian into `pool` from `offset` on (see [`read_words`]).
pub fn write_words<T: LeWord>(pool: &MappedPool, offset: u64, values: &[T]) -> HalResult<()> {
    if cfg!(target_endian = "little") {
        pool.write(offset, bytemuck::cast_slice(values))
    } else {
        pool.write_values(offset, values, T::to_le)
    }
}

/// Elements converted per step between binary16 request memory and float32 buffers: the
/// staging buffer stays on the stack (2 KiB), so the edges allocate nothing.
const HALF_CHUNK: usize = 1024;

/// Fills `out` with the little-endian binary16 values stored in `pool` from `offset` on,
/// widened to float32 (exact). The conversion runs over whole slices (`half`'s F16C path on
/// x86-64 when the processor has it, detected at run time).
pub fn read_f16(pool: &MappedPool, offset: u64, out: &mut [f32]) -> HalResult<()> {
    let mut bits = [0u16; HALF_CHUNK];
    for (k, chunk) in out.chunks_mut(HALF_CHUNK).enumerate() {
        let bits = &mut bits[..chunk.len()];
        pool.read(
            offset + (k * HALF_CHUNK * 2) as u64,
            bytemuck::cast_slice_mut(bits),
        )?;
        if cfg!(target_endian = "big") {
            bits.iter_mut().for_each(|b| *b = u16::from_le(*b));
        }
        bits.reinterpret_cast::<f16>().convert_to_f32_slice(chunk);
    }
    Ok(())
}

/// Stores `values` into `pool` from `offset` on as little-endian binary16, each rounded to the
/// nearest (ties to even; beyond the range to infinity, NaN kept NaN).
pub fn write_f16(pool: &MappedPool, offset: u64, values: &[f32]) -> HalResult<()> {
    let mut halves = [f16::ZERO; HALF_CHUNK];
    for (k, chunk) in values.chunks(HALF_CHUNK).enumerate() {
        let halves = &mut halves[..chunk.len()];
        halves.convert_from_f32_slice(chunk);
        let bits = halves.reinterpret_cast_mut();
        if cfg!(target_endian = "big") {
            bits.iter_mut().for_each(|b| *b = b.to_le());
        }
        pool.write(
            offset + (k * HALF_CHUNK * 2) as u64,
            bytemuck::cast_slice(bits),
        )?;
    }
    Ok(())
}

/// Rounds float32 values in place to the nearest binary16 value (as [`write_f16`] stores
/// them), so a float16 operand computed in float32 holds only values its type can hold.
pub fn round_to_f16(values: &mut [f32]) {
    let mut halves = [f16::ZERO; HALF_CHUNK];
    for chunk in values.chunks_mut(HALF_CHUNK) {
        let halves = &mut halves[..chunk.len()];
        halves.convert_from_f32_slice(chunk);
        halves.convert_to_f32_slice(chunk);
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    /// TENSOR_QUANT16_SYMM (and TENSOR_QUANT16_ASYMM, whose values are read as the same bits).
    I16(Vec<i16>),
}

/// A value with its dimensions (empty for scalars).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dims: Vec<u32>,
    pub data: Data,
}

fn try_vec<T: Clone>(len: usize, fill: T) -> HalResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        HalError::GeneralFailure(format!(
            "cannot allocate {len} elements of {} bytes",
            std::mem::size_of::<T>()
        ))
    })?;
    v.resize(len, fill);
    Ok(v)
}

#[allow(clippy::len_without_is_empty)]
impl Data {
    /// A zero-filled buffer for `len` elements of `ty` (fallible: a huge shape must not abort).
    pub fn zeros(ty: OperandType, len: usize) -> HalResult<Data> {
        Ok(match ty {
            OperandType::Float32 | OperandType::TensorFloat32 => Data::F32(try_vec(len, 0.0)?),
            OperandType::Int32 | OperandType::UInt32 | OperandType::TensorInt32 => {
                Data::I32(try_vec(len, 0)?)
            }
            // BOOL: one byte, nonzero is true (the NCHW `layout` flag); TENSOR_BOOL8 rides on
            // the byte storage too, one byte per element, the operand type telling them apart.
            // The 8-bit symmetric types (NNAPI 1.2) hold int8 values in the same bytes.
            OperandType::TensorQuant8Asymm
            | OperandType::Bool
            | OperandType::TensorBool8
            | OperandType::TensorQuant8Symm
            | OperandType::TensorQuant8SymmPerChannel => Data::U8(try_vec(len, 0)?),
            OperandType::TensorQuant16Symm | OperandType::TensorQuant16Asymm => {
                Data::I16(try_vec(len, 0)?)
            }
            // OEM and post-1.0 types only ever reach opaque (unsupported) operations.
            _ => {
                return Err(HalError::GeneralFailure(format!(
                    "{ty} operands cannot be executed"
                )))
            }
        })
    }

    /// Decodes little-endian bytes holding values of `ty`.
    pub fn decode(ty: OperandType, bytes: &[u8]) -> HalResult<Data> {
        Ok(match Data::zeros(ty, 0)? {
            Data::F32(_) => {
                let mut v = try_vec(bytes.len() / 4, 0.0f32)?;
                for (d, c) in v.iter_mut().zip(bytes.chunks_exact(4)) {
                    *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                Data::F32(v)
            }
            Data::I32(_) => {
                let mut v = try_vec(bytes.len() / 4, 0i32)?;
                for (d, c) in v.iter_mut().zip(bytes.chunks_exact(4)) {
                    *d = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                Data::I32(v)
            }
            Data::U8(_) => {
                let mut v = try_vec(bytes.len(), 0u8)?;
                v.copy_from_slice(bytes);
                Data::U8(v)
            }
            Data::I16(_) => {
                let mut v = try_vec(bytes.len() / 2, 0i16)?;
                for (d, c) in v.iter_mut().zip(bytes.chunks_exact(2)) {
                    *d = i16::from_le_bytes([c[0], c[1]]);
                }
                Data::I16(v)
            }
        })
    }

    /// Reads `len` values of `ty` stored little-endian in `pool` from `offset` on, decoding
    /// them on the way (no intermediate byte buffer for mapped pools).
    pub fn read(ty: OperandType, pool: &MappedPool, offset: u64, len: usize) -> HalResult<Data> {
        let mut data = Data::zeros(ty, len)?;
        match &mut data {
            Data::F32(v) => read_words(pool, offset, v)?,
            Data::I32(v) => read_words(pool, offset, v)?,
            Data::U8(v) => pool.read(offset, v)?,
            Data::I16(v) => read_halves(pool, offset, v)?,
        }
        Ok(data)
    }

    /// Writes the values little-endian into `pool` from `offset` on.
    pub fn write(&self, pool: &MappedPool, offset: u64) -> HalResult<()> {
        match self {
            Data::F32(v) => write_words(pool, offset, v),
            Data::I32(v) => write_words(pool, offset, v),
            Data::U8(v) => pool.write(offset, v),
            Data::I16(v) => write_halves(pool, offset, v),
        }
    }

    /// Bytes of the little-endian encoding.
    pub fn byte_len(&self) -> usize {
        match self {
            Data::F32(v) => v.len() * 4,
            Data::I32(v) => v.len() * 4,
            Data::U8(v) => v.len(),
            Data::I16(v) => v.len() * 2,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::U8(v) => v.len(),
            Data::I16(v) => v.len(),
        }
    }

    /// Little-endian bytes of the values.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U8(v) => v.clone(),
            Data::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

impl Tensor {
    pub fn f32(&self) -> HalResult<&[f32]> {
        match &self.data {
            Data::F32(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected float32 data".into())),
        }
    }

    pub fn i32(&self) -> HalResult<&[i32]> {
        match &self.data {
            Data::I32(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected int32 data".into())),
        }
    }

    pub fn u8(&self) -> HalResult<&[u8]> {
        match &self.data {
            Data::U8(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected uint8 data".into())),
        }
    }

    pub fn f32_mut(&mut self) -> HalResult<&mut [f32]> {
        match &mut self.data {
            Data::F32(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected float32 data".into())),
        }
    }

    pub fn i32_mut(&mut self) -> HalResult<&mut [i32]> {
        match &mut self.data {
            Data::I32(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected int32 data".into())),
        }
    }

    pub fn u8_mut(&mut self) -> HalResult<&mut [u8]> {
        match &mut self.data {
            Data::U8(v) => Ok(v),
            _ => Err(HalError::GeneralFailure("expected uint8 data".into())),
        }
    }
}

/// A borrowed view of operand values: a constant, a slot of an execution's arena, or a
/// [`Tensor`] of the dynamic path. Kernels only ever see these.
#[derive(Clone, Copy, Debug)]
pub enum DataRef<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
    U8(&'a [u8]),
    I16(&'a [i16]),
}

/// The writable counterpart of [`DataRef`], for operation outputs.
#[derive(Debug)]
pub enum DataMut<'a> {
    F32(&'a mut [f32]),
    I32(&'a mut [i32]),
    U8(&'a mut [u8]),
    I16(&'a mut [i16]),
}

/// Operand values with their dimensions, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub dims: &'a [u32],
    pub data: DataRef<'a>,
}

/// An operation output: dimensions and the buffer to fill.
#[derive(Debug)]
pub struct TensorMut<'a> {
    pub dims: &'a [u32],
    pub data: DataMut<'a>,
}

fn wrong(want: &str) -> HalError {
    HalError::GeneralFailure(format!("expected {want} data"))
}

#[allow(clippy::len_without_is_empty)]
impl<'a> DataRef<'a> {
    pub fn len(&self) -> usize {
        match self {
            DataRef::F32(v) => v.len(),
            DataRef::I32(v) => v.len(),
            DataRef::U8(v) => v.len(),
            DataRef::I16(v) => v.len(),
        }
    }

    /// Little-endian bytes of the values.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            DataRef::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            DataRef::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            DataRef::U8(v) => v.to_vec(),
            DataRef::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

impl<'a> TensorRef<'a> {
    pub fn f32(&self) -> HalResult<&'a [f32]> {
        match self.data {
            DataRef::F32(v) => Ok(v),
            _ => Err(wrong("float32")),
        }
    }

    pub fn i32(&self) -> HalResult<&'a [i32]> {
        match self.data {
            DataRef::I32(v) => Ok(v),
            _ => Err(wrong("int32")),
        }
    }

    pub fn u8(&self) -> HalResult<&'a [u8]> {
        match self.data {
            DataRef::U8(v) => Ok(v),
            _ => Err(wrong("uint8")),
        }
    }

    pub fn i16(&self) -> HalResult<&'a [i16]> {
        match self.data {
            DataRef::I16(v) => Ok(v),
            _ => Err(wrong("int16")),
        }
    }
}

impl TensorMut<'_> {
    pub fn f32_mut(&mut self) -> HalResult<&mut [f32]> {
        match &mut self.data {
            DataMut::F32(v) => Ok(v),
            _ => Err(wrong("float32")),
        }
    }

    pub fn i32_mut(&mut self) -> HalResult<&mut [i32]> {
        match &mut self.data {
            DataMut::I32(v) => Ok(v),
            _ => Err(wrong("int32")),
        }
    }

    pub fn u8_mut(&mut self) -> HalResult<&mut [u8]> {
        match &mut self.data {
            DataMut::U8(v) => Ok(v),
            _ => Err(wrong("uint8")),
        }
    }

    pub fn i16_mut(&mut self) -> HalResult<&mut [i16]> {
        match &mut self.data {
            DataMut::I16(v) => Ok(v),
            _ => Err(wrong("int16")),
        }
    }

    /// Copies `src` (of the same type and length) into this output.
    pub fn copy_from(&mut self, src: DataRef<'_>) -> HalResult<()> {
        match (&mut self.data, src) {
            (DataMut::F32(d), DataRef::F32(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (DataMut::I32(d), DataRef::I32(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (DataMut::U8(d), DataRef::U8(s)) if d.len() == s.len() => d.copy_from_slice(s),
            (DataMut::I16(d), DataRef::I16(s)) if d.len() == s.len() => d.copy_from_slice(s),
            _ => return Err(wrong("same-typed, same-sized")),
        }
        Ok(())
    }
}

impl Tensor {
    pub fn view(&self) -> TensorRef<'_> {
        TensorRef {
            dims: &self.dims,
            data: match &self.data {
                Data::F32(v) => DataRef::F32(v),
                Data::I32(v) => DataRef::I32(v),
                Data::U8(v) => DataRef::U8(v),
                Data::I16(v) => DataRef::I16(v),
            },
        }
    }

    pub fn view_mut(&mut self) -> TensorMut<'_> {
        TensorMut {
            dims: &self.dims,
            data: match &mut self.data {
                Data::F32(v) => DataMut::F32(v),
                Data::I32(v) => DataMut::I32(v),
                Data::U8(v) => DataMut::U8(v),
                Data::I16(v) => DataMut::I16(v),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_encode_round_trip() {
        let d = Data::F32(vec![1.5, -2.0]);
        assert_eq!(
            Data::decode(OperandType::TensorFloat32, &d.to_le_bytes()).unwrap(),
            d
        );
        let d = Data::I32(vec![7, -9]);
        assert_eq!(
            Data::decode(OperandType::Int32, &d.to_le_bytes()).unwrap(),
            d
        );
        assert_eq!(
            Data::decode(OperandType::TensorQuant8Asymm, &[1, 2]).unwrap(),
            Data::U8(vec![1, 2])
        );
        let d = Data::I16(vec![-32768, 2047, -3]);
        assert_eq!(d.to_le_bytes(), [0, 0x80, 0xff, 0x07, 0xfd, 0xff]);
        assert_eq!(
            Data::decode(OperandType::TensorQuant16Symm, &d.to_le_bytes()).unwrap(),
            d
        );
    }

    /// Values at the edges of binary16 and their bits, worked out by hand: the largest
    /// finite value, the halfway point above it (a tie, rounded to even: infinity), the
    /// subnormals and their ties, ties to even among normals, signed zero, infinities.
    const EDGES: &[(f32, u16)] = &[
        (65504.0, 0x7bff),
        (65519.0, 0x7bff),
        (65520.0, 0x7c00),
        (1.0e6, 0x7c00),
        (-1.0e6, 0xfc00),
        (f32::INFINITY, 0x7c00),
        (f32::NEG_INFINITY, 0xfc00),
        (6.103_515_6e-5, 0x0400), // 2^-14, the smallest normal
        (6.097_555e-5, 0x03ff),   // 1023 · 2^-24, the largest subnormal
        (5.960_464_5e-8, 0x0001), // 2^-24, the smallest subnormal
        (2.980_232_2e-8, 0x0000), // 2^-25: a tie, to even (zero)
        (4.470_348_4e-8, 0x0001), // 1.5 · 2^-25: above the tie
        (1.788_139_3e-7, 0x0003), // 3 · 2^-24, exact
        (8.940_697e-8, 0x0002),   // 1.5 · 2^-24: a tie, to even (2)
        (1.000_488_3, 0x3c00),    // 1 + 2^-11: a tie, to even (1)
        (1.001_464_8, 0x3c02),    // 1 + 3 · 2^-11: a tie, to even
        (-0.0, 0x8000),
        (-2.0, 0xc000),
        (0.333_333_34, 0x3555),
    ];

    #[test]
    fn rounding_to_f16_at_the_edges_of_the_range() {
        for &(x, bits) in EDGES {
            assert_eq!(f16::from_f32(x).to_bits(), bits, "{x:e} (scalar)");
            let mut v = [x];
            round_to_f16(&mut v);
            assert_eq!(
                v[0].to_bits(),
                f16::from_bits(bits).to_f32().to_bits(),
                "{x:e}"
            );
        }
        let mut nan = [f32::NAN, -f32::NAN];
        round_to_f16(&mut nan);
        assert!(nan.iter().all(|v| v.is_nan()));
    }

    /// A spread of float32 bit patterns: every exponent, several mantissas (the ties included),
    /// both signs.
    fn spread(n: usize) -> Vec<f32> {
        let mut s = 0x9e37_79b9u32;
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let exp = (i as u32 * 7) % 256;
                let man = match i % 4 {
                    0 => 0x1000, // a tie at the binary16 cut
                    1 => 0x3000, // a tie, odd side
                    _ => s & 0x7f_ffff,
                };
                f32::from_bits(((s & 1) << 31) | (exp << 23) | man)
            })
            .collect()
    }

    #[test]
    fn bulk_rounding_matches_the_scalar_conversion_past_chunk_edges() {
        for n in [
            0,
            1,
            7,
            8,
            9,
            HALF_CHUNK - 1,
            HALF_CHUNK,
            HALF_CHUNK + 3,
            2 * HALF_CHUNK + 517,
        ] {
            let x = spread(n);
            let mut v = x.clone();
            round_to_f16(&mut v);
            for (i, (&a, &r)) in x.iter().zip(&v).enumerate() {
                let want = f16::from_f32(a).to_f32();
                assert!(
                    want.to_bits() == r.to_bits() || (want.is_nan() && r.is_nan()),
                    "n {n}, element {i}: {a:e} rounded to {r:e}, the scalar conversion {want:e}"
                );
            }
        }
    }

    #[test]
    fn float16_request_memory_round_trips_at_an_offset() {
        use nnhal_hal::memory::{create_memfd, Memory};
        let n = 2 * HALF_CHUNK + 77;
        let offset = 6u64;
        let size = offset + 2 * n as u64;
        let memory = Memory::shared(create_memfd("f16", &[], size, false).unwrap(), size);
        let pool = MappedPool::map(&memory, "f16").unwrap();
        let x = spread(n);
        write_f16(&pool, offset, &x).unwrap();
        let bytes = pool.read_vec(offset, 2 * n).unwrap();
        for (i, (c, &a)) in bytes.chunks_exact(2).zip(&x).enumerate() {
            let got = u16::from_le_bytes([c[0], c[1]]);
            let want = f16::from_f32(a);
            assert!(
                got == want.to_bits() || (want.is_nan() && f16::from_bits(got).is_nan()),
                "element {i}: {a:e} stored as {got:#06x}, want {:#06x}",
                want.to_bits()
            );
        }
        let mut back = vec![0f32; n];
        read_f16(&pool, offset, &mut back).unwrap();
        for (i, (&r, &a)) in back.iter().zip(&x).enumerate() {
            let want = f16::from_f32(a).to_f32();
            assert!(
                r.to_bits() == want.to_bits() || (want.is_nan() && r.is_nan()),
                "element {i}"
            );
        }
        // Every binary16 value widens exactly and narrows back to its own bits.
        let all: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
        let size = all.len() as u64;
        let memory = Memory::shared(create_memfd("all", &all, size, true).unwrap(), size);
        let pool = MappedPool::map(&memory, "all").unwrap();
        let mut wide = vec![0f32; 1 << 16];
        read_f16(&pool, 0, &mut wide).unwrap();
        for (b, &w) in (0..=u16::MAX).zip(&wide) {
            let h = f16::from_bits(b);
            if h.is_nan() {
                assert!(w.is_nan());
            } else {
                assert_eq!(w.to_bits(), h.to_f32().to_bits());
                assert_eq!(f16::from_f32(w).to_bits(), b);
            }
        }
    }

    #[test]
    fn absurd_allocations_fail_cleanly() {
        assert!(Data::zeros(OperandType::TensorFloat32, usize::MAX / 2).is_err());
    }
}
