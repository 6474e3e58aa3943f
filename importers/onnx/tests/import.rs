//! The committed MobileNets import into models that pass NNAPI validation, with the layout and
//! quantization their edges need.

use nnhal_onnx::{import_file, EdgeLayout, SourceType};
use std::path::Path;

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

#[test]
fn mobilenet_f32_imports() {
    let m = import_file(&testdata("mobilenet_v1_f32.onnx")).unwrap();
    for line in &m.summary {
        println!("{line}");
    }
    assert_eq!(m.inputs.len(), 1);
    assert_eq!(m.inputs[0].shape, vec![1, 3, 224, 224]);
    assert_eq!(m.inputs[0].layout, EdgeLayout::Nhwc);
    assert_eq!(m.outputs[0].shape, vec![1, 1001]);
    // 28 convolutions with 27 Clip(0,6) fused into them, the pool, the reshape, the softmax.
    assert_eq!(m.model.operations.len(), 31);
}

#[test]
fn mobilenet_u8u8_imports() {
    let m = import_file(&testdata("mobilenet_v1_u8u8.onnx")).unwrap();
    for line in &m.summary {
        println!("{line}");
    }
    assert_eq!(m.inputs[0].source_type, SourceType::Float32);
    assert!(m.inputs[0].quantized.is_some());
    assert_eq!(m.outputs[0].source_type, SourceType::Float32);
    // 28 convolutions, the pool, the reshape, the softmax and the DEQUANTIZE of the output.
    assert_eq!(m.model.operations.len(), 32);
}
