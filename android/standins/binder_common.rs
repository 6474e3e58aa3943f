// The part of AOSP's `binder` crate (frameworks/native/libs/binder/rust, Soong module
// libbinder_rs) that nnhal's `src/binder/ipc.rs` uses and that did not change across the
// ParcelFileDescriptor shapes. Signatures only: nothing here runs, every body is a stand-in.
// Each crate in this directory includes this file and adds its own ParcelFileDescriptor.
//
// Read from frameworks/native at the versions named in each shape's lib.rs; where this file
// simplifies (a trait bound the code does not reach), the comment says so.

use std::ffi::CStr;
use std::io::Write;
use std::ops::Deref;

/// src/lib.rs: `pub type Result<T> = core::result::Result<T, Status>;`
pub type Result<T> = core::result::Result<T, Status>;

/// src/error.rs: `StatusCode` is the bindgen enum of libbinder_ndk's `binder_status_t`
/// values; nnhal names UNKNOWN_ERROR only.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum StatusCode {
    OK = 0,
    UNKNOWN_ERROR = i32::MIN,
    BAD_VALUE = -22,
}

/// src/error.rs: `Status`.
#[derive(Debug)]
pub struct Status(i32);

impl Status {
    /// src/error.rs: `pub fn new_service_specific_error(err: i32, message: Option<&CStr>) -> Status`
    pub fn new_service_specific_error(err: i32, _message: Option<&CStr>) -> Status {
        Status(err)
    }

    /// src/error.rs: `pub fn is_ok(&self) -> bool`
    pub fn is_ok(&self) -> bool {
        self.0 == 0
    }
}

/// src/error.rs: `impl From<StatusCode> for Status`
impl From<StatusCode> for Status {
    fn from(code: StatusCode) -> Status {
        Status(code as i32)
    }
}

/// src/proxy.rs: `SpIBinder`, a strong reference to a binder object.
#[derive(Clone, Debug)]
pub struct SpIBinder(());

/// src/binder.rs: `pub trait Interface: Send + Sync + DowncastSync` (the `DowncastSync` bound
/// is left out: nnhal never downcasts).
pub trait Interface: Send + Sync {
    /// src/binder.rs: `fn as_binder(&self) -> SpIBinder`
    fn as_binder(&self) -> SpIBinder {
        unimplemented!("stand-in")
    }

    /// src/binder.rs: `fn dump(&self, _writer: &mut dyn Write, _args: &[&CStr]) -> Result<()>`,
    /// where that module's `Result` is `crate::error::Result`, i.e. `Result<T, StatusCode>`.
    fn dump(
        &self,
        _writer: &mut dyn Write,
        _args: &[&CStr],
    ) -> core::result::Result<(), StatusCode> {
        Ok(())
    }
}

/// src/binder.rs: `pub struct Strong<I: FromIBinder + ?Sized>(Box<I>)`, which derefs to `I`
/// (the `FromIBinder` bound is left out).
pub struct Strong<I: ?Sized>(Box<I>);

impl<I: ?Sized> Deref for Strong<I> {
    type Target = I;
    fn deref(&self) -> &I {
        &self.0
    }
}

/// src/binder.rs: `pub struct BinderFeatures { pub set_requesting_sid: bool }` (Default).
#[derive(Clone, Copy, Debug, Default)]
pub struct BinderFeatures {
    pub set_requesting_sid: bool,
}

/// src/state.rs: `ProcessState`.
pub struct ProcessState;

impl ProcessState {
    /// src/state.rs: `pub fn set_thread_pool_max_thread_count(num_threads: u32)`
    pub fn set_thread_pool_max_thread_count(_num_threads: u32) {}
    /// src/state.rs: `pub fn start_thread_pool()`
    pub fn start_thread_pool() {}
    /// src/state.rs: `pub fn join_thread_pool()`
    pub fn join_thread_pool() {}
}

/// src/state.rs: `ThreadState` (re-exported at the crate root beside `ProcessState`).
pub struct ThreadState;

impl ThreadState {
    /// src/state.rs: `pub fn get_calling_pid() -> pid_t` (`IPCThreadState::getCallingPid`).
    pub fn get_calling_pid() -> i32 {
        unimplemented!("stand-in")
    }
}

/// src/service.rs: `pub fn add_service(identifier: &str, mut binder: SpIBinder) -> Result<()>`
/// (that module's `Result` is `Result<T, StatusCode>`).
pub fn add_service(_identifier: &str, _binder: SpIBinder) -> core::result::Result<(), StatusCode> {
    unimplemented!("stand-in")
}

/// src/service.rs: `pub fn register_lazy_service(identifier: &str, mut binder: SpIBinder)
/// -> Result<()>` (`Result<T, StatusCode>`).
pub fn register_lazy_service(
    _identifier: &str,
    _binder: SpIBinder,
) -> core::result::Result<(), StatusCode> {
    unimplemented!("stand-in")
}

/// src/lib.rs: `pub mod binder_impl`, what AIDL-generated code and hand-made transactions use.
pub mod binder_impl {
    use super::{SpIBinder, Status, StatusCode};

    type Result<T> = core::result::Result<T, StatusCode>;

    /// src/binder.rs: `pub type TransactionCode = u32;`
    pub type TransactionCode = u32;
    /// src/binder.rs: `pub type TransactionFlags = u32;`
    pub type TransactionFlags = u32;
    /// src/binder.rs: `pub const FIRST_CALL_TRANSACTION: TransactionCode`
    pub const FIRST_CALL_TRANSACTION: TransactionCode = 1;
    /// src/binder.rs: `pub const FLAG_PRIVATE_LOCAL: TransactionFlags` (not under android_ndk)
    pub const FLAG_PRIVATE_LOCAL: TransactionFlags = 0;

    /// src/parcel.rs: `Parcel`.
    pub struct Parcel(());

    impl Parcel {
        /// src/parcel.rs: `pub fn write<S: Serialize + ?Sized>(&mut self, parcelable: &S)
        /// -> Result<()>`
        pub fn write<S: Serialize + ?Sized>(&mut self, _parcelable: &S) -> Result<()> {
            unimplemented!("stand-in")
        }

        /// src/parcel.rs: `pub fn read<D: Deserialize>(&self) -> Result<D>`
        pub fn read<D: Deserialize>(&self) -> Result<D> {
            unimplemented!("stand-in")
        }
    }

    /// src/parcel.rs: `BorrowedParcel<'a>`.
    pub struct BorrowedParcel<'a>(core::marker::PhantomData<&'a ()>);

    /// src/parcel/traits.rs: `pub trait Serialize { fn serialize(&self, parcel: &mut
    /// BorrowedParcel<'_>) -> Result<()>; }`
    pub trait Serialize {
        fn serialize(&self, parcel: &mut BorrowedParcel<'_>) -> Result<()>;
    }

    /// src/parcel/traits.rs: `pub trait Deserialize: Sized { fn deserialize(parcel:
    /// &BorrowedParcel<'_>) -> Result<Self>; … }` (the UninitType items are left out).
    pub trait Deserialize: Sized {
        fn deserialize(parcel: &BorrowedParcel<'_>) -> Result<Self>;
    }

    /// src/parcel/traits.rs: `Option<T>` serializes for every `T: SerializeOption`, which
    /// `SpIBinder` is (src/proxy.rs); collapsed here into the one impl nnhal needs.
    impl Serialize for Option<SpIBinder> {
        fn serialize(&self, _parcel: &mut BorrowedParcel<'_>) -> Result<()> {
            unimplemented!("stand-in")
        }
    }

    /// src/error.rs: `impl Deserialize for Status`.
    impl Deserialize for Status {
        fn deserialize(_parcel: &BorrowedParcel<'_>) -> Result<Self> {
            unimplemented!("stand-in")
        }
    }

    /// src/binder.rs: `pub trait IBinderInternal: IBinder` (the `IBinder` supertrait and the
    /// methods nnhal does not call are left out).
    pub trait IBinderInternal {
        /// `fn prepare_transact(&self) -> Result<Parcel>;`
        fn prepare_transact(&self) -> Result<Parcel>;
        /// `fn submit_transact(&self, code: TransactionCode, data: Parcel, flags:
        /// TransactionFlags) -> Result<Parcel>;`
        fn submit_transact(
            &self,
            code: TransactionCode,
            data: Parcel,
            flags: TransactionFlags,
        ) -> Result<Parcel>;
    }

    impl IBinderInternal for SpIBinder {
        fn prepare_transact(&self) -> Result<Parcel> {
            unimplemented!("stand-in")
        }
        fn submit_transact(
            &self,
            _code: TransactionCode,
            _data: Parcel,
            _flags: TransactionFlags,
        ) -> Result<Parcel> {
            unimplemented!("stand-in")
        }
    }
}
