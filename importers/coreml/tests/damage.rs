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
        which in 0usize..4,
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
