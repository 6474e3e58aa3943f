//! Runs one operation: turns the resolved [`Params`] and typed operand values into a call of the
//! matching kernel (types.hal 1.0, `OperationType`). Shapes were inferred and checked before
//! this is called, so slice lengths agree with the dimensions handed to the kernels.

use crate::tensor::{Data, Tensor};
use nnhal_hal::shape::{LshKind, Params, WindowParams};
use nnhal_hal::validate::{OperandInfo, OperationInfo};
use nnhal_hal::{FusedActivationFunc, HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::{
    conv, elementwise as ew, layout, lookup, normalization as norm, pool, recurrent, Activation,
    KernelError, Nhwc, Padding, QuantParams, Window,
};

fn act(a: FusedActivationFunc) -> Activation {
    match a {
        FusedActivationFunc::None => Activation::None,
        FusedActivationFunc::Relu => Activation::Relu,
        FusedActivationFunc::Relu1 => Activation::Relu1,
        FusedActivationFunc::Relu6 => Activation::Relu6,
    }
}

fn nhwc(d: &[u32]) -> Nhwc {
    Nhwc::new(d[0] as usize, d[1] as usize, d[2] as usize, d[3] as usize)
}

fn shape(d: &[u32]) -> Vec<usize> {
    d.iter().map(|&x| x as usize).collect()
}

fn quant(o: &OperandInfo) -> QuantParams {
    QuantParams::new(o.scale, o.zero_point)
}

fn window(p: &WindowParams, input: &[u32], output: &[u32]) -> Window {
    Window {
        input: nhwc(input),
        output: nhwc(output),
        filter_h: p.filter_h as usize,
        filter_w: p.filter_w as usize,
        stride_h: p.stride_h as usize,
        stride_w: p.stride_w as usize,
        padding: Padding {
            left: p.pad.left as usize,
            right: p.pad.right as usize,
            top: p.pad.top as usize,
            bottom: p.pad.bottom as usize,
        },
    }
}

fn kernel_error(e: KernelError) -> HalError {
    match e {
        KernelError::InvalidData(m) => HalError::InvalidArgument(m),
    }
}

fn mismatch(op: OperationType) -> HalError {
    HalError::GeneralFailure(format!("{op}: operand data of an unexpected type"))
}

/// The operand values an operation reads, by input position (`None` = omitted).
pub struct OpInputs<'a> {
    pub values: Vec<Option<&'a Tensor>>,
    pub infos: Vec<&'a OperandInfo>,
}

impl<'a> OpInputs<'a> {
    fn t(&self, i: usize) -> HalResult<&'a Tensor> {
        self.values
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| HalError::InvalidArgument(format!("input {i} is missing")))
    }
    fn f(&self, i: usize) -> HalResult<&'a [f32]> {
        self.t(i)?.f32()
    }
    fn opt_f(&self, i: usize) -> HalResult<Option<&'a [f32]>> {
        self.values
            .get(i)
            .copied()
            .flatten()
            .map(|t| t.f32())
            .transpose()
    }
    fn u(&self, i: usize) -> HalResult<&'a [u8]> {
        self.t(i)?.u8()
    }
    fn i(&self, i: usize) -> HalResult<&'a [i32]> {
        self.t(i)?.i32()
    }
    fn q(&self, i: usize) -> QuantParams {
        quant(self.infos[i])
    }
    fn dims(&self, i: usize) -> HalResult<&'a [u32]> {
        Ok(&self.t(i)?.dims)
    }
    fn is_quant(&self) -> bool {
        self.infos[0].ty == OperandType::TensorQuant8Asymm
    }
}

/// Runs `op` writing into `outs` (allocated with the inferred dimensions).
pub fn run(
    op: &OperationInfo,
    params: &Params,
    ins: &OpInputs,
    out_infos: &[&OperandInfo],
    outs: &mut [Tensor],
) -> HalResult<()> {
    use OperationType::*;
    let ty = op.ty;
    let quant8 = ins.is_quant();
    let out_dims: Vec<Vec<u32>> = outs.iter().map(|t| t.dims.clone()).collect();
    let out0 = &mut outs[0];
    match (ty, params) {
        (Add | Mul, Params::Binary { act: a }) => {
            let (ad, bd, od) = (
                shape(ins.dims(0)?),
                shape(ins.dims(1)?),
                shape(&out_dims[0]),
            );
            if quant8 {
                let f = if ty == Add { ew::add_u8 } else { ew::mul_u8 };
                f(
                    ins.u(0)?,
                    &ad,
                    ins.q(0),
                    ins.u(1)?,
                    &bd,
                    ins.q(1),
                    quant(out_infos[0]),
                    act(*a),
                    out0.u8_mut()?,
                    &od,
                )
                .map_err(kernel_error)?;
            } else {
                let f = if ty == Add { ew::add_f32 } else { ew::mul_f32 };
                f(
                    ins.f(0)?,
                    &ad,
                    ins.f(1)?,
                    &bd,
                    act(*a),
                    out0.f32_mut()?,
                    &od,
                );
            }
        }
        (AveragePool2d | MaxPool2d | L2Pool2d, Params::Pool { window: w, act: a }) => {
            let win = window(w, ins.dims(0)?, &out_dims[0]);
            match (ty, quant8) {
                (AveragePool2d, false) => {
                    pool::average_pool_f32(&win, ins.f(0)?, act(*a), out0.f32_mut()?)
                }
                (AveragePool2d, true) => {
                    pool::average_pool_u8(&win, ins.u(0)?, ins.q(0), act(*a), out0.u8_mut()?)
                }
                (MaxPool2d, false) => pool::max_pool_f32(&win, ins.f(0)?, act(*a), out0.f32_mut()?),
                (MaxPool2d, true) => {
                    pool::max_pool_u8(&win, ins.u(0)?, ins.q(0), act(*a), out0.u8_mut()?)
                }
                (L2Pool2d, false) => pool::l2_pool_f32(&win, ins.f(0)?, act(*a), out0.f32_mut()?),
                _ => return Err(mismatch(ty)),
            }
        }
        (Concatenation, Params::Concat { axis }) => {
            let n = op.inputs.len() - 1;
            let dims: Vec<Vec<usize>> = (0..n)
                .map(|i| ins.dims(i).map(shape))
                .collect::<HalResult<_>>()?;
            if quant8 {
                let parts: Vec<(&[u8], &[usize])> = (0..n)
                    .map(|i| Ok((ins.u(i)?, dims[i].as_slice())))
                    .collect::<HalResult<_>>()?;
                layout::concatenation(&parts, *axis, out0.u8_mut()?);
            } else {
                let parts: Vec<(&[f32], &[usize])> = (0..n)
                    .map(|i| Ok((ins.f(i)?, dims[i].as_slice())))
                    .collect::<HalResult<_>>()?;
                layout::concatenation(&parts, *axis, out0.f32_mut()?);
            }
        }
        (Conv2d, Params::Conv { window: w, act: a }) => {
            let win = window(w, ins.dims(0)?, &out_dims[0]);
            if quant8 {
                conv::conv2d_u8(
                    &win,
                    ins.u(0)?,
                    ins.q(0),
                    ins.u(1)?,
                    ins.q(1),
                    ins.i(2)?,
                    quant(out_infos[0]),
                    act(*a),
                    out0.u8_mut()?,
                )
                .map_err(kernel_error)?;
            } else {
                conv::conv2d_f32(
                    &win,
                    ins.f(0)?,
                    ins.f(1)?,
                    ins.f(2)?,
                    act(*a),
                    out0.f32_mut()?,
                );
            }
        }
        (
            DepthwiseConv2d,
            Params::Depthwise {
                window: w,
                multiplier,
                act: a,
            },
        ) => {
            let win = window(w, ins.dims(0)?, &out_dims[0]);
            let m = *multiplier as usize;
            if quant8 {
                conv::depthwise_conv2d_u8(
                    &win,
                    m,
                    ins.u(0)?,
                    ins.q(0),
                    ins.u(1)?,
                    ins.q(1),
                    ins.i(2)?,
                    quant(out_infos[0]),
                    act(*a),
                    out0.u8_mut()?,
                )
                .map_err(kernel_error)?;
            } else {
                conv::depthwise_conv2d_f32(
                    &win,
                    m,
                    ins.f(0)?,
                    ins.f(1)?,
                    ins.f(2)?,
                    act(*a),
                    out0.f32_mut()?,
                );
            }
        }
        (DepthToSpace | SpaceToDepth, Params::Block { block }) => {
            let s = nhwc(ins.dims(0)?);
            let b = *block as usize;
            let d2s = ty == DepthToSpace;
            match (&ins.t(0)?.data, &mut out0.data) {
                (Data::F32(i), Data::F32(o)) if d2s => layout::depth_to_space(i, s, b, o),
                (Data::F32(i), Data::F32(o)) => layout::space_to_depth(i, s, b, o),
                (Data::U8(i), Data::U8(o)) if d2s => layout::depth_to_space(i, s, b, o),
                (Data::U8(i), Data::U8(o)) => layout::space_to_depth(i, s, b, o),
                _ => return Err(mismatch(ty)),
            }
        }
        (Dequantize, _) => ew::dequantize(ins.u(0)?, ins.q(0), out0.f32_mut()?),
        (Floor, _) => ew::floor_f32(ins.f(0)?, out0.f32_mut()?),
        (Relu | Relu1 | Relu6, _) => {
            let a = match ty {
                Relu => Activation::Relu,
                Relu1 => Activation::Relu1,
                _ => Activation::Relu6,
            };
            if quant8 {
                ew::clamp_u8(a, ins.q(0), ins.u(0)?, out0.u8_mut()?);
            } else {
                ew::clamp_f32(a, ins.f(0)?, out0.f32_mut()?);
            }
        }
        (Logistic, _) => {
            if quant8 {
                ew::logistic_u8(ins.u(0)?, ins.q(0), out0.u8_mut()?).map_err(kernel_error)?;
            } else {
                ew::logistic_f32(ins.f(0)?, out0.f32_mut()?);
            }
        }
        (Tanh, _) => ew::tanh_f32(ins.f(0)?, out0.f32_mut()?),
        (Reshape, _) => {
            out0.data = ins.t(0)?.data.clone();
        }
        (EmbeddingLookup, Params::Lookup { rows, row_len }) => {
            let (rows, row_len) = (*rows as usize, *row_len as usize);
            let lookups = ins.i(0)?;
            match (&ins.t(1)?.data, &mut out0.data) {
                (Data::F32(v), Data::F32(o)) => {
                    lookup::embedding_lookup(lookups, v, rows, row_len, o)
                }
                (Data::I32(v), Data::I32(o)) => {
                    lookup::embedding_lookup(lookups, v, rows, row_len, o)
                }
                (Data::U8(v), Data::U8(o)) => {
                    lookup::embedding_lookup(lookups, v, rows, row_len, o)
                }
                _ => return Err(mismatch(ty)),
            }
            .map_err(kernel_error)?;
        }
        (HashtableLookup, Params::Lookup { row_len, .. }) => {
            let row_len = *row_len as usize;
            let (lookups, keys) = (ins.i(0)?, ins.i(1)?);
            let (first, rest) = outs.split_at_mut(1);
            let hits = rest[0].u8_mut()?;
            match (&ins.t(2)?.data, &mut first[0].data) {
                (Data::F32(v), Data::F32(o)) => {
                    lookup::hashtable_lookup(lookups, keys, v, row_len, o, hits)
                }
                (Data::I32(v), Data::I32(o)) => {
                    lookup::hashtable_lookup(lookups, keys, v, row_len, o, hits)
                }
                (Data::U8(v), Data::U8(o)) => {
                    lookup::hashtable_lookup(lookups, keys, v, row_len, o, hits)
                }
                _ => return Err(mismatch(ty)),
            }
        }
        (L2Normalization, Params::Depth { depth }) => {
            norm::l2_normalization_f32(ins.f(0)?, *depth as usize, out0.f32_mut()?)
        }
        (
            LocalResponseNormalization,
            Params::Lrn {
                radius,
                bias,
                alpha,
                beta,
            },
        ) => {
            let depth = ins.dims(0)?[3] as usize;
            norm::local_response_normalization_f32(
                ins.f(0)?,
                depth,
                *radius as usize,
                *bias,
                *alpha,
                *beta,
                out0.f32_mut()?,
            );
        }
        (
            LshProjection,
            Params::Lsh {
                kind,
                num_hash,
                num_bits,
                input_rows,
            },
        ) => {
            let kind = match kind {
                LshKind::Sparse => lookup::LshProjectionType::Sparse,
                LshKind::Dense => lookup::LshProjectionType::Dense,
            };
            let input = ins.t(1)?.data.to_le_bytes();
            lookup::lsh_projection(
                ins.f(0)?,
                *num_hash as usize,
                *num_bits as usize,
                &input,
                *input_rows as usize,
                ins.opt_f(2)?,
                kind,
                out0.i32_mut()?,
            );
        }
        (Lstm, Params::Lstm(p)) => {
            let activation =
                recurrent::LstmActivation::from_code(p.activation).ok_or_else(|| {
                    HalError::InvalidArgument(format!("LSTM activation {}", p.activation))
                })?;
            let inputs = recurrent::LstmInputs {
                input: ins.f(0)?,
                input_to_input_weights: ins.opt_f(1)?,
                input_to_forget_weights: ins.f(2)?,
                input_to_cell_weights: ins.f(3)?,
                input_to_output_weights: ins.f(4)?,
                recurrent_to_input_weights: ins.opt_f(5)?,
                recurrent_to_forget_weights: ins.f(6)?,
                recurrent_to_cell_weights: ins.f(7)?,
                recurrent_to_output_weights: ins.f(8)?,
                cell_to_input_weights: ins.opt_f(9)?,
                cell_to_forget_weights: ins.opt_f(10)?,
                cell_to_output_weights: ins.opt_f(11)?,
                input_gate_bias: ins.opt_f(12)?,
                forget_gate_bias: ins.f(13)?,
                cell_bias: ins.f(14)?,
                output_gate_bias: ins.f(15)?,
                projection_weights: ins.opt_f(16)?,
                projection_bias: ins.opt_f(17)?,
                output_state_in: ins.f(18)?,
                cell_state_in: ins.f(19)?,
            };
            let dims = recurrent::LstmDims {
                batch: p.batch as usize,
                input_size: p.input_size as usize,
                num_units: p.units as usize,
                output_size: p.output_size as usize,
            };
            let params = recurrent::LstmParams {
                activation,
                cell_clip: p.cell_clip,
                proj_clip: p.proj_clip,
            };
            let [scratch, state, cell, output] = outs else {
                return Err(mismatch(ty));
            };
            let outputs = recurrent::LstmOutputs {
                scratch: scratch.f32_mut()?,
                output_state_out: state.f32_mut()?,
                cell_state_out: cell.f32_mut()?,
                output: output.f32_mut()?,
            };
            recurrent::lstm_f32(dims, &inputs, params, outputs);
        }
        (ResizeBilinear, Params::Resize { height, width }) => {
            let s = nhwc(ins.dims(0)?);
            layout::resize_bilinear_f32(
                ins.f(0)?,
                s,
                *height as usize,
                *width as usize,
                out0.f32_mut()?,
            );
        }
        (
            Rnn,
            Params::Rnn {
                batch,
                input_size,
                units,
                act: a,
            },
        ) => {
            let dims = recurrent::RnnDims {
                batch: *batch as usize,
                input_size: *input_size as usize,
                num_units: *units as usize,
            };
            let inputs = recurrent::RnnInputs {
                input: ins.f(0)?,
                weights: ins.f(1)?,
                recurrent_weights: ins.f(2)?,
                bias: ins.f(3)?,
                hidden_state_in: ins.f(4)?,
            };
            let [state, output] = outs else {
                return Err(mismatch(ty));
            };
            recurrent::rnn_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
        }
        (Softmax, Params::Softmax { beta, depth }) => {
            if quant8 {
                norm::softmax_u8(ins.u(0)?, ins.q(0), *depth as usize, *beta, out0.u8_mut()?)
                    .map_err(kernel_error)?;
            } else {
                norm::softmax_f32(ins.f(0)?, *depth as usize, *beta, out0.f32_mut()?);
            }
        }
        (
            Svdf,
            Params::Svdf {
                batch,
                input_size,
                num_filters,
                memory_size,
                rank,
                act: a,
                ..
            },
        ) => {
            let dims = recurrent::SvdfDims {
                batch: *batch as usize,
                input_size: *input_size as usize,
                num_filters: *num_filters as usize,
                memory_size: *memory_size as usize,
                rank: *rank as usize,
            };
            let inputs = recurrent::SvdfInputs {
                input: ins.f(0)?,
                weights_feature: ins.f(1)?,
                weights_time: ins.f(2)?,
                bias: ins.opt_f(3)?,
                state_in: ins.f(4)?,
            };
            let [state, output] = outs else {
                return Err(mismatch(ty));
            };
            recurrent::svdf_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
        }
        (
            FullyConnected,
            Params::FullyConnected {
                batch,
                input_size,
                units,
                act: a,
            },
        ) => {
            let (b, n, u) = (*batch as usize, *input_size as usize, *units as usize);
            if quant8 {
                conv::fully_connected_u8(
                    b,
                    n,
                    u,
                    ins.u(0)?,
                    ins.q(0),
                    ins.u(1)?,
                    ins.q(1),
                    ins.i(2)?,
                    quant(out_infos[0]),
                    act(*a),
                    out0.u8_mut()?,
                )
                .map_err(kernel_error)?;
            } else {
                conv::fully_connected_f32(
                    b,
                    n,
                    u,
                    ins.f(0)?,
                    ins.f(1)?,
                    ins.f(2)?,
                    act(*a),
                    out0.f32_mut()?,
                );
            }
        }
        _ => {
            return Err(HalError::GeneralFailure(format!(
                "{ty} cannot be executed by this driver"
            )));
        }
    }
    Ok(())
}
