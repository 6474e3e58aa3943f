//! Stand-in for AOSP's `binder` crate whose `ParcelFileDescriptor` holds an `OwnedFd` and
//! also implements `AsFd` and `try_clone`.
//!
//! Read from frameworks/native `libs/binder/rust/src/parcel/file_descriptor.rs` (module
//! `std_parcel_fd`) at yaap/frameworks_native 4cdda61bb6c6e97322d2b93369191609378d286f (a
//! tree of the android16 generation; the release tag itself was not inspected here).
//!
//! - `pub struct ParcelFileDescriptor(OwnedFd);`
//! - `pub fn new<F: Into<OwnedFd>>(fd: F) -> Self`
//! - `pub fn try_clone(&self) -> Result<Self, io::Error>`
//! - `impl AsRef<OwnedFd>`, `impl From<ParcelFileDescriptor> for OwnedFd`, `impl AsRawFd`,
//!   `impl IntoRawFd`, `impl AsFd`.

include!("../../binder_common.rs");

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};

#[derive(Debug)]
pub struct ParcelFileDescriptor(OwnedFd);

impl ParcelFileDescriptor {
    pub fn new<F: Into<OwnedFd>>(fd: F) -> Self {
        Self(fd.into())
    }

    pub fn try_clone(&self) -> core::result::Result<Self, std::io::Error> {
        Ok(Self(self.0.try_clone()?))
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

impl AsFd for ParcelFileDescriptor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
