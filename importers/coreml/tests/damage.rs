//! Damaged `.mlmodel` bytes (flipped, truncated, spliced) never panic the importer: they import
//! or fail with an error that says what is wrong.

use proptest::prelude::*;
use std::path::Path;

fn seed_models() -> Vec<Vec<u8>> {
    [
        "branched_graph",
        "conv_fp16_weights",
        "inner_product_q8_lut",
        "padding_constant",
        "inner_product_lut_3bit",
        "conv_grouped",
    ]
    .iter()
    .map(|n| {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/cases/{n}.mlmodel")),
        )
        .unwrap()
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn damaged_models_never_panic(
        which in 0usize..6,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = seed_models().swap_remove(which);
        for (at, v) in flips {
            let i = at % bytes.len();
            bytes[i] = v;
        }
        if truncate {
            bytes.truncate(cut % bytes.len());
        }
        if let Err(e) = nnhal_coreml::import(&bytes) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn empty_and_foreign_bytes_are_malformed() {
    for bytes in [&b""[..], b"\x08\x01", b"not a model at all"] {
        let e = nnhal_coreml::import(bytes).unwrap_err();
        assert!(matches!(e, nnhal_coreml::CoremlError::Malformed(_)), "{e}");
    }
}

fn case(name: &str) -> nnhal_coreml::proto::Model {
    use prost::Message;
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/cases/{name}.mlmodel")),
    )
    .unwrap();
    nnhal_coreml::proto::Model::decode(bytes.as_slice()).unwrap()
}

fn layers(
    model: &mut nnhal_coreml::proto::Model,
) -> &mut Vec<nnhal_coreml::proto::NeuralNetworkLayer> {
    match &mut model.r#type {
        Some(nnhal_coreml::proto::model::Type::NeuralNetwork(n)) => &mut n.layers,
        _ => panic!("a neuralNetwork body"),
    }
}

/// Imports `model`, which must be refused for its layer `index` with a reason containing `why`.
fn refused(model: &nnhal_coreml::proto::Model, index: usize, why: &str) {
    use prost::Message;
    match nnhal_coreml::import(&model.encode_to_vec()) {
        Ok(_) => panic!("imported; expected a refusal containing '{why}'"),
        Err(e @ nnhal_coreml::CoremlError::Layer { index: i, .. }) => {
            assert_eq!(i, index, "{e}");
            assert!(e.to_string().contains(why), "'{e}' does not say '{why}'");
        }
        Err(e) => panic!("'{e}': expected a layer refusal containing '{why}'"),
    }
}

fn weights_of(model: &mut nnhal_coreml::proto::Model) -> &mut nnhal_coreml::proto::WeightParams {
    use nnhal_coreml::proto::neural_network_layer::Layer;
    match &mut layers(model)[0].layer {
        Some(Layer::InnerProduct(p)) => p.weights.as_mut().unwrap(),
        Some(Layer::Convolution(p)) => p.weights.as_mut().unwrap(),
        _ => panic!("an inner product or convolution"),
    }
}

#[test]
fn bi98_quantized_weights_that_disagree_with_their_bit_width_are_refused() {
    use nnhal_coreml::proto::quantization_params::QuantizationType;
    // The undamaged files import (and their outputs are checked in cli/tests/coreml_cases.rs).
    for name in [
        "inner_product_lut_2bit",
        "inner_product_linear_4bit",
        "conv_lut_2bit",
    ] {
        nnhal_coreml::import(
            &std::fs::read(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("testdata/cases/{name}.mlmodel")),
            )
            .unwrap(),
        )
        .unwrap();
    }
    // A lookup table shorter (or longer) than 2^bits.
    for len in [3, 5, 0] {
        let mut m = case("inner_product_lut_2bit");
        let w = weights_of(&mut m);
        let Some(QuantizationType::LookupTableQuantization(t)) =
            &mut w.quantization.as_mut().unwrap().quantization_type
        else {
            panic!("a lookup table")
        };
        t.float_value.resize(len, 0.5);
        refused(
            &m,
            0,
            &format!("a 2-bit lookup table of {len} values (4 needed)"),
        );
    }
    // Packed codes shorter or longer than ⌈count · bits / 8⌉ bytes (5 × 7 codes of 2 bits: 9).
    for (len, name) in [
        (8, "inner_product_lut_2bit"),
        (10, "inner_product_lut_2bit"),
        (0, "conv_lut_2bit"),
    ] {
        let mut m = case(name);
        let w = weights_of(&mut m);
        w.raw_value.resize(len, 0xff);
        let why = if len == 0 {
            "no weight values".to_string()
        } else {
            format!("{len} bytes of 2-bit weights, the layer's 35 values need 9")
        };
        refused(&m, 0, &why);
    }
    // A bit width outside 1–8.
    for bits in [0, 9, 16] {
        let mut m = case("inner_product_lut_2bit");
        weights_of(&mut m)
            .quantization
            .as_mut()
            .unwrap()
            .number_of_bits = bits;
        refused(
            &m,
            0,
            &format!("{bits}-bit quantized weights (numberOfBits is 1 to 8)"),
        );
    }
    // Linear quantization with a scale per row for other than the layer's rows.
    let mut m = case("inner_product_linear_4bit");
    let w = weights_of(&mut m);
    let Some(QuantizationType::LinearQuantization(l)) =
        &mut w.quantization.as_mut().unwrap().quantization_type
    else {
        panic!("linear quantization")
    };
    l.scale.truncate(2);
    refused(
        &m,
        0,
        "2 linear quantization scale values for 5 output channels",
    );
}

#[test]
fn bi99_layer_parameters_the_new_lowerings_cannot_honour_are_refused() {
    use nnhal_coreml::proto::activation_params::NonlinearityType as N;
    use nnhal_coreml::proto::neural_network_layer::Layer;
    // PReLU with neither 1 nor C slopes.
    let mut m = case("activation_prelu");
    let Some(Layer::Activation(a)) = &mut layers(&mut m)[0].layer else {
        panic!("an activation")
    };
    let Some(N::PReLu(p)) = &mut a.nonlinearity_type else {
        panic!("a PReLU")
    };
    p.alpha.as_mut().unwrap().float_value.truncate(3);
    refused(&m, 0, "PReLU alpha: 3 float weights, the layer needs 4");

    // Grouped convolution: output channels not split evenly over the groups, a dilated one.
    let conv = |f: &dyn Fn(&mut nnhal_coreml::proto::ConvolutionLayerParams)| {
        let mut m = case("conv_grouped");
        let Some(Layer::Convolution(c)) = &mut layers(&mut m)[0].layer else {
            panic!("a convolution")
        };
        f(c);
        m
    };
    refused(
        &conv(&|c| c.output_channels = 5),
        0,
        "outputChannels 5 is not a multiple of nGroups 2",
    );
    refused(
        &conv(&|c| c.dilation_factor = vec![2, 2]),
        0,
        "GROUPED_CONV_2D has no dilation",
    );
    refused(&conv(&|c| c.dilation_factor = vec![0, 1]), 0, "zero");
    refused(
        &conv(&|c| c.dilation_factor = vec![2]),
        0,
        "dilation factors [2]",
    );

    // Enumerations outside the specification.
    let mut m = case("unary_abs");
    let Some(Layer::Unary(u)) = &mut layers(&mut m)[0].layer else {
        panic!("a unary layer")
    };
    u.r#type = 11;
    refused(&m, 0, "unary function type 11 (0 to 7 are defined)");
    for (mode, axis, why) in [(12, 0, "reduce mode 12"), (0, 9, "reduce axis 9")] {
        let mut m = case("reduce_sum_c");
        let Some(Layer::Reduce(r)) = &mut layers(&mut m)[0].layer else {
            panic!("a reduce layer")
        };
        (r.mode, r.axis) = (mode, axis);
        refused(&m, 0, why);
    }
    let mut m = case("upsample_bilinear_align_corners_true");
    let Some(Layer::Upsample(u)) = &mut layers(&mut m)[0].layer else {
        panic!("an upsample layer")
    };
    u.linear_upsample_mode = 5;
    refused(&m, 0, "linearUpsampleMode 5 (0 to 2 are defined)");

    // Pixel shuffle of channels that are not a multiple of the block squared.
    let mut m = case("reorganize_pixel_shuffle");
    let Some(Layer::ReorganizeData(r)) = &mut layers(&mut m)[0].layer else {
        panic!("a reorganizeData layer")
    };
    r.block_size = 3;
    refused(&m, 0, "the channels must be a multiple of 9");

    // A reordering reshape whose target holds another element count.
    let mut m = case("reshape_channel_first");
    let Some(Layer::Reshape(r)) = &mut layers(&mut m)[0].layer else {
        panic!("a reshape layer")
    };
    r.target_shape = vec![2, 6, 3];
    refused(
        &m,
        0,
        "target shape [2, 6, 3] holds 36 elements, the input 24",
    );
}

#[test]
fn reflection_padding_past_the_edge_is_refused() {
    use nnhal_coreml::proto::neural_network_layer::Layer;
    let mut model = case("padding_reflection");
    let Some(Layer::Padding(p)) = &mut layers(&mut model)[0].layer else {
        panic!("a padding layer")
    };
    // The input is 4 high: a reflection pads at most 3 rows on a side.
    p.padding_amounts.as_mut().unwrap().border_amounts[0].end_edge_size = 4;
    refused(&model, 0, "reflection padding of 1 and 4 on a side of 4");
}
