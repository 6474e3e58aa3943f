//! Lowering of a decoded CoreML neural network to NNAPI operations (float32, NHWC inside): the
//! NNAPI 1.0 set where it expresses a layer exactly, the 1.1–1.3 operations (TRANSPOSE,
//! GROUPED_CONV_2D, PRELU, PAD_V2, REDUCE_*, RESIZE_*, …) where it does not.
//!
//! Every blob is held as a `[1, H, W, C]` operand. A channel-first flatten of an image with
//! H·W > 1 keeps its elements in NHWC order and remembers the source `[C, H, W]`, so an inner
//! product after it uses re-laid-out weight columns and a model output after it is reordered on
//! the host: the CHW element order is kept exactly, never approximated.

use crate::decode::{element_count, weights};
use crate::proto;
use crate::proto::neural_network_layer::Layer;
use crate::CoremlError;
use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, ModelBuilder, SourceType};
use nnhal_hal::{OperandType, OperationType};
use std::collections::HashMap;

type R<T> = Result<T, String>;

#[derive(Clone, Copy, Debug)]
struct Blob {
    operand: u32,
    c: usize,
    h: usize,
    w: usize,
    /// The source `[C, H, W]` of a channel-first flatten held in NHWC order (then `c` is C·H·W).
    flat: Option<(usize, usize, usize)>,
}

/// The body shared by the three neural-network model types.
struct Net<'a> {
    layers: &'a [proto::NeuralNetworkLayer],
    preprocessing: &'a [proto::NeuralNetworkPreprocessing],
    updatable: bool,
    labels: Option<Vec<String>>,
    /// A classifier's probability blob (`labelProbabilityLayerName`, else the last layer's).
    probabilities: Option<String>,
}

fn model_type_name(t: &proto::model::Type) -> String {
    let debug = format!("{t:?}");
    let name = debug.split('(').next().unwrap_or("?");
    let mut chars = name.chars();
    chars
        .next()
        .map(|c| c.to_lowercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

fn layer_kind(l: &proto::NeuralNetworkLayer) -> String {
    match &l.layer {
        None => "unknown layer type".into(),
        Some(layer) => {
            let debug = format!("{layer:?}");
            let name = debug.split('(').next().unwrap_or("?").to_string();
            let mut chars = name.chars();
            chars
                .next()
                .map(|c| c.to_lowercase().collect::<String>() + chars.as_str())
                .unwrap_or_default()
        }
    }
}

pub fn lower(model: &proto::Model) -> Result<ImportedModel, CoremlError> {
    use proto::model::Type;
    let unsupported = CoremlError::Unsupported;
    if model.is_updatable {
        return Err(unsupported(
            "an updatable model (isUpdatable): only inference models are imported".into(),
        ));
    }
    let net = match &model.r#type {
        Some(Type::NeuralNetwork(n)) => Net {
            layers: &n.layers,
            preprocessing: &n.preprocessing,
            updatable: n.update_params.is_some(),
            labels: None,
            probabilities: None,
        },
        Some(Type::NeuralNetworkRegressor(n)) => Net {
            layers: &n.layers,
            preprocessing: &n.preprocessing,
            updatable: n.update_params.is_some(),
            labels: None,
            probabilities: None,
        },
        Some(Type::NeuralNetworkClassifier(n)) => {
            use proto::neural_network_classifier::ClassLabels;
            Net {
                layers: &n.layers,
                preprocessing: &n.preprocessing,
                updatable: n.update_params.is_some(),
                labels: match &n.class_labels {
                    Some(ClassLabels::StringClassLabels(v)) => Some(v.vector.clone()),
                    Some(ClassLabels::Int64ClassLabels(v)) => {
                        Some(v.vector.iter().map(|x| x.to_string()).collect())
                    }
                    None => None,
                },
                probabilities: Some(if n.label_probability_layer_name.is_empty() {
                    n.layers
                        .last()
                        .and_then(|l| l.output.first())
                        .cloned()
                        .unwrap_or_default()
                } else {
                    n.label_probability_layer_name.clone()
                }),
            }
        }
        Some(Type::MlProgram(_)) => return Err(unsupported(
            "an ML Program model (mlProgram, CoreML 5+): only NeuralNetwork models are imported"
                .into(),
        )),
        Some(t) => {
            return Err(unsupported(format!(
                "a '{}' model: only neuralNetwork, neuralNetworkClassifier and \
                 neuralNetworkRegressor models are imported",
                model_type_name(t)
            )))
        }
        None => {
            return Err(CoremlError::Malformed(
                "the Model has no body (no known model type)".into(),
            ))
        }
    };
    if net.updatable {
        return Err(unsupported(
            "an updatable model (updateParams): only inference models are imported".into(),
        ));
    }
    let description = model.description.as_ref().expect("decode checked it");
    let mut l = Lowering {
        b: ModelBuilder::new(),
        blobs: HashMap::new(),
        summary: Vec::new(),
    };
    let mut inputs = Vec::new();
    for feature in &description.input {
        inputs.push(l.input(feature, net.preprocessing)?);
    }
    // How many layers (and declared outputs) read each blob: the ReLU6 pattern below may only
    // swallow intermediates nothing else reads.
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for layer in net.layers {
        for i in &layer.input {
            *uses.entry(i.as_str()).or_default() += 1;
        }
    }
    for f in &description.output {
        *uses.entry(f.name.as_str()).or_default() += 1;
    }
    if let Some(p) = &net.probabilities {
        *uses.entry(p.as_str()).or_default() += 1;
    }
    let mut swallowed = 0;
    for (index, layer) in net.layers.iter().enumerate() {
        if swallowed > 0 {
            swallowed -= 1;
            l.summary.push(format!(
                "layer {index} '{}' ({}): part of the RELU6 above",
                layer.name,
                layer_kind(layer)
            ));
            continue;
        }
        let err = |why: String| CoremlError::Layer {
            index,
            name: layer.name.clone(),
            kind: layer_kind(layer),
            why,
        };
        if layer.is_updatable {
            return Err(err("updatable layers are not supported".into()));
        }
        let done = if relu6_pattern(&net.layers[index..], &uses) {
            swallowed = 3;
            l.relu6(layer, &net.layers[index + 3].output[0])
                .map_err(err)?
        } else {
            l.layer(layer).map_err(err)?
        };
        l.summary.push(format!(
            "layer {index} '{}' ({}): {done}",
            layer.name,
            layer_kind(layer)
        ));
    }
    let mut outputs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for feature in &description.output {
        if !seen.insert(feature.name.as_str()) {
            return Err(CoremlError::Malformed(format!(
                "output '{}' declared twice",
                feature.name
            )));
        }
        // A classifier's predicted-label output is a string or integer: the runner prints the
        // labels beside the probabilities instead.
        if net.labels.is_some()
            && !matches!(
                feature.r#type.as_ref().and_then(|t| t.r#type.as_ref()),
                Some(proto::feature_type::Type::MultiArrayType(_))
                    | Some(proto::feature_type::Type::DictionaryType(_))
            )
        {
            continue;
        }
        let (blob, labels) = match (
            &net.probabilities,
            feature.r#type.as_ref().and_then(|t| t.r#type.as_ref()),
        ) {
            (Some(p), Some(proto::feature_type::Type::DictionaryType(_))) => {
                (p.as_str(), net.labels.as_deref())
            }
            _ => (feature.name.as_str(), None),
        };
        outputs.push(l.output(feature, blob, labels)?);
    }
    if outputs.is_empty() {
        return Err(CoremlError::Unsupported(
            "the model declares no output the importer can produce".into(),
        ));
    }
    let model = l.b.finish();
    nnhal_hal::validate::validate_model(&model).map_err(|e| CoremlError::Invalid(e.to_string()))?;
    if let Some(labels) = &net.labels {
        l.summary
            .push(format!("class labels: {}", labels.join(", ")));
    }
    Ok(ImportedModel {
        model,
        inputs,
        outputs,
        summary: l.summary,
        class_labels: net.labels,
    })
}

/// Whether `layers` starts with the four layers coremltools' converters write for ReLU6 (the
/// MIL backend's `relu6` and the Keras converter alike): ReLU → linear(−1, 0) → unary
/// THRESHOLD(−6) → linear(−1, 0), i.e. −max(−6, −max(0, x)) = min(max(0, x), 6), with each
/// intermediate read only by the next layer. Lowered as one RELU6, which computes exactly that.
fn relu6_pattern(layers: &[proto::NeuralNetworkLayer], uses: &HashMap<&str, usize>) -> bool {
    use proto::activation_params::NonlinearityType as N;
    use proto::unary_function_layer_params::Operation;
    let [relu, neg, threshold, neg2, ..] = layers else {
        return false;
    };
    let act = |l: &proto::NeuralNetworkLayer| match &l.layer {
        Some(Layer::Activation(a)) => a.nonlinearity_type.clone(),
        _ => None,
    };
    let negation = |l: &proto::NeuralNetworkLayer| matches!(act(l), Some(N::Linear(p)) if p.alpha == -1.0 && p.beta == 0.0);
    let chained = [relu, neg, threshold, neg2].windows(2).all(|w| {
        w[0].output.len() == 1 && w[1].input.len() == 1 && w[0].output[0] == w[1].input[0]
    }) && [relu, neg, threshold]
        .iter()
        .all(|l| uses.get(l.output[0].as_str()) == Some(&1));
    let clamp = matches!(
        &threshold.layer,
        Some(Layer::Unary(u)) if u.r#type == Operation::Threshold as i32
            && u.alpha == -6.0
            && (u.scale == 0.0 || u.scale == 1.0)
            && u.shift == 0.0
    );
    chained
        && relu.input.len() == 1
        && neg2.output.len() == 1
        && matches!(act(relu), Some(N::ReLu(_)))
        && negation(neg)
        && clamp
        && negation(neg2)
        && [relu, neg, threshold, neg2].iter().all(|l| !l.is_updatable)
}

struct Lowering {
    b: ModelBuilder,
    blobs: HashMap<String, Blob>,
    summary: Vec<String>,
}

fn u(v: u64) -> R<usize> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v <= 1 << 20)
        .ok_or_else(|| format!("value {v} out of range"))
}

impl Lowering {
    fn input(
        &mut self,
        feature: &proto::FeatureDescription,
        preprocessing: &[proto::NeuralNetworkPreprocessing],
    ) -> Result<Edge, CoremlError> {
        use proto::feature_type::Type;
        let bad = |why: String| {
            CoremlError::Unsupported(format!("model input '{}': {why}", feature.name))
        };
        let ty = feature
            .r#type
            .as_ref()
            .and_then(|t| t.r#type.as_ref())
            .ok_or_else(|| {
                CoremlError::Malformed(format!("input '{}' has no type", feature.name))
            })?;
        let (shape, c, h, w, image) = match ty {
            Type::MultiArrayType(a) => {
                if a.data_type != proto::array_feature_type::ArrayDataType::Float32 as i32
                    && a.data_type != proto::array_feature_type::ArrayDataType::Double as i32
                {
                    return Err(bad(format!(
                        "array element type {} (float32 arrays only)",
                        a.data_type
                    )));
                }
                let dims: Vec<usize> = a
                    .shape
                    .iter()
                    .map(|&d| {
                        usize::try_from(d)
                            .ok()
                            .filter(|d| (1..=1 << 20).contains(d))
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad(format!("shape {:?}", a.shape)))?;
                element_count(&dims).map_err(bad)?;
                let (c, h, w) = match dims.as_slice() {
                    [c] => (*c, 1, 1),
                    [c, h, w] => (*c, *h, *w),
                    // Batch 1 of the exact array mapping coremltools' ML-program-to-
                    // NeuralNetwork conversion writes.
                    [1, c, h, w] => (*c, *h, *w),
                    [1, 1, c, h, w] => (*c, *h, *w),
                    _ => {
                        return Err(bad(format!(
                            "shape {dims:?} (rank 1 [C], rank 3 [C,H,W], rank 4 [1,C,H,W] or \
                             rank 5 [1,1,C,H,W] only)"
                        )))
                    }
                };
                (dims, c, h, w, None)
            }
            Type::ImageType(i) => {
                use proto::image_feature_type::ColorSpace;
                let c = match ColorSpace::try_from(i.color_space) {
                    Ok(ColorSpace::Rgb) | Ok(ColorSpace::Bgr) => 3,
                    Ok(ColorSpace::Grayscale) => 1,
                    _ => return Err(bad(format!("image color space {}", i.color_space))),
                };
                let h = usize::try_from(i.height)
                    .ok()
                    .filter(|v| (1..=1 << 14).contains(v));
                let w = usize::try_from(i.width)
                    .ok()
                    .filter(|v| (1..=1 << 14).contains(v));
                let (Some(h), Some(w)) = (h, w) else {
                    return Err(bad(format!("image size {}×{}", i.width, i.height)));
                };
                (vec![c, h, w], c, h, w, Some(i.color_space))
            }
            _ => return Err(bad("not a float32 multi-array or an image".into())),
        };
        let operand = self.b.input(
            OperandType::TensorFloat32,
            &[1, h as u32, w as u32, c as u32],
        );
        let mut blob = Blob {
            operand,
            c,
            h,
            w,
            flat: None,
        };
        let mine: Vec<_> = preprocessing
            .iter()
            .filter(|p| p.feature_name == feature.name || (p.feature_name.is_empty()))
            .collect();
        if !mine.is_empty() {
            use proto::neural_network_preprocessing::Preprocessor;
            let Some(space) = image else {
                return Err(bad("preprocessing on a non-image input".into()));
            };
            if mine.len() > 1 {
                return Err(bad("more than one preprocessing step".into()));
            }
            match &mine[0].preprocessor {
                Some(Preprocessor::Scaler(s)) => {
                    use proto::image_feature_type::ColorSpace;
                    let bias = match ColorSpace::try_from(space) {
                        Ok(ColorSpace::Rgb) => vec![s.red_bias, s.green_bias, s.blue_bias],
                        Ok(ColorSpace::Bgr) => vec![s.blue_bias, s.green_bias, s.red_bias],
                        _ => vec![s.gray_bias],
                    };
                    // An unset channelScale means 1 in the specification's proto3 reading
                    // (coremltools writes it explicitly); 0 would blank the image.
                    let scale = if s.channel_scale == 0.0 {
                        1.0
                    } else {
                        s.channel_scale
                    };
                    let k = self.b.f32_tensor(&[1], &[scale]);
                    let x = self
                        .binary(OperationType::Mul, blob.operand, k)
                        .map_err(bad)?;
                    let bvec = self.b.f32_tensor(&[c as u32], &bias);
                    blob.operand = self.binary(OperationType::Add, x, bvec).map_err(bad)?;
                    self.summary.push(format!(
                        "input '{}': image preprocessing scale {scale}, bias {bias:?} → MUL, ADD",
                        feature.name
                    ));
                }
                Some(Preprocessor::MeanImage(_)) => {
                    return Err(bad("mean-image preprocessing is not supported".into()))
                }
                None => {}
            }
        }
        self.blobs.insert(feature.name.clone(), blob);
        Ok(Edge {
            name: feature.name.clone(),
            layout: if h == 1 && w == 1 {
                EdgeLayout::Same
            } else {
                EdgeLayout::Chw
            },
            shape,
            source_type: SourceType::Float32,
            quantized: None,
        })
    }

    fn output(
        &mut self,
        feature: &proto::FeatureDescription,
        blob_name: &str,
        labels: Option<&[String]>,
    ) -> Result<Edge, CoremlError> {
        let bad = |why: String| {
            CoremlError::Unsupported(format!("model output '{}': {why}", feature.name))
        };
        let blob = *self
            .blobs
            .get(blob_name)
            .ok_or_else(|| bad(format!("no layer produces '{blob_name}'")))?;
        let declared: Vec<usize> = match feature.r#type.as_ref().and_then(|t| t.r#type.as_ref()) {
            Some(proto::feature_type::Type::MultiArrayType(a)) => a
                .shape
                .iter()
                .map(|&d| usize::try_from(d).unwrap_or(0))
                .collect(),
            _ => Vec::new(),
        };
        let count = blob.c * blob.h * blob.w;
        if let Some(labels) = labels {
            if labels.len() != count {
                return Err(bad(format!(
                    "{} class labels for {count} probabilities",
                    labels.len()
                )));
            }
        }
        let (src_c, src_h, src_w) = blob.flat.unwrap_or((blob.c, blob.h, blob.w));
        let shape = if labels.is_some() {
            // The probabilities of a classifier, one per class.
            vec![count]
        } else if declared.is_empty() {
            vec![blob.c, blob.h, blob.w]
        } else if declared.iter().product::<usize>() == count {
            declared
        } else {
            return Err(bad(format!(
                "declared shape {declared:?}, the network computes [{}, {}, {}]",
                blob.c, blob.h, blob.w
            )));
        };
        let layout = if blob.flat.is_some() {
            EdgeLayout::FlatNhwc {
                c: src_c,
                h: src_h,
                w: src_w,
            }
        } else if blob.h == 1 && blob.w == 1 {
            EdgeLayout::Same
        } else if shape.len() >= 3 && shape[shape.len() - 3..] == [blob.c, blob.h, blob.w] {
            EdgeLayout::Chw
        } else {
            return Err(bad(format!(
                "declared shape {shape:?} does not end in the computed [{}, {}, {}]",
                blob.c, blob.h, blob.w
            )));
        };
        let operand = self.b.operand_at(blob.operand);
        let lifetime = operand.lifetime;
        let already = self.b.model().output_indexes.contains(&blob.operand);
        if lifetime != nnhal_hal::OperandLifeTime::TemporaryVariable.raw() || already {
            return Err(bad(
                "a model input, constant or repeated output as a model output is not supported"
                    .into(),
            ));
        }
        self.b.mark_output(blob.operand);
        Ok(Edge {
            name: feature.name.clone(),
            shape,
            layout,
            source_type: SourceType::Float32,
            quantized: None,
        })
    }

    fn get(&self, name: &str) -> R<Blob> {
        self.blobs.get(name).copied().ok_or_else(|| {
            format!("input '{name}' is not produced by an earlier layer or a model input")
        })
    }

    /// Emits `ty` on `inputs`, its output a new temporary, and returns it.
    fn emit(&mut self, ty: OperationType, inputs: &[u32]) -> R<u32> {
        let dims = self.b.infer(ty, inputs)?;
        let out = self
            .b
            .temporary(OperandType::TensorFloat32, &dims[0], 0.0, 0);
        self.b.operation(ty, inputs, &[out]);
        Ok(out)
    }

    fn binary(&mut self, ty: OperationType, a: u32, c: u32) -> R<u32> {
        let act = self.b.int(0);
        self.emit(ty, &[a, c, act])
    }

    fn binary_act(&mut self, ty: OperationType, a: u32, c: u32, act: i32) -> R<u32> {
        let act = self.b.int(act);
        self.emit(ty, &[a, c, act])
    }

    /// A one-element float32 constant (broadcasts against any blob).
    fn scalar_tensor(&mut self, v: f32) -> u32 {
        self.b.f32_tensor(&[1], &[v])
    }

    fn boolean(&mut self, v: bool) -> u32 {
        self.b.constant(OperandType::Bool, &[], &[u8::from(v)])
    }

    fn reshape(&mut self, x: u32, dims: [usize; 4]) -> R<u32> {
        let d: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
        let shape = self.b.i32_tensor(&[4], &d, 0.0);
        self.emit(OperationType::Reshape, &[x, shape])
    }

    fn transpose(&mut self, x: u32, perm: [i32; 4]) -> R<u32> {
        let p = self.b.i32_tensor(&[4], &perm, 0.0);
        self.emit(OperationType::Transpose, &[x, p])
    }

    /// `x` with its elements in CoreML's channel-first order as an NCHW `[1, C, H, W]` operand
    /// (a TRANSPOSE of the NHWC blob; a channel-first flatten is first restored to its image).
    fn channel_first(&mut self, x: &Blob) -> R<(u32, [usize; 3])> {
        if let Some((c, h, w)) = x.flat {
            let img = self.reshape(x.operand, [1, h, w, c])?;
            let t = self.transpose(img, [0, 3, 1, 2])?;
            return Ok((t, [c, h, w]));
        }
        if x.h == 1 && x.w == 1 {
            let t = self.reshape(x.operand, [1, x.c, 1, 1])?;
            return Ok((t, [x.c, 1, 1]));
        }
        let t = self.transpose(x.operand, [0, 3, 1, 2])?;
        Ok((t, [x.c, x.h, x.w]))
    }

    /// A channel-first flatten made a plain `[N, 1, 1]` blob in CoreML's element order, for the
    /// layers whose result depends on that order (TRANSPOSE back to C·H·W order).
    fn plain(&mut self, x: Blob) -> R<Blob> {
        if x.flat.is_none() {
            return Ok(x);
        }
        let n = x.c;
        let (t, _) = self.channel_first(&x)?;
        let y = self.reshape(t, [1, 1, 1, n])?;
        Ok(Blob {
            operand: y,
            c: n,
            h: 1,
            w: 1,
            flat: None,
        })
    }

    /// The four layers [`relu6_pattern`] recognised, from the first one.
    fn relu6(&mut self, layer: &proto::NeuralNetworkLayer, output: &str) -> R<String> {
        let x = self.one_input(layer)?;
        let y = self.emit(OperationType::Relu6, &[x.operand])?;
        self.blobs
            .insert(output.to_string(), Blob { operand: y, ..x });
        Ok("RELU6 (with the 3 layers after it: coremltools' ReLU6 pattern)".into())
    }

    fn dims(&self, operand: u32) -> Vec<usize> {
        self.b
            .operand_at(operand)
            .dimensions
            .iter()
            .map(|&d| d as usize)
            .collect()
    }

    fn image(&mut self, operand: u32) -> Blob {
        let d = self.dims(operand);
        Blob {
            operand,
            c: d[3],
            h: d[1],
            w: d[2],
            flat: None,
        }
    }

    fn one_input(&self, layer: &proto::NeuralNetworkLayer) -> R<Blob> {
        if layer.input.len() != 1 || layer.output.len() != 1 {
            return Err(format!(
                "{} inputs and {} outputs (one of each expected)",
                layer.input.len(),
                layer.output.len()
            ));
        }
        let x = self.get(&layer.input[0])?;
        Ok(x)
    }

    /// A `[C, H, W]` (or `[1, H, W]`, `[C]`, `[1]`) per-channel or full constant as an NHWC
    /// operand for broadcasting against `x`.
    fn broadcast_constant(&mut self, shape: &[u64], values: &[f32], x: &Blob) -> R<u32> {
        let s: Vec<usize> = shape.iter().map(|&d| u(d)).collect::<R<_>>()?;
        match s.as_slice() {
            [] | [1] | [1, 1, 1] => Ok(self.b.f32_tensor(&[1], values)),
            [c] | [c, 1, 1] if *c == x.c => Ok(self.b.f32_tensor(&[*c as u32], values)),
            [c, h, w] if (*c == x.c || *c == 1) && *h == x.h && *w == x.w && x.flat.is_none() => {
                let (c, h, w) = (*c, *h, *w);
                let mut v = Vec::with_capacity(c * h * w);
                for y in 0..h {
                    for xx in 0..w {
                        for ci in 0..c {
                            v.push(values[(ci * h + y) * w + xx]);
                        }
                    }
                }
                Ok(self.b.f32_tensor(&[1, h as u32, w as u32, c as u32], &v))
            }
            _ => Err(format!(
                "parameter shape {s:?} does not broadcast against the input [{}, {}, {}]",
                x.c, x.h, x.w
            )),
        }
    }

    fn layer(&mut self, layer: &proto::NeuralNetworkLayer) -> R<String> {
        let Some(kind) = &layer.layer else {
            return Err("a layer type this importer does not know".into());
        };
        let set = |me: &mut Self, blob: Blob| {
            me.blobs.insert(layer.output[0].clone(), blob);
        };
        match kind {
            Layer::Convolution(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                let y = self.convolution(p, &x)?;
                let b = self.image(y.0);
                set(self, b);
                Ok(y.1)
            }
            Layer::InnerProduct(p) => {
                let x = self.one_input(layer)?;
                let y = self.inner_product(p, &x)?;
                set(self, y);
                Ok("FULLY_CONNECTED, RESHAPE".into())
            }
            Layer::Activation(p) => {
                let x = self.one_input(layer)?;
                use proto::activation_params::NonlinearityType as N;
                let (operand, what) = match &p.nonlinearity_type {
                    Some(N::ReLu(_)) => (self.emit(OperationType::Relu, &[x.operand])?, "RELU"),
                    Some(N::Sigmoid(_)) => (
                        self.emit(OperationType::Logistic, &[x.operand])?,
                        "LOGISTIC",
                    ),
                    Some(N::Tanh(_)) => (self.emit(OperationType::Tanh, &[x.operand])?, "TANH"),
                    Some(N::Linear(l)) => {
                        let a = self.b.f32_tensor(&[1], &[l.alpha]);
                        let m = self.binary(OperationType::Mul, x.operand, a)?;
                        let c = self.b.f32_tensor(&[1], &[l.beta]);
                        (self.binary(OperationType::Add, m, c)?, "MUL, ADD")
                    }
                    Some(N::LeakyReLu(l)) => {
                        // PRELU computes x < 0 ? αx : x, the leaky ReLU exactly.
                        let a = self.scalar_tensor(l.alpha);
                        (self.emit(OperationType::Prelu, &[x.operand, a])?, "PRELU")
                    }
                    Some(N::PReLu(pr)) => {
                        let n = pr
                            .alpha
                            .as_ref()
                            .map_or(0, |w| w.float_value.len().max(w.float16_value.len() / 2));
                        let count = if n == 1 || (n == 0 && x.c == 1) {
                            1
                        } else {
                            x.c
                        };
                        let x = if count > 1 { self.plain(x)? } else { x };
                        let alpha = weights(pr.alpha.as_ref(), count, count)
                            .map_err(|e| format!("PReLU alpha: {e} (1 or C = {} values)", x.c))?;
                        let a = self.b.f32_tensor(&[count as u32], &alpha);
                        let y = self.emit(OperationType::Prelu, &[x.operand, a])?;
                        set(self, Blob { operand: y, ..x });
                        return Ok("PRELU (per channel)".into());
                    }
                    Some(N::ScaledTanh(t)) => {
                        let b = self.scalar_tensor(t.beta);
                        let m = self.binary(OperationType::Mul, x.operand, b)?;
                        let th = self.emit(OperationType::Tanh, &[m])?;
                        let a = self.scalar_tensor(t.alpha);
                        (self.binary(OperationType::Mul, th, a)?, "MUL, TANH, MUL")
                    }
                    Some(N::SigmoidHard(h)) => {
                        // min(max(αx + β, 0), 1): the ADD's fused RELU is the max with 0.
                        let a = self.scalar_tensor(h.alpha);
                        let m = self.binary(OperationType::Mul, x.operand, a)?;
                        let b = self.scalar_tensor(h.beta);
                        let r = self.binary_act(OperationType::Add, m, b, 1)?;
                        let one = self.scalar_tensor(1.0);
                        (
                            self.emit(OperationType::Minimum, &[r, one])?,
                            "MUL, ADD (fused RELU), MINIMUM",
                        )
                    }
                    Some(N::Elu(e)) => {
                        let a = self.b.float(e.alpha);
                        (self.emit(OperationType::Elu, &[x.operand, a])?, "ELU")
                    }
                    Some(N::ThresholdedReLu(t)) => {
                        // x where x ≥ α, else 0: SELECT between x and zeros.
                        let dims = self.b.operand_at(x.operand).dimensions.clone();
                        let n: usize = dims.iter().map(|&d| d as usize).product();
                        let a = self.scalar_tensor(t.alpha);
                        let ge = self.b.infer(OperationType::GreaterEqual, &[x.operand, a])?;
                        let ge_dims = ge.into_iter().next().ok_or("no output")?;
                        let m = self.b.temporary(OperandType::TensorBool8, &ge_dims, 0.0, 0);
                        self.b
                            .operation(OperationType::GreaterEqual, &[x.operand, a], &[m]);
                        let zeros = self.b.f32_tensor(&dims, &vec![0.0; n]);
                        (
                            self.emit(OperationType::Select, &[m, x.operand, zeros])?,
                            "GREATER_EQUAL, SELECT",
                        )
                    }
                    Some(N::Softplus(_)) => (
                        self.softplus(x.operand)?,
                        "softplus: ABS, NEG, EXP, ADD, LOG, RELU, ADD",
                    ),
                    Some(N::ParametricSoftplus(ps)) => {
                        // α·log(1 + e^(β·x)), α and β one value or one per channel.
                        let len = |w: Option<&proto::WeightParams>| {
                            w.map_or(0, |w| w.float_value.len().max(w.float16_value.len() / 2))
                        };
                        let n = len(ps.alpha.as_ref()).max(len(ps.beta.as_ref()));
                        let count = if n <= 1 { 1 } else { x.c };
                        let x = if count > 1 { self.plain(x)? } else { x };
                        let alpha = weights(ps.alpha.as_ref(), count, count).map_err(|e| {
                            format!("parametric softplus alpha: {e} (1 or C = {} values)", x.c)
                        })?;
                        let beta = weights(ps.beta.as_ref(), count, count).map_err(|e| {
                            format!("parametric softplus beta: {e} (1 or C = {} values)", x.c)
                        })?;
                        let b = self.b.f32_tensor(&[count as u32], &beta);
                        let m = self.binary(OperationType::Mul, x.operand, b)?;
                        let sp = self.softplus(m)?;
                        let a = self.b.f32_tensor(&[count as u32], &alpha);
                        let y = self.binary(OperationType::Mul, sp, a)?;
                        set(self, Blob { operand: y, ..x });
                        return Ok("MUL, softplus, MUL".into());
                    }
                    Some(N::Softsign(_)) => {
                        // x / (1 + |x|)
                        let ab = self.emit(OperationType::Abs, &[x.operand])?;
                        let one = self.scalar_tensor(1.0);
                        let d = self.binary(OperationType::Add, ab, one)?;
                        (
                            self.binary(OperationType::Div, x.operand, d)?,
                            "ABS, ADD, DIV",
                        )
                    }
                    None => return Err("activation without a type".into()),
                };
                set(self, Blob { operand, ..x });
                Ok(what.into())
            }
            Layer::Clip(p) => {
                let x = self.one_input(layer)?;
                let ty = match (p.min_val, p.max_val) {
                    (0.0, 6.0) => OperationType::Relu6,
                    (-1.0, 1.0) => OperationType::Relu1,
                    (lo, hi) if lo <= hi => {
                        let l = self.scalar_tensor(lo);
                        let m = self.emit(OperationType::Maximum, &[x.operand, l])?;
                        let h = self.scalar_tensor(hi);
                        let y = self.emit(OperationType::Minimum, &[m, h])?;
                        set(self, Blob { operand: y, ..x });
                        return Ok("MAXIMUM, MINIMUM".into());
                    }
                    (lo, hi) => return Err(format!("clip to [{lo}, {hi}]: minVal above maxVal")),
                };
                let y = self.emit(ty, &[x.operand])?;
                set(self, Blob { operand: y, ..x });
                Ok(ty.name().to_string())
            }
            Layer::Pooling(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                let (y, what) = self.pooling(p, &x)?;
                let b = self.image(y);
                set(self, b);
                Ok(what)
            }
            Layer::Add(_) | Layer::Multiply(_) => {
                let (ty, alpha, name) = match kind {
                    Layer::Add(p) => (OperationType::Add, p.alpha, "ADD"),
                    Layer::Multiply(p) => (OperationType::Mul, p.alpha, "MUL"),
                    _ => unreachable!(),
                };
                if layer.output.len() != 1 || layer.input.is_empty() {
                    return Err("one output and at least one input expected".into());
                }
                let xs: Vec<Blob> = layer.input.iter().map(|n| self.get(n)).collect::<R<_>>()?;
                let mut flat = xs[0].flat;
                let xs = if xs.iter().any(|b| b.flat != flat) {
                    // Mixed element orders: every input in CoreML's order.
                    flat = None;
                    xs.into_iter()
                        .map(|b| self.plain(b))
                        .collect::<R<Vec<_>>>()?
                } else {
                    xs
                };
                let mut acc = xs[0].operand;
                let mut n = 0;
                if xs.len() == 1 {
                    let k = self.b.f32_tensor(&[1], &[alpha]);
                    acc = self.binary(ty, acc, k)?;
                    n += 1;
                }
                for b in &xs[1..] {
                    acc = self.binary(ty, acc, b.operand)?;
                    n += 1;
                }
                let mut out = self.image(acc);
                out.flat = flat;
                set(self, out);
                Ok(format!("{n} {name}"))
            }
            Layer::Unary(p) => {
                let x = self.one_input(layer)?;
                let (y, what) = self.unary(p, &x)?;
                set(self, Blob { operand: y, ..x });
                Ok(what)
            }
            Layer::Average(_) | Layer::Max(_) | Layer::Min(_) => {
                if layer.output.len() != 1 || layer.input.is_empty() {
                    return Err("one output and at least one input expected".into());
                }
                let xs: Vec<Blob> = layer.input.iter().map(|n| self.get(n)).collect::<R<_>>()?;
                let mut flat = xs[0].flat;
                let xs = if xs.iter().any(|b| b.flat != flat) {
                    flat = None;
                    xs.into_iter()
                        .map(|b| self.plain(b))
                        .collect::<R<Vec<_>>>()?
                } else {
                    xs
                };
                let (ty, name) = match kind {
                    Layer::Average(_) => (OperationType::Add, "ADD"),
                    Layer::Max(_) => (OperationType::Maximum, "MAXIMUM"),
                    _ => (OperationType::Minimum, "MINIMUM"),
                };
                let mut acc = xs[0].operand;
                for b in &xs[1..] {
                    acc = if ty == OperationType::Add {
                        self.binary(ty, acc, b.operand)?
                    } else {
                        self.emit(ty, &[acc, b.operand])?
                    };
                }
                let mut what = format!("{} {name}", xs.len() - 1);
                if matches!(kind, Layer::Average(_)) || xs.len() == 1 {
                    // The mean as the sum divided by the count (one input: a copy, x / 1).
                    let n = self.scalar_tensor(xs.len() as f32);
                    acc = self.binary(OperationType::Div, acc, n)?;
                    what.push_str(", DIV");
                }
                let mut out = self.image(acc);
                out.flat = flat;
                set(self, out);
                Ok(what)
            }
            Layer::Reduce(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                let (y, what) = self.reduce(p, &x)?;
                let b = self.image(y);
                set(self, b);
                Ok(what)
            }
            Layer::Concat(p) => {
                if p.sequence_concat {
                    return Err(
                        "sequence concatenation is not supported (channel axis only)".into(),
                    );
                }
                if layer.output.len() != 1 || layer.input.is_empty() {
                    return Err("one output and at least one input expected".into());
                }
                let xs: Vec<Blob> = layer.input.iter().map(|n| self.get(n)).collect::<R<_>>()?;
                let xs = xs
                    .into_iter()
                    .map(|b| self.plain(b))
                    .collect::<R<Vec<_>>>()?;
                let mut ins: Vec<u32> = xs.iter().map(|b| b.operand).collect();
                ins.push(self.b.int(3));
                let y = self.emit(OperationType::Concatenation, &ins)?;
                let b = self.image(y);
                set(self, b);
                Ok("CONCATENATION (channel axis)".into())
            }
            Layer::Softmax(_) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                let beta = self.b.float(1.0);
                let y = self.emit(OperationType::Softmax, &[x.operand, beta])?;
                set(self, Blob { operand: y, ..x });
                Ok("SOFTMAX (channel axis)".into())
            }
            Layer::Flatten(p) => {
                let x = self.one_input(layer)?;
                let n = x.c * x.h * x.w;
                let shape = self.b.i32_tensor(&[4], &[1, 1, 1, n as i32], 0.0);
                let y = self.emit(OperationType::Reshape, &[x.operand, shape])?;
                let channel_last =
                    p.mode == proto::flatten_layer_params::FlattenOrder::ChannelLast as i32;
                let flat = if channel_last || (x.h == 1 && x.w == 1) {
                    x.flat
                } else {
                    Some((x.c, x.h, x.w))
                };
                set(
                    self,
                    Blob {
                        operand: y,
                        c: n,
                        h: 1,
                        w: 1,
                        flat,
                    },
                );
                Ok(if flat.is_some() && !channel_last {
                    "RESHAPE (channel-first order kept for the consumers)".into()
                } else {
                    "RESHAPE".into()
                })
            }
            Layer::Reshape(p) => {
                let x = self.one_input(layer)?;
                let t: Vec<i64> = p.target_shape.clone();
                let (c, h, w) = match t.as_slice() {
                    [c, h, w] | [1, c, h, w] => (*c, *h, *w),
                    _ => return Err(format!("target shape {t:?} (rank 3 or [1,C,H,W] only)")),
                };
                let (c, h, w) = (
                    u(c as u64).map_err(|_| format!("target shape {t:?}"))?,
                    u(h as u64).map_err(|_| format!("target shape {t:?}"))?,
                    u(w as u64).map_err(|_| format!("target shape {t:?}"))?,
                );
                if c * h * w != x.c * x.h * x.w || c == 0 {
                    return Err(format!(
                        "target shape {t:?} holds {} elements, the input {}",
                        c * h * w,
                        x.c * x.h * x.w
                    ));
                }
                let mode = proto::reshape_layer_params::ReshapeOrder::try_from(p.mode)
                    .map_err(|_| format!("reshape mode {} (0 or 1 are defined)", p.mode))?;
                let channel_last = mode == proto::reshape_layer_params::ReshapeOrder::ChannelLast;
                let mut what = "RESHAPE";
                let (src, flat) = if h == 1 && w == 1 {
                    if channel_last || (x.h == 1 && x.w == 1) {
                        (x.operand, x.flat)
                    } else {
                        (x.operand, Some((x.c, x.h, x.w)))
                    }
                } else if x.flat.is_none() && (channel_last || (x.c == 1 && c == 1)) {
                    // CHANNEL_LAST reshapes in H·W·C order: the NHWC operand's own order.
                    (x.operand, None)
                } else if channel_last {
                    // A channel-first flatten read in channel-last order: CoreML's order first.
                    let p = self.plain(x)?;
                    (p.operand, None)
                } else {
                    // CHANNEL_FIRST to an image: reshape in C·H·W order between two TRANSPOSEs.
                    let (t, _) = self.channel_first(&x)?;
                    let r = self.reshape(t, [1, c, h, w])?;
                    what = "TRANSPOSE, RESHAPE, TRANSPOSE (channel-first order)";
                    (self.transpose(r, [0, 2, 3, 1])?, None)
                };
                let y = self.reshape(src, [1, h, w, c])?;
                set(
                    self,
                    Blob {
                        operand: y,
                        c,
                        h,
                        w,
                        flat,
                    },
                );
                Ok(what.into())
            }
            Layer::Batchnorm(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                if p.compute_mean_var || p.instance_normalization {
                    return Err("computeMeanVar / instanceNormalization are not supported".into());
                }
                let c = u(p.channels)?;
                if c != x.c {
                    return Err(format!("{c} channels, the input has {}", x.c));
                }
                let g = weights(p.gamma.as_ref(), c, c)?;
                let be = weights(p.beta.as_ref(), c, c)?;
                let m = weights(p.mean.as_ref(), c, c)?;
                let v = weights(p.variance.as_ref(), c, c)?;
                let scale: Vec<f32> = (0..c).map(|i| g[i] / (v[i] + p.epsilon).sqrt()).collect();
                let shift: Vec<f32> = (0..c).map(|i| be[i] - m[i] * scale[i]).collect();
                let s = self.b.f32_tensor(&[c as u32], &scale);
                let y = self.binary(OperationType::Mul, x.operand, s)?;
                let t = self.b.f32_tensor(&[c as u32], &shift);
                let y = self.binary(OperationType::Add, y, t)?;
                set(self, Blob { operand: y, ..x });
                Ok("MUL, ADD (per channel)".into())
            }
            Layer::Scale(p) => {
                let x = self.one_input(layer)?;
                let n: usize =
                    element_count(&p.shape_scale.iter().map(|&d| u(d)).collect::<R<Vec<_>>>()?)?;
                let rows = p.shape_scale.first().map_or(1, |&d| d as usize);
                let v = weights(p.scale.as_ref(), n, rows)?;
                let k = self.broadcast_constant(&p.shape_scale, &v, &x)?;
                let mut y = self.binary(OperationType::Mul, x.operand, k)?;
                let mut what = "MUL".to_string();
                if p.has_bias {
                    let n: usize =
                        element_count(&p.shape_bias.iter().map(|&d| u(d)).collect::<R<Vec<_>>>()?)?;
                    let rows = p.shape_bias.first().map_or(1, |&d| d as usize);
                    let v = weights(p.bias.as_ref(), n, rows)?;
                    let k = self.broadcast_constant(&p.shape_bias, &v, &x)?;
                    y = self.binary(OperationType::Add, y, k)?;
                    what.push_str(", ADD");
                }
                set(self, Blob { operand: y, ..x });
                Ok(what)
            }
            Layer::Bias(p) => {
                let x = self.one_input(layer)?;
                let n: usize =
                    element_count(&p.shape.iter().map(|&d| u(d)).collect::<R<Vec<_>>>()?)?;
                let rows = p.shape.first().map_or(1, |&d| d as usize);
                let v = weights(p.bias.as_ref(), n, rows)?;
                let k = self.broadcast_constant(&p.shape, &v, &x)?;
                let y = self.binary(OperationType::Add, x.operand, k)?;
                set(self, Blob { operand: y, ..x });
                Ok("ADD".into())
            }
            Layer::LoadConstant(p) => {
                if !layer.input.is_empty() || layer.output.len() != 1 {
                    return Err("no input and one output expected".into());
                }
                let (c, h, w) = match p.shape.as_slice() {
                    [c, h, w] => (u(*c)?, u(*h)?, u(*w)?),
                    s => return Err(format!("shape {s:?} (rank 3 [C,H,W] only)")),
                };
                let n = element_count(&[c, h, w])?;
                if n == 0 {
                    return Err("an empty constant".into());
                }
                let v = weights(p.data.as_ref(), n, c)?;
                let x = Blob {
                    operand: 0,
                    c,
                    h,
                    w,
                    flat: None,
                };
                let k = self.broadcast_constant(&p.shape, &v, &x)?;
                // A per-channel constant has rank 1; give every blob the rank-4 NHWC form.
                let k = if self.dims(k).len() == 4 {
                    k
                } else {
                    let full: Vec<f32> = (0..h * w).flat_map(|_| v.iter().copied()).collect();
                    self.b.f32_tensor(&[1, h as u32, w as u32, c as u32], &full)
                };
                set(self, Blob { operand: k, ..x });
                Ok("constant".into())
            }
            Layer::Lrn(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                let size = u(p.local_size)?;
                if size % 2 == 0 || size == 0 {
                    return Err(format!(
                        "localSize {size}: NNAPI's window is 2·radius+1, odd sizes only"
                    ));
                }
                let radius = self.b.int(((size - 1) / 2) as i32);
                let bias = self.b.float(p.k);
                let alpha = self.b.float(p.alpha / size as f32);
                let beta = self.b.float(p.beta);
                let y = self.emit(
                    OperationType::LocalResponseNormalization,
                    &[x.operand, radius, bias, alpha, beta],
                )?;
                set(self, Blob { operand: y, ..x });
                Ok("LOCAL_RESPONSE_NORMALIZATION (alpha / localSize)".into())
            }
            Layer::L2normalize(p) => {
                let x = self.one_input(layer)?;
                if x.h == 1 && x.w == 1 {
                    let y = self.emit(OperationType::L2Normalization, &[x.operand])?;
                    set(self, Blob { operand: y, ..x });
                    return Ok("L2_NORMALIZATION".into());
                }
                // x / √(Σx² + ε) over all C·H·W elements (NNAPI's L2_NORMALIZATION works
                // along one axis); a sum over every element does not depend on their order.
                let eps = if p.epsilon == 0.0 { 1e-6 } else { p.epsilon };
                let sq = self.binary(OperationType::Mul, x.operand, x.operand)?;
                let axes = self.b.i32_tensor(&[3], &[1, 2, 3], 0.0);
                let keep = self.boolean(true);
                let sum = self.emit(OperationType::ReduceSum, &[sq, axes, keep])?;
                let e = self.scalar_tensor(eps);
                let sum = self.binary(OperationType::Add, sum, e)?;
                let r = self.emit(OperationType::Rsqrt, &[sum])?;
                let y = self.binary(OperationType::Mul, x.operand, r)?;
                set(self, Blob { operand: y, ..x });
                Ok("MUL, REDUCE_SUM, ADD ε, RSQRT, MUL (over C·H·W)".into())
            }
            Layer::ReorganizeData(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                use proto::reorganize_data_layer_params::ReorganizationType as T;
                let mode = T::try_from(p.mode)
                    .map_err(|_| format!("reorganization mode {} (0 to 2 are defined)", p.mode))?;
                let block = u(p.block_size)?;
                if block < 1 {
                    return Err("block size 0".into());
                }
                let mut src = x.operand;
                let mut what = String::new();
                let ty = match mode {
                    T::SpaceToDepth => OperationType::SpaceToDepth,
                    T::DepthToSpace => OperationType::DepthToSpace,
                    T::PixelShuffle => {
                        let r2 = block * block;
                        if x.c % r2 != 0 {
                            return Err(format!(
                                "PIXEL_SHUFFLE of {} channels by block {block}: the channels \
                                 must be a multiple of {r2}",
                                x.c
                            ));
                        }
                        // Pixel shuffle reads channel c·r² + k where DEPTH_TO_SPACE reads
                        // k·C + c: swap the two channel factors first.
                        let c = x.c / r2;
                        let t = self.reshape(x.operand, [1, x.h * x.w, c, r2])?;
                        let t = self.transpose(t, [0, 1, 3, 2])?;
                        src = self.reshape(t, [1, x.h, x.w, x.c])?;
                        what.push_str("RESHAPE, TRANSPOSE, RESHAPE, ");
                        OperationType::DepthToSpace
                    }
                };
                let bs = self.b.int(block as i32);
                let y = self.emit(ty, &[src, bs])?;
                let b = self.image(y);
                set(self, b);
                what.push_str(ty.name());
                Ok(what)
            }
            Layer::Upsample(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                use proto::upsample_layer_params::{InterpolationMode, LinearUpsampleMode};
                let bilinear = p.mode == InterpolationMode::Bilinear as i32;
                if !bilinear && p.mode != InterpolationMode::Nn as i32 {
                    return Err(format!("interpolation mode {}", p.mode));
                }
                let mode = LinearUpsampleMode::try_from(p.linear_upsample_mode).map_err(|_| {
                    format!(
                        "linearUpsampleMode {} (0 to 2 are defined)",
                        p.linear_upsample_mode
                    )
                })?;
                let (sh, sw, oh, ow) = if p.fractional_scaling_factor.is_empty() {
                    let (sh, sw) = match p.scaling_factor.as_slice() {
                        [] => (1, 1),
                        [a, b] => (u(*a)?, u(*b)?),
                        s => return Err(format!("scaling factors {s:?}")),
                    };
                    if sh == 0 || sw == 0 {
                        return Err(format!("scaling factors [{sh}, {sw}]: zero"));
                    }
                    (sh, sw, x.h * sh, x.w * sw)
                } else {
                    // Fractional factors (bilinear with aligned corners or half-pixel centres
                    // only): the output is ⌊size · factor⌋, sampled by the sizes' ratio.
                    if !bilinear || mode == LinearUpsampleMode::Default {
                        return Err("fractional scaling factors need bilinear mode with \
                                    ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE"
                            .into());
                    }
                    let [fh, fw] = p.fractional_scaling_factor[..] else {
                        return Err(format!(
                            "fractional scaling factors {:?} (height and width expected)",
                            p.fractional_scaling_factor
                        ));
                    };
                    let size = |n: usize, f: f32| -> R<usize> {
                        let o = (n as f64 * f64::from(f)).floor();
                        if !(1.0..=f64::from(1u32 << 20)).contains(&o) {
                            return Err(format!(
                                "fractional scaling factor {f} makes an output size of {o} from {n}"
                            ));
                        }
                        Ok(o as usize)
                    };
                    (0, 0, size(x.h, fh)?, size(x.w, fw)?)
                };
                element_count(&[x.c, oh, ow])?;
                if bilinear {
                    // DEFAULT's grid spacing (Xin − Xin/Xout)/(Xout − 1) is Xin/Xout: the
                    // asymmetric sampling; ALIGN_CORNERS_TRUE samples i·(Xin − 1)/(Xout − 1)
                    // (aligned corners); ALIGN_CORNERS_FALSE (i + ½)·Xin/Xout − ½ clamped at 0
                    // (half-pixel centres).
                    let (align, half) = match mode {
                        LinearUpsampleMode::Default => (false, false),
                        LinearUpsampleMode::AlignCornersTrue => (true, false),
                        LinearUpsampleMode::AlignCornersFalse => (false, true),
                    };
                    let owo = self.b.int(ow as i32);
                    let oho = self.b.int(oh as i32);
                    let mut ins = vec![x.operand, owo, oho];
                    let what = if align || half {
                        ins.push(self.boolean(false));
                        ins.push(self.boolean(align));
                        ins.push(self.boolean(half));
                        if align {
                            "RESIZE_BILINEAR (align_corners)"
                        } else {
                            "RESIZE_BILINEAR (half_pixel_centers)"
                        }
                    } else {
                        "RESIZE_BILINEAR"
                    };
                    let y = self.emit(OperationType::ResizeBilinear, &ins)?;
                    let b = self.image(y);
                    set(self, b);
                    return Ok(what.into());
                }
                if sh == 1 && sw == 1 {
                    set(self, x);
                    return Ok("removed (factor 1)".into());
                }
                if sh == sw {
                    // Nearest-neighbour by an integer factor s: s² copies of every channel
                    // side by side, then DEPTH_TO_SPACE puts copy (dy·s+dx) at offset (dy, dx).
                    let mut ins = vec![x.operand; sh * sh];
                    ins.push(self.b.int(3));
                    let cat = self.emit(OperationType::Concatenation, &ins)?;
                    let bs = self.b.int(sh as i32);
                    let y = self.emit(OperationType::DepthToSpace, &[cat, bs])?;
                    let b = self.image(y);
                    set(self, b);
                    return Ok("CONCATENATION, DEPTH_TO_SPACE (nearest)".into());
                }
                // RESIZE_NEAREST_NEIGHBOR takes input ⌊i · (in/out)⌋ with the ratio in float32;
                // CoreML takes ⌊i / s⌋. They agree unless in/out rounds below 1/s far enough
                // to drop a product under an integer, checked here for every output index.
                let floors = |n: usize, s: usize| {
                    let scale = n as f32 / (n * s) as f32;
                    (0..n * s).all(|i| (i as f32 * scale).floor() as usize == i / s)
                };
                if !floors(x.h, sh) || !floors(x.w, sw) {
                    return Err(format!(
                        "nearest upsampling of {}×{} by [{sh}, {sw}]: NNAPI's float32 ratio \
                         would pick other rows or columns",
                        x.h, x.w
                    ));
                }
                let owo = self.b.int(ow as i32);
                let oho = self.b.int(oh as i32);
                let layout = self.boolean(false);
                let y = self.emit(
                    OperationType::ResizeNearestNeighbor,
                    &[x.operand, owo, oho, layout],
                )?;
                let b = self.image(y);
                set(self, b);
                Ok("RESIZE_NEAREST_NEIGHBOR".into())
            }
            Layer::Padding(p) => {
                let x = self.one_input(layer)?;
                let x = self.plain(x)?;
                use proto::padding_layer_params::PaddingType;
                // None: constant; Some(true): reflection; Some(false): replication.
                let (value, mirror) = match &p.padding_type {
                    Some(PaddingType::Constant(c)) => (c.value, None),
                    Some(PaddingType::Reflection(_)) => (0.0, Some(true)),
                    Some(PaddingType::Replication(_)) => (0.0, Some(false)),
                    None => return Err("padding without a type".into()),
                };
                let amounts = p
                    .padding_amounts
                    .as_ref()
                    .map(|a| a.border_amounts.clone())
                    .unwrap_or_default();
                let [(t, bo), (l, r)] = match amounts.as_slice() {
                    [] => [(0, 0), (0, 0)],
                    [hh, ww] => [
                        (u(hh.start_edge_size)?, u(hh.end_edge_size)?),
                        (u(ww.start_edge_size)?, u(ww.end_edge_size)?),
                    ],
                    _ => return Err("padding amounts for height and width expected".into()),
                };
                element_count(&[x.c, x.h + t + bo, x.w + l + r])?;
                if let Some(reflect) = mirror {
                    let mut y = x.operand;
                    for (axis, n, before, after) in [(1, x.h, t, bo), (2, x.w, l, r)] {
                        if before + after > 0 {
                            y = self.mirror_pad(y, axis, n, before, after, reflect)?;
                        }
                    }
                    let b = self.image(y);
                    set(self, b);
                    return Ok("GATHER per padded axis".into());
                }
                let y = self.pad(x.operand, [t, bo, l, r], value)?;
                let b = self.image(y);
                set(self, b);
                Ok("PAD_V2".into())
            }
            other => {
                let _ = other;
                Err("this layer type is not supported (see the README's CoreML table)".into())
            }
        }
    }

    /// Reflection (the edge row not repeated) or replication padding of NHWC axis `axis` (of
    /// size `n`) as one GATHER of source indices: NNAPI 1.3 has no MIRROR_PAD.
    fn mirror_pad(
        &mut self,
        x: u32,
        axis: i32,
        n: usize,
        before: usize,
        after: usize,
        reflect: bool,
    ) -> R<u32> {
        if n == 0 || (reflect && (before >= n || after >= n)) {
            return Err(format!(
                "reflection padding of {before} and {after} on a side of {n}: at most {} each",
                n.saturating_sub(1)
            ));
        }
        let last = n as i64 - 1;
        let index: Vec<i32> = (0..(n + before + after) as i64)
            .map(|i| {
                let s = i - before as i64;
                let s = if reflect {
                    if s < 0 {
                        -s
                    } else if s > last {
                        2 * last - s
                    } else {
                        s
                    }
                } else {
                    s.clamp(0, last)
                };
                s as i32
            })
            .collect();
        let idx = self.b.i32_tensor(&[index.len() as u32], &index, 0.0);
        let ax = self.b.int(axis);
        self.emit(OperationType::Gather, &[x, ax, idx])
    }

    /// PAD_V2 of an NHWC operand by `[top, bottom, left, right]` with `value`.
    fn pad(&mut self, x: u32, [t, bo, l, r]: [usize; 4], value: f32) -> R<u32> {
        let amounts = [0, 0, t, bo, l, r, 0, 0].map(|v| v as i32);
        let p = self.b.i32_tensor(&[4, 2], &amounts, 0.0);
        let v = self.b.float(value);
        self.emit(OperationType::PadV2, &[x, p, v])
    }

    /// Explicit paddings `[top, bottom, left, right]` of a window op.
    fn window_padding(
        valid: Option<&proto::ValidPadding>,
        same: Option<&proto::SamePadding>,
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        (sh, sw): (usize, usize),
    ) -> R<[usize; 4]> {
        if let Some(s) = same {
            let one = |n: usize, k: usize, st: usize, top_heavy: bool| {
                let out = n.div_ceil(st);
                let total = ((out - 1) * st + k).saturating_sub(n);
                let small = total / 2;
                if top_heavy {
                    (total - small, small)
                } else {
                    (small, total - small)
                }
            };
            let top_heavy =
                s.asymmetry_mode == proto::same_padding::SamePaddingMode::TopLeftHeavy as i32;
            let (t, b) = one(h, kh, sh, top_heavy);
            let (l, r) = one(w, kw, sw, top_heavy);
            return Ok([t, b, l, r]);
        }
        let amounts = valid
            .and_then(|v| v.padding_amounts.as_ref())
            .map(|a| a.border_amounts.clone())
            .unwrap_or_default();
        match amounts.as_slice() {
            [] => Ok([0; 4]),
            [hh, ww] => Ok([
                u(hh.start_edge_size)?,
                u(hh.end_edge_size)?,
                u(ww.start_edge_size)?,
                u(ww.end_edge_size)?,
            ]),
            _ => Err("padding amounts for height and width expected".into()),
        }
    }

    fn padding_ints(&mut self, [t, b, l, r]: [usize; 4], (sh, sw): (usize, usize)) -> Vec<u32> {
        [l, r, t, b, sw, sh]
            .iter()
            .map(|&v| self.b.int(v as i32))
            .collect()
    }

    /// CoreML's `unary` layer: f(scale·x + shift), with ε (default 1e-6 when unset) added
    /// inside RSQRT and INVERSE as the specification writes them.
    fn unary(&mut self, p: &proto::UnaryFunctionLayerParams, x: &Blob) -> R<(u32, String)> {
        use proto::unary_function_layer_params::Operation as Op;
        let op = Op::try_from(p.r#type)
            .map_err(|_| format!("unary function type {} (0 to 7 are defined)", p.r#type))?;
        let scale = if p.scale == 0.0 { 1.0 } else { p.scale };
        let eps = if p.epsilon == 0.0 { 1e-6 } else { p.epsilon };
        let mut steps = Vec::new();
        let mut v = x.operand;
        if scale != 1.0 {
            let k = self.scalar_tensor(scale);
            v = self.binary(OperationType::Mul, v, k)?;
            steps.push("MUL");
        }
        if p.shift != 0.0 {
            let k = self.scalar_tensor(p.shift);
            v = self.binary(OperationType::Add, v, k)?;
            steps.push("ADD");
        }
        let y = match op {
            Op::Sqrt => {
                steps.push("SQRT");
                self.emit(OperationType::Sqrt, &[v])?
            }
            Op::Rsqrt => {
                let e = self.scalar_tensor(eps);
                let s = self.binary(OperationType::Add, v, e)?;
                steps.push("ADD ε, RSQRT");
                self.emit(OperationType::Rsqrt, &[s])?
            }
            Op::Inverse => {
                let e = self.scalar_tensor(eps);
                let s = self.binary(OperationType::Add, v, e)?;
                let one = self.scalar_tensor(1.0);
                steps.push("ADD ε, DIV");
                self.binary(OperationType::Div, one, s)?
            }
            Op::Power => {
                let a = self.scalar_tensor(p.alpha);
                steps.push("POW");
                self.emit(OperationType::Pow, &[v, a])?
            }
            Op::Exp => {
                steps.push("EXP");
                self.emit(OperationType::Exp, &[v])?
            }
            Op::Log => {
                steps.push("LOG");
                self.emit(OperationType::Log, &[v])?
            }
            Op::Abs => {
                steps.push("ABS");
                self.emit(OperationType::Abs, &[v])?
            }
            Op::Threshold => {
                let a = self.scalar_tensor(p.alpha);
                steps.push("MAXIMUM");
                self.emit(OperationType::Maximum, &[v, a])?
            }
        };
        Ok((y, steps.join(", ")))
    }

    /// CoreML's `reduce` layer over C, H, W, H·W or C·H·W, the reduced dimensions kept as 1.
    fn reduce(&mut self, p: &proto::ReduceLayerParams, x: &Blob) -> R<(u32, String)> {
        use proto::reduce_layer_params::{ReduceAxis as A, ReduceOperation as M};
        let mode = M::try_from(p.mode)
            .map_err(|_| format!("reduce mode {} (0 to 9 are defined)", p.mode))?;
        let axis = A::try_from(p.axis)
            .map_err(|_| format!("reduce axis {} (0 to 4 are defined)", p.axis))?;
        // NHWC positions of CoreML's C, H and W.
        let axes: &[i32] = match axis {
            A::Chw => &[1, 2, 3],
            A::Hw => &[1, 2],
            A::C => &[3],
            A::H => &[1],
            A::W => &[2],
        };
        if mode == M::Argmax {
            let [a] = axes else {
                return Err("ARGMAX over more than one axis (C, H or W only)".into());
            };
            let a = self.b.int(*a);
            let dims = self.b.infer(OperationType::Argmax, &[x.operand, a])?;
            let idx = self.b.temporary(OperandType::TensorInt32, &dims[0], 0.0, 0);
            self.b
                .operation(OperationType::Argmax, &[x.operand, a], &[idx]);
            let f = self.emit(OperationType::Cast, &[idx])?;
            let keep = [
                1,
                if axis == A::H { 1 } else { x.h },
                if axis == A::W { 1 } else { x.w },
                if axis == A::C { 1 } else { x.c },
            ];
            let y = self.reshape(f, keep)?;
            return Ok((y, "ARGMAX, CAST, RESHAPE".into()));
        }
        let eps = if p.epsilon == 0.0 { 1e-6 } else { p.epsilon };
        let (src, pre) = match mode {
            M::Sumsquare | M::L2 => (
                self.binary(OperationType::Mul, x.operand, x.operand)?,
                "MUL, ",
            ),
            M::L1 => (self.emit(OperationType::Abs, &[x.operand])?, "ABS, "),
            M::Logsum => {
                let e = self.scalar_tensor(eps);
                let s = self.binary(OperationType::Add, x.operand, e)?;
                (self.emit(OperationType::Log, &[s])?, "ADD ε, LOG, ")
            }
            _ => (x.operand, ""),
        };
        let axes_op = self.b.i32_tensor(&[axes.len() as u32], axes, 0.0);
        let (ty, keep) = match mode {
            M::Avg => (OperationType::Mean, self.b.int(1)),
            M::Prod => (OperationType::ReduceProd, self.boolean(true)),
            M::Max => (OperationType::ReduceMax, self.boolean(true)),
            M::Min => (OperationType::ReduceMin, self.boolean(true)),
            _ => (OperationType::ReduceSum, self.boolean(true)),
        };
        let mut y = self.emit(ty, &[src, axes_op, keep])?;
        let mut what = format!("{pre}{}", ty.name());
        if mode == M::L2 {
            y = self.emit(OperationType::Sqrt, &[y])?;
            what.push_str(", SQRT");
        }
        Ok((y, what))
    }

    /// A deconvolution as TRANSPOSE_CONV_2D: CoreML's weights `[inC, outC, kh, kw]` to
    /// NNAPI's `[outC, kh, kw, inC]`; valid padding (output (in − 1)·stride + k), one group,
    /// no dilation, `outputShape` absent or that size.
    fn deconvolution(&mut self, p: &proto::ConvolutionLayerParams, x: &Blob) -> R<(u32, String)> {
        use proto::convolution_layer_params::ConvolutionPaddingType as P;
        let pair = |v: &[u64], what: &str| -> R<(usize, usize)> {
            match v {
                [] => Ok((1, 1)),
                [a, b] => Ok((u(*a)?, u(*b)?)),
                s => Err(format!("{what} {s:?} (height and width expected)")),
            }
        };
        if pair(&p.dilation_factor, "dilation factors")? != (1, 1) {
            return Err("a dilated deconvolution: TRANSPOSE_CONV_2D has no dilation".into());
        }
        if p.n_groups > 1 {
            return Err(format!(
                "a grouped deconvolution (nGroups {}) is not supported",
                p.n_groups
            ));
        }
        if matches!(p.convolution_padding_type, Some(P::Same(_))) {
            return Err("a deconvolution with same padding is not supported (valid only)".into());
        }
        let (out_c, in_c) = (u(p.output_channels)?, u(p.kernel_channels)?);
        let (kh, kw) = match p.kernel_size.as_slice() {
            [] => (3, 3),
            [a, b] => (u(*a)?, u(*b)?),
            s => return Err(format!("kernel size {s:?}")),
        };
        let (sh, sw) = pair(&p.stride, "stride")?;
        if kh == 0 || kw == 0 || sh == 0 || sw == 0 || out_c == 0 {
            return Err("a zero kernel size, stride or channel count".into());
        }
        if in_c != x.c {
            return Err(format!(
                "kernelChannels {in_c} ≠ the input's {} channels",
                x.c
            ));
        }
        let oh =
            x.h.checked_sub(1)
                .ok_or("an empty input")?
                .checked_mul(sh)
                .and_then(|v| v.checked_add(kh))
                .ok_or("the output height overflows")?;
        let ow =
            x.w.checked_sub(1)
                .ok_or("an empty input")?
                .checked_mul(sw)
                .and_then(|v| v.checked_add(kw))
                .ok_or("the output width overflows")?;
        if let [h, w] = p.output_shape.as_slice() {
            if (*h as usize, *w as usize) != (oh, ow) {
                return Err(format!(
                    "outputShape [{h}, {w}] differs from the valid-padding size [{oh}, {ow}]"
                ));
            }
        }
        element_count(&[out_c, oh, ow])?;
        let n = element_count(&[in_c, out_c, kh, kw])?;
        let wv = weights(p.weights.as_ref(), n, out_c)?;
        let bias = if p.has_bias {
            weights(p.bias.as_ref(), out_c, out_c)?
        } else {
            vec![0.0; out_c]
        };
        let mut f = vec![0f32; n];
        for ci in 0..in_c {
            for o in 0..out_c {
                for y in 0..kh {
                    for xx in 0..kw {
                        f[((o * kh + y) * kw + xx) * in_c + ci] =
                            wv[((ci * out_c + o) * kh + y) * kw + xx];
                    }
                }
            }
        }
        let filter = self
            .b
            .f32_tensor(&[out_c as u32, kh as u32, kw as u32, in_c as u32], &f);
        let bias_op = self.b.f32_tensor(&[out_c as u32], &bias);
        let mut ins = vec![x.operand, filter, bias_op];
        for v in [0, 0, 0, 0, sw, sh] {
            ins.push(self.b.int(v as i32));
        }
        ins.push(self.b.int(0));
        ins.push(self.boolean(false));
        let y = self.emit(OperationType::TransposeConv2d, &ins)?;
        Ok((y, "TRANSPOSE_CONV_2D".into()))
    }

    /// log(1 + e^x) as max(x, 0) + log(1 + e^−|x|), which no large input overflows.
    fn softplus(&mut self, x: u32) -> R<u32> {
        let ab = self.emit(OperationType::Abs, &[x])?;
        let ng = self.emit(OperationType::Neg, &[ab])?;
        let ex = self.emit(OperationType::Exp, &[ng])?;
        let one = self.scalar_tensor(1.0);
        let p1 = self.binary(OperationType::Add, ex, one)?;
        let lg = self.emit(OperationType::Log, &[p1])?;
        let rl = self.emit(OperationType::Relu, &[x])?;
        self.binary(OperationType::Add, rl, lg)
    }

    fn convolution(&mut self, p: &proto::ConvolutionLayerParams, x: &Blob) -> R<(u32, String)> {
        use proto::convolution_layer_params::ConvolutionPaddingType as P;
        if p.is_deconvolution {
            return self.deconvolution(p, x);
        }
        let (dh, dw) = match p.dilation_factor.as_slice() {
            [] => (1, 1),
            [a, b] => (u(*a)?, u(*b)?),
            d => {
                return Err(format!(
                    "dilation factors {d:?} (height and width expected)"
                ))
            }
        };
        if dh == 0 || dw == 0 {
            return Err(format!("dilation factors [{dh}, {dw}]: zero"));
        }
        let out_c = u(p.output_channels)?;
        let k_c = u(p.kernel_channels)?;
        let groups = u(p.n_groups.max(1))?;
        let (kh, kw) = match p.kernel_size.as_slice() {
            [] => (3, 3),
            [a, b] => (u(*a)?, u(*b)?),
            s => return Err(format!("kernel size {s:?}")),
        };
        let (sh, sw) = match p.stride.as_slice() {
            [] => (1, 1),
            [a, b] => (u(*a)?, u(*b)?),
            s => return Err(format!("stride {s:?}")),
        };
        if kh == 0 || kw == 0 || sh == 0 || sw == 0 || out_c == 0 {
            return Err("a zero kernel size, stride or channel count".into());
        }
        if k_c * groups != x.c {
            return Err(format!(
                "kernelChannels {k_c} × nGroups {groups} ≠ the input's {} channels",
                x.c
            ));
        }
        if out_c % groups != 0 {
            return Err(format!(
                "outputChannels {out_c} is not a multiple of nGroups {groups}"
            ));
        }
        let depthwise = groups > 1 && k_c == 1;
        let grouped = groups > 1 && !depthwise;
        let dilated = (dh, dw) != (1, 1);
        if grouped && dilated {
            return Err(format!(
                "a grouped convolution (nGroups {groups}) with dilation [{dh}, {dw}]: \
                 GROUPED_CONV_2D has no dilation"
            ));
        }
        let n = element_count(&[out_c, k_c, kh, kw])?;
        let wv = weights(p.weights.as_ref(), n, out_c)?;
        let bias = if p.has_bias {
            weights(p.bias.as_ref(), out_c, out_c)?
        } else {
            vec![0.0; out_c]
        };
        let (valid, same) = match &p.convolution_padding_type {
            Some(P::Valid(v)) => (Some(v), None),
            Some(P::Same(s)) => (None, Some(s)),
            None => (None, None),
        };
        // A dilated window spans (k − 1)·d + 1 inputs: what same padding is sized for.
        let (eh, ew) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
        let pads = Self::window_padding(valid, same, (x.h, x.w), (eh, ew), (sh, sw))?;
        let bias_op = self.b.f32_tensor(&[out_c as u32], &bias);
        let (filter, ty) = if depthwise {
            // CoreML [outC, 1, kh, kw] → NNAPI [1, kh, kw, outC].
            let mut f = vec![0f32; n];
            for o in 0..out_c {
                for y in 0..kh {
                    for xx in 0..kw {
                        f[(y * kw + xx) * out_c + o] = wv[(o * kh + y) * kw + xx];
                    }
                }
            }
            (
                self.b
                    .f32_tensor(&[1, kh as u32, kw as u32, out_c as u32], &f),
                OperationType::DepthwiseConv2d,
            )
        } else {
            // CoreML [outC, inC, kh, kw] → NNAPI [outC, kh, kw, inC].
            let mut f = vec![0f32; n];
            for o in 0..out_c {
                for ci in 0..k_c {
                    for y in 0..kh {
                        for xx in 0..kw {
                            f[((o * kh + y) * kw + xx) * k_c + ci] =
                                wv[((o * k_c + ci) * kh + y) * kw + xx];
                        }
                    }
                }
            }
            // GROUPED_CONV_2D's filter is the same [outC, kh, kw, kernelChannels], output
            // channel o reading group o / (outC / nGroups): CoreML's grouping.
            (
                self.b
                    .f32_tensor(&[out_c as u32, kh as u32, kw as u32, k_c as u32], &f),
                if grouped {
                    OperationType::GroupedConv2d
                } else {
                    OperationType::Conv2d
                },
            )
        };
        let mut ins = vec![x.operand, filter, bias_op];
        ins.extend(self.padding_ints(pads, (sh, sw)));
        if depthwise {
            ins.push(self.b.int((out_c / x.c) as i32));
        }
        if grouped {
            ins.push(self.b.int(groups as i32));
        }
        ins.push(self.b.int(0));
        if grouped || dilated {
            ins.push(self.boolean(false));
        }
        if dilated {
            ins.push(self.b.int(dw as i32));
            ins.push(self.b.int(dh as i32));
        }
        let y = self.emit(ty, &ins)?;
        let d = self.dims(y);
        if let [oh, ow] = p.output_shape.as_slice() {
            if (*oh as usize, *ow as usize) != (d[1], d[2]) {
                return Err(format!(
                    "outputShape {:?} disagrees with the computed {}×{}",
                    p.output_shape, d[1], d[2]
                ));
            }
        }
        let mut what = ty.name().to_string();
        if dilated {
            what.push_str(&format!(" (dilation [{dh}, {dw}])"));
        }
        Ok((y, what))
    }

    fn inner_product(&mut self, p: &proto::InnerProductLayerParams, x: &Blob) -> R<Blob> {
        if p.int8_dynamic_quantize {
            return Err("int8 dynamic quantization is not supported".into());
        }
        let in_c = u(p.input_channels)?;
        let out_c = u(p.output_channels)?;
        if x.h != 1 || x.w != 1 {
            return Err(format!(
                "an input of [{}, {}, {}] (H = W = 1 expected; flatten first)",
                x.c, x.h, x.w
            ));
        }
        if in_c != x.c || out_c == 0 {
            return Err(format!("inputChannels {in_c}, the input has {}", x.c));
        }
        let n = element_count(&[out_c, in_c])?;
        let mut wv = weights(p.weights.as_ref(), n, out_c)?;
        if let Some((c, h, w)) = x.flat {
            // The operand holds the flattened image in (y, x, c) order; CoreML's column index
            // is c·H·W + y·W + x.
            let mut re = vec![0f32; n];
            for o in 0..out_c {
                for y in 0..h {
                    for xx in 0..w {
                        for ci in 0..c {
                            re[o * in_c + (y * w + xx) * c + ci] =
                                wv[o * in_c + (ci * h + y) * w + xx];
                        }
                    }
                }
            }
            wv = re;
        }
        let bias = if p.has_bias {
            weights(p.bias.as_ref(), out_c, out_c)?
        } else {
            vec![0.0; out_c]
        };
        let wop = self.b.f32_tensor(&[out_c as u32, in_c as u32], &wv);
        let bop = self.b.f32_tensor(&[out_c as u32], &bias);
        let act = self.b.int(0);
        let y = self.emit(OperationType::FullyConnected, &[x.operand, wop, bop, act])?;
        let shape = self.b.i32_tensor(&[4], &[1, 1, 1, out_c as i32], 0.0);
        let y = self.emit(OperationType::Reshape, &[y, shape])?;
        Ok(Blob {
            operand: y,
            c: out_c,
            h: 1,
            w: 1,
            flat: None,
        })
    }

    fn pooling(&mut self, p: &proto::PoolingLayerParams, x: &Blob) -> R<(u32, String)> {
        use proto::pooling_layer_params::{PoolingPaddingType as P, PoolingType};
        let kind =
            PoolingType::try_from(p.r#type).map_err(|_| format!("pooling type {}", p.r#type))?;
        // `counted`: the padding an average that counts padded cells (avgPoolExcludePadding
        // false) takes as zeros; any padding beyond it (includeLastPixel's extra end) is
        // outside the window's count, as in Caffe, whose pooling includeLastPixel follows.
        let (kh, kw, sh, sw, pads, counted) = if p.global_pooling {
            (x.h, x.w, 1, 1, [0; 4], [0; 4])
        } else {
            let (kh, kw) = match p.kernel_size.as_slice() {
                [] => (3, 3),
                [a, b] => (u(*a)?, u(*b)?),
                s => return Err(format!("kernel size {s:?}")),
            };
            let (sh, sw) = match p.stride.as_slice() {
                [] => (1, 1),
                [a, b] => (u(*a)?, u(*b)?),
                s => return Err(format!("stride {s:?}")),
            };
            if kh == 0 || kw == 0 || sh == 0 || sw == 0 {
                return Err("a zero kernel size or stride".into());
            }
            let (pads, counted) = match &p.pooling_padding_type {
                Some(P::Valid(v)) => {
                    let pads = Self::window_padding(Some(v), None, (x.h, x.w), (kh, kw), (sh, sw))?;
                    (pads, pads)
                }
                Some(P::Same(s)) => {
                    let pads = Self::window_padding(None, Some(s), (x.h, x.w), (kh, kw), (sh, sw))?;
                    (pads, pads)
                }
                None => ([0; 4], [0; 4]),
                Some(P::IncludeLastPixel(v)) => {
                    let (ph, pw) = match v.padding_amounts.as_slice() {
                        [] => (0, 0),
                        [a, b] => (u(*a)?, u(*b)?),
                        s => return Err(format!("includeLastPixel padding {s:?}")),
                    };
                    // Output ceil((n + 2p − k) / s) + 1, less one when the last window would
                    // start inside the end padding; the extra end padding makes NNAPI's
                    // explicit-padding arithmetic give the same size.
                    let one = |n: usize, k: usize, s: usize, pad: usize| -> R<(usize, usize)> {
                        if n + 2 * pad < k {
                            return Err("a window larger than the padded input".into());
                        }
                        let mut out = (n + 2 * pad - k).div_ceil(s) + 1;
                        if pad > 0 && (out - 1) * s >= n + pad {
                            out -= 1;
                        }
                        let end = ((out - 1) * s + k).saturating_sub(n + pad);
                        Ok((pad, end))
                    };
                    let (t, b) = one(x.h, kh, sh, ph)?;
                    let (l, r) = one(x.w, kw, sw, pw)?;
                    ([t, b, l, r], [t, b.min(ph), l, r.min(pw)])
                }
            };
            (kh, kw, sh, sw, pads, counted)
        };
        let mut src = x.operand;
        let mut pads = pads;
        let mut what = String::new();
        if kind == PoolingType::Average
            && !p.avg_pool_exclude_padding
            && counted.iter().any(|&v| v > 0)
        {
            // NNAPI's AVERAGE_POOL_2D leaves padding out of the count: the counted padding
            // becomes real zeros (PAD_V2) and only the rest stays the operation's padding.
            src = self.pad(x.operand, counted, 0.0)?;
            for (p, c) in pads.iter_mut().zip(counted) {
                *p -= c;
            }
            what.push_str("PAD_V2, ");
        }
        let ty = match kind {
            PoolingType::Max => OperationType::MaxPool2d,
            PoolingType::Average => OperationType::AveragePool2d,
            PoolingType::L2 => OperationType::L2Pool2d,
        };
        let mut ins = vec![src];
        ins.extend(self.padding_ints(pads, (sh, sw)));
        ins.push(self.b.int(kw as i32));
        ins.push(self.b.int(kh as i32));
        ins.push(self.b.int(0));
        let y = self.emit(ty, &ins)?;
        if kind != PoolingType::L2 {
            what.push_str(ty.name());
            return Ok((y, what));
        }
        // CoreML's L2 pooling is √Σx², NNAPI's the root mean square over the window's valid
        // elements: multiply every output position by √(its valid count).
        let d = self.dims(y);
        let (oh, ow) = (d[1], d[2]);
        let [t, _, l, _] = pads;
        let mut k = Vec::with_capacity(oh * ow);
        for oy in 0..oh {
            let y0 = (oy * sh) as isize - t as isize;
            let rows = (y0.max(0)..(y0 + kh as isize).min(x.h as isize)).len();
            for ox in 0..ow {
                let x0 = (ox * sw) as isize - l as isize;
                let cols = (x0.max(0)..(x0 + kw as isize).min(x.w as isize)).len();
                k.push(((rows * cols) as f32).sqrt());
            }
        }
        let kop = self.b.f32_tensor(&[1, oh as u32, ow as u32, 1], &k);
        let y = self.binary(OperationType::Mul, y, kop)?;
        Ok((y, "L2_POOL_2D, MUL (√count: CoreML's √Σx²)".into()))
    }
}
