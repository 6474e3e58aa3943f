pub mod aidl {
    #![allow(clippy::all, unused, non_snake_case, non_camel_case_types, non_upper_case_globals)]
    rsbinder::include_aidl!("nnhal_aidl");
}
