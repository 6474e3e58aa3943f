//! 64-byte aligned, zero-initialised buffers of plain numbers: packed weights and per-execution
//! arenas. Aligned so micro-kernels may use aligned vector loads on them and so no vector ever
//! straddles a cache line needlessly.

use std::marker::PhantomData;

/// One cache line; the allocation unit of [`AlignedBuf`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Alignment of every [`AlignedBuf`], in bytes.
pub const ALIGN: usize = 64;

mod sealed {
    pub trait Sealed {}
}

/// Numbers for which every bit pattern is a valid value and that need at most [`ALIGN`]
/// bytes of alignment, so a run of zeroed cache lines can be viewed as a slice of them.
pub trait Plain: sealed::Sealed + Copy + Default + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Plain for $t {}
    )*};
}
plain!(u8, i8, i16, u16, i32, u32, f32);

/// A zero-filled, 64-byte aligned buffer of `len` values of `T`.
#[derive(Clone)]
pub struct AlignedBuf<T: Plain> {
    lines: Vec<Line>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Plain> std::fmt::Debug for AlignedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Plain> Default for AlignedBuf<T> {
    fn default() -> Self {
        Self {
            lines: Vec::new(),
            len: 0,
            _t: PhantomData,
        }
    }
}

impl<T: Plain> AlignedBuf<T> {
    /// `len` zeros, or `None` when the allocation fails (a huge model must not abort).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let count = bytes.div_ceil(ALIGN);
        let mut lines = Vec::new();
        lines.try_reserve_exact(count).ok()?;
        lines.resize(count, Line([0; 64]));
        Some(Self {
            lines,
            len,
            _t: PhantomData,
        })
    }

    /// `len` zeros. Panics only when memory is exhausted.
    pub fn zeroed(len: usize) -> Self {
        Self::try_zeroed(len).expect("cannot allocate an aligned buffer")
    }

    /// A copy of `values`.
    pub fn from_slice(values: &[T]) -> Self {
        let mut b = Self::zeroed(values.len());
        b.as_mut_slice().copy_from_slice(values);
        b
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `lines` holds at least `len · size_of::<T>()` initialised bytes (zeroed at
        // allocation, written only through typed slices), its start is 64-byte aligned, which
        // satisfies any `Plain` type, and every bit pattern is a valid `T`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<T>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Plain> std::ops::Deref for AlignedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Plain> std::ops::DerefMut for AlignedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        let mut b = AlignedBuf::<f32>::zeroed(37);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(b.iter().all(|&x| x == 0.0));
        b[36] = 2.5;
        assert_eq!(b.as_slice()[36], 2.5);
        assert_eq!(
            AlignedBuf::<u8>::from_slice(&[1, 2, 3]).as_slice(),
            &[1, 2, 3]
        );
        assert!(AlignedBuf::<i32>::try_zeroed(usize::MAX / 2).is_none());
    }
}
