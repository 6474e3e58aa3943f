//! Single-time-step recurrent layers: RNN, SVDF and LSTM (types.hal 1.0, `OperationType` 24,
//! 27 and 16), TENSOR_FLOAT32 only as in NNAPI 1.0, plus the layer-normalised LSTM NNAPI 1.2
//! added (inputs 23–26; docs/hal-contract.md lists what runs beyond 1.0).
//!
//! The arithmetic follows the reference CPU path (the TFLite-derived kernels of the Android
//! NNAPI CpuExecutor) step for step: accumulators start from the bias, matrix-vector products
//! are summed per row before being added, gates are evaluated in the reference's order. The
//! conformance tolerance is a few ULP, so reordering sums is not free.
//!
//! State tensors are passed in and out separately; the caller carries `*_state_out` over to
//! the next step's `*_state_in`.

use crate::Activation;

/// `result[b·rows + r] += Σ_c matrix[r, c] · vector[b, c]`: each row's dot product is formed
/// first and then added to the accumulator, as the reference's
/// `MatrixBatchVectorMultiplyAccumulate` does. `result_stride` spaces consecutive outputs
/// (SVDF writes straight into one column of its state).
fn matrix_batch_vector_multiply_accumulate(
    matrix: &[f32],
    rows: usize,
    cols: usize,
    vector: &[f32],
    batch: usize,
    result: &mut [f32],
    result_stride: usize,
) {
    if cols == 0 {
        return;
    }
    let mut out = 0;
    for b in 0..batch {
        let v = &vector[b * cols..(b + 1) * cols];
        for row in matrix.chunks_exact(cols).take(rows) {
            let dot = row.iter().zip(v).fold(0.0f32, |acc, (&m, &x)| acc + m * x);
            result[out] += dot;
            out += result_stride;
        }
    }
}

/// Fills each of the `batch` rows of `dst` with `vector`, or with zeros when it is absent.
fn assign_per_batch(vector: Option<&[f32]>, len: usize, dst: &mut [f32]) {
    if len == 0 {
        return;
    }
    for row in dst.chunks_exact_mut(len) {
        match vector {
            Some(v) => row.copy_from_slice(&v[..len]),
            None => row.fill(0.0),
        }
    }
}

/// `dst[b, i] += weights[i] · batch_vector[b, i]` (peephole connections).
fn vector_batch_vector_product_accumulate(weights: &[f32], batch_vector: &[f32], dst: &mut [f32]) {
    if weights.is_empty() {
        return;
    }
    for (d, s) in dst
        .chunks_exact_mut(weights.len())
        .zip(batch_vector.chunks_exact(weights.len()))
    {
        for ((d, &w), &s) in d.iter_mut().zip(weights).zip(s) {
            *d += w * s;
        }
    }
}

#[inline]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `[-limit, limit]` clipping with the reference's comparisons (a NaN passes through).
#[inline]
pub(crate) fn clip(x: f32, limit: f32) -> f32 {
    let x = if limit < x { limit } else { x };
    if -limit > x {
        -limit
    } else {
        x
    }
}

// ---------------------------------------------------------------------------------------------
// RNN
// ---------------------------------------------------------------------------------------------

/// Extents of an RNN step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnDims {
    pub batch: usize,
    pub input_size: usize,
    pub num_units: usize,
}

/// The tensor inputs of RNN (inputs 0–4), row-major.
#[derive(Clone, Copy, Debug)]
pub struct RnnInputs<'a> {
    /// `[batch, input_size]`
    pub input: &'a [f32],
    /// `[num_units, input_size]`
    pub weights: &'a [f32],
    /// `[num_units, num_units]`
    pub recurrent_weights: &'a [f32],
    /// `[num_units]`
    pub bias: &'a [f32],
    /// `[batch, num_units]`
    pub hidden_state_in: &'a [f32],
}

/// The auxiliary input of a BIDIRECTIONAL_SEQUENCE_RNN step (NNAPI 1.2, cross-linking) with
/// its weights.
#[derive(Clone, Copy, Debug)]
pub struct RnnAux<'a> {
    /// `[batch, aux_size]`
    pub input: &'a [f32],
    /// `[num_units, aux_size]`
    pub weights: &'a [f32],
    pub aux_size: usize,
}

/// RNN: `output = activation(weights · input + recurrent_weights · hidden_state_in + bias)`,
/// and `hidden_state_out = output`. Both outputs are `[batch, num_units]`.
pub fn rnn_f32(
    dims: RnnDims,
    inputs: &RnnInputs<'_>,
    activation: Activation,
    hidden_state_out: &mut [f32],
    output: &mut [f32],
) {
    rnn_step_f32(dims, inputs, None, activation, output);
    hidden_state_out.copy_from_slice(output);
}

/// One RNN step into `output` (`[batch, num_units]`), with an optional auxiliary input whose
/// weighted sum is added after the input's and before the recurrent one.
pub fn rnn_step_f32(
    dims: RnnDims,
    inputs: &RnnInputs<'_>,
    aux: Option<RnnAux<'_>>,
    activation: Activation,
    output: &mut [f32],
) {
    let RnnDims {
        batch,
        input_size,
        num_units,
    } = dims;
    debug_assert_eq!(inputs.input.len(), batch * input_size);
    debug_assert_eq!(inputs.weights.len(), num_units * input_size);
    debug_assert_eq!(inputs.recurrent_weights.len(), num_units * num_units);
    debug_assert_eq!(inputs.bias.len(), num_units);
    debug_assert_eq!(inputs.hidden_state_in.len(), batch * num_units);
    debug_assert_eq!(output.len(), batch * num_units);
    if num_units == 0 {
        return;
    }
    // The reference accumulates straight into the output, element by element: input part,
    // auxiliary part, recurrent part.
    let accumulate = |out: &mut [f32], x: &[f32], weights: &[f32], width: usize| {
        if width == 0 {
            return;
        }
        for (o, w) in out.iter_mut().zip(weights.chunks_exact(width)) {
            for (&xi, &wi) in x.iter().zip(w) {
                *o += xi * wi;
            }
        }
    };
    for (b, out) in output.chunks_exact_mut(num_units).enumerate().take(batch) {
        out.copy_from_slice(inputs.bias);
        let x = &inputs.input[b * input_size..(b + 1) * input_size];
        accumulate(out, x, inputs.weights, input_size);
        if let Some(a) = aux {
            let xa = &a.input[b * a.aux_size..(b + 1) * a.aux_size];
            accumulate(out, xa, a.weights, a.aux_size);
        }
        let h = &inputs.hidden_state_in[b * num_units..(b + 1) * num_units];
        accumulate(out, h, inputs.recurrent_weights, num_units);
        for o in out.iter_mut() {
            *o = activation.apply_f32(*o);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SVDF
// ---------------------------------------------------------------------------------------------

/// Extents of an SVDF step. `num_filters = num_units · rank`; `num_units` is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvdfDims {
    pub batch: usize,
    pub input_size: usize,
    /// First dimension of `weights_feature` and `weights_time`.
    pub num_filters: usize,
    /// Second dimension of `weights_time`.
    pub memory_size: usize,
    /// The rank of the decomposition (input 5); must divide `num_filters`.
    pub rank: usize,
}

impl SvdfDims {
    /// `num_filters / rank` (0 for a rank of 0, which validation rejects).
    pub fn num_units(&self) -> usize {
        self.num_filters.checked_div(self.rank).unwrap_or(0)
    }

    /// Elements per batch of the state: `memory_size · num_filters`.
    pub fn state_len(&self) -> usize {
        self.memory_size * self.num_filters
    }
}

/// The tensor inputs of SVDF (inputs 0–4), row-major.
#[derive(Clone, Copy, Debug)]
pub struct SvdfInputs<'a> {
    /// `[batch, input_size]`
    pub input: &'a [f32],
    /// `[num_filters, input_size]`
    pub weights_feature: &'a [f32],
    /// `[num_filters, memory_size]`
    pub weights_time: &'a [f32],
    /// `[num_units]`, optional.
    pub bias: Option<&'a [f32]>,
    /// `[batch, memory_size · num_filters]`: per batch, per filter, `memory_size` activations
    /// oldest first. This is the layout of the reference and the conformance tests, not the
    /// `(memory_size − 1)` one the HAL text describes.
    pub state_in: &'a [f32],
}

/// SVDF: one step of the rank-constrained filter bank.
///
/// The state is copied to `state_out`, each filter's newest slot (the last of its
/// `memory_size`) is overwritten with the filter's feature activation `weights_feature ·
/// input`, each filter's memory is dotted with its `weights_time` row, the `rank` filters of
/// each unit are summed onto the bias, the activation applied, and finally every filter's
/// memory is shifted one slot towards the oldest, leaving the newest slot zero for the next
/// step. `output` is `[batch, num_units]`; `state_out` has the shape of `state_in`.
pub fn svdf_f32(
    dims: SvdfDims,
    inputs: &SvdfInputs<'_>,
    activation: Activation,
    state_out: &mut [f32],
    output: &mut [f32],
) {
    let SvdfDims {
        batch,
        input_size,
        num_filters,
        memory_size,
        rank,
    } = dims;
    let num_units = dims.num_units();
    let state_len = dims.state_len();
    debug_assert_eq!(inputs.input.len(), batch * input_size);
    debug_assert_eq!(inputs.weights_feature.len(), num_filters * input_size);
    debug_assert_eq!(inputs.weights_time.len(), num_filters * memory_size);
    debug_assert_eq!(inputs.state_in.len(), batch * state_len);
    debug_assert_eq!(state_out.len(), batch * state_len);
    debug_assert_eq!(output.len(), batch * num_units);
    if let Some(bias) = inputs.bias {
        debug_assert_eq!(bias.len(), num_units);
    }

    state_out.copy_from_slice(inputs.state_in);
    if memory_size == 0 || num_units == 0 {
        output.fill(0.0);
        return;
    }
    for slot in state_out
        .iter_mut()
        .skip(memory_size - 1)
        .step_by(memory_size)
    {
        *slot = 0.0;
    }
    matrix_batch_vector_multiply_accumulate(
        inputs.weights_feature,
        num_filters,
        input_size,
        inputs.input,
        batch,
        &mut state_out[memory_size - 1..],
        memory_size,
    );

    assign_per_batch(inputs.bias, num_units, output);
    for (state, out) in state_out
        .chunks_exact(state_len)
        .zip(output.chunks_exact_mut(num_units))
    {
        let mut filters = state
            .chunks_exact(memory_size)
            .zip(inputs.weights_time.chunks_exact(memory_size))
            .map(|(memory, weights)| {
                memory
                    .iter()
                    .zip(weights)
                    .fold(0.0f32, |acc, (&m, &w)| acc + m * w)
            });
        // Filters `u·rank .. (u+1)·rank` belong to unit `u`; they are added one at a time
        // onto the bias, as the reference's reduction does.
        for o in out.iter_mut() {
            for _ in 0..rank {
                *o += filters.next().unwrap_or(0.0);
            }
            *o = activation.apply_f32(*o);
        }
    }

    for memory in state_out.chunks_exact_mut(memory_size) {
        memory.copy_within(1.., 0);
        memory[memory_size - 1] = 0.0;
    }
}

// ---------------------------------------------------------------------------------------------
// LSTM
// ---------------------------------------------------------------------------------------------

/// The cell activation `g` of LSTM (input 20). The codes are TFLite's fused-activation
/// numbering; NNAPI 1.0 defines exactly these five.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LstmActivation {
    None,
    Relu,
    Relu6,
    Tanh,
    Sigmoid,
}

impl LstmActivation {
    /// Maps input 20's code (0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid); `None` for any
    /// other value, which the model must be rejected for.
    pub fn from_code(code: i32) -> Option<Self> {
        match code {
            0 => Some(Self::None),
            1 => Some(Self::Relu),
            3 => Some(Self::Relu6),
            4 => Some(Self::Tanh),
            6 => Some(Self::Sigmoid),
            _ => None,
        }
    }

    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Self::None => x,
            Self::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Self::Relu6 => x.clamp(0.0, 6.0),
            Self::Tanh => x.tanh(),
            Self::Sigmoid => sigmoid(x),
        }
    }
}

/// Extents of an LSTM step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LstmDims {
    pub batch: usize,
    pub input_size: usize,
    /// Number of cell units (`num_units`).
    pub num_units: usize,
    /// Width of the output state: the first dimension of the projection weights with
    /// projection; without it, must equal `num_units`.
    pub output_size: usize,
}

/// The tensor inputs of LSTM (inputs 0–19), row-major. Optional tensors are `None` when the
/// operand has no value.
///
/// The optional groups decide the variant, as in the reference:
/// * CIFG (coupled input and forget gates, input gate = 1 − forget gate) when
///   `input_to_input_weights` is absent; `recurrent_to_input_weights`, `input_gate_bias` and
///   `cell_to_input_weights` are then unused.
/// * Peephole connections when `cell_to_output_weights` is present.
/// * Projection when `projection_weights` is present; `projection_bias` is used only then.
#[derive(Clone, Copy, Debug)]
pub struct LstmInputs<'a> {
    /// 0: `[batch, input_size]`
    pub input: &'a [f32],
    /// 1: `[num_units, input_size]`, optional (absent: CIFG).
    pub input_to_input_weights: Option<&'a [f32]>,
    /// 2: `[num_units, input_size]`
    pub input_to_forget_weights: &'a [f32],
    /// 3: `[num_units, input_size]`
    pub input_to_cell_weights: &'a [f32],
    /// 4: `[num_units, input_size]`
    pub input_to_output_weights: &'a [f32],
    /// 5: `[num_units, output_size]`, optional (absent with CIFG).
    pub recurrent_to_input_weights: Option<&'a [f32]>,
    /// 6: `[num_units, output_size]`
    pub recurrent_to_forget_weights: &'a [f32],
    /// 7: `[num_units, output_size]`
    pub recurrent_to_cell_weights: &'a [f32],
    /// 8: `[num_units, output_size]`
    pub recurrent_to_output_weights: &'a [f32],
    /// 9: `[num_units]`, optional (peephole without CIFG).
    pub cell_to_input_weights: Option<&'a [f32]>,
    /// 10: `[num_units]`, optional (peephole).
    pub cell_to_forget_weights: Option<&'a [f32]>,
    /// 11: `[num_units]`, optional (peephole).
    pub cell_to_output_weights: Option<&'a [f32]>,
    /// 12: `[num_units]`, optional (absent with CIFG).
    pub input_gate_bias: Option<&'a [f32]>,
    /// 13: `[num_units]`
    pub forget_gate_bias: &'a [f32],
    /// 14: `[num_units]`
    pub cell_bias: &'a [f32],
    /// 15: `[num_units]`
    pub output_gate_bias: &'a [f32],
    /// 16: `[output_size, num_units]`, optional (projection).
    pub projection_weights: Option<&'a [f32]>,
    /// 17: `[output_size]`, optional (projection bias).
    pub projection_bias: Option<&'a [f32]>,
    /// 18: `[batch, output_size]`
    pub output_state_in: &'a [f32],
    /// 19: `[batch, num_units]`
    pub cell_state_in: &'a [f32],
    /// 23–26 (NNAPI 1.2): layer normalisation of the gate pre-activations, when given.
    pub layer_norm: Option<LstmLayerNorm<'a>>,
    /// BIDIRECTIONAL_SEQUENCE_LSTM's cross-linked auxiliary input (NNAPI 1.2), when given.
    pub aux: Option<LstmAux<'a>>,
}

/// An auxiliary input with its own weights, added to every gate's pre-activation after the
/// input's contribution and before the recurrent one (the reference's order).
#[derive(Clone, Copy, Debug)]
pub struct LstmAux<'a> {
    /// `[batch, aux_size]`
    pub input: &'a [f32],
    pub aux_size: usize,
    /// `[num_units, aux_size]`, absent with CIFG.
    pub to_input: Option<&'a [f32]>,
    pub to_forget: &'a [f32],
    pub to_cell: &'a [f32],
    pub to_output: &'a [f32],
}

/// The layer-norm weights of NNAPI 1.2's LSTM (inputs 23–26), each `[num_units]`.
///
/// With them, each gate's pre-activation (weights times input and output state, plus the
/// peephole term) is normalised per batch row to zero mean and unit variance (the variance
/// takes an epsilon of 1e-8), multiplied by the gate's layer-norm weights, and only then
/// offset by the gate's bias, before the gate's activation.
#[derive(Clone, Copy, Debug)]
pub struct LstmLayerNorm<'a> {
    /// 23: absent with CIFG (there is no input gate to normalise).
    pub input: Option<&'a [f32]>,
    /// 24
    pub forget: &'a [f32],
    /// 25
    pub cell: &'a [f32],
    /// 26
    pub output: &'a [f32],
}

/// Normalises each `weights.len()`-wide row of `gate` as [`LstmLayerNorm`] describes:
/// `((x − mean) / sqrt(variance + 1e-8)) · weight + bias`, in f32 and in that order, the
/// mean and (population) variance taken in two passes over the row.
pub(crate) fn layer_norm_rows(gate: &mut [f32], weights: &[f32], bias: Option<&[f32]>) {
    const EPSILON: f32 = 1e-8;
    let n = weights.len();
    if n == 0 {
        return;
    }
    for row in gate.chunks_exact_mut(n) {
        let mean = row.iter().sum::<f32>() / n as f32;
        let variance = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
        let inv_stddev = 1.0 / (variance + EPSILON).sqrt();
        for (k, v) in row.iter_mut().enumerate() {
            let b = bias.map_or(0.0, |b| b[k]);
            *v = (*v - mean) * inv_stddev * weights[k] + b;
        }
    }
}

/// The scalar parameters of LSTM (inputs 20–22).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstmParams {
    /// Cell input and output activation `g`.
    pub activation: LstmActivation,
    /// Cell state clipping threshold; 0 disables clipping.
    pub cell_clip: f32,
    /// Projection output clipping threshold; 0 disables clipping.
    pub proj_clip: f32,
}

/// The four outputs of LSTM.
#[derive(Debug)]
pub struct LstmOutputs<'a> {
    /// 0: `[batch, num_units · 4]`, or `· 3` with CIFG. Holds the gate pre-activations and
    /// activations, gate-major as in the reference: `[input,] cell, forget, output`, each a
    /// `[batch, num_units]` block. Its contents are not part of the operation's result.
    pub scratch: &'a mut [f32],
    /// 1: `[batch, output_size]`
    pub output_state_out: &'a mut [f32],
    /// 2: `[batch, num_units]`
    pub cell_state_out: &'a mut [f32],
    /// 3: `[batch, output_size]`, equal to `output_state_out`.
    pub output: &'a mut [f32],
}

/// LSTM: one time step with optional CIFG, peephole connections, projection and clipping
/// (see [`LstmInputs`] for how the variant is chosen):
///
/// ```text
/// i = σ(W_xi·x + W_hi·h + w_ci ⊙ c + b_i)        (CIFG: i = 1 − f)
/// f = σ(W_xf·x + W_hf·h + w_cf ⊙ c + b_f)
/// c' = clip(f ⊙ c + i ⊙ g(W_xc·x + W_hc·h + b_c), cell_clip)
/// o = σ(W_xo·x + W_ho·h + w_co ⊙ c' + b_o)
/// h' = clip(W_proj·(o ⊙ g(c')) + b_proj, proj_clip)   (no projection: o ⊙ g(c'))
/// ```
///
/// `cell_state_out = c'`, `output_state_out = output = h'`. With layer normalisation each
/// gate's sum is instead `LN(W_x·x + W_h·h [+ w_c ⊙ c]) ⊙ w_ln + b`, `LN` normalising over
/// the units of one batch row (see [`LstmLayerNorm`]).
pub fn lstm_f32(
    dims: LstmDims,
    inputs: &LstmInputs<'_>,
    params: LstmParams,
    outputs: LstmOutputs<'_>,
) {
    let LstmDims {
        batch,
        input_size,
        num_units,
        output_size,
    } = dims;
    let LstmOutputs {
        scratch,
        output_state_out,
        cell_state_out,
        output,
    } = outputs;
    let use_cifg = inputs.input_to_input_weights.is_none();
    let use_peephole = inputs.cell_to_output_weights.is_some();
    let block = batch * num_units;
    debug_assert_eq!(inputs.input.len(), batch * input_size);
    debug_assert_eq!(inputs.output_state_in.len(), batch * output_size);
    debug_assert_eq!(inputs.cell_state_in.len(), block);
    debug_assert_eq!(scratch.len(), block * if use_cifg { 3 } else { 4 });
    debug_assert_eq!(output_state_out.len(), batch * output_size);
    debug_assert_eq!(cell_state_out.len(), block);
    debug_assert_eq!(output.len(), batch * output_size);
    if let Some(ln) = inputs.layer_norm {
        debug_assert_eq!(ln.input.is_none(), use_cifg);
        for w in [ln.forget, ln.cell, ln.output].into_iter().chain(ln.input) {
            debug_assert_eq!(w.len(), num_units);
        }
    }
    if inputs.projection_weights.is_none() {
        debug_assert_eq!(output_size, num_units);
    }

    let (input_gate, rest) = scratch.split_at_mut(if use_cifg { 0 } else { block });
    let (cell_gate, rest) = rest.split_at_mut(block);
    let (forget_gate, output_gate) = rest.split_at_mut(block);
    let output_gate = &mut output_gate[..block];

    // Gate pre-activations: bias, then the input contribution, then the recurrent one. With
    // layer normalisation the bias comes after normalising, so the sums start from zero.
    let x = inputs.input;
    let h = inputs.output_state_in;
    let ln = inputs.layer_norm;
    let aux = inputs.aux;
    let gate =
        |acc: &mut [f32], bias: Option<&[f32]>, w_x: &[f32], w_aux: Option<&[f32]>, w_h: &[f32]| {
            assign_per_batch(bias.filter(|_| ln.is_none()), num_units, acc);
            matrix_batch_vector_multiply_accumulate(w_x, num_units, input_size, x, batch, acc, 1);
            if let (Some(a), Some(w_a)) = (aux, w_aux) {
                matrix_batch_vector_multiply_accumulate(
                    w_a, num_units, a.aux_size, a.input, batch, acc, 1,
                );
            }
            matrix_batch_vector_multiply_accumulate(w_h, num_units, output_size, h, batch, acc, 1);
        };
    if let Some(w_xi) = inputs.input_to_input_weights {
        gate(
            input_gate,
            inputs.input_gate_bias,
            w_xi,
            aux.and_then(|a| a.to_input),
            inputs.recurrent_to_input_weights.unwrap_or(&[]),
        );
    }
    gate(
        forget_gate,
        Some(inputs.forget_gate_bias),
        inputs.input_to_forget_weights,
        aux.map(|a| a.to_forget),
        inputs.recurrent_to_forget_weights,
    );
    gate(
        cell_gate,
        Some(inputs.cell_bias),
        inputs.input_to_cell_weights,
        aux.map(|a| a.to_cell),
        inputs.recurrent_to_cell_weights,
    );
    gate(
        output_gate,
        Some(inputs.output_gate_bias),
        inputs.input_to_output_weights,
        aux.map(|a| a.to_output),
        inputs.recurrent_to_output_weights,
    );

    // Input and forget gates, with peepholes from the previous cell state.
    let c_prev = inputs.cell_state_in;
    if !use_cifg {
        if let (true, Some(w_ci)) = (use_peephole, inputs.cell_to_input_weights) {
            vector_batch_vector_product_accumulate(w_ci, c_prev, input_gate);
        }
        if let Some(ln) = ln {
            let w = ln.input.unwrap_or(&[]);
            layer_norm_rows(input_gate, w, inputs.input_gate_bias);
        }
        input_gate.iter_mut().for_each(|v| *v = sigmoid(*v));
    }
    if let (true, Some(w_cf)) = (use_peephole, inputs.cell_to_forget_weights) {
        vector_batch_vector_product_accumulate(w_cf, c_prev, forget_gate);
    }
    if let Some(ln) = ln {
        layer_norm_rows(forget_gate, ln.forget, Some(inputs.forget_gate_bias));
    }
    forget_gate.iter_mut().for_each(|v| *v = sigmoid(*v));

    // New cell state.
    if let Some(ln) = ln {
        layer_norm_rows(cell_gate, ln.cell, Some(inputs.cell_bias));
    }
    let g = params.activation;
    for ((c, &f), &cp) in cell_state_out.iter_mut().zip(&*forget_gate).zip(c_prev) {
        *c = f * cp;
    }
    cell_gate.iter_mut().for_each(|v| *v = g.apply(*v));
    if use_cifg {
        // The reference turns the forget gate block into the input gate in place.
        forget_gate.iter_mut().for_each(|v| *v = 1.0 - *v);
        for ((c, &a), &i) in cell_state_out
            .iter_mut()
            .zip(&*cell_gate)
            .zip(&*forget_gate)
        {
            *c += a * i;
        }
    } else {
        for ((c, &a), &i) in cell_state_out.iter_mut().zip(&*cell_gate).zip(&*input_gate) {
            *c += a * i;
        }
    }
    if params.cell_clip > 0.0 {
        let limit = params.cell_clip;
        cell_state_out.iter_mut().for_each(|v| *v = clip(*v, limit));
    }

    // Output gate, with a peephole from the new cell state, times g(new cell state).
    if let Some(w_co) = inputs.cell_to_output_weights {
        vector_batch_vector_product_accumulate(w_co, cell_state_out, output_gate);
    }
    if let Some(ln) = ln {
        layer_norm_rows(output_gate, ln.output, Some(inputs.output_gate_bias));
    }
    output_gate.iter_mut().for_each(|v| *v = sigmoid(*v));
    for (a, &c) in cell_gate.iter_mut().zip(&*cell_state_out) {
        *a = g.apply(c);
    }
    for (o, &a) in output_gate.iter_mut().zip(&*cell_gate) {
        *o *= a;
    }

    // Projection (or identity) into the output.
    if let Some(w_proj) = inputs.projection_weights {
        assign_per_batch(inputs.projection_bias, output_size, output);
        matrix_batch_vector_multiply_accumulate(
            w_proj,
            output_size,
            num_units,
            output_gate,
            batch,
            output,
            1,
        );
        if params.proj_clip > 0.0 {
            let limit = params.proj_clip;
            output.iter_mut().for_each(|v| *v = clip(*v, limit));
        }
    } else {
        // Without projection the widths agree (validation requires it); never index past
        // either buffer if they do not.
        let n = output.len().min(output_gate.len());
        output[..n].copy_from_slice(&output_gate[..n]);
        output[n..].fill(0.0);
    }
    output_state_out.copy_from_slice(output);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rnn_matches_hand_computation() {
        // 1 batch, 2 inputs, 2 units.
        let inputs = RnnInputs {
            input: &[1.0, 2.0],
            weights: &[0.5, -1.0, 2.0, 0.25],
            recurrent_weights: &[1.0, 0.0, -3.0, 1.0],
            bias: &[0.1, -0.2],
            hidden_state_in: &[0.5, 2.0],
        };
        let dims = RnnDims {
            batch: 1,
            input_size: 2,
            num_units: 2,
        };
        let mut h = [0.0; 2];
        let mut out = [0.0; 2];
        rnn_f32(dims, &inputs, Activation::None, &mut h, &mut out);
        // unit 0: 0.1 + (0.5 − 2) + 0.5 = −0.9; unit 1: −0.2 + (2 + 0.5) + (−1.5 + 2) = 2.8
        assert!(
            (out[0] + 0.9).abs() < 1e-6 && (out[1] - 2.8).abs() < 1e-6,
            "{out:?}"
        );
        assert_eq!(h, out);
        rnn_f32(dims, &inputs, Activation::Relu1, &mut h, &mut out);
        assert_eq!(out, [-0.9, 1.0]);
    }

    /// A straightforward SVDF over an explicit time window, for comparison with the
    /// state-shifting kernel over several steps.
    #[test]
    fn svdf_state_carries_over_steps() {
        let (batch, input_size, num_units, rank, memory_size) = (2, 3, 2, 2, 3);
        let num_filters = num_units * rank;
        let dims = SvdfDims {
            batch,
            input_size,
            num_filters,
            memory_size,
            rank,
        };
        let wf: Vec<f32> = (0..num_filters * input_size)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1)
            .collect();
        let wt: Vec<f32> = (0..num_filters * memory_size)
            .map(|i| ((i * 17 % 7) as f32 - 3.0) * 0.2)
            .collect();
        let bias = [0.5f32, -0.25];
        let steps: Vec<Vec<f32>> = (0..5)
            .map(|t| {
                (0..batch * input_size)
                    .map(|i| ((t * 13 + i * 5) % 9) as f32 * 0.3 - 1.0)
                    .collect()
            })
            .collect();

        let mut state = vec![0.0f32; batch * dims.state_len()];
        for (t, x) in steps.iter().enumerate() {
            let mut state_out = vec![f32::NAN; state.len()];
            let mut out = vec![f32::NAN; batch * num_units];
            let inputs = SvdfInputs {
                input: x,
                weights_feature: &wf,
                weights_time: &wt,
                bias: Some(&bias),
                state_in: &state,
            };
            svdf_f32(dims, &inputs, Activation::None, &mut state_out, &mut out);
            state = state_out;

            for b in 0..batch {
                for u in 0..num_units {
                    let mut want = bias[u];
                    for f in u * rank..(u + 1) * rank {
                        // Activation of filter f at step s, for the window ending at t.
                        let act = |s: usize| -> f32 {
                            (0..input_size)
                                .map(|i| wf[f * input_size + i] * steps[s][b * input_size + i])
                                .sum()
                        };
                        for m in 0..memory_size {
                            // Slot m holds step t − (memory_size − 1 − m).
                            let back = memory_size - 1 - m;
                            if back <= t {
                                want += wt[f * memory_size + m] * act(t - back);
                            }
                        }
                    }
                    let got = out[b * num_units + u];
                    assert!(
                        (got - want).abs() < 1e-5,
                        "step {t} b {b} u {u}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn svdf_rank_zero_does_not_panic() {
        let dims = SvdfDims {
            batch: 1,
            input_size: 1,
            num_filters: 2,
            memory_size: 2,
            rank: 0,
        };
        let inputs = SvdfInputs {
            input: &[1.0],
            weights_feature: &[1.0, 1.0],
            weights_time: &[1.0; 4],
            bias: None,
            state_in: &[0.0; 4],
        };
        let mut state = [0.0; 4];
        svdf_f32(dims, &inputs, Activation::None, &mut state, &mut []);
    }

    fn lstm_case(cifg: bool, peephole: bool, projection: bool, params: LstmParams) -> Vec<f32> {
        let (batch, input_size, num_units) = (2, 3, 4);
        let output_size = if projection { 2 } else { num_units };
        let w = |n: usize, seed: usize| -> Vec<f32> {
            (0..n)
                .map(|i| (((i + seed) * 29 % 13) as f32 - 6.0) * 0.15)
                .collect()
        };
        let wx: Vec<Vec<f32>> = (0..4).map(|g| w(num_units * input_size, g)).collect();
        let wh: Vec<Vec<f32>> = (0..4).map(|g| w(num_units * output_size, g + 4)).collect();
        let wc: Vec<Vec<f32>> = (0..3).map(|g| w(num_units, g + 8)).collect();
        let bias: Vec<Vec<f32>> = (0..4).map(|g| w(num_units, g + 11)).collect();
        let w_proj = w(output_size * num_units, 15);
        let b_proj = w(output_size, 16);
        let x = w(batch * input_size, 17);
        let h = w(batch * output_size, 18);
        let c = w(batch * num_units, 19);
        let inputs = LstmInputs {
            input: &x,
            input_to_input_weights: (!cifg).then_some(&wx[0][..]),
            input_to_forget_weights: &wx[1],
            input_to_cell_weights: &wx[2],
            input_to_output_weights: &wx[3],
            recurrent_to_input_weights: (!cifg).then_some(&wh[0][..]),
            recurrent_to_forget_weights: &wh[1],
            recurrent_to_cell_weights: &wh[2],
            recurrent_to_output_weights: &wh[3],
            cell_to_input_weights: (peephole && !cifg).then_some(&wc[0][..]),
            cell_to_forget_weights: peephole.then_some(&wc[1][..]),
            cell_to_output_weights: peephole.then_some(&wc[2][..]),
            input_gate_bias: (!cifg).then_some(&bias[0][..]),
            forget_gate_bias: &bias[1],
            cell_bias: &bias[2],
            output_gate_bias: &bias[3],
            projection_weights: projection.then_some(&w_proj[..]),
            projection_bias: projection.then_some(&b_proj[..]),
            output_state_in: &h,
            cell_state_in: &c,
            layer_norm: None,
            aux: None,
        };
        let dims = LstmDims {
            batch,
            input_size,
            num_units,
            output_size,
        };
        let mut scratch = vec![f32::NAN; batch * num_units * if cifg { 3 } else { 4 }];
        let mut h_out = vec![f32::NAN; batch * output_size];
        let mut c_out = vec![f32::NAN; batch * num_units];
        let mut out = vec![f32::NAN; batch * output_size];
        lstm_f32(
            dims,
            &inputs,
            params,
            LstmOutputs {
                scratch: &mut scratch,
                output_state_out: &mut h_out,
                cell_state_out: &mut c_out,
                output: &mut out,
            },
        );
        assert!(
            scratch.iter().all(|v| v.is_finite()),
            "scratch fully written"
        );
        assert_eq!(h_out, out);

        // Direct evaluation of the equations.
        let dot = |m: &[f32], cols: usize, r: usize, v: &[f32]| -> f32 {
            (0..cols).map(|k| m[r * cols + k] * v[k]).sum()
        };
        let g = params.activation;
        let clip_to = |v: f32, t: f32| if t > 0.0 { v.clamp(-t, t) } else { v };
        let mut want = Vec::new();
        let mut want_c = Vec::new();
        for b in 0..batch {
            let xb = &x[b * input_size..(b + 1) * input_size];
            let hb = &h[b * output_size..(b + 1) * output_size];
            let cb = &c[b * num_units..(b + 1) * num_units];
            let pre = |gate: usize, u: usize| {
                bias[gate][u]
                    + dot(&wx[gate], input_size, u, xb)
                    + dot(&wh[gate], output_size, u, hb)
            };
            let mut m = vec![0.0f32; num_units];
            for u in 0..num_units {
                let peep = |k: usize, cell: f32| if peephole { wc[k][u] * cell } else { 0.0 };
                let f = sigmoid(pre(1, u) + peep(1, cb[u]));
                let i = if cifg {
                    1.0 - f
                } else {
                    sigmoid(pre(0, u) + peep(0, cb[u]))
                };
                let cn = clip_to(f * cb[u] + i * g.apply(pre(2, u)), params.cell_clip);
                let o = sigmoid(pre(3, u) + peep(2, cn));
                want_c.push(cn);
                m[u] = o * g.apply(cn);
            }
            if projection {
                for (r, &bias) in b_proj.iter().enumerate() {
                    want.push(clip_to(
                        bias + dot(&w_proj, num_units, r, &m),
                        params.proj_clip,
                    ));
                }
            } else {
                want.extend(m);
            }
        }
        for (got, want) in [(&out, &want), (&c_out, &want_c)] {
            for (a, e) in got.iter().zip(want) {
                assert!((a - e).abs() < 1e-5, "{got:?} vs {want:?}");
            }
        }
        out
    }

    #[test]
    fn lstm_variants_match_the_equations() {
        let plain = LstmParams {
            activation: LstmActivation::Tanh,
            cell_clip: 0.0,
            proj_clip: 0.0,
        };
        for cifg in [false, true] {
            for peephole in [false, true] {
                for projection in [false, true] {
                    lstm_case(cifg, peephole, projection, plain);
                }
            }
        }
        let clipped = LstmParams {
            activation: LstmActivation::Relu,
            cell_clip: 0.05,
            proj_clip: 0.01,
        };
        let out = lstm_case(false, true, true, clipped);
        assert!(out.iter().all(|v| v.abs() <= 0.01));
        for activation in [
            LstmActivation::None,
            LstmActivation::Relu6,
            LstmActivation::Sigmoid,
        ] {
            let params = LstmParams {
                activation,
                ..plain
            };
            lstm_case(true, true, false, params);
        }
    }

    /// Deterministic small values in about [−0.9, 0.9].
    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 29 % 13) as f32 - 6.0) * 0.15)
            .collect()
    }

    /// Weights of a layer-norm LSTM case: 2 batches, 3 inputs, 5 units, 2 outputs with
    /// projection. `scale` multiplies every weight feeding a gate's sum (input, recurrent and
    /// peephole), which layer normalisation must cancel.
    struct LnCase {
        cifg: bool,
        peephole: bool,
        projection: bool,
        wx: Vec<Vec<f32>>,
        wh: Vec<Vec<f32>>,
        wc: Vec<Vec<f32>>,
        bias: Vec<Vec<f32>>,
        ln: Vec<Vec<f32>>,
        w_proj: Vec<f32>,
        x: Vec<f32>,
        h: Vec<f32>,
        c: Vec<f32>,
    }

    const LN_DIMS: (usize, usize, usize) = (2, 3, 5);

    impl LnCase {
        fn new(cifg: bool, peephole: bool, projection: bool, scale: f32) -> Self {
            let (batch, input_size, units) = LN_DIMS;
            let out = if projection { 2 } else { units };
            let scaled =
                |n, seed| -> Vec<f32> { values(n, seed).into_iter().map(|v| v * scale).collect() };
            LnCase {
                cifg,
                peephole,
                projection,
                wx: (0..4).map(|g| scaled(units * input_size, g)).collect(),
                wh: (0..4).map(|g| scaled(units * out, g + 4)).collect(),
                wc: (0..3).map(|g| scaled(units, g + 8)).collect(),
                bias: (0..4).map(|g| values(units, g + 11)).collect(),
                // Layer-norm weights around 1, so that no gate is flattened to its bias.
                ln: (0..4)
                    .map(|g| values(units, g + 20).iter().map(|v| 1.0 + v).collect())
                    .collect(),
                w_proj: values(out * units, 15),
                x: values(batch * input_size, 17),
                h: values(batch * out, 18),
                c: values(batch * units, 19),
            }
        }

        fn output_size(&self) -> usize {
            if self.projection {
                2
            } else {
                LN_DIMS.2
            }
        }

        /// Runs the kernel; returns (output, cell state).
        fn run(&self, layer_norm: bool) -> (Vec<f32>, Vec<f32>) {
            let (batch, input_size, num_units) = LN_DIMS;
            let output_size = self.output_size();
            let (cifg, peephole) = (self.cifg, self.peephole);
            let inputs = LstmInputs {
                input: &self.x,
                input_to_input_weights: (!cifg).then_some(&self.wx[0][..]),
                input_to_forget_weights: &self.wx[1],
                input_to_cell_weights: &self.wx[2],
                input_to_output_weights: &self.wx[3],
                recurrent_to_input_weights: (!cifg).then_some(&self.wh[0][..]),
                recurrent_to_forget_weights: &self.wh[1],
                recurrent_to_cell_weights: &self.wh[2],
                recurrent_to_output_weights: &self.wh[3],
                cell_to_input_weights: (peephole && !cifg).then_some(&self.wc[0][..]),
                cell_to_forget_weights: peephole.then_some(&self.wc[1][..]),
                cell_to_output_weights: peephole.then_some(&self.wc[2][..]),
                input_gate_bias: (!cifg).then_some(&self.bias[0][..]),
                forget_gate_bias: &self.bias[1],
                cell_bias: &self.bias[2],
                output_gate_bias: &self.bias[3],
                projection_weights: self.projection.then_some(&self.w_proj[..]),
                projection_bias: None,
                output_state_in: &self.h,
                cell_state_in: &self.c,
                layer_norm: layer_norm.then(|| LstmLayerNorm {
                    input: (!cifg).then_some(&self.ln[0][..]),
                    forget: &self.ln[1],
                    cell: &self.ln[2],
                    output: &self.ln[3],
                }),
                aux: None,
            };
            let dims = LstmDims {
                batch,
                input_size,
                num_units,
                output_size,
            };
            let mut scratch = vec![f32::NAN; batch * num_units * if cifg { 3 } else { 4 }];
            let mut h_out = vec![f32::NAN; batch * output_size];
            let mut c_out = vec![f32::NAN; batch * num_units];
            let mut out = vec![f32::NAN; batch * output_size];
            let params = LstmParams {
                activation: LstmActivation::Tanh,
                cell_clip: 0.0,
                proj_clip: 0.0,
            };
            lstm_f32(
                dims,
                &inputs,
                params,
                LstmOutputs {
                    scratch: &mut scratch,
                    output_state_out: &mut h_out,
                    cell_state_out: &mut c_out,
                    output: &mut out,
                },
            );
            assert_eq!(h_out, out);
            (out, c_out)
        }

        /// The layer-norm LSTM equations evaluated directly in f64.
        fn reference_f64(&self) -> (Vec<f64>, Vec<f64>) {
            let (batch, input_size, units) = LN_DIMS;
            let out = self.output_size();
            let f = |v: f32| f64::from(v);
            let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
            let dot = |m: &[f32], cols: usize, r: usize, v: &[f32]| -> f64 {
                (0..cols).map(|k| f(m[r * cols + k]) * f(v[k])).sum()
            };
            let norm = |pre: &[f64], gate: usize| -> Vec<f64> {
                let n = pre.len() as f64;
                let mean = pre.iter().sum::<f64>() / n;
                let var = pre.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
                pre.iter()
                    .enumerate()
                    .map(|(u, v)| {
                        (v - mean) / (var + 1e-8).sqrt() * f(self.ln[gate][u])
                            + f(self.bias[gate][u])
                    })
                    .collect()
            };
            let (mut outputs, mut cells) = (Vec::new(), Vec::new());
            for b in 0..batch {
                let xb = &self.x[b * input_size..(b + 1) * input_size];
                let hb = &self.h[b * out..(b + 1) * out];
                let cb = &self.c[b * units..(b + 1) * units];
                let sum = |gate: usize, peep: Option<(&[f32], &[f64])>| -> Vec<f64> {
                    (0..units)
                        .map(|u| {
                            dot(&self.wx[gate], input_size, u, xb)
                                + dot(&self.wh[gate], out, u, hb)
                                + peep.map_or(0.0, |(w, c)| f(w[u]) * c[u])
                        })
                        .collect()
                };
                let c_prev: Vec<f64> = cb.iter().map(|&v| f(v)).collect();
                let peep = |k: usize, c: &[f64]| -> Option<(Vec<f32>, Vec<f64>)> {
                    self.peephole.then(|| (self.wc[k].clone(), c.to_vec()))
                };
                let with = |gate: usize, p: &Option<(Vec<f32>, Vec<f64>)>| {
                    norm(&sum(gate, p.as_ref().map(|(w, c)| (&w[..], &c[..]))), gate)
                };
                let fg: Vec<f64> = with(1, &peep(1, &c_prev)).into_iter().map(sig).collect();
                let ig: Vec<f64> = if self.cifg {
                    fg.iter().map(|v| 1.0 - v).collect()
                } else {
                    with(0, &peep(0, &c_prev)).into_iter().map(sig).collect()
                };
                let g = with(2, &None);
                let c_new: Vec<f64> = (0..units)
                    .map(|u| fg[u] * c_prev[u] + ig[u] * g[u].tanh())
                    .collect();
                let og: Vec<f64> = with(3, &peep(2, &c_new)).into_iter().map(sig).collect();
                let m: Vec<f64> = (0..units).map(|u| og[u] * c_new[u].tanh()).collect();
                if self.projection {
                    for r in 0..out {
                        outputs.push(
                            (0..units)
                                .map(|u| f(self.w_proj[r * units + u]) * m[u])
                                .sum(),
                        );
                    }
                } else {
                    outputs.extend(m);
                }
                cells.extend(c_new);
            }
            (outputs, cells)
        }
    }

    #[test]
    fn lstm_layer_norm_matches_an_f64_evaluation() {
        for cifg in [false, true] {
            for peephole in [false, true] {
                for projection in [false, true] {
                    let case = LnCase::new(cifg, peephole, projection, 1.0);
                    let (out, cell) = case.run(true);
                    let (want_out, want_cell) = case.reference_f64();
                    for (got, want) in [(&out, &want_out), (&cell, &want_cell)] {
                        assert_eq!(got.len(), want.len());
                        for (a, e) in got.iter().zip(want) {
                            assert!(
                                (f64::from(*a) - e).abs() < 1e-5,
                                "cifg {cifg} peephole {peephole} projection {projection}: \
                                 {got:?} vs {want:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lstm_layer_norm_cancels_the_scale_of_the_gate_weights() {
        // Normalising makes each gate independent of a common positive scale of the weights
        // feeding its sum; the plain LSTM is not.
        for cifg in [false, true] {
            let one = LnCase::new(cifg, true, true, 1.0);
            let three = LnCase::new(cifg, true, true, 3.0);
            let (a, ca) = one.run(true);
            let (b, cb) = three.run(true);
            for (x, y) in a.iter().zip(&b).chain(ca.iter().zip(&cb)) {
                assert!((x - y).abs() < 1e-5, "{a:?} {ca:?} vs {b:?} {cb:?}");
            }
            let (plain_one, _) = one.run(false);
            let (plain_three, _) = three.run(false);
            assert!(
                plain_one
                    .iter()
                    .zip(&plain_three)
                    .any(|(x, y)| (x - y).abs() > 1e-3),
                "without layer norm the scale matters"
            );
            assert!(
                a.iter().zip(&plain_one).any(|(x, y)| (x - y).abs() > 1e-3),
                "layer normalisation changes the result"
            );
        }
    }

    #[test]
    fn lstm_activation_codes() {
        let codes: Vec<_> = (-1..8).map(LstmActivation::from_code).collect();
        let expected = [
            None,
            Some(LstmActivation::None),
            Some(LstmActivation::Relu),
            None,
            Some(LstmActivation::Relu6),
            Some(LstmActivation::Tanh),
            None,
            Some(LstmActivation::Sigmoid),
            None,
        ];
        assert_eq!(codes, expected);
    }
}
