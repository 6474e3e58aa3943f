//! Stand-in for AOSP's `binder` crate whose `ParcelFileDescriptor` holds a `File`.
//!
//! Read from frameworks/native `libs/binder/rust/src/parcel/file_descriptor.rs` at
//! LineageOS/android_frameworks_native f56c8b1e0614442e55432e39ca1bf13215dcb988 and
//! littleGnAl/mirror_platform_frameworks_native 04ed4dcb45543223cdd4260497f41736448c78e2
//! (mirrors of the android13-era tree: `BorrowedParcel`, `Deserialize::UninitType`). The
//! release tag itself was not inspected here: the README states the range this implies.
//!
//! - `pub struct ParcelFileDescriptor(File);`
//! - `pub fn new(file: File) -> Self`
//! - `impl AsRef<File>`, `impl From<ParcelFileDescriptor> for File`, `impl AsRawFd`,
//!   `impl IntoRawFd` — and no `AsFd`, no `AsRef<OwnedFd>`, no `try_clone`.

include!("../../binder_common.rs");

use std::fs::File;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

#[derive(Debug)]
pub struct ParcelFileDescriptor(File);

impl ParcelFileDescriptor {
    pub fn new(file: File) -> Self {
        Self(file)
    }
}

impl AsRef<File> for ParcelFileDescriptor {
    fn as_ref(&self) -> &File {
        &self.0
    }
}

impl From<ParcelFileDescriptor> for File {
    fn from(pfd: ParcelFileDescriptor) -> File {
        pfd.0
    }
}

impl AsRawFd for ParcelFileDescriptor {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl IntoRawFd for ParcelFileDescriptor {
    fn into_raw_fd(self) -> RawFd {
        self.0.into_raw_fd()
    }
}
