//! BI-01…BI-22: every VTS model mutation class applied to every bundled vector (both constant
//! modes and the `all_inputs_as_internal` form); each variant must get INVALID_ARGUMENT from
//! both `supported_operations` and `prepare_model`, without a panic.

mod common;

class_tests! {
    common::model_class;
    bi01_operand_type_out_of_range => 1,
    bi02_operand_rank_wrong => 2,
    bi03_operand_scale_invalid => 3,
    bi04_operand_zero_point_invalid => 4,
    bi05_lifetime_contradicts_writer => 5,
    bi06_lifetime_inconsistent_with_io_lists => 6,
    bi07_consumer_count_off_by_one => 7,
    bi08_operand_with_two_writers => 8,
    bi09_operand_without_writer => 9,
    bi10_operations_out_of_order => 10,
    bi11_graph_cycle => 11,
    bi12_operation_operand_type_mismatch => 12,
    bi13_operation_type_out_of_range => 13,
    bi14_operation_input_index_out_of_range => 14,
    bi15_operation_output_index_out_of_range => 15,
    bi16_model_io_index_out_of_range => 16,
    bi17_operand_removed => 17,
    bi18_operation_removed => 18,
    bi19_operation_input_removed => 19,
    bi20_operation_output_removed => 20,
    bi21_operation_input_added => 21,
    bi22_operation_output_added => 22,
}

#[test]
fn every_model_class_has_a_test() {
    // The list above must cover the mutator table exactly.
    assert_eq!(nnhal_vts::mutations::MODEL_MUTATORS.len(), 22);
}
