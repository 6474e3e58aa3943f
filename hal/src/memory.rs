//! Shared-memory pools (types.hal `Model.pools`/`Request.pools`; the AIDL `Memory` union).
//!
//! A pool arrives as a file descriptor: an ashmem region on Android, a memfd or any mappable
//! file on Linux hosts. Two rules keep the service alive whatever the client does:
//!
//! * The region is checked against `fstat` before anything touches it: pages past the end of
//!   a file raise SIGBUS when accessed.
//! * A client may shrink an unsealed file after the check. Only regions the client cannot shrink
//!   (memfds sealed with `F_SEAL_SHRINK`, and character devices such as ashmem whose size is
//!   fixed when created) are memory-mapped; anything else is read and written with positional
//!   I/O, where a shrink shows up as a short read and becomes an error instead of a signal.
//!
//! Data is copied in and out at this boundary with bounds checks in u64: no `&[f32]` is ever
//! built over memory another process can write, and nothing here assumes alignment.
//!
//! Mapping and unmapping cost more than a small model's whole execution (mmap, the page faults
//! of first touch, munmap's TLB shootdown), and clients reuse the same pools execution after
//! execution. A [`PoolCache`] therefore keeps the mappings of shrink-sealed memfds between
//! executions, keyed so that a hit is exactly what a fresh `mmap` of that fd would have
//! produced (see [`PoolCache`]).

use crate::error::{HalError, HalResult};
use nix::fcntl::{OFlag, SealFlag};
use nix::sys::stat::SFlag;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use sys::{fcntl, fstat};

/// `PROT_READ` / `PROT_WRITE` as carried by a mappable-file pool.
pub const PROT_READ: i32 = 0x1;
pub const PROT_WRITE: i32 = 0x2;

/// A pool as described by the client.
#[derive(Clone, Debug)]
pub enum Memory {
    /// A whole shared-memory region of `size` bytes (ashmem; a memfd on hosts), read-write.
    Ashmem { fd: Arc<OwnedFd>, size: u64 },
    /// `size` bytes of a file starting at `offset`, accessible with `prot`.
    MappableFile {
        fd: Arc<OwnedFd>,
        size: u64,
        prot: i32,
        offset: u64,
    },
    /// An AHardwareBuffer (`crate::ahwb`): usable as a BLOB with CPU access, on Android only.
    HardwareBuffer(Arc<crate::ahwb::HardwareBuffer>),
    /// A kind of memory the 1.0 driver cannot use (unknown names, memory-domain tokens).
    Unsupported(String),
}

impl Memory {
    /// A read-write shared-memory pool over a whole fd.
    pub fn shared(fd: OwnedFd, size: u64) -> Self {
        Memory::Ashmem {
            fd: Arc::new(fd),
            size,
        }
    }

    pub fn size(&self) -> u64 {
        match self {
            Memory::Ashmem { size, .. } | Memory::MappableFile { size, .. } => *size,
            Memory::HardwareBuffer(hb) => hb.size(),
            Memory::Unsupported(_) => 0,
        }
    }

    /// Static checks that need no system call (pool kinds, size, protection bits).
    pub fn validate(&self, what: &str) -> HalResult<()> {
        match self {
            Memory::HardwareBuffer(hb) => hb.validate(what)?,
            Memory::Unsupported(kind) => {
                invalid!("{what}: memory kind {kind} is not usable by an NNAPI 1.0 driver")
            }
            Memory::Ashmem { size, .. } => ensure!(*size > 0, "{what}: pool size is 0"),
            Memory::MappableFile {
                size, prot, offset, ..
            } => {
                ensure!(*size > 0, "{what}: pool size is 0");
                ensure!(
                    prot & !(PROT_READ | PROT_WRITE) == 0 && prot & PROT_READ != 0,
                    "{what}: protection {prot:#x} must be PROT_READ or PROT_READ|PROT_WRITE"
                );
                ensure!(
                    offset.checked_add(*size).is_some(),
                    "{what}: offset + size overflows"
                );
            }
        }
        Ok(())
    }
}

enum Backing {
    /// A mapping the client cannot shrink under us (shared with a [`PoolCache`] when cached).
    Map(Arc<memmap2::MmapRaw>),
    /// Positional I/O on a (possibly shrinkable) file, starting at `base`.
    File { file: File, base: u64 },
    /// A BLOB hardware buffer locked for CPU access (fixed size while locked).
    #[cfg(all(feature = "aosp", target_os = "android"))]
    Blob(Arc<crate::ahwb::LockedBlob>),
}

impl Backing {
    /// The first byte of a region mapped into this process, or `None` for positional I/O.
    fn mapped_base(&self) -> Option<*mut u8> {
        match self {
            Backing::Map(map) => Some(map.as_mut_ptr()),
            #[cfg(all(feature = "aosp", target_os = "android"))]
            Backing::Blob(blob) => Some(blob.as_ptr()),
            Backing::File { .. } => None,
        }
    }
}

/// A pool made accessible to the driver. Reads and writes copy, with bounds checks.
pub struct MappedPool {
    backing: Backing,
    size: u64,
    writable: bool,
    /// (device, inode, base offset) of regular files, to detect two pools naming the same bytes.
    identity: Option<(u64, u64, u64)>,
}

impl std::fmt::Debug for MappedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedPool")
            .field("size", &self.size)
            .field("writable", &self.writable)
            .field("mapped", &self.backing.mapped_base().is_some())
            .finish()
    }
}

impl MappedPool {
    /// Makes `memory` accessible. `what` names the pool in error messages.
    pub fn map(memory: &Memory, what: &str) -> HalResult<MappedPool> {
        Self::open(memory, what, None)
    }

    /// As [`MappedPool::map`], taking a mapping from `cache` (or adding one to it) when the
    /// pool is a shrink-sealed regular file.
    fn open(memory: &Memory, what: &str, cache: Option<&PoolCache>) -> HalResult<MappedPool> {
        memory.validate(what)?;
        if let Memory::HardwareBuffer(hb) = memory {
            return Self::open_hardware_buffer(hb, what);
        }
        let (fd, size, offset, asked_writable) = match memory {
            Memory::Ashmem { fd, size } => (fd, *size, 0u64, true),
            Memory::MappableFile {
                fd,
                size,
                prot,
                offset,
            } => (fd, *size, *offset, prot & PROT_WRITE != 0),
            Memory::HardwareBuffer(_) | Memory::Unsupported(_) => {
                unreachable!("rejected by validate or opened above")
            }
        };
        // What the fd itself allows, decided here rather than by the first read or write of
        // an execution: an output in a pool that cannot be written is a malformed request.
        let access = fd_access(fd.as_fd(), what)?;
        let writable = match memory {
            // A shared-memory pool is read-write by kind, but a client may hand over a
            // read-only fd for inputs; the output check of the request refuses it as output.
            Memory::Ashmem { .. } => access.writable,
            _ => {
                ensure!(
                    !asked_writable || access.writable,
                    "{what}: PROT_WRITE asked of an fd that cannot be written (opened read-only, \
                     or sealed against writes)"
                );
                asked_writable
            }
        };
        let raw = fd.as_raw_fd();
        let meta = fstat(fd.as_fd())
            .map_err(|e| HalError::InvalidArgument(format!("{what}: fstat failed: {e}")))?;
        let len = usize::try_from(size).map_err(|_| {
            HalError::InvalidArgument(format!(
                "{what}: size {size} does not fit the address space"
            ))
        })?;

        let ft = SFlag::from_bits_truncate(meta.st_mode & SFlag::S_IFMT.bits());
        if ft == SFlag::S_IFREG {
            let end = offset + size; // cannot overflow: checked by validate
            let file_len = u64::try_from(meta.st_size).unwrap_or(0);
            ensure!(
                end <= file_len,
                "{what}: region [{offset}, {end}) lies past the end of the file ({file_len} bytes)"
            );
            let (dev, ino) = (meta.st_dev, meta.st_ino);
            let seals = seals(fd.as_fd());
            let backing = if seals.contains(SealFlag::F_SEAL_SHRINK) {
                let key = cache.and_then(|_| {
                    PoolKey::new(fd.as_fd(), dev, ino, offset, size, writable, seals)
                });
                Backing::Map(match (cache, key) {
                    (Some(cache), Some(key)) => match cache.get(&key) {
                        Some(map) => map,
                        None => cache.insert(key, map_region(raw, offset, len, writable, what)?),
                    },
                    _ => Arc::new(map_region(raw, offset, len, writable, what)?),
                })
            } else {
                let file = File::from(fd.try_clone().map_err(|e| {
                    HalError::InvalidArgument(format!("{what}: cannot duplicate fd: {e}"))
                })?);
                Backing::File { file, base: offset }
            };
            Ok(MappedPool {
                backing,
                size,
                writable,
                identity: Some((dev, ino, offset)),
            })
        } else if ft == SFlag::S_IFCHR || ft == SFlag::S_IFBLK {
            // ashmem: the driver refuses a mapping longer than the region, and the region
            // cannot shrink, so a successful mapping stays valid. Never cached: every ashmem
            // region reports the inode of /dev/ashmem, so (st_dev, st_ino) does not name one.
            // A device that maps at any length (/dev/zero) is not a region of the stated size:
            // what the client writes there is never what the service reads.
            ensure!(
                !maps_past(raw, offset, len),
                "{what}: fd maps past its stated size of {size} bytes: not a shared-memory \
                 region of that size (a device such as /dev/zero)"
            );
            let map = map_region(raw, offset, len, writable, what)?;
            Ok(MappedPool {
                backing: Backing::Map(Arc::new(map)),
                size,
                writable,
                identity: None,
            })
        } else {
            invalid!("{what}: fd is not a mappable file (pipe, socket or directory)")
        }
    }

    /// A BLOB hardware buffer, locked for CPU reads, and writes when its usage allows them
    /// (an output in a buffer without CPU write access is then refused as for a read-only fd).
    #[cfg(all(feature = "aosp", target_os = "android"))]
    fn open_hardware_buffer(hb: &crate::ahwb::HardwareBuffer, what: &str) -> HalResult<MappedPool> {
        let blob = crate::ahwb::LockedBlob::lock(hb, what)?;
        Ok(MappedPool {
            size: blob.len() as u64,
            writable: hb.cpu_writable(),
            backing: Backing::Blob(Arc::new(blob)),
            identity: None,
        })
    }

    /// Hosts refuse hardware buffers in [`Memory::validate`]; nothing reaches here.
    #[cfg(not(all(feature = "aosp", target_os = "android")))]
    fn open_hardware_buffer(hb: &crate::ahwb::HardwareBuffer, what: &str) -> HalResult<MappedPool> {
        hb.validate(what)?;
        Err(HalError::GeneralFailure(format!(
            "{what}: hardware buffers cannot be mapped here"
        )))
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// For regular files: (device, inode, offset of this pool's byte 0 in the file), so that
    /// regions of two pools naming the same file can be compared.
    pub fn identity(&self) -> Option<(u64, u64, u64)> {
        self.identity
    }

    fn check(&self, offset: u64, len: usize, what: &str) -> HalResult<()> {
        let end = offset.checked_add(len as u64);
        ensure!(
            end.is_some_and(|e| e <= self.size),
            "{what}: region at {offset} of {len} bytes exceeds the pool ({} bytes)",
            self.size
        );
        Ok(())
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the pool.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> HalResult<()> {
        self.check(offset, dst.len(), "read")?;
        if let Some(mapped) = self.backing.mapped_base() {
            // SAFETY: `check` keeps [offset, offset + len) inside the mapping, which lives as
            // long as `self`; the mapping cannot shrink (sealed memfd, fixed-size device or
            // locked hardware buffer). Copying raw bytes means no reference to shared memory is
            // ever formed and no alignment is assumed; concurrent client writes only change the
            // copied values.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    mapped.add(offset as usize),
                    dst.as_mut_ptr(),
                    dst.len(),
                );
            }
            return Ok(());
        }
        match &self.backing {
            Backing::Map(_) => unreachable!("mapped above"),
            #[cfg(all(feature = "aosp", target_os = "android"))]
            Backing::Blob(_) => unreachable!("mapped above"),
            Backing::File { file, base } => file.read_exact_at(dst, base + offset).map_err(|e| {
                HalError::GeneralFailure(format!(
                    "pool read at {offset} of {} bytes failed: {e}",
                    dst.len()
                ))
            }),
        }
    }

    /// Copies `src` into the pool starting at `offset`.
    pub fn write(&self, offset: u64, src: &[u8]) -> HalResult<()> {
        ensure!(self.writable, "write: pool is read-only");
        self.check(offset, src.len(), "write")?;
        if let Some(mapped) = self.backing.mapped_base() {
            // SAFETY: bounds as in `read`; the mapping was created writable (`self.writable`),
            // and the destination is raw shared memory, never aliased by a Rust reference.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), mapped.add(offset as usize), src.len());
            }
            return Ok(());
        }
        match &self.backing {
            Backing::Map(_) => unreachable!("mapped above"),
            #[cfg(all(feature = "aosp", target_os = "android"))]
            Backing::Blob(_) => unreachable!("mapped above"),
            Backing::File { file, base } => {
                // A file shrunk after the size check would be grown back by a positional write;
                // refuse instead so the client's file keeps the size it chose.
                let now = file.metadata().map(|m| m.len()).unwrap_or(0);
                if base + offset + src.len() as u64 > now {
                    return Err(HalError::GeneralFailure(
                        "pool shrank below the output region during execution".into(),
                    ));
                }
                file.write_all_at(src, base + offset).map_err(|e| {
                    HalError::GeneralFailure(format!(
                        "pool write at {offset} of {} bytes failed: {e}",
                        src.len()
                    ))
                })
            }
        }
    }

    /// Reads a whole region into a new vector (fallible allocation: a hostile length must not
    /// abort the service).
    pub fn read_vec(&self, offset: u64, len: usize) -> HalResult<Vec<u8>> {
        self.check(offset, len, "read")?;
        let mut v = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| HalError::GeneralFailure(format!("cannot allocate {len} bytes")))?;
        v.resize(len, 0);
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Fills `out` with the values of `N` bytes each stored from `offset` on, converting each
    /// with `decode`. A mapped pool is decoded straight from the mapping, with no byte buffer
    /// in between.
    pub fn read_values<T, const N: usize>(
        &self,
        offset: u64,
        out: &mut [T],
        decode: impl Fn([u8; N]) -> T,
    ) -> HalResult<()> {
        let len = out.len().checked_mul(N).ok_or_else(|| {
            HalError::InvalidArgument(format!("read: {} values overflow", out.len()))
        })?;
        self.check(offset, len, "read")?;
        match self.backing.mapped_base() {
            Some(mapped) => {
                let base = mapped.cast_const().wrapping_add(offset as usize);
                for (i, value) in out.iter_mut().enumerate() {
                    // SAFETY: `check` keeps the `N` bytes at `base + i·N` inside the mapping,
                    // which lives as long as `self` and cannot shrink (see `read`).
                    // `read_unaligned` copies them into a local array: no reference to shared
                    // memory is formed and no alignment is assumed.
                    let bytes =
                        unsafe { std::ptr::read_unaligned(base.add(i * N).cast::<[u8; N]>()) };
                    *value = decode(bytes);
                }
            }
            None => {
                let bytes = self.read_vec(offset, len)?;
                for (value, chunk) in out.iter_mut().zip(bytes.chunks_exact(N)) {
                    *value = decode(chunk.try_into().expect("chunks_exact yields N bytes"));
                }
            }
        }
        Ok(())
    }

    /// Stores `values` from `offset` on, `N` bytes each as `encode` gives them. A mapped pool
    /// is written straight into the mapping, with no byte buffer in between.
    pub fn write_values<T, const N: usize>(
        &self,
        offset: u64,
        values: &[T],
        encode: impl Fn(&T) -> [u8; N],
    ) -> HalResult<()> {
        ensure!(self.writable, "write: pool is read-only");
        let len = values.len().checked_mul(N).ok_or_else(|| {
            HalError::InvalidArgument(format!("write: {} values overflow", values.len()))
        })?;
        self.check(offset, len, "write")?;
        match self.backing.mapped_base() {
            Some(mapped) => {
                let base = mapped.wrapping_add(offset as usize);
                for (i, value) in values.iter().enumerate() {
                    // SAFETY: bounds as in `read_values`; the mapping was created writable
                    // (`self.writable`), and the destination is raw shared memory, never
                    // aliased by a Rust reference.
                    unsafe {
                        std::ptr::write_unaligned(base.add(i * N).cast::<[u8; N]>(), encode(value))
                    };
                }
                Ok(())
            }
            None => {
                let mut bytes = Vec::new();
                bytes.try_reserve_exact(len).map_err(|_| {
                    HalError::GeneralFailure(format!("cannot allocate {len} bytes"))
                })?;
                bytes.extend(values.iter().flat_map(encode));
                self.write(offset, &bytes)
            }
        }
    }
}

fn map_region(
    fd: RawFd,
    offset: u64,
    len: usize,
    writable: bool,
    what: &str,
) -> HalResult<memmap2::MmapRaw> {
    let mut opts = memmap2::MmapOptions::new();
    opts.offset(offset).len(len);
    let map = if writable {
        opts.map_raw(fd)
    } else {
        opts.map_raw_read_only(fd)
    };
    map.map_err(|e| {
        // Lack of memory (or of address space) is the service's condition, not a fault of the
        // pool.
        if e.raw_os_error() == Some(nix::libc::ENOMEM) {
            HalError::GeneralFailure(format!("{what}: mmap failed for lack of memory: {e}"))
        } else {
            HalError::InvalidArgument(format!("{what}: mmap failed: {e}"))
        }
    })
}

/// What an fd's open mode and seals let the service do with it.
struct FdAccess {
    writable: bool,
}

/// Reads the fd's access mode and seals. An `O_PATH` or write-only fd can be neither read nor
/// mapped, so it is no pool at all.
fn fd_access(fd: BorrowedFd<'_>, what: &str) -> HalResult<FdAccess> {
    let flags = fcntl(fd, nix::libc::F_GETFL, 0)
        .map(OFlag::from_bits_truncate)
        .map_err(|e| HalError::InvalidArgument(format!("{what}: fcntl(F_GETFL) failed: {e}")))?;
    ensure!(
        !flags.contains(OFlag::O_PATH),
        "{what}: fd was opened with O_PATH and gives no access to the data"
    );
    let mode = flags & OFlag::O_ACCMODE;
    ensure!(
        mode != OFlag::O_WRONLY,
        "{what}: fd was opened write-only; a pool must be readable"
    );
    let sealed = seals(fd).intersects(SealFlag::F_SEAL_WRITE | SealFlag::F_SEAL_FUTURE_WRITE);
    Ok(FdAccess {
        writable: mode == OFlag::O_RDWR && !sealed,
    })
}

/// Whether `fd` can be mapped further than `[offset, offset + len)`. A fixed-size
/// shared-memory device refuses that; a device of no size (/dev/zero) accepts any length.
/// 64 KiB past the end is past the last page whatever the page size.
fn maps_past(fd: RawFd, offset: u64, len: usize) -> bool {
    let Some(longer) = len.checked_add(64 << 10) else {
        return false;
    };
    let mut opts = memmap2::MmapOptions::new();
    opts.offset(offset).len(longer);
    // Read-only and dropped at once: it is only asked whether the mapping can exist.
    opts.map_raw_read_only(fd).is_ok()
}

/// The seals of a file; none when its file system has no sealing (only memfds can carry
/// `F_SEAL_SHRINK`).
fn seals(fd: BorrowedFd<'_>) -> SealFlag {
    fcntl(fd, nix::libc::F_GET_SEALS, 0).map_or(SealFlag::empty(), SealFlag::from_bits_truncate)
}

/// What a cached mapping was made from. Two pools with equal keys would get equivalent
/// mappings from `mmap`:
///
/// * `(dev, ino)` names the file. A cached mapping holds a reference to the file, so the inode
///   cannot be freed and its number handed to another file while the entry exists.
/// * `offset` and `size` are the region. The file is sealed against shrinking (seals are never
///   removed), so a region that fitted once still fits; a grown file asked for a larger region
///   is a different key and goes through the size check and `mmap` again.
/// * `writable` is the protection asked for, and `access` the fd's own open mode (`O_ACCMODE`
///   and `O_PATH` bits): `mmap` checks protection against the fd, so a mapping made through a
///   read-write fd must never be handed to a read-only fd of the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PoolKey {
    dev: u64,
    ino: u64,
    offset: u64,
    size: u64,
    writable: bool,
    access: i32,
}

impl PoolKey {
    /// `None` when the pool must not come from the cache: the open mode is unknown, or a
    /// writable mapping is asked of a file sealed against writing, which `mmap` refuses now
    /// even if a mapping made before the seal is still cached.
    fn new(
        fd: BorrowedFd<'_>,
        dev: u64,
        ino: u64,
        offset: u64,
        size: u64,
        writable: bool,
        seals: SealFlag,
    ) -> Option<PoolKey> {
        if writable && seals.intersects(SealFlag::F_SEAL_WRITE | SealFlag::F_SEAL_FUTURE_WRITE) {
            return None;
        }
        let flags = fcntl(fd, nix::libc::F_GETFL, 0).ok()?;
        let access = flags & (OFlag::O_ACCMODE | OFlag::O_PATH).bits();
        Some(PoolKey {
            dev,
            ino,
            offset,
            size,
            writable,
            access,
        })
    }
}

/// Request-pool mappings kept across executions: a small LRU list, bounded both in entries and
/// in mapped bytes, safe to share between concurrent executions.
///
/// Only shrink-sealed regular files (memfds) are cached; anything a client could shrink keeps
/// the positional-I/O path, and ashmem devices are mapped per execution. A pool larger than the
/// byte bound is mapped per execution too. Dropping the cache (with its prepared model) or
/// evicting an entry unmaps it once the executions still using it have finished.
///
/// A cached mapping keeps the client's memory alive after the client closed its fd, until the
/// entry is evicted: the bounds cap what one cache can hold on to that way.
pub struct PoolCache {
    max_entries: usize,
    max_bytes: u64,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// Most recently used first.
    entries: VecDeque<(PoolKey, Arc<memmap2::MmapRaw>)>,
    bytes: u64,
}

impl Default for PoolCache {
    fn default() -> Self {
        PoolCache::new(PoolCache::DEFAULT_ENTRIES, PoolCache::DEFAULT_BYTES)
    }
}

impl std::fmt::Debug for PoolCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolCache")
            .field("entries", &self.len())
            .field("mapped_bytes", &self.mapped_bytes())
            .finish()
    }
}

impl PoolCache {
    /// Entries a cache holds by default: more distinct pools than a client cycles through
    /// for one model, few enough that a lookup is a short scan.
    pub const DEFAULT_ENTRIES: usize = 16;
    /// Mapped bytes a cache holds by default.
    pub const DEFAULT_BYTES: u64 = 64 << 20;

    /// A cache of at most `max_entries` mappings totalling at most `max_bytes`.
    pub fn new(max_entries: usize, max_bytes: u64) -> PoolCache {
        PoolCache {
            max_entries,
            max_bytes,
            state: Mutex::new(CacheState::default()),
        }
    }

    /// Makes `memory` accessible as [`MappedPool::map`] does, reusing a cached mapping of the
    /// same region when there is one.
    pub fn map(&self, memory: &Memory, what: &str) -> HalResult<MappedPool> {
        MappedPool::open(memory, what, Some(self))
    }

    /// Number of cached mappings.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes of the cached mappings.
    pub fn mapped_bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Drops every cached mapping.
    pub fn clear(&self) {
        let mut state = self.lock();
        state.entries.clear();
        state.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // Every update leaves the state consistent, so a panic elsewhere cannot poison it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, key: &PoolKey) -> Option<Arc<memmap2::MmapRaw>> {
        let mut state = self.lock();
        let at = state.entries.iter().position(|(k, _)| k == key)?;
        let entry = state.entries.remove(at)?;
        let map = entry.1.clone();
        state.entries.push_front(entry);
        Some(map)
    }

    /// Adds a fresh mapping and returns the one to use: an equal entry added meanwhile by a
    /// concurrent execution wins, so one region is mapped once.
    fn insert(&self, key: PoolKey, map: memmap2::MmapRaw) -> Arc<memmap2::MmapRaw> {
        let map = Arc::new(map);
        if self.max_entries == 0 || key.size > self.max_bytes {
            return map;
        }
        let mut state = self.lock();
        if let Some((_, existing)) = state.entries.iter().find(|(k, _)| *k == key) {
            return existing.clone();
        }
        state.entries.push_front((key, map.clone()));
        state.bytes += key.size;
        while state.entries.len() > self.max_entries || state.bytes > self.max_bytes {
            let Some((old, _)) = state.entries.pop_back() else {
                break;
            };
            state.bytes -= old.size;
        }
        map
    }
}

/// Creates an anonymous shared-memory file of `size` bytes holding `data` at offset 0, sealed
/// against shrinking when `seal` is set. Used by clients and tests on Linux hosts.
pub fn create_memfd(name: &str, data: &[u8], size: u64, seal: bool) -> std::io::Result<OwnedFd> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| std::io::Error::other("name contains NUL"))?;
    let mut flags = nix::libc::MFD_CLOEXEC;
    if seal {
        flags |= nix::libc::MFD_ALLOW_SEALING;
    }
    let fd = sys::memfd_create(&cname, flags).map_err(std::io::Error::from)?;
    let file = File::from(fd);
    file.set_len(size)?;
    file.write_all_at(&data[..data.len().min(size as usize)], 0)?;
    if seal {
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(file.as_fd(), nix::libc::F_ADD_SEALS, seals.bits()).map_err(std::io::Error::from)?;
    }
    Ok(OwnedFd::from(file))
}

/// `fstat`, `fcntl` and `memfd_create` on borrowed and owned descriptors, through libc (as nix
/// re-exports it) rather than nix's wrappers: those changed their signatures in nix 0.30
/// (`RawFd` → `AsFd`, `MemFdCreateFlag` → `MFdFlags`), and the device build must compile with
/// the nix AOSP trees carry (0.29) as with the one cargo locks (README, "Release range").
mod sys {
    use nix::errno::Errno;
    use nix::libc;
    use std::ffi::CStr;
    use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

    pub fn fstat(fd: BorrowedFd<'_>) -> nix::Result<libc::stat> {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fd` is open for the duration of the borrow and `stat` points to writable
        // memory of the size fstat fills.
        let ret = unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) };
        Errno::result(ret)?;
        // SAFETY: fstat returned 0, so it initialised the whole structure.
        Ok(unsafe { stat.assume_init() })
    }

    /// `fcntl(fd, cmd, arg)` for the integer-argument commands (F_GETFL, F_GET_SEALS,
    /// F_ADD_SEALS).
    pub fn fcntl(
        fd: BorrowedFd<'_>,
        cmd: libc::c_int,
        arg: libc::c_int,
    ) -> nix::Result<libc::c_int> {
        // SAFETY: `fd` is open for the duration of the borrow; the commands used take an
        // integer argument and touch no memory of ours.
        Errno::result(unsafe { libc::fcntl(fd.as_raw_fd(), cmd, arg) })
    }

    pub fn memfd_create(name: &CStr, flags: libc::c_uint) -> nix::Result<OwnedFd> {
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        let fd = Errno::result(unsafe { libc::memfd_create(name.as_ptr(), flags) })?;
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // nix's own wrappers (the lock has a recent nix); the library goes through `sys`.
    use nix::fcntl::{fcntl, FcntlArg};

    #[test]
    fn sealed_memfd_is_mapped_and_bounds_checked() {
        let fd = create_memfd("t", &[1, 2, 3, 4], 4096, true).unwrap();
        let pool = MappedPool::map(&Memory::shared(fd, 4096), "pool").unwrap();
        assert!(matches!(pool.backing, Backing::Map(_)));
        let mut b = [0u8; 4];
        pool.read(0, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        pool.write(4090, &[9; 6]).unwrap();
        assert!(pool.write(4091, &[9; 6]).is_err());
        assert!(pool.read(u64::MAX - 1, &mut b).is_err());
    }

    #[test]
    fn region_past_end_of_file_is_rejected() {
        let fd = create_memfd("t", &[], 100, false).unwrap();
        let err = MappedPool::map(&Memory::shared(fd, 4096), "pool").unwrap_err();
        assert_eq!(err.status(), crate::ErrorStatus::InvalidArgument);
    }

    #[test]
    fn unsealed_file_survives_a_shrink() {
        let fd = create_memfd("t", &[7; 64], 8192, false).unwrap();
        let shrinker = File::from(fd.try_clone().unwrap());
        let pool = MappedPool::map(&Memory::shared(fd, 8192), "pool").unwrap();
        assert!(matches!(pool.backing, Backing::File { .. }));
        shrinker.set_len(10).unwrap();
        let mut b = [0u8; 100];
        assert!(pool.read(0, &mut b).is_err());
        assert!(pool.write(4000, &b).is_err());
        assert_eq!(shrinker.metadata().unwrap().len(), 10);
    }

    #[test]
    fn read_only_file_rejects_writes_and_bad_prot() {
        let fd = Arc::new(create_memfd("t", &[5; 16], 16, true).unwrap());
        let ro = Memory::MappableFile {
            fd: fd.clone(),
            size: 16,
            prot: PROT_READ,
            offset: 0,
        };
        let pool = MappedPool::map(&ro, "pool").unwrap();
        assert!(pool.write(0, &[1]).is_err());
        let bad = Memory::MappableFile {
            fd,
            size: 16,
            prot: 0x4 | PROT_READ,
            offset: 0,
        };
        assert!(MappedPool::map(&bad, "pool").is_err());
    }

    /// A memfd sealed against shrinking only: it may still grow, and take more seals.
    fn growable_memfd(data: &[u8], size: u64) -> OwnedFd {
        use nix::sys::memfd::{memfd_create, MFdFlags};
        let fd =
            memfd_create(c"grow", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING).unwrap();
        let file = File::from(fd);
        file.set_len(size).unwrap();
        file.write_all_at(data, 0).unwrap();
        fcntl(file.as_fd(), FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK)).unwrap();
        OwnedFd::from(file)
    }

    /// A second, read-only open of the same file (a new open file description).
    fn reopen_read_only(fd: &OwnedFd) -> OwnedFd {
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        OwnedFd::from(File::open(path).unwrap())
    }

    fn mapping(pool: &MappedPool) -> &Arc<memmap2::MmapRaw> {
        match &pool.backing {
            Backing::Map(map) => map,
            Backing::File { .. } => panic!("pool is not mapped"),
        }
    }

    #[test]
    fn cached_mapping_is_reused_and_reads_fresh_contents() {
        let fd = create_memfd("t", &[1; 64], 4096, true).unwrap();
        let writer = File::from(fd.try_clone().unwrap());
        let memory = Memory::shared(fd, 4096);
        let cache = PoolCache::default();
        let first = cache.map(&memory, "pool").unwrap();
        let mut b = [0u8; 4];
        first.read(0, &mut b).unwrap();
        assert_eq!(b, [1; 4]);
        // The client rewrites the pool between executions; the cached mapping shows it.
        writer.write_all_at(&[2; 64], 0).unwrap();
        let second = cache.map(&memory, "pool").unwrap();
        assert!(Arc::ptr_eq(mapping(&first), mapping(&second)));
        second.read(0, &mut b).unwrap();
        assert_eq!(b, [2; 4]);
        // Writes through the mapping reach the file.
        second.write(8, &[9; 4]).unwrap();
        let mut f = [0u8; 4];
        writer.read_exact_at(&mut f, 8).unwrap();
        assert_eq!(f, [9; 4]);
        assert_eq!((cache.len(), cache.mapped_bytes()), (1, 4096));
    }

    #[test]
    fn another_file_is_never_served_a_stale_mapping() {
        let cache = PoolCache::default();
        let a = create_memfd("a", &[1; 16], 4096, true).unwrap();
        let pool_a = cache.map(&Memory::shared(a, 4096), "pool").unwrap();
        drop(pool_a);
        // The client closed every fd of the first file; the next one may reuse the number.
        let b = create_memfd("b", &[2; 16], 4096, true).unwrap();
        let pool_b = cache.map(&Memory::shared(b, 4096), "pool").unwrap();
        let mut got = [0u8; 4];
        pool_b.read(0, &mut got).unwrap();
        assert_eq!(got, [2; 4]);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn grown_file_is_checked_and_mapped_again() {
        let fd = Arc::new(growable_memfd(&[1; 16], 4096));
        let file = File::from(fd.try_clone().unwrap());
        let cache = PoolCache::default();
        let small = Memory::Ashmem {
            fd: fd.clone(),
            size: 4096,
        };
        cache.map(&small, "pool").unwrap();
        let large = Memory::Ashmem { fd, size: 8192 };
        assert!(
            cache.map(&large, "pool").is_err(),
            "past the end of the file"
        );
        file.set_len(8192).unwrap();
        file.write_all_at(&[5; 4], 8000).unwrap();
        let pool = cache.map(&large, "pool").unwrap();
        let mut b = [0u8; 4];
        pool.read(8000, &mut b).unwrap();
        assert_eq!(b, [5; 4]);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn read_only_fd_never_gets_a_writable_cached_mapping() {
        let rw = create_memfd("t", &[3; 16], 4096, true).unwrap();
        let ro = Arc::new(reopen_read_only(&rw));
        let cache = PoolCache::default();
        cache.map(&Memory::shared(rw, 4096), "pool").unwrap();
        assert_eq!(cache.len(), 1);
        // A shared-memory pool through the read-only fd is read-only: never the writable
        // mapping the cache holds for the read-write fd.
        let pool = cache
            .map(
                &Memory::Ashmem {
                    fd: ro.clone(),
                    size: 4096,
                },
                "pool",
            )
            .unwrap();
        assert!(!pool.is_writable());
        assert!(pool.write(0, &[1]).is_err());
        // PROT_WRITE asked of the read-only fd is refused, as mmap would refuse it.
        let err = cache
            .map(
                &Memory::MappableFile {
                    fd: ro.clone(),
                    size: 4096,
                    prot: PROT_READ | PROT_WRITE,
                    offset: 0,
                },
                "pool",
            )
            .unwrap_err();
        assert_eq!(err.status(), crate::ErrorStatus::InvalidArgument, "{err}");
        // Read access through it is fine, and read-only.
        let read_only = Memory::MappableFile {
            fd: ro,
            size: 4096,
            prot: PROT_READ,
            offset: 0,
        };
        let pool = cache.map(&read_only, "pool").unwrap();
        assert!(!pool.is_writable());
        assert!(pool.write(0, &[1]).is_err());
        let mut b = [0u8; 2];
        pool.read(0, &mut b).unwrap();
        assert_eq!(b, [3; 2]);
    }

    #[test]
    fn write_sealed_file_gets_no_cached_writable_mapping() {
        let fd = Arc::new(growable_memfd(&[0; 16], 4096));
        let memory = Memory::Ashmem {
            fd: fd.clone(),
            size: 4096,
        };
        let cache = PoolCache::default();
        cache.map(&memory, "pool").unwrap().write(0, &[1]).unwrap();
        // Sealed against further writes: a fresh writable mmap would be refused, so the cached
        // writable one must not be handed out either; the pool is now read-only.
        fcntl(
            fd.as_fd(),
            FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_FUTURE_WRITE),
        )
        .unwrap();
        let pool = cache.map(&memory, "pool").unwrap();
        assert!(!pool.is_writable());
        assert!(pool.write(0, &[2]).is_err());
    }

    #[test]
    fn cache_is_bounded_by_entries_and_bytes() {
        let memfd = |size| Memory::shared(create_memfd("t", &[7], size, true).unwrap(), size);
        let cache = PoolCache::new(3, 1 << 20);
        let kept: Vec<_> = (0..5).map(|_| memfd(4096)).collect();
        for m in &kept {
            cache.map(m, "pool").unwrap();
        }
        assert_eq!((cache.len(), cache.mapped_bytes()), (3, 3 * 4096));

        let cache = PoolCache::new(16, 8192);
        for m in &kept[..3] {
            cache.map(m, "pool").unwrap();
        }
        assert_eq!((cache.len(), cache.mapped_bytes()), (2, 8192));
        // Larger than the whole budget: mapped for this use only.
        let big = memfd(16384);
        let pool = cache.map(&big, "pool").unwrap();
        let mut b = [0u8; 1];
        pool.read(0, &mut b).unwrap();
        assert_eq!(b, [7]);
        assert_eq!((cache.len(), cache.mapped_bytes()), (2, 8192));
        cache.clear();
        assert!(cache.is_empty());
    }

    #[test]
    fn least_recently_used_entry_is_evicted_and_stays_valid_for_its_user() {
        let memfd = |v: u8| Memory::shared(create_memfd("t", &[v; 4], 4096, true).unwrap(), 4096);
        let (a, b, c) = (memfd(1), memfd(2), memfd(3));
        let cache = PoolCache::new(2, 1 << 20);
        let in_use = cache.map(&a, "pool").unwrap();
        let b_first = cache.map(&b, "pool").unwrap();
        // `a` becomes the most recent, so `c` evicts `b`.
        cache.map(&a, "pool").unwrap();
        cache.map(&c, "pool").unwrap();
        let b_again = cache.map(&b, "pool").unwrap();
        assert!(!Arc::ptr_eq(mapping(&b_first), mapping(&b_again)));
        // ... and `b` coming back evicted `a`, whose mapping its user still reads.
        assert_eq!(cache.len(), 2);
        let mut got = [0u8; 4];
        in_use.read(0, &mut got).unwrap();
        assert_eq!(got, [1; 4]);
    }

    #[test]
    fn unsealed_and_zero_device_pools_are_not_cached() {
        let cache = PoolCache::default();
        let fd = create_memfd("t", &[1; 16], 4096, false).unwrap();
        let shrinker = File::from(fd.try_clone().unwrap());
        let memory = Memory::shared(fd, 4096);
        let pool = cache.map(&memory, "pool").unwrap();
        assert!(matches!(pool.backing, Backing::File { .. }));
        assert!(cache.is_empty());
        shrinker.set_len(8).unwrap();
        assert!(cache.map(&memory, "pool").is_err());

        let zero = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/zero")
            .unwrap();
        let zero = OwnedFd::from(zero);
        // /dev/zero maps at any length: it is not shared memory of the stated size.
        let err = cache.map(&Memory::shared(zero, 4096), "pool").unwrap_err();
        assert_eq!(err.status(), crate::ErrorStatus::InvalidArgument, "{err}");
        assert!(cache.is_empty());
    }

    #[test]
    fn values_are_decoded_and_encoded_at_any_offset() {
        for seal in [true, false] {
            let fd = create_memfd("t", &[], 64, seal).unwrap();
            let pool = MappedPool::map(&Memory::shared(fd, 64), "pool").unwrap();
            assert_eq!(matches!(pool.backing, Backing::Map(_)), seal);
            let values = [1.5f32, -2.0, 1e-3];
            pool.write_values(3, &values, |x| x.to_le_bytes()).unwrap();
            let mut raw = [0u8; 4];
            pool.read(7, &mut raw).unwrap();
            assert_eq!(f32::from_le_bytes(raw), -2.0);
            let mut back = [0f32; 3];
            pool.read_values(3, &mut back, f32::from_le_bytes).unwrap();
            assert_eq!(back, values);
            assert!(pool
                .read_values(61, &mut back[..1], f32::from_le_bytes)
                .is_err());
            assert!(pool
                .write_values(60, &values[..2], |x| x.to_le_bytes())
                .is_err());
        }
    }

    #[test]
    fn pipes_and_zero_sizes_are_rejected() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert!(MappedPool::map(&Memory::shared(r, 16), "pool").is_err());
        let fd = create_memfd("t", &[], 16, true).unwrap();
        assert!(MappedPool::map(&Memory::shared(fd, 0), "pool").is_err());
        assert!(MappedPool::map(&Memory::Unsupported("hardware_buffer".into()), "pool").is_err());
    }
}
