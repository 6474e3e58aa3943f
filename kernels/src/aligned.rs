//! 64-byte aligned, zero-initialised buffers of plain numbers: packed weights and per-execution
//! arenas. Aligned so micro-kernels may use aligned vector loads on them and so no vector ever
//! straddles a cache line needlessly.
//!
//! Buffers of [`HUGE`] bytes or more come from their own anonymous mapping, 2 MiB aligned and
//! advised for transparent huge pages (`madvise(MADV_HUGEPAGE)`; where the kernel has none, the
//! advice is ignored): one fault then maps 2 MiB instead of 4 KiB, which is most of the cost of
//! filling a fresh buffer of packed weights, and the kernel's zero pages need no second zeroing
//! pass.

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
plain!(u8, i8, i16, u16, i32, u32, i64, f32);

/// Size from which an [`AlignedBuf`] gets its own huge-page-advised mapping: one transparent
/// huge page.
pub const HUGE: usize = 2 << 20;

/// Where an [`AlignedBuf`]'s bytes live.
enum Storage {
    /// Heap cache lines (buffers under [`HUGE`] bytes).
    Lines(Vec<Line>),
    /// An anonymous mapping (zero-filled by the kernel) whose bytes from its first 2 MiB
    /// multiple of [`HUGE`], hold the values.
    /// boundary on hold the values ([`huge_start`]; not stored, which keeps an
    /// [`AlignedBuf`] at four words).
    Map(memmap2::MmapMut),
}

/// Advises `len` bytes of `map` from `start` for transparent huge pages (Linux hosts; the
/// advice is not exposed for Android's libc target, where the buffer keeps small pages).
#[cfg(target_os = "linux")]
fn advise_huge(map: &memmap2::MmapMut, start: usize, len: usize) {
    let _ = map.advise_range(memmap2::Advice::HugePage, start, len);
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_map: &memmap2::MmapMut, _start: usize, _len: usize) {}

/// Bytes from `p` to the next multiple of [`HUGE`] (0 when `p` is one).
fn huge_start(p: *const u8) -> usize {
    (HUGE - p as usize % HUGE) % HUGE
}

impl Storage {
    /// At least `bytes` zero bytes, 64-byte aligned; `None` when memory is exhausted.
    fn zeroed(bytes: usize) -> Option<Self> {
        if bytes < HUGE {
            let count = bytes.div_ceil(ALIGN);
            let mut lines = Vec::new();
            lines.try_reserve_exact(count).ok()?;
            lines.resize(count, Line([0; 64]));
            return Some(Storage::Lines(lines));
        }
        let map = memmap2::MmapMut::map_anon(bytes.checked_add(HUGE)?).ok()?;
        let start = huge_start(map.as_ptr());
        // Only whole huge pages are advised: the tail keeps small pages, so no buffer holds
        // more than its own size plus one small page. A refusal (no transparent huge pages)
        // only leaves the small pages.
        advise_huge(&map, start, bytes / HUGE * HUGE);
        Some(Storage::Map(map))
    }

    fn ptr(&self) -> *const u8 {
        match self {
            Storage::Lines(lines) => lines.as_ptr().cast(),
            Storage::Map(map) => map[huge_start(map.as_ptr())..].as_ptr(),
        }
    }

    fn mut_ptr(&mut self) -> *mut u8 {
        match self {
            Storage::Lines(lines) => lines.as_mut_ptr().cast(),
            Storage::Map(map) => {
                let start = huge_start(map.as_ptr());
                map[start..].as_mut_ptr()
            }
        }
    }
}

/// A zero-filled, 64-byte aligned buffer of `len` values of `T`.
pub struct AlignedBuf<T: Plain> {
    storage: Storage,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Plain> Clone for AlignedBuf<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self.as_slice())
    }
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
            storage: Storage::Lines(Vec::new()),
            len: 0,
            _t: PhantomData,
        }
    }
}

impl<T: Plain> AlignedBuf<T> {
    /// `len` zeros, or `None` when the allocation fails (a huge model must not abort).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        Some(Self {
            storage: Storage::zeroed(bytes)?,
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
        // SAFETY: `storage` holds at least `len · size_of::<T>()` initialised bytes (zeroed at
        // allocation, written only through typed slices), its start is 64-byte aligned (heap
        // lines) or 2 MiB aligned (mapping), which satisfies any `Plain` type, and every bit
        // pattern is a valid `T`.
        unsafe { std::slice::from_raw_parts(self.storage.ptr().cast::<T>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.storage.mut_ptr().cast::<T>(), self.len) }
    }

    /// The values' bytes, writable (any bytes are valid values): where a packed-weight image
    /// is read straight into its buffer.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self.as_mut_slice())
    }

    /// The values' bytes in memory order (a packed-weight image, see [`crate::persist`]).
    pub fn as_bytes(&self) -> &[u8] {
        bytes_of(self.as_slice())
    }

    /// `len` values read from their bytes in memory order (`bytes.len() == len ·
    /// size_of::<T>()`), in one pass; `None` when the length disagrees or the allocation
    /// fails.
    pub fn from_bytes(bytes: &[u8], len: usize) -> Option<Self> {
        if len.checked_mul(std::mem::size_of::<T>())? != bytes.len() {
            return None;
        }
        if bytes.len() >= HUGE {
            let mut b = Self::try_zeroed(len)?;
            b.as_bytes_mut().copy_from_slice(bytes);
            return Some(b);
        }
        let mut lines = Vec::new();
        lines.try_reserve_exact(bytes.len().div_ceil(ALIGN)).ok()?;
        lines.extend(bytes.chunks(ALIGN).map(|c| {
            let mut line = [0u8; ALIGN];
            line[..c.len()].copy_from_slice(c);
            Line(line)
        }));
        Some(Self {
            storage: Storage::Lines(lines),
            len,
            _t: PhantomData,
        })
    }
}

/// The bytes of plain values in memory order.
pub fn bytes_of<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding bytes, so every byte of the slice is initialised;
    // the view has the slice's exact extent and lifetime, and `u8` needs no alignment.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The bytes of plain values in memory order, writable.
pub fn bytes_of_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: the view covers exactly the values' bytes, exclusively borrowed; `Plain` values
    // have no padding and take any bit pattern, so whatever is written leaves valid values,
    // and `u8` needs no alignment.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

/// Plain values from their bytes in memory order; `None` when `bytes` is not a whole number
/// of values.
pub fn vec_from_bytes<T: Plain>(bytes: &[u8]) -> Option<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    let mut v = Vec::new();
    v.try_reserve_exact(bytes.len() / size).ok()?;
    v.resize(bytes.len() / size, T::default());
    // SAFETY: `v` holds exactly `bytes.len()` bytes of `T`s, which have no padding and take
    // any bit pattern, so overwriting them byte-wise leaves valid values; the regions are
    // distinct allocations.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len())
    };
    Some(v)
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

    #[test]
    fn huge_buffers_are_mapped_aligned_and_zeroed() {
        let n = HUGE / 4 * 3 + 5;
        let mut b = AlignedBuf::<f32>::zeroed(n);
        assert!(matches!(b.storage, Storage::Map(_)));
        assert_eq!(
            std::mem::size_of::<AlignedBuf<f32>>(),
            4 * std::mem::size_of::<usize>()
        );
        assert_eq!(b.as_ptr() as usize % HUGE, 0);
        assert!(b.iter().all(|&x| x == 0.0));
        b[n - 1] = 1.5;
        b.as_bytes_mut()[..4].copy_from_slice(&2.5f32.to_ne_bytes());
        let c = b.clone();
        assert_eq!((c[0], c[n - 1], c.len()), (2.5, 1.5, n));
        let d = AlignedBuf::<f32>::from_bytes(c.as_bytes(), n).unwrap();
        assert_eq!(d.as_slice(), c.as_slice());
    }
}
