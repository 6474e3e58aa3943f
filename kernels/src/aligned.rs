//! 64-byte aligned, zero-initialised buffers of plain numbers: packed weights and per-execution
//! arenas. Aligned so micro-kernels may use aligned vector loads on them and so no vector ever
//! straddles a cache line needlessly.
//!
//! Buffers of [`HUGE`] bytes or more come from their own anonymous mapping, 2 MiB aligned and
//! advised for transparent huge pages (`madvise(MADV_HUGEPAGE)`; where the kernel has none, the
//! advice is ignored): one fault then maps 2 MiB instead of 4 KiB, which is most of the cost of
//! filling a fresh buffer of packed weights, and the kernel's zero pages need no second zeroing
//! pass.
//!
//! A [`Region`] is one such mapping that many buffers are carved from, for a compilation-cache
//! restore that reads a whole model's packed weights at once: one region sized from the cache
//! file, so a 17 MB restore costs a few huge-page faults instead of one small fault (and one
//! heap zeroing pass) per 4 KiB, and the region is unmapped when its last buffer is dropped.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
    /// Bytes from `at` of a [`Region`]'s mapping, which no other buffer shares.
    Carved { map: Arc<RegionMap>, at: usize },
}

/// Advises `len` bytes of `map` from `start` for transparent huge pages (Linux hosts; the
/// advice is not exposed for Android's libc target, where the buffer keeps small pages).
#[cfg(target_os = "linux")]
fn advise_huge(map: &memmap2::MmapMut, start: usize, len: usize) {
    let _ = map.advise_range(memmap2::Advice::HugePage, start, len);
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_map: &memmap2::MmapMut, _start: usize, _len: usize) {}

/// Faults in `len` bytes of `map` from `start` for writing, in one call (Linux 5.14 on; an
/// older kernel refuses and the pages fault in as they are first written).
#[cfg(target_os = "linux")]
fn populate(map: &memmap2::MmapMut, start: usize, len: usize) {
    let _ = map.advise_range(memmap2::Advice::PopulateWrite, start, len);
}

#[cfg(not(target_os = "linux"))]
fn populate(_map: &memmap2::MmapMut, _start: usize, _len: usize) {}

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
            // `at` lies within the mapping (checked when carved), so the offset stays in it.
            Storage::Carved { map, at } => map.0.as_ptr().wrapping_add(*at),
        }
    }

    fn mut_ptr(&mut self) -> *mut u8 {
        match self {
            Storage::Lines(lines) => lines.as_mut_ptr().cast(),
            Storage::Map(map) => {
                let start = huge_start(map.as_ptr());
                map[start..].as_mut_ptr()
            }
            Storage::Carved { map, at } => map.0.as_mut_ptr().wrapping_add(*at),
        }
    }
}

/// Bytes mapped by the [`Region`]s alive in this process (a diagnostic: what restored
/// compilation caches hold).
static REGION_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes of address space the [`Region`]s alive in this process map (their buffers' bytes,
/// alignment and the slack past them).
pub fn region_bytes() -> usize {
    REGION_BYTES.load(Ordering::Relaxed)
}

/// A region's mapping, counted in [`region_bytes`] while it lives.
struct RegionMap(memmap2::MmapRaw);

impl Drop for RegionMap {
    fn drop(&mut self) {
        REGION_BYTES.fetch_sub(self.0.len(), Ordering::Relaxed);
    }
}

/// One anonymous mapping (zero-filled by the kernel, 2 MiB aligned, its whole huge pages
/// advised for transparent huge pages and faulted in at once) that buffers are carved from in
/// order, each 64-byte aligned and disjoint from every other. Each carved buffer holds the
/// mapping, which is unmapped when the region and the last of its buffers are gone.
pub struct Region {
    map: Arc<RegionMap>,
    /// Offset of the first free byte.
    next: usize,
    /// Offset past the last byte buffers may take.
    end: usize,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("next", &self.next)
            .field("end", &self.end)
            .finish()
    }
}

impl Region {
    /// A region of at least `bytes` bytes; `None` when it cannot be mapped. The bytes are
    /// faulted in here (whole huge pages where the kernel has them), so the caller should ask
    /// for about what it will fill: the bytes past that only take address space.
    pub fn new(bytes: usize) -> Option<Region> {
        let map = memmap2::MmapMut::map_anon(bytes.checked_add(HUGE)?.max(1)).ok()?;
        let start = huge_start(map.as_ptr());
        // Whole huge pages only, as for a single mapped buffer: the tail keeps small pages.
        advise_huge(&map, start, bytes / HUGE * HUGE);
        // Faulting in means the kernel zeroing every page: on a team, each thread takes a
        // share of whole huge pages.
        let parts = crate::parallel::threads().min(bytes / HUGE).max(1);
        let share = bytes.div_ceil(parts).next_multiple_of(HUGE);
        crate::parallel::for_parts(parts, |i| {
            let from = i * share;
            populate(&map, start + from, share.min(bytes.saturating_sub(from)));
        });
        // Buffers may take the slack past `bytes` too (it stays unfaulted unless used).
        let end = map.len();
        REGION_BYTES.fetch_add(end, Ordering::Relaxed);
        Some(Region {
            map: Arc::new(RegionMap(memmap2::MmapRaw::from(map))),
            next: start,
            end,
        })
    }

    /// Bytes not carved yet.
    pub fn left(&self) -> usize {
        self.end - self.next
    }

    /// The next `len` values, 64-byte aligned and zero-filled (or as the file read left them:
    /// nothing else ever writes them); `None` when the region has no room for them.
    pub fn carve<T: Plain>(&mut self, len: usize) -> Option<AlignedBuf<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let at = self.next.checked_next_multiple_of(ALIGN)?;
        let stop = at.checked_add(bytes)?;
        if stop > self.end {
            return None;
        }
        self.next = stop;
        Some(AlignedBuf {
            storage: Storage::Carved {
                map: Arc::clone(&self.map),
                at,
            },
            len,
            _t: PhantomData,
        })
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
        // lines, carved buffers) or 2 MiB aligned (own mapping), which satisfies any `Plain`
        // type, and every bit pattern is a valid `T`. A carved buffer's bytes are its own: the
        // region hands out disjoint ranges, and the mapping lives while `storage` holds it.
        unsafe { std::slice::from_raw_parts(self.storage.ptr().cast::<T>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes the view exclusive (no other buffer
        // carved from the same region overlaps these bytes).
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

    /// A large region is faulted in whole when it is made: every byte asked for is resident
    /// before anything is written, and reads as zero. Native
    /// x86_64 Linux only: under a user-mode emulator (the aarch64 runs) `/proc/self/smaps`
    /// describes the emulator's own mappings, not the guest addresses.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn a_large_region_is_resident_and_zero_from_the_start() {
        let bytes = 8 * HUGE + 3 * 4096 + 13;
        let mut region = Region::new(bytes).unwrap();
        let start = region.map.0.as_ptr() as usize + region.next;
        // The huge-page advice splits the mapping in two (the tail keeps small pages): add
        // up the resident bytes of every mapping the region's bytes fall in.
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut rss, mut inside) = (0, false);
        for line in smaps.lines() {
            let range = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((Ok(lo), Ok(hi))) =
                range.map(|(lo, hi)| (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)))
            {
                inside = lo < start + bytes && start < hi;
            } else if inside && line.starts_with("Rss:") {
                let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
                rss += kib * 1024;
            }
        }
        assert!(rss >= bytes, "{rss} of {bytes} bytes resident");
        let buf = region.carve::<u8>(bytes).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
    }

    /// Buffers carved from a region are aligned, zeroed, disjoint and refused past its end;
    /// the mapping lives as long as the last of them, whatever the order they go in.
    #[test]
    fn region_carves_aligned_disjoint_buffers_that_keep_it_alive() {
        let bytes = HUGE + 3 * 4096 + 13;
        let mut region = Region::new(bytes).unwrap();
        assert_eq!(
            std::mem::size_of::<AlignedBuf<u8>>(),
            4 * std::mem::size_of::<usize>()
        );
        let mut a = region.carve::<u8>(13).unwrap();
        let mut b = region.carve::<f32>(HUGE / 4).unwrap();
        let mut c = region.carve::<i32>(1000).unwrap();
        let empty = region.carve::<i16>(0).unwrap();
        assert!(empty.is_empty());
        for p in [
            a.as_ptr() as usize,
            b.as_ptr() as usize,
            c.as_ptr() as usize,
        ] {
            assert_eq!(p % ALIGN, 0);
        }
        // The first buffer starts the region, on a huge-page boundary.
        assert_eq!(a.as_ptr() as usize % HUGE, 0);
        assert!(a.iter().all(|&x| x == 0));
        assert!(b.iter().all(|&x| x == 0.0) && c.iter().all(|&x| x == 0));
        a.fill(0xAB);
        b.fill(-1.0);
        c.fill(7);
        assert!(a.iter().all(|&x| x == 0xAB));
        assert!(b.iter().all(|&x| x == -1.0));
        assert!(c.iter().all(|&x| x == 7));
        // Past the end: refused, nothing taken.
        let left = region.left();
        assert!(region.carve::<u8>(usize::MAX).is_none());
        assert!(region.carve::<i64>(usize::MAX / 4).is_none());
        assert!(region.carve::<u8>(left + 1).is_none());
        assert_eq!(region.left(), left);
        let last = region.carve::<u8>(left).unwrap();
        assert_eq!(region.left(), 0);
        assert!(region.carve::<u8>(1).is_none());
        let map = match &b.storage {
            Storage::Carved { map, .. } => Arc::clone(map),
            _ => panic!("a carved buffer holds its region"),
        };
        // The region, the buffers and this handle: the mapping goes with the last of them.
        assert_eq!(Arc::strong_count(&map), 7);
        drop(region);
        drop((a, c, empty, last));
        assert_eq!(Arc::strong_count(&map), 2);
        assert!(b.iter().all(|&x| x == -1.0));
        let copy = b.clone();
        drop(b);
        assert_eq!(Arc::strong_count(&map), 1);
        assert!(matches!(copy.storage, Storage::Map(_)));
        assert!(copy.iter().all(|&x| x == -1.0));
    }
}
