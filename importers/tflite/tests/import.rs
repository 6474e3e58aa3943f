//! The fixtures of testdata/ (made by tools/make_fixtures.py with TensorFlow's converter)
//! through the importer alone: what each operator becomes, what is refused and why, and the
//! damaged-file classes BI-90…BI-92 of docs/bad-inputs.md. Running the lowered models
//! against LiteRT's outputs is cli/tests/tflite_cases.rs.

use nnhal_hal::{OperandType, OperationType};
use nnhal_tflite::{import, TfliteError};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(name),
    )
    .unwrap()
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    v.sort();
    v
}

fn op_names(m: &nnhal_hal::Model) -> Vec<&'static str> {
    m.operations
        .iter()
        .map(|o| OperationType::from_raw(o.operation_type).unwrap().name())
        .collect()
}

#[test]
fn float_convolutions_lower_one_to_one() {
    let m = import(&fixture("conv_f32.tflite")).unwrap();
    assert_eq!(
        op_names(&m.model),
        [
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "AVERAGE_POOL_2D",
            "MAX_POOL_2D",
            "RESHAPE",
            "FULLY_CONNECTED",
            "FULLY_CONNECTED",
            "SOFTMAX"
        ]
    );
    assert_eq!(m.summary.len(), 10);
    assert!(m.summary[1].contains("(DEPTHWISE_CONV_2D) → DEPTHWISE_CONV_2D"));
    // The dilated depthwise convolution carries layout and dilation scalars (11 inputs).
    assert_eq!(m.model.operations[3].inputs.len(), 11);
    assert_eq!(m.inputs[0].shape, [1, 12, 12, 3]);
}

#[test]
fn int8_models_keep_signed_edges_and_per_channel_filters() {
    let m = import(&fixture("conv_int8.tflite")).unwrap();
    let ty = |i: u32| OperandType::from_raw(m.model.operands[i as usize].operand_type).unwrap();
    assert_eq!(
        ty(m.model.input_indexes[0]),
        OperandType::TensorQuant8AsymmSigned
    );
    assert_eq!(
        m.inputs[0].source_type,
        nnhal_tflite::SourceType::Int8,
        "an int8 model takes int8"
    );
    let conv = &m.model.operations[0];
    let filter = &m.model.operands[conv.inputs[1] as usize];
    assert_eq!(ty(conv.inputs[1]), OperandType::TensorQuant8SymmPerChannel);
    assert_eq!(filter.channel_quant.as_ref().unwrap().channel_dim, 0);
    assert_eq!(filter.channel_quant.as_ref().unwrap().scales.len(), 6);
    let dw = &m.model.operations[1];
    let dw_filter = &m.model.operands[dw.inputs[1] as usize];
    assert_eq!(dw_filter.channel_quant.as_ref().unwrap().channel_dim, 3);
    // Per-channel biases have scale 0: NNAPI derives each channel's.
    assert_eq!(m.model.operands[conv.inputs[2] as usize].scale, 0.0);
}

#[test]
fn float16_weights_become_float32_constants() {
    let m = import(&fixture("conv_f16.tflite")).unwrap();
    let names = op_names(&m.model);
    assert!(!names.contains(&"DEQUANTIZE"), "{names:?}");
    assert_eq!(names.len(), 10);
    assert!(m.summary[0].contains("(DEQUANTIZE) → folded into a constant"));
    let conv = &m.model.operations[0];
    assert_eq!(
        m.model.operands[conv.inputs[1] as usize].operand_type,
        OperandType::TensorFloat32.raw()
    );
}

#[test]
fn requantization_and_quantized_mean_go_through_float() {
    let m = import(&fixture("shapes_int8.tflite")).unwrap();
    let names = op_names(&m.model);
    let line = m.summary.iter().find(|l| l.contains("(MEAN)")).unwrap();
    assert!(
        line.ends_with("DEQUANTIZE + MEAN + QUANTIZE") || line.ends_with("→ MEAN"),
        "{line}"
    );
    let q = m.summary.iter().find(|l| l.contains("(QUANTIZE)")).unwrap();
    assert!(q.ends_with("DEQUANTIZE + QUANTIZE"), "{q}");
    assert!(names.contains(&"HARD_SWISH") && names.contains(&"STRIDED_SLICE"));
}

#[test]
fn keep_num_dims_reshapes_the_fully_connected_result() {
    let m = import(&fixture("shapes_f32.tflite")).unwrap();
    let line = m
        .summary
        .iter()
        .find(|l| l.contains("(FULLY_CONNECTED)"))
        .unwrap();
    assert!(line.ends_with("FULLY_CONNECTED + RESHAPE"), "{line}");
    assert_eq!(m.outputs[0].shape, [1, 54, 3]);
}

/// The report line of the first operator of builtin `name`.
fn line<'a>(m: &'a nnhal_tflite::ImportedModel, name: &str) -> &'a str {
    let tag = format!("({name}) →");
    m.summary
        .iter()
        .find(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no {name} in {:#?}", m.summary))
}

#[test]
fn rewritten_builtins_become_what_the_delegate_sends() {
    let m = import(&fixture("moves_f32.tflite")).unwrap();
    for (builtin, became) in [
        ("PACK", "CONCATENATION + RESHAPE"),
        ("UNPACK", "SPLIT + RESHAPE + RESHAPE + RESHAPE"),
        ("SPLIT", "SPLIT"),
        // Parts of 1 and 2 channels: one SLICE each.
        ("SPLIT_V", "SLICE + SLICE"),
        ("GATHER", "GATHER"),
        ("SPACE_TO_BATCH_ND", "SPACE_TO_BATCH_ND"),
        ("BATCH_TO_SPACE_ND", "BATCH_TO_SPACE_ND"),
    ] {
        let l = line(&m, builtin);
        assert!(l.ends_with(&format!("→ {became}")), "{l}");
    }
    let m = import(&fixture("layers_f32.tflite")).unwrap();
    assert!(line(&m, "LEAKY_RELU").ends_with("→ PRELU"));
    assert!(line(&m, "TRANSPOSE_CONV").ends_with("→ TRANSPOSE_CONV_2D"));
    let m = import(&fixture("math_f32.tflite")).unwrap();
    assert!(line(&m, "SQUARED_DIFFERENCE").ends_with("→ SUB + MUL"));
    assert!(line(&m, "SELECT_V2").ends_with("→ SELECT"));
    assert!(line(&m, "PADV2").ends_with("→ PAD_V2"));
    assert!(line(&m, "SUM").ends_with("→ REDUCE_SUM"));
    // Comparisons produce TENSOR_BOOL8 temporaries.
    assert!(m
        .model
        .operands
        .iter()
        .any(|o| o.operand_type == OperandType::TensorBool8.raw()));
}

#[test]
fn leaky_relu_alpha_is_stored_exactly_in_the_quantized_forms() {
    // The converter's uint8 form keeps an int8 interior behind uint8 edges (a QUANTIZE at
    // each end), so both alphas are signed; the uint8 edges are TENSOR_QUANT8_ASYMM.
    let ty = OperandType::TensorQuant8AsymmSigned;
    for file in ["layers_int8.tflite", "layers_uint8.tflite"] {
        let m = import(&fixture(file)).unwrap();
        let prelu = m
            .model
            .operations
            .iter()
            .find(|o| o.operation_type == OperationType::Prelu.raw())
            .unwrap();
        // The first PRELU is the LEAKY_RELU's (alpha 0.2): one element, scale 0.2.
        let alpha = &m.model.operands[prelu.inputs[1] as usize];
        assert_eq!(alpha.operand_type, ty.raw(), "{file}");
        assert_eq!(alpha.dimensions, [1]);
        assert!((alpha.scale - 0.2).abs() < 1e-7, "{file}: {}", alpha.scale);
    }
    let m = import(&fixture("layers_uint8.tflite")).unwrap();
    assert_eq!(m.inputs[0].source_type, nnhal_tflite::SourceType::UInt8);
    let input = &m.model.operands[m.model.input_indexes[0] as usize];
    assert_eq!(input.operand_type, OperandType::TensorQuant8Asymm.raw());
    assert!(line(&m, "QUANTIZE").ends_with("→ DEQUANTIZE + QUANTIZE"));
}

#[test]
fn a_builtin_without_an_nnapi_form_is_refused_by_name_with_the_whole_report() {
    // int8 DIV: NNAPI's DIV has no quantized signature, so the delegate would not send it.
    let e = import(&fixture("misc_int8.tflite")).unwrap_err();
    let TfliteError::Operators { count, report } = &e else {
        panic!("{e}")
    };
    assert_eq!(*count, 1);
    assert_eq!(report.len(), 7, "every operator has its line");
    let div = report.iter().find(|l| l.contains("(DIV)")).unwrap();
    assert!(
        div.contains("not lowered") && div.contains("quantized"),
        "{div}"
    );
    assert!(report.iter().any(|l| l.contains("(SOFTMAX) → SOFTMAX")));
    let text = e.to_string();
    assert!(
        text.starts_with("1 operator(s) cannot be lowered"),
        "{text}"
    );
}

#[test]
fn bool_and_int32_edges_keep_their_types() {
    use nnhal_tflite::SourceType;
    let m = import(&fixture("edges_f32.tflite")).unwrap();
    let ins: Vec<_> = m.inputs.iter().map(|e| e.source_type).collect();
    assert_eq!(
        ins,
        [SourceType::Float32, SourceType::Int32, SourceType::Bool8]
    );
    let outs: Vec<_> = m.outputs.iter().map(|e| e.source_type).collect();
    assert_eq!(
        outs,
        [
            SourceType::Bool8,
            SourceType::Int32,
            SourceType::Float32,
            SourceType::Int32,
            SourceType::Float32
        ]
    );
    let ty = |i: u32| m.model.operands[i as usize].operand_type;
    assert_eq!(ty(m.model.input_indexes[2]), OperandType::TensorBool8.raw());
    assert_eq!(
        ty(m.model.output_indexes[1]),
        OperandType::TensorInt32.raw()
    );
    // k is passed as a scalar, the indices come out as int32.
    let topk = line(&m, "TOPK_V2");
    assert!(topk.ends_with("→ TOPK_V2"), "{topk}");
    let op = m
        .model
        .operations
        .iter()
        .find(|o| o.operation_type == OperationType::TopkV2.raw())
        .unwrap();
    assert_eq!(ty(op.inputs[1]), OperandType::Int32.raw());
    assert_eq!(ty(op.outputs[1]), OperandType::TensorInt32.raw());
}

#[test]
fn recurrent_builtins_get_the_delegates_extra_operands() {
    let m = import(&fixture("recurrent_f32.tflite")).unwrap();
    let op = |t: OperationType| {
        m.model
            .operations
            .iter()
            .find(|o| o.operation_type == t.raw())
            .unwrap_or_else(|| panic!("no {}", t.name()))
    };
    let lifetime = |i: u32| m.model.operands[i as usize].lifetime;
    let zeros = |i: u32| {
        let o = &m.model.operands[i as usize];
        let at = o.location.offset as usize;
        o.lifetime == nnhal_hal::OperandLifeTime::ConstantCopy.raw()
            && m.model.operand_values[at..at + o.location.length as usize]
                .iter()
                .all(|&b| b == 0)
    };
    // RNN: activation appended, state in as zeros, state out added before the output.
    let rnn = op(OperationType::Rnn);
    assert_eq!((rnn.inputs.len(), rnn.outputs.len()), (6, 2));
    assert!(zeros(rnn.inputs[4]));
    assert_eq!(
        lifetime(rnn.outputs[0]),
        nnhal_hal::OperandLifeTime::TemporaryVariable.raw()
    );
    let svdf = op(OperationType::Svdf);
    assert_eq!((svdf.inputs.len(), svdf.outputs.len()), (7, 2));
    // LSTM of 24 inputs: 20 tensors, 3 scalars, 4 layer-norm weights (all absent here);
    // scratch buffer and both states before the output.
    let lstm = op(OperationType::Lstm);
    assert_eq!((lstm.inputs.len(), lstm.outputs.len()), (27, 4));
    assert!(zeros(lstm.inputs[18]) && zeros(lstm.inputs[19]));
    for i in 23..27 {
        assert_eq!(
            lifetime(lstm.inputs[i]),
            nnhal_hal::OperandLifeTime::NoValue.raw()
        );
    }
    let seq = op(OperationType::UnidirectionalSequenceLstm);
    assert_eq!(seq.inputs.len(), 28);
    // CIFG: the input gate's weights are absent.
    assert_eq!(
        lifetime(seq.inputs[1]),
        nnhal_hal::OperandLifeTime::NoValue.raw()
    );
    assert_eq!(op(OperationType::UnidirectionalSequenceRnn).inputs.len(), 7);
    let bi = op(OperationType::BidirectionalSequenceLstm);
    assert_eq!((bi.inputs.len(), bi.outputs.len()), (61, 1));
}

#[test]
fn lookups_and_projections_lower_as_the_delegate_sends_them() {
    let m = import(&fixture("lookup_f32.tflite")).unwrap();
    let hits = m.model.operands[m.model.output_indexes[1] as usize].clone();
    assert_eq!(hits.operand_type, OperandType::TensorQuant8Asymm.raw());
    assert_eq!((hits.scale, hits.zero_point), (1.0, 0));
    let lsh: Vec<_> = m
        .model
        .operations
        .iter()
        .filter(|o| o.operation_type == OperationType::LshProjection.raw())
        .collect();
    assert_eq!(lsh.len(), 2);
    let kind = |o: &nnhal_hal::Operation| {
        let c = &m.model.operands[o.inputs[3] as usize];
        let at = c.location.offset as usize;
        i32::from_le_bytes(m.model.operand_values[at..at + 4].try_into().unwrap())
    };
    // SPARSE is NNAPI's type 3 with the weight omitted; DENSE type 2 with its weights.
    assert_eq!(kind(lsh[0]), 3);
    assert_eq!(
        m.model.operands[lsh[0].inputs[2] as usize].lifetime,
        nnhal_hal::OperandLifeTime::NoValue.raw()
    );
    assert_eq!(kind(lsh[1]), 2);
}

#[test]
fn operators_the_delegate_keeps_on_the_cpu_are_reported_with_the_reason() {
    let e = import(&fixture("refused_f32.tflite")).unwrap_err();
    let TfliteError::Operators { count, report } = &e else {
        panic!("{e}")
    };
    assert_eq!(*count, 4, "{report:#?}");
    for (builtin, why) in [
        ("RNN", "fused activation Tanh"),
        ("BIDIRECTIONAL_SEQUENCE_RNN", "no mapping"),
        ("LSH_PROJECTION", "SPARSE projection with a weight input"),
        ("TOPK_V2", "k must be an int32 constant"),
    ] {
        let l = report
            .iter()
            .find(|l| l.contains(&format!("({builtin}) →")))
            .unwrap();
        assert!(l.contains("not lowered") && l.contains(why), "{l}");
    }
}

#[test]
fn bi90_truncated_or_foreign_bytes_are_not_tflite() {
    let bytes = fixture("conv_f32.tflite");
    for cut in [0, 3, 7] {
        let e = import(&bytes[..cut]).unwrap_err();
        assert!(matches!(e, TfliteError::NotTflite(_)), "{cut}: {e}");
    }
    let e = import(b"\x10\0\0\0ONNXwhatever-else").unwrap_err();
    assert!(e.to_string().contains("not \"TFL3\""), "{e}");
    // Cut in the middle: the root table or a later offset falls outside the file.
    for cut in [16, bytes.len() / 2, bytes.len() - 1] {
        let e = import(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(e, TfliteError::NotTflite(_) | TfliteError::Malformed(_)),
            "{cut}: {e}"
        );
    }
    // A root offset pointing past the end.
    let mut bad = bytes.clone();
    bad[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        import(&bad).unwrap_err(),
        TfliteError::NotTflite(_)
    ));
}

/// The byte position of `needle` in `bytes`, which must hold it once.
fn find_unique(bytes: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 1, "{needle:?} at {hits:?}");
    hits[0]
}

#[test]
fn bi91_offsets_and_indexes_out_of_range_are_refused() {
    // Every uoffset of the file pointed past its end: each is caught by the verifier, not
    // followed.
    let bytes = fixture("misc_f32.tflite");
    let mut refused = 0;
    for at in (8..bytes.len() - 4).step_by(4) {
        let mut bad = bytes.clone();
        bad[at..at + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
        if let Err(e) = import(&bad) {
            assert!(!e.to_string().is_empty());
            refused += 1;
        }
    }
    assert!(refused > 50, "{refused} refusals");
    // An operator's input tensor index past the tensor table: SOFTMAX's one-element input
    // vector ([1, i] as little-endian words) rewritten to [1, 999], wherever such a vector
    // sits; one of the candidates is the operator's.
    let m = decoded(&bytes);
    let softmax = m.operators.len() - 2;
    let i = m.operators[softmax].inputs[0].unwrap() as u32;
    let mut needle = 1u32.to_le_bytes().to_vec();
    needle.extend_from_slice(&i.to_le_bytes());
    let mut named = 0;
    for at in (0..bytes.len() - 8).step_by(4) {
        if bytes[at..at + 8] == needle[..] {
            let mut bad = bytes.clone();
            bad[at + 4..at + 8].copy_from_slice(&999u32.to_le_bytes());
            if let Err(e) = import(&bad) {
                named += usize::from(e.to_string().contains("input tensor 999 is out of range"));
            }
        }
    }
    assert!(named >= 1, "no rewrite was refused with the index named");
}

fn decoded(bytes: &[u8]) -> nnhal_tflite::Decoded {
    nnhal_tflite::decode(bytes).unwrap()
}

#[test]
fn bi92_a_buffer_shorter_than_its_tensor_is_refused() {
    // The first convolution's filter [6, 3, 3, 3] float32 needs 648 bytes; its buffer's
    // length prefix is lowered by 4.
    let bytes = fixture("conv_f32.tflite");
    let at = find_unique(&bytes, &648u32.to_le_bytes());
    let mut bad = bytes.clone();
    bad[at..at + 4].copy_from_slice(&644u32.to_le_bytes());
    let e = import(&bad).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("holds 644 bytes") && text.contains("needs 648"),
        "{text}"
    );
}

#[test]
fn every_fixture_imports_or_names_its_refusal() {
    for path in fixtures() {
        match import(&std::fs::read(&path).unwrap()) {
            Ok(m) => assert!(nnhal_hal::validate::validate_model(&m.model).is_ok()),
            Err(TfliteError::Operators { report, .. }) => {
                assert!(report.iter().any(|l| l.contains("not lowered")))
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random damage (overwritten bytes, a cut) never panics: a model that validates or an
    /// error in words.
    #[test]
    fn damaged_bytes_never_panic(
        which in 0usize..16,
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
        cut in proptest::option::of(any::<u16>()),
    ) {
        let all = fixtures();
        let mut bytes = std::fs::read(&all[which % all.len()]).unwrap();
        for (at, value) in edits {
            let i = at as usize % bytes.len();
            bytes[i] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut as usize % (bytes.len() + 1));
        }
        match import(&bytes) {
            Ok(m) => prop_assert!(nnhal_hal::validate::validate_model(&m.model).is_ok()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
