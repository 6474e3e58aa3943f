//! Stand-in for AOSP's `binder` crate whose `ParcelFileDescriptor` holds an `OwnedFd` but
//! does not implement `AsFd`.
//!
//! Read from frameworks/native `libs/binder/rust/src/parcel/file_descriptor.rs` (module
//! `std_parcel_fd`) at oplus-8650-clo/android_frameworks_native
//! 026c03091da9fb5bc12352c4bc20d503102ac6e8 (a vendor tree of the android14/android15
//! generation; the release tag itself was not inspected here).
//!
//! - `pub struct ParcelFileDescriptor(OwnedFd);`
//! - `pub fn new<F: Into<OwnedFd>>(fd: F) -> Self`
//! - `impl AsRef<OwnedFd>`, `impl From<ParcelFileDescriptor> for OwnedFd`, `impl AsRawFd`,
//!   `impl IntoRawFd` — and no `AsFd`, no `try_clone`.

include!("../../binder_common.rs");

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};

#[derive(Debug)]
pub struct ParcelFileDescriptor(OwnedFd);

impl ParcelFileDescriptor {
    pub fn new<F: Into<OwnedFd>>(fd: F) -> Self {
        Self(fd.into())
    }
}

impl AsRef<OwnedFd> for ParcelFileDescriptor {
    fn as_ref(&self) -> &OwnedFd {
        &self.0
    }
}

impl From<ParcelFileDescriptor> for OwnedFd {
    fn from(pfd: ParcelFileDescriptor) -> OwnedFd {
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
