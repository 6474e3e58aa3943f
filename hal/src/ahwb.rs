//! Hardware-buffer pools (the AIDL `Memory::hardwareBuffer`, an `AHardwareBuffer`): which ones
//! the driver can use, and, on Android with the `aosp` feature, their mapping through the
//! platform's AHardwareBuffer API (`docs/hal-contract.md`, "Memory pools").
//!
//! A CPU driver can use a hardware buffer only as plain bytes: format BLOB (height 1, one
//! layer, width = size in bytes) with CPU read access, and CPU write access where it is an
//! output. Any other buffer is valid but unusable here, and is refused with GENERAL_FAILURE;
//! a BLOB that breaks the BLOB shape, has no bytes or no handle is malformed
//! (INVALID_ARGUMENT). Hosts have no AHardwareBuffer allocator: there every hardware buffer is
//! refused with GENERAL_FAILURE.
//!
//! Every foreign declaration the mapping uses is in this file (module `ffi`), each read from the
//! platform headers of `frameworks/native` (`libs/nativewindow/include/android/hardware_buffer.h`,
//! the NDK header, and `libs/nativewindow/include/vndk/hardware_buffer.h`, its vendor
//! extension, at AOSP `main` commit 2953706fb1bc of 2023-11-10; the same declarations since
//! Android 12) and `system/core/libcutils/include/cutils/native_handle.h` for the handle
//! layout. The mapping is type-checked in CI for the Android targets; it has not run on a
//! device.

use crate::error::{HalError, HalResult};
use std::os::fd::OwnedFd;

/// `AHARDWAREBUFFER_FORMAT_BLOB` (NDK `hardware_buffer.h`): opaque bytes, height 1, one layer,
/// width = size in bytes. The AIDL `PixelFormat.BLOB` has the same value.
pub const FORMAT_BLOB: i32 = 0x21;
/// `AHARDWAREBUFFER_USAGE_CPU_READ_MASK`.
pub const USAGE_CPU_READ_MASK: u64 = 0xF;
/// `AHARDWAREBUFFER_USAGE_CPU_READ_OFTEN`.
pub const USAGE_CPU_READ_OFTEN: u64 = 3;
/// `AHARDWAREBUFFER_USAGE_CPU_WRITE_MASK`.
pub const USAGE_CPU_WRITE_MASK: u64 = 0xF << 4;
/// `AHARDWAREBUFFER_USAGE_CPU_WRITE_OFTEN`.
pub const USAGE_CPU_WRITE_OFTEN: u64 = 3 << 4;

/// An AIDL `HardwareBuffer`: its description and the fds and ints of its native handle.
#[derive(Debug)]
pub struct HardwareBuffer {
    pub width: u32,
    pub height: u32,
    pub layers: u32,
    /// `PixelFormat` / `AHARDWAREBUFFER_FORMAT_*`.
    pub format: i32,
    /// `BufferUsage` / `AHARDWAREBUFFER_USAGE_*` bits.
    pub usage: u64,
    pub stride: u32,
    pub fds: Vec<OwnedFd>,
    pub ints: Vec<i32>,
}

impl HardwareBuffer {
    /// The pool's size in bytes: a BLOB's width; other formats have no byte size.
    pub fn size(&self) -> u64 {
        if self.format == FORMAT_BLOB {
            u64::from(self.width)
        } else {
            0
        }
    }

    /// Whether the buffer may be locked for CPU writes (it can then hold outputs).
    pub fn cpu_writable(&self) -> bool {
        self.usage & USAGE_CPU_WRITE_MASK != 0
    }

    /// Whether this driver can use the buffer as a pool, wherever it runs: a well-formed BLOB
    /// with CPU read access.
    pub fn check_usable(&self, what: &str) -> HalResult<()> {
        ensure!(
            !self.fds.is_empty(),
            "{what}: hardware buffer whose native handle has no fd"
        );
        if self.format != FORMAT_BLOB {
            return Err(HalError::GeneralFailure(format!(
                "{what}: hardware buffer of format {:#x}: this driver uses only BLOB (0x21) \
                 buffers as pools",
                self.format
            )));
        }
        ensure!(
            self.height == 1 && self.layers == 1,
            "{what}: BLOB hardware buffer of height {} and {} layer(s): a BLOB has height 1 and \
             one layer",
            self.height,
            self.layers
        );
        ensure!(self.width > 0, "{what}: pool size is 0");
        if self.usage & USAGE_CPU_READ_MASK == 0 {
            return Err(HalError::GeneralFailure(format!(
                "{what}: BLOB hardware buffer without CPU read access (usage {:#x}); this \
                 driver reads and writes pools with the CPU",
                self.usage
            )));
        }
        Ok(())
    }

    /// [`HardwareBuffer::check_usable`], and on a host the refusal of every hardware buffer.
    pub fn validate(&self, what: &str) -> HalResult<()> {
        if !cfg!(all(feature = "aosp", target_os = "android")) {
            return Err(HalError::GeneralFailure(format!(
                "{what}: hardware buffers (AHardwareBuffer) cannot be mapped on this host"
            )));
        }
        self.check_usable(what)
    }
}

/// The AHardwareBuffer API, as the headers named in the module documentation declare it.
#[cfg(all(feature = "aosp", target_os = "android"))]
mod ffi {
    use std::ffi::c_void;

    /// `AHardwareBuffer` (opaque).
    #[repr(C)]
    pub struct AHardwareBuffer {
        _private: [u8; 0],
    }

    /// `AHardwareBuffer_Desc`.
    #[repr(C)]
    pub struct AHardwareBufferDesc {
        pub width: u32,
        pub height: u32,
        pub layers: u32,
        pub format: u32,
        pub usage: u64,
        pub stride: u32,
        pub rfu0: u32,
        pub rfu1: u64,
    }

    /// `AHARDWAREBUFFER_CREATE_FROM_HANDLE_METHOD_CLONE` (vndk `hardware_buffer.h`): the
    /// handle is cloned and the clone imported; the buffer owns the clone, not the original.
    pub const CREATE_FROM_HANDLE_METHOD_CLONE: i32 = 3;

    /// `sizeof(native_handle_t)`: `native_handle_t.version` (`int version, numFds, numInts`,
    /// then `int data[numFds + numInts]`).
    pub const NATIVE_HANDLE_VERSION: i32 = 12;

    #[link(name = "nativewindow")]
    extern "C" {
        /// `int AHardwareBuffer_createFromHandle(const AHardwareBuffer_Desc* desc,
        /// const native_handle_t* handle, int32_t method, AHardwareBuffer** outBuffer)`.
        pub fn AHardwareBuffer_createFromHandle(
            desc: *const AHardwareBufferDesc,
            handle: *const i32,
            method: i32,
            out_buffer: *mut *mut AHardwareBuffer,
        ) -> i32;
        /// `int AHardwareBuffer_lock(AHardwareBuffer* buffer, uint64_t usage, int32_t fence,
        /// const ARect* rect, void** outVirtualAddress)`.
        pub fn AHardwareBuffer_lock(
            buffer: *mut AHardwareBuffer,
            usage: u64,
            fence: i32,
            rect: *const c_void,
            out_virtual_address: *mut *mut c_void,
        ) -> i32;
        /// `int AHardwareBuffer_unlock(AHardwareBuffer* buffer, int32_t* fence)`.
        pub fn AHardwareBuffer_unlock(buffer: *mut AHardwareBuffer, fence: *mut i32) -> i32;
        /// `void AHardwareBuffer_release(AHardwareBuffer* buffer)`.
        pub fn AHardwareBuffer_release(buffer: *mut AHardwareBuffer);
    }
}

/// A BLOB hardware buffer imported from its handle and locked for CPU access; unlocked and
/// released when dropped.
#[cfg(all(feature = "aosp", target_os = "android"))]
pub struct LockedBlob {
    buffer: std::ptr::NonNull<ffi::AHardwareBuffer>,
    address: *mut u8,
    len: usize,
}

// SAFETY: the lock gives a plain address of shared bytes that any thread may copy to and from
// (a BLOB behaves like shared memory, NDK `hardware_buffer.h` on AHardwareBuffer_lock), and the
// buffer's reference is released exactly once, in `Drop`.
#[cfg(all(feature = "aosp", target_os = "android"))]
unsafe impl Send for LockedBlob {}
// SAFETY: as for `Send`; `&LockedBlob` only exposes the address, and every access through it
// is a bounded raw copy by `MappedPool`.
#[cfg(all(feature = "aosp", target_os = "android"))]
unsafe impl Sync for LockedBlob {}

#[cfg(all(feature = "aosp", target_os = "android"))]
impl LockedBlob {
    /// Imports `hb` (which [`HardwareBuffer::check_usable`] accepted) and locks it for CPU
    /// reads, and writes when its usage allows them.
    pub fn lock(hb: &HardwareBuffer, what: &str) -> HalResult<LockedBlob> {
        use std::os::fd::AsRawFd;
        hb.check_usable(what)?;
        let len = usize::try_from(hb.width).map_err(|_| {
            HalError::InvalidArgument(format!("{what}: width does not fit the address space"))
        })?;
        let count = |n: usize| {
            i32::try_from(n)
                .map_err(|_| HalError::InvalidArgument(format!("{what}: native handle too large")))
        };
        // native_handle_t laid out as its header declares it: version, numFds, numInts, data.
        let mut handle = vec![
            ffi::NATIVE_HANDLE_VERSION,
            count(hb.fds.len())?,
            count(hb.ints.len())?,
        ];
        handle.extend(hb.fds.iter().map(|fd| fd.as_raw_fd()));
        handle.extend_from_slice(&hb.ints);
        let desc = ffi::AHardwareBufferDesc {
            width: hb.width,
            height: hb.height,
            layers: hb.layers,
            format: FORMAT_BLOB as u32,
            usage: hb.usage,
            stride: hb.stride,
            rfu0: 0,
            rfu1: 0,
        };
        let mut raw: *mut ffi::AHardwareBuffer = std::ptr::null_mut();
        // SAFETY: `desc` and `handle` are live for the call and laid out as the C declarations;
        // with METHOD_CLONE the function duplicates the fds and keeps nothing of ours.
        let status = unsafe {
            ffi::AHardwareBuffer_createFromHandle(
                &desc,
                handle.as_ptr(),
                ffi::CREATE_FROM_HANDLE_METHOD_CLONE,
                &mut raw,
            )
        };
        let buffer = match std::ptr::NonNull::new(raw) {
            Some(buffer) if status == 0 => buffer,
            _ => {
                return Err(HalError::GeneralFailure(format!(
                    "{what}: the hardware buffer cannot be imported (AHardwareBuffer_createFromHandle: {status})"
                )))
            }
        };
        let usage = USAGE_CPU_READ_OFTEN
            | if hb.cpu_writable() {
                USAGE_CPU_WRITE_OFTEN
            } else {
                0
            };
        let mut address: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `buffer` is the live buffer just created; no fence (-1) and the whole buffer
        // (null rect) are what the header allows for a CPU lock.
        let status = unsafe {
            ffi::AHardwareBuffer_lock(buffer.as_ptr(), usage, -1, std::ptr::null(), &mut address)
        };
        if status != 0 || address.is_null() {
            // SAFETY: the reference createFromHandle gave us, released once.
            unsafe { ffi::AHardwareBuffer_release(buffer.as_ptr()) };
            return Err(HalError::GeneralFailure(format!(
                "{what}: the hardware buffer cannot be locked for CPU access \
                 (AHardwareBuffer_lock: {status})"
            )));
        }
        Ok(LockedBlob {
            buffer,
            address: address.cast(),
            len,
        })
    }

    /// The locked bytes' address; [`LockedBlob::len`] bytes from it are accessible.
    pub fn as_ptr(&self) -> *mut u8 {
        self.address
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(all(feature = "aosp", target_os = "android"))]
impl Drop for LockedBlob {
    fn drop(&mut self) {
        // SAFETY: the buffer was locked by `lock` and is unlocked once, then its reference is
        // released once; a null fence makes the unlock wait until the buffer is consistent.
        unsafe {
            let status = ffi::AHardwareBuffer_unlock(self.buffer.as_ptr(), std::ptr::null_mut());
            if status != 0 {
                log_unlock_failure(status);
            }
            ffi::AHardwareBuffer_release(self.buffer.as_ptr());
        }
    }
}

#[cfg(all(feature = "aosp", target_os = "android"))]
fn log_unlock_failure(status: i32) {
    // The hal crate has no logger: the failure is reported on stderr, which the service's
    // logger does not see, but an unlock failure leaves nothing for the caller to do.
    eprintln!("nnhal: AHardwareBuffer_unlock failed: {status}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ErrorStatus;

    fn blob(width: u32, usage: u64) -> HardwareBuffer {
        HardwareBuffer {
            width,
            height: 1,
            layers: 1,
            format: FORMAT_BLOB,
            usage,
            stride: width,
            fds: vec![std::fs::File::open("/dev/null").unwrap().into()],
            ints: Vec::new(),
        }
    }

    /// What the device build accepts and how it refuses the rest: only a BLOB with CPU read
    /// access is usable; other formats and a BLOB without CPU access are GENERAL_FAILURE (valid,
    /// unusable here), a malformed BLOB is INVALID_ARGUMENT.
    #[test]
    fn only_cpu_accessible_blobs_are_usable() {
        let rw = USAGE_CPU_READ_OFTEN | USAGE_CPU_WRITE_OFTEN;
        assert!(blob(64, rw).check_usable("p").is_ok());
        assert!(blob(64, USAGE_CPU_READ_OFTEN).check_usable("p").is_ok());
        assert!(blob(64, rw).cpu_writable());
        assert!(!blob(64, USAGE_CPU_READ_OFTEN).cpu_writable());
        assert_eq!(blob(64, rw).size(), 64);

        let status = |hb: HardwareBuffer| hb.check_usable("p").unwrap_err().status();
        let mut rgba = blob(64, rw);
        rgba.format = 1; // AHARDWAREBUFFER_FORMAT_R8G8B8A8_UNORM
        assert_eq!(rgba.size(), 0);
        assert_eq!(status(rgba), ErrorStatus::GeneralFailure);
        assert_eq!(status(blob(64, 0)), ErrorStatus::GeneralFailure);
        assert_eq!(
            status(blob(64, USAGE_CPU_WRITE_OFTEN)),
            ErrorStatus::GeneralFailure
        );
        let mut tall = blob(64, rw);
        tall.height = 2;
        assert_eq!(status(tall), ErrorStatus::InvalidArgument);
        let mut layered = blob(64, rw);
        layered.layers = 2;
        assert_eq!(status(layered), ErrorStatus::InvalidArgument);
        assert_eq!(status(blob(0, rw)), ErrorStatus::InvalidArgument);
        let mut no_handle = blob(64, rw);
        no_handle.fds.clear();
        assert_eq!(status(no_handle), ErrorStatus::InvalidArgument);
    }

    /// A host refuses every hardware buffer, usable or not, with GENERAL_FAILURE.
    #[cfg(not(all(feature = "aosp", target_os = "android")))]
    #[test]
    fn hosts_refuse_hardware_buffers() {
        let err = blob(64, USAGE_CPU_READ_OFTEN | USAGE_CPU_WRITE_OFTEN)
            .validate("p")
            .unwrap_err();
        assert_eq!(err.status(), ErrorStatus::GeneralFailure);
        assert!(
            err.message().contains("cannot be mapped on this host"),
            "{err}"
        );
    }
}
