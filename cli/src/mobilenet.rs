//! The float32 MobileNet v1 (alpha 1.0, 224×224, 1001 classes) the driver's speed is measured
//! on, built as a canonical HAL [`Model`] with seeded weights (`perf/README.md`).
//!
//! The weights are not downloaded: they come from a splitmix64 stream ([`SplitMix64`]), so the
//! model here is bit for bit the one the anchor runtimes (ONNX Runtime, LiteRT) were measured
//! on, and its output can be checked against theirs ([`reference_output`]). The layout follows
//! `mobilenet_v1_u8.json` operand for operand (95 operands, 31 operations, the same shared
//! scalar operands), so the float and the uint8 model read alike.

use nnhal_hal::{
    DataLocation, Model, Operand, OperandLifeTime, OperandType, Operation, OperationType,
};

/// Seed of the weight stream (every layer's filter and bias, in table order).
pub const WEIGHT_SEED: u64 = 1;
/// Seed of the test input.
pub const INPUT_SEED: u64 = 2;
/// Input dimensions, NHWC.
pub const INPUT_DIMS: [u32; 4] = [1, 224, 224, 3];
/// Number of output classes (probabilities).
pub const CLASSES: usize = 1001;
/// Filter and bias values of all layers.
pub const PARAMETERS: usize = 4_222_057;
/// Multiply-adds of one inference (convolutions, depthwise convolutions, logits).
pub const MACS: u64 = 568_741_376;
/// The five most probable classes of the reference output, most probable first.
pub const REFERENCE_TOP5: [usize; 5] = [290, 271, 523, 538, 149];
/// How far each probability may be from [`reference_output`]: summation order alone moves a
/// float32 result far less than this.
pub const REFERENCE_TOLERANCE: f32 = 1e-5;

/// splitmix64: the generator behind every weight and input value.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value uniform in `[-limit, limit)`: the top 24 bits as a fraction, scaled in float64
    /// and rounded once to float32, so it matches the numpy generator of the anchors exactly.
    pub fn uniform(&mut self, limit: f64) -> f32 {
        let u = (self.next_u64() >> 40) as f64 / (1u64 << 24) as f64;
        ((2.0 * u - 1.0) * limit) as f32
    }

    /// `n` consecutive [`SplitMix64::uniform`] values.
    pub fn values(&mut self, n: usize, limit: f64) -> Vec<f32> {
        (0..n).map(|_| self.uniform(limit)).collect()
    }
}

/// A convolution layer's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// CONV_2D, filter `[out_c, k, k, in_c]`.
    Conv,
    /// DEPTHWISE_CONV_2D with depth multiplier 1, filter `[1, k, k, c]`.
    Depthwise,
}

/// One weighted layer of the network (the 28 convolutions, logits included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub name: String,
    pub kind: LayerKind,
    /// Square kernel size.
    pub kernel: u32,
    pub stride: u32,
    /// Square input size (height = width).
    pub in_hw: u32,
    pub in_c: u32,
    pub out_c: u32,
    /// Fused RELU6 (every layer but the logits).
    pub relu6: bool,
}

impl Layer {
    /// PADDING_SAME output size: `ceil(in / stride)`.
    pub fn out_hw(&self) -> u32 {
        self.in_hw.div_ceil(self.stride)
    }

    /// The filter's dimensions in NNAPI layout.
    pub fn filter_dims(&self) -> [u32; 4] {
        match self.kind {
            LayerKind::Conv => [self.out_c, self.kernel, self.kernel, self.in_c],
            LayerKind::Depthwise => [1, self.kernel, self.kernel, self.out_c],
        }
    }

    pub fn output_dims(&self) -> [u32; 4] {
        [1, self.out_hw(), self.out_hw(), self.out_c]
    }

    /// Inputs feeding one output value.
    pub fn fan_in(&self) -> u32 {
        match self.kind {
            LayerKind::Conv => self.kernel * self.kernel * self.in_c,
            LayerKind::Depthwise => self.kernel * self.kernel,
        }
    }

    /// The filter's uniform limit: He-style `sqrt(6 / fan_in)`, and `sqrt(3 / fan_in)` for the
    /// logits so the softmax input stays moderate.
    pub fn filter_limit(&self) -> f64 {
        let gain = if self.relu6 { 6.0 } else { 3.0 };
        (gain / f64::from(self.fan_in())).sqrt()
    }

    pub fn macs(&self) -> u64 {
        let out: u64 = self.output_dims().iter().map(|&d| u64::from(d)).product();
        out * u64::from(self.fan_in())
    }
}

/// Uniform limit of every bias.
pub const BIAS_LIMIT: f64 = 0.1;

/// The 28 weighted layers in table (and weight-stream) order: conv0, then dw1/pw1 … dw13/pw13,
/// then the logits.
pub fn layers() -> Vec<Layer> {
    // (depthwise stride, pointwise output channels) of blocks 1..=13.
    const BLOCKS: [(u32, u32); 13] = [
        (1, 64),
        (2, 128),
        (1, 128),
        (2, 256),
        (1, 256),
        (2, 512),
        (1, 512),
        (1, 512),
        (1, 512),
        (1, 512),
        (1, 512),
        (2, 1024),
        (1, 1024),
    ];
    let mut layers = vec![Layer {
        name: "conv0".into(),
        kind: LayerKind::Conv,
        kernel: 3,
        stride: 2,
        in_hw: 224,
        in_c: 3,
        out_c: 32,
        relu6: true,
    }];
    let (mut hw, mut c) = (112, 32);
    for (i, &(stride, out_c)) in BLOCKS.iter().enumerate() {
        let dw = Layer {
            name: format!("dw{}", i + 1),
            kind: LayerKind::Depthwise,
            kernel: 3,
            stride,
            in_hw: hw,
            in_c: c,
            out_c: c,
            relu6: true,
        };
        hw = dw.out_hw();
        layers.push(dw);
        layers.push(Layer {
            name: format!("pw{}", i + 1),
            kind: LayerKind::Conv,
            kernel: 1,
            stride: 1,
            in_hw: hw,
            in_c: c,
            out_c,
            relu6: true,
        });
        c = out_c;
    }
    layers.push(Layer {
        name: "logits".into(),
        kind: LayerKind::Conv,
        kernel: 1,
        stride: 1,
        in_hw: 1,
        in_c: c,
        out_c: CLASSES as u32,
        relu6: false,
    });
    layers
}

/// One layer's values: the filter in NNAPI layout, row-major, and the bias.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub filter: Vec<f32>,
    pub bias: Vec<f32>,
}

/// Every layer's weights from one stream (seed [`WEIGHT_SEED`], never reset between layers).
pub fn weights() -> Vec<LayerWeights> {
    let mut rng = SplitMix64::new(WEIGHT_SEED);
    layers()
        .iter()
        .map(|layer| {
            let n = layer.filter_dims().iter().map(|&d| d as usize).product();
            let filter = rng.values(n, layer.filter_limit());
            let bias = rng.values(layer.out_c as usize, BIAS_LIMIT);
            LayerWeights { filter, bias }
        })
        .collect()
}

/// The test input (seed [`INPUT_SEED`]), NHWC, values in `[-1, 1)`.
pub fn input() -> Vec<f32> {
    let n = INPUT_DIMS.iter().map(|&d| d as usize).product();
    SplitMix64::new(INPUT_SEED).values(n, 1.0)
}

/// Operand numbers of the model [`model`] builds (the same as in `mobilenet_v1_u8.json`).
pub mod operands {
    pub const INPUT: u32 = 0;
    /// INT32 1: PADDING_SAME, stride 1, depth multiplier 1.
    pub const ONE: u32 = 3;
    /// INT32 2: stride 2, PADDING_VALID.
    pub const TWO: u32 = 4;
    /// INT32 3: FUSED_RELU6.
    pub const RELU6: u32 = 5;
    /// INT32 7: the average pool's window.
    pub const SEVEN: u32 = 85;
    /// INT32 0: FUSED_NONE.
    pub const NONE: u32 = 86;
    /// The logits `[1, 1001]` (RESHAPE output, SOFTMAX input).
    pub const LOGITS: u32 = 92;
    /// The probabilities `[1, 1001]`.
    pub const OUTPUT: u32 = 94;
}

/// Appends operands with their values to a model under construction.
struct Builder {
    model: Model,
}

impl Builder {
    fn operand(&mut self, ty: OperandType, dims: &[u32], lifetime: OperandLifeTime) -> u32 {
        self.model.operands.push(Operand::new(ty, dims, lifetime));
        (self.model.operands.len() - 1) as u32
    }

    /// A CONSTANT_COPY operand; values start on a 4-byte boundary as the framework lays them.
    fn constant(&mut self, ty: OperandType, dims: &[u32], bytes: &[u8]) -> u32 {
        let offset = self.model.operand_values.len().next_multiple_of(4);
        self.model.operand_values.resize(offset, 0);
        self.model.operand_values.extend_from_slice(bytes);
        let index = self.operand(ty, dims, OperandLifeTime::ConstantCopy);
        self.model.operands[index as usize].location = DataLocation {
            pool_index: 0,
            offset: offset as u32,
            length: bytes.len() as u32,
        };
        index
    }

    fn floats(&mut self, dims: &[u32], values: &[f32]) -> u32 {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(OperandType::TensorFloat32, dims, &bytes)
    }

    fn int(&mut self, value: i32) -> u32 {
        self.constant(OperandType::Int32, &[], &value.to_le_bytes())
    }

    fn temporary(&mut self, dims: &[u32]) -> u32 {
        self.operand(
            OperandType::TensorFloat32,
            dims,
            OperandLifeTime::TemporaryVariable,
        )
    }

    fn operation(&mut self, ty: OperationType, inputs: &[u32], output: u32) {
        self.model.operations.push(Operation {
            operation_type: ty.raw(),
            inputs: inputs.to_vec(),
            outputs: vec![output],
        });
    }
}

/// The float32 MobileNet v1 with the seeded weights: input operand 0 `[1,224,224,3]`, output
/// operand 94 `[1,1001]` probabilities; 15 CONV_2D, 13 DEPTHWISE_CONV_2D, AVERAGE_POOL_2D,
/// RESHAPE and SOFTMAX, all with implicit padding.
pub fn model() -> Model {
    use operands as op;
    let layers = layers();
    let weights = weights();
    let mut b = Builder {
        model: Model::default(),
    };
    b.operand(
        OperandType::TensorFloat32,
        &INPUT_DIMS,
        OperandLifeTime::ModelInput,
    );
    let mut previous = op::INPUT;
    for (i, (layer, w)) in layers.iter().zip(&weights).enumerate() {
        if layer.name == "logits" {
            // Global average: a 7×7 VALID window over the 7×7 map (stride 2 is irrelevant).
            let seven = b.int(7);
            let none = b.int(0);
            debug_assert_eq!((seven, none), (op::SEVEN, op::NONE));
            let pooled = b.temporary(&[1, 1, 1, layer.in_c]);
            b.operation(
                OperationType::AveragePool2d,
                &[previous, op::TWO, op::TWO, op::TWO, seven, seven, none],
                pooled,
            );
            previous = pooled;
        }
        let filter = b.floats(&layer.filter_dims(), &w.filter);
        let bias = b.floats(&[layer.out_c], &w.bias);
        if i == 0 {
            // The shared scalars sit between conv0's weights and its output, as in the u8 file.
            let scalars = [b.int(1), b.int(2), b.int(3)];
            debug_assert_eq!(scalars, [op::ONE, op::TWO, op::RELU6]);
        }
        let out = b.temporary(&layer.output_dims());
        let stride = if layer.stride == 2 { op::TWO } else { op::ONE };
        let activation = if layer.relu6 { op::RELU6 } else { op::NONE };
        match layer.kind {
            LayerKind::Conv => b.operation(
                OperationType::Conv2d,
                &[previous, filter, bias, op::ONE, stride, stride, activation],
                out,
            ),
            LayerKind::Depthwise => b.operation(
                OperationType::DepthwiseConv2d,
                &[
                    previous,
                    filter,
                    bias,
                    op::ONE,
                    stride,
                    stride,
                    op::ONE,
                    activation,
                ],
                out,
            ),
        }
        previous = out;
    }
    let shape: Vec<u8> = [1i32, CLASSES as i32]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let shape = b.constant(OperandType::TensorInt32, &[2], &shape);
    let logits = b.temporary(&[1, CLASSES as u32]);
    b.operation(OperationType::Reshape, &[previous, shape], logits);
    let beta = b.constant(OperandType::Float32, &[], &1.0f32.to_le_bytes());
    let output = b.operand(
        OperandType::TensorFloat32,
        &[1, CLASSES as u32],
        OperandLifeTime::ModelOutput,
    );
    b.operation(OperationType::Softmax, &[logits, beta], output);
    debug_assert_eq!((logits, output), (op::LOGITS, op::OUTPUT));

    let mut model = b.model;
    model.input_indexes = vec![op::INPUT];
    model.output_indexes = vec![output];
    for operation in &model.operations {
        for &i in &operation.inputs {
            model.operands[i as usize].number_of_consumers += 1;
        }
    }
    model
}

/// The reference output for [`input`]: ONNX Runtime's float32 probabilities
/// (`perf/mobilenet_v1_f32_reference.bin`, see `perf/README.md`).
pub fn reference_output() -> Vec<f32> {
    const BYTES: &[u8] = include_bytes!("../../perf/mobilenet_v1_f32_reference.bin");
    const _: () = assert!(BYTES.len() == CLASSES * 4);
    BYTES
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Indexes of the `k` largest values, largest first (ties: lower index first).
pub fn top_k(values: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_check_values() {
        assert_eq!(SplitMix64::new(1).next_u64(), 0x910a_2dec_8902_5cc1);
        // The check values are printed to a fixed number of decimals: compare at that precision.
        let printed = |values: &[f32], expected: &[&str]| {
            for (v, e) in values.iter().zip(expected) {
                let decimals = e.len() - e.find('.').unwrap() - 1;
                assert_eq!(format!("{v:.decimals$}"), *e, "{v}");
            }
        };
        let w = weights();
        printed(&w[0].filter[..3], &["0.0627548", "0.23172523", "0.4440656"]);
        printed(&w[0].bias[..2], &["-0.06816145", "0.01145169"]);
        printed(
            &input()[..4],
            &["0.18237936", "0.49829936", "0.19127607", "0.53083825"],
        );
    }

    #[test]
    fn layer_table_counts() {
        let layers = layers();
        assert_eq!(layers.len(), 28);
        let params: usize = weights()
            .iter()
            .map(|w| w.filter.len() + w.bias.len())
            .sum();
        assert_eq!(params, PARAMETERS);
        assert_eq!(layers.iter().map(Layer::macs).sum::<u64>(), MACS);
        assert_eq!(layers[26].output_dims(), [1, 7, 7, 1024]);
        assert_eq!(layers[1].macs(), 3_612_672);
        assert_eq!(layers[0].macs(), 10_838_016);
    }

    #[test]
    fn model_layout_matches_the_uint8_vector() {
        let m = model();
        assert_eq!(m.operands.len(), 95);
        assert_eq!(m.operations.len(), 31);
        let count = |ty: OperationType| {
            m.operations
                .iter()
                .filter(|o| o.operation_type == ty.raw())
                .count()
        };
        assert_eq!(count(OperationType::Conv2d), 15);
        assert_eq!(count(OperationType::DepthwiseConv2d), 13);
        assert_eq!(m.operations[0].inputs, [0, 1, 2, 3, 4, 4, 5]);
        assert_eq!(m.operations[1].inputs, [6, 7, 8, 3, 3, 3, 3, 5]);
        assert_eq!(m.operations[3].inputs, [12, 13, 14, 3, 4, 4, 3, 5]);
        assert_eq!(m.operations[27].inputs, [84, 4, 4, 4, 85, 85, 86]);
        assert_eq!(m.operations[28].inputs, [87, 88, 89, 3, 3, 3, 86]);
        assert_eq!(m.operations[29].inputs, [90, 91]);
        assert_eq!(m.operations[30].inputs, [92, 93]);
        assert_eq!(m.output_indexes, [94]);
        // Every float32 parameter is in operand_values, beside 5 INT32 scalars, the RESHAPE
        // shape (2 × INT32) and beta.
        assert_eq!(m.operand_values.len(), PARAMETERS * 4 + 5 * 4 + 8 + 4);
        nnhal::Driver::new(1)
            .unwrap()
            .supported_operations(&m)
            .unwrap()
            .iter()
            .for_each(|&s| assert!(s));
    }

    #[test]
    fn same_graph_as_the_uint8_vector() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../perf/mobilenet_v1_u8.json");
        let v = nnhal_vts::vector::Vector::from_file(&path).unwrap();
        let m = model();
        assert_eq!(m.operations.len(), v.model.operations.len());
        for (k, (a, b)) in m.operations.iter().zip(&v.model.operations).enumerate() {
            let ty = OperationType::from_raw(a.operation_type).unwrap();
            assert_eq!(ty.name(), b.operation_type, "operation {k}");
            assert_eq!(
                (&a.inputs, &a.outputs),
                (&b.inputs, &b.outputs),
                "operation {k}"
            );
        }
        assert_eq!(m.operands.len(), v.model.operands.len());
        for (i, (a, b)) in m.operands.iter().zip(&v.model.operands).enumerate() {
            assert_eq!(a.dimensions, b.dimensions, "operand {i}");
            let lifetime = OperandLifeTime::from_raw(a.lifetime).unwrap();
            assert_eq!(lifetime.name(), b.lifetime, "operand {i}");
            if a.operand_type != OperandType::TensorFloat32.raw() {
                // Scalars and the shape: the same values in both models.
                let start = a.location.offset as usize;
                let bytes = &m.operand_values[start..start + a.location.length as usize];
                let ty = OperandType::from_raw(a.operand_type).unwrap();
                let values = nnhal_vts::vector::model::decode(ty, bytes);
                assert_eq!(Some(&values), b.value.as_ref(), "operand {i}");
            }
        }
    }

    #[test]
    fn reference_top5() {
        let r = reference_output();
        assert_eq!(top_k(&r, 5), REFERENCE_TOP5);
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    }
}
