//! BI-23…BI-26: every request mutation class applied to a valid request of every bundled vector
//! (both constant modes); each variant must get INVALID_ARGUMENT from `execute`, without a panic.

mod common;

class_tests! {
    common::request_class;
    bi23_request_input_removed => 23,
    bi24_request_output_removed => 24,
    bi25_request_pool_index_out_of_range => 25,
    bi26_request_dims_conflict => 26,
}

#[test]
fn every_request_class_has_a_test() {
    assert_eq!(nnhal_vts::mutations::REQUEST_MUTATORS.len(), 4);
}
