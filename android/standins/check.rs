// Shared body of the check-* crates: a stand-in for the two Soong-generated AIDL crates that
// src/binder/ipc.rs names (android.hardware.neuralnetworks-V1-rust and
// android.hardware.common-V2-rust, crate names android_hardware_neuralnetworks and
// android_hardware_common), reduced to the items ipc.rs uses, with the signatures AOSP's AIDL
// Rust backend generates for the frozen V1 declarations (IPreparedModelCallback.notify is
// `void notify(in ErrorStatus status, in IPreparedModel preparedModel)`, without @nullable).
// The crate stands in for both by naming itself under both names.
// (The crate-level `allow`s are in each lib.rs: an included file cannot carry them.)

extern crate self as android_hardware_common;
extern crate self as android_hardware_neuralnetworks;

pub mod aidl {
    pub mod android {
        pub mod hardware {
            pub mod common {}
            pub mod neuralnetworks {
                pub mod ErrorStatus {
                    /// A backing-type newtype with one constant per enumerator, as the
                    /// backend's `declare_binder_enum!` makes it.
                    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
                    pub struct ErrorStatus(pub i32);
                    impl ErrorStatus {
                        pub const NONE: Self = Self(0);
                        pub const GENERAL_FAILURE: Self = Self(2);
                    }
                    impl ::binder::binder_impl::Serialize for ErrorStatus {
                        fn serialize(
                            &self,
                            _parcel: &mut ::binder::binder_impl::BorrowedParcel<'_>,
                        ) -> Result<(), ::binder::StatusCode> {
                            unimplemented!("stand-in")
                        }
                    }
                }
                pub mod IPreparedModel {
                    pub trait IPreparedModel: ::binder::Interface + Send {}
                }
                pub mod IPreparedModelCallback {
                    use super::{ErrorStatus::ErrorStatus, IPreparedModel::IPreparedModel};
                    pub trait IPreparedModelCallback: ::binder::Interface + Send {
                        fn r#notify(
                            &self,
                            _arg_status: ErrorStatus,
                            _arg_preparedModel: &::binder::Strong<dyn IPreparedModel>,
                        ) -> ::binder::Result<()>;
                    }
                    pub mod transactions {
                        pub const r#notify: ::binder::binder_impl::TransactionCode =
                            ::binder::binder_impl::FIRST_CALL_TRANSACTION;
                    }
                }
            }
        }
    }
}

/// Expands the shim's `dump` macro against the stand-in's `Interface`, as `service.rs` does.
mod dump_probe {
    struct Probe;
    impl Probe {
        fn dump_text(&self) -> String {
            String::new()
        }
    }
    crate::binder::ipc::impl_interface_with_dump!(Probe);
}
