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

use crate::error::{HalError, HalResult};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::sync::Arc;

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
    /// A kind of memory the 1.0 driver cannot use (hardware buffers, unknown names).
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
            Memory::Unsupported(_) => 0,
        }
    }

    /// Static checks that need no system call (pool kinds, size, protection bits).
    pub fn validate(&self, what: &str) -> HalResult<()> {
        match self {
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
    /// A mapping the client cannot shrink under us.
    Map(memmap2::MmapRaw),
    /// Positional I/O on a (possibly shrinkable) file, starting at `base`.
    File { file: File, base: u64 },
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
            .field("mapped", &matches!(self.backing, Backing::Map(_)))
            .finish()
    }
}

impl MappedPool {
    /// Makes `memory` accessible. `what` names the pool in error messages.
    pub fn map(memory: &Memory, what: &str) -> HalResult<MappedPool> {
        memory.validate(what)?;
        let (fd, size, offset, writable) = match memory {
            Memory::Ashmem { fd, size } => (fd, *size, 0u64, true),
            Memory::MappableFile {
                fd,
                size,
                prot,
                offset,
            } => (fd, *size, *offset, prot & PROT_WRITE != 0),
            Memory::Unsupported(_) => unreachable!("rejected by validate"),
        };
        let file =
            File::from(fd.try_clone().map_err(|e| {
                HalError::InvalidArgument(format!("{what}: cannot duplicate fd: {e}"))
            })?);
        let meta = file
            .metadata()
            .map_err(|e| HalError::InvalidArgument(format!("{what}: fstat failed: {e}")))?;
        let len = usize::try_from(size).map_err(|_| {
            HalError::InvalidArgument(format!(
                "{what}: size {size} does not fit the address space"
            ))
        })?;

        let ft = meta.file_type();
        if ft.is_file() {
            let end = offset + size; // cannot overflow: checked by validate
            ensure!(
                end <= meta.len(),
                "{what}: region [{offset}, {end}) lies past the end of the file ({} bytes)",
                meta.len()
            );
            let identity = Some((meta.dev(), meta.ino(), offset));
            let backing = if is_shrink_sealed(&file) {
                Backing::Map(map_region(&file, offset, len, writable, what)?)
            } else {
                Backing::File { file, base: offset }
            };
            Ok(MappedPool {
                backing,
                size,
                writable,
                identity,
            })
        } else if ft.is_char_device() || ft.is_block_device() {
            // ashmem: the driver refuses a mapping longer than the region, and the region
            // cannot shrink, so a successful mapping stays valid.
            let map = map_region(&file, offset, len, writable, what)?;
            Ok(MappedPool {
                backing: Backing::Map(map),
                size,
                writable,
                identity: None,
            })
        } else {
            invalid!("{what}: fd is not a mappable file (pipe, socket or directory)")
        }
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
        match &self.backing {
            Backing::Map(map) => {
                // SAFETY: `check` keeps [offset, offset + len) inside the mapping, which lives as
                // long as `self`; the mapping cannot shrink (sealed memfd or fixed-size device).
                // Copying raw bytes means no reference to shared memory is ever formed and no
                // alignment is assumed; concurrent client writes only change the copied values.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        map.as_ptr().add(offset as usize),
                        dst.as_mut_ptr(),
                        dst.len(),
                    );
                }
                Ok(())
            }
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
        match &self.backing {
            Backing::Map(map) => {
                // SAFETY: bounds as in `read`; the mapping was created writable (`self.writable`),
                // and the destination is raw shared memory, never aliased by a Rust reference.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        map.as_mut_ptr().add(offset as usize),
                        src.len(),
                    );
                }
                Ok(())
            }
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
}

fn map_region(
    file: &File,
    offset: u64,
    len: usize,
    writable: bool,
    what: &str,
) -> HalResult<memmap2::MmapRaw> {
    let mut opts = memmap2::MmapOptions::new();
    opts.offset(offset).len(len);
    let map = if writable {
        opts.map_raw(file)
    } else {
        opts.map_raw_read_only(file)
    };
    map.map_err(|e| HalError::InvalidArgument(format!("{what}: mmap failed: {e}")))
}

fn is_shrink_sealed(file: &File) -> bool {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    match fcntl(file.as_raw_fd(), FcntlArg::F_GET_SEALS) {
        Ok(bits) => SealFlag::from_bits_truncate(bits).contains(SealFlag::F_SEAL_SHRINK),
        Err(_) => false,
    }
}

/// Creates an anonymous shared-memory file of `size` bytes holding `data` at offset 0, sealed
/// against shrinking when `seal` is set. Used by clients and tests on Linux hosts.
pub fn create_memfd(name: &str, data: &[u8], size: u64, seal: bool) -> std::io::Result<OwnedFd> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let cname =
        std::ffi::CString::new(name).map_err(|_| std::io::Error::other("name contains NUL"))?;
    let mut flags = MemFdCreateFlag::MFD_CLOEXEC;
    if seal {
        flags |= MemFdCreateFlag::MFD_ALLOW_SEALING;
    }
    let fd = memfd_create(&cname, flags).map_err(std::io::Error::from)?;
    let file = File::from(fd);
    file.set_len(size)?;
    file.write_all_at(&data[..data.len().min(size as usize)], 0)?;
    if seal {
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        fcntl(
            file.as_raw_fd(),
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )
        .map_err(std::io::Error::from)?;
    }
    Ok(OwnedFd::from(file))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn pipes_and_zero_sizes_are_rejected() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert!(MappedPool::map(&Memory::shared(r, 16), "pool").is_err());
        let fd = create_memfd("t", &[], 16, true).unwrap();
        assert!(MappedPool::map(&Memory::shared(fd, 0), "pool").is_err());
        assert!(MappedPool::map(&Memory::Unsupported("hardware_buffer".into()), "pool").is_err());
    }
}
