//! Registrations of the data-movement family (types.hal 1.0 `OperationType`):
//! CONCATENATION (2), DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and
//! SPACE_TO_DEPTH (26) on float32 and uint8 (RESHAPE on any type); NNAPI 1.1's PAD, SQUEEZE,
//! STRIDED_SLICE, TRANSPOSE, SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND on float32 and uint8
//! (signed quant8 through its unsigned image: the padding byte is the output zero point, which
//! the image shifts with the values), on the row loops of `nnhal_kernels::transform::nd`. NCHW
//! forms (NNAPI 1.2 `layout`) run transposed ([`super::run_nchw`]). NNAPI 1.2's
//! RESIZE_NEAREST_NEIGHBOR moves whole channel runs (`nd::resize_nearest`), on float32 and
//! uint8 (signed quant8 as its image: the values are only copied).
//! forms (NNAPI 1.2 `layout`) run transposed ([`super::run_nchw`]). NNAPI 1.2's SLICE (as a
//! STRIDED_SLICE of step 1), SPLIT, TILE and EXPAND_DIMS (RESHAPE's copy) on float32, int32 and
//! uint8, PAD_V2 and CHANNEL_SHUFFLE on float32 and uint8, on the block loops of
//! `nnhal_kernels::transform::{nd, blocks}`.

use super::{elementwise_work, mismatch, nhwc, out0, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::elementwise::reference as ew;
use nnhal_kernels::transform::reference as transform;
use nnhal_kernels::transform::{blocks, nd};
use smallvec::SmallVec;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Concatenation, F | Q) => &CONCATENATION,
        (DepthToSpace | SpaceToDepth, F | Q) => &BLOCK_REARRANGE,
        (Reshape, _) => &RESHAPE,
        (ResizeBilinear, F | Q) => &RESIZE_BILINEAR,
        (ResizeNearestNeighbor, F | Q) => &RESIZE_NEAREST,
        // SQUEEZE keeps the bytes, as RESHAPE does.
        (Squeeze, F | Q) => &RESHAPE,
        (Pad, F | Q) => &PAD,
        (Transpose, F | Q) => &TRANSPOSE,
        (StridedSlice, F | Q) => &STRIDED_SLICE,
        (SpaceToBatchNd, F | Q) => &SPACE_TO_BATCH,
        (BatchToSpaceNd, F | Q) => &BATCH_TO_SPACE,
        (PadV2, F | Q) => &PAD_V2,
        // EXPAND_DIMS keeps the bytes too.
        (ExpandDims, F | I | Q) => &RESHAPE,
        (Slice, F | I | Q) => &STRIDED_SLICE,
        (Tile, F | I | Q) => &TILE,
        (ChannelShuffle, F | Q) => &CHANNEL_SHUFFLE,
        (Split, F | I | Q) => &SPLIT,
        _ => return None,
    })
}

registration!(CONCATENATION, concatenation, elementwise_work);
registration!(BLOCK_REARRANGE, block_rearrange, elementwise_work, partial);
registration!(RESHAPE, reshape, elementwise_work);
registration!(RESIZE_BILINEAR, resize_bilinear, elementwise_work, partial);
registration!(RESIZE_NEAREST, resize_nearest, elementwise_work);
registration!(PAD, pad, elementwise_work);
registration!(TRANSPOSE, transpose, elementwise_work);
registration!(STRIDED_SLICE, strided_slice, elementwise_work);
registration!(SPACE_TO_BATCH, space_to_batch, elementwise_work);
registration!(BATCH_TO_SPACE, batch_to_space, elementwise_work);
registration!(PAD_V2, pad_v2, elementwise_work);
registration!(TILE, tile, elementwise_work);
registration!(CHANNEL_SHUFFLE, channel_shuffle, elementwise_work);
registration!(SPLIT, split, elementwise_work);

type Axes = SmallVec<[usize; 4]>;

fn axes(v: &[u32]) -> Axes {
    v.iter().map(|&x| x as usize).collect()
}

fn pad(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Pad { before, after } = c.params else {
        return Err(mismatch(c));
    };
    let (b, a) = (axes(before), axes(after));
    let d = axes(c.dims(0)?);
    // The reference pads quant8 with the output's zero point (0 in float32).
    let zero = c.out_q(0).zero_point.clamp(0, 255) as u8;
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::pad(x, &d, &b, &a, 0.0, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::pad(x, &d, &b, &a, zero, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

/// PAD_V2: PAD with the scalar input 2 as the value, in the input's domain. The reference
/// keeps the low byte of a quant8 INT32 value (a signed quant8 one as an int8): of signed
/// quant8 the unsigned image pads with that byte shifted by 128, as its values are.
fn pad_v2(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Pad { before, after } = c.params else {
        return Err(mismatch(c));
    };
    let (b, a) = (axes(before), axes(after));
    let d = axes(c.dims(0)?);
    let signed = c.model.signed[c.op.inputs[0]];
    match (c.t(0)?.data, c.t(2)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataRef::F32(&[v]), DataMut::F32(y)) => nd::pad(x, &d, &b, &a, v, y),
        (DataRef::U8(x), DataRef::I32(&[v]), DataMut::U8(y)) => {
            let byte = v as u8 ^ if signed { 0x80 } else { 0 };
            nd::pad(x, &d, &b, &a, byte, y)
        }
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn tile(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Tile { multiples } = c.params else {
        return Err(mismatch(c));
    };
    let (m, d) = (axes(multiples), axes(c.dims(0)?));
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => blocks::tile(x, &d, &m, y),
        (DataRef::I32(x), DataMut::I32(y)) => blocks::tile(x, &d, &m, y),
        (DataRef::U8(x), DataMut::U8(y)) => blocks::tile(x, &d, &m, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn channel_shuffle(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::ChannelShuffle { groups, axis } = *c.params else {
        return Err(mismatch(c));
    };
    let (g, k, d) = (groups as usize, axis as usize, axes(c.dims(0)?));
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => blocks::channel_shuffle(x, &d, g, k, y),
        (DataRef::U8(x), DataMut::U8(y)) => blocks::channel_shuffle(x, &d, g, k, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

/// SPLIT: as many equal parts as outputs (shape inference made one output per part).
fn split(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Split { axis } = *c.params else {
        return Err(mismatch(c));
    };
    let (k, d) = (axis as usize, axes(c.dims(0)?));
    let total: usize = d.iter().product();
    if outs.is_empty()
        || d[k] % outs.len() != 0
        || outs
            .iter()
            .any(|o| o.dims.iter().map(|&x| x as usize).product::<usize>() * outs.len() != total)
    {
        return Err(mismatch(c));
    }
    match c.t(0)?.data {
        DataRef::F32(x) => {
            let mut parts = outs
                .iter_mut()
                .map(TensorMut::f32_mut)
                .collect::<HalResult<SmallVec<[_; 8]>>>()?;
            blocks::split(x, &d, k, &mut parts)
        }
        DataRef::I32(x) => {
            let mut parts = outs
                .iter_mut()
                .map(TensorMut::i32_mut)
                .collect::<HalResult<SmallVec<[_; 8]>>>()?;
            blocks::split(x, &d, k, &mut parts)
        }
        DataRef::U8(x) => {
            let mut parts = outs
                .iter_mut()
                .map(TensorMut::u8_mut)
                .collect::<HalResult<SmallVec<[_; 8]>>>()?;
            blocks::split(x, &d, k, &mut parts)
        }
        DataRef::I16(_) => return Err(mismatch(c)),
    }
    Ok(())
}

fn transpose(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Transpose { perm } = c.params else {
        return Err(mismatch(c));
    };
    let (p, d) = (axes(perm), axes(c.dims(0)?));
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::transpose(x, &d, &p, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::transpose(x, &d, &p, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn strided_slice(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::StridedSlice {
        begin,
        step,
        count,
        fault,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    if let Some(why) = fault {
        // The reference refuses these slices when it runs them (they are valid models).
        return Err(HalError::InvalidArgument(format!("STRIDED_SLICE: {why}")));
    }
    let (b, n, d) = (axes(begin), axes(count), axes(c.dims(0)?));
    let s: SmallVec<[isize; 4]> = step.iter().map(|&x| x as isize).collect();
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::strided_slice(x, &d, &b, &s, &n, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::strided_slice(x, &d, &b, &s, &n, y),
        (DataRef::I32(x), DataMut::I32(y)) => nd::strided_slice(x, &d, &b, &s, &n, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn space_to_batch(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::SpaceToBatch { block, pad } = *c.params else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let block = block.map(|b| b as usize);
    let pad = pad.map(|p| p as usize);
    let zero = c.out_q(0).zero_point.clamp(0, 255) as u8;
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::space_to_batch(x, s, block, pad, 0.0, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::space_to_batch(x, s, block, pad, zero, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn batch_to_space(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::BatchToSpace { block } = *c.params else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let block = block.map(|b| b as usize);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::batch_to_space(x, s, block, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::batch_to_space(x, s, block, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

/// RESHAPE keeps the bytes; the plan aliases its output to its input where it can, so this
/// copy only runs when it cannot (a constant input, or the dynamic path).
fn reshape(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    out0(outs)?.copy_from(c.t(0)?.data)
}

/// Shape lists inline: a CONCATENATION of up to 8 rank-4 inputs allocates nothing per run.
type Dims = SmallVec<[usize; 4]>;

fn concatenation(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Concat { axis } = c.params else {
        return Err(mismatch(c));
    };
    let n = c.op.inputs.len() - 1;
    let dims: SmallVec<[Dims; 8]> = (0..n)
        .map(|i| Ok(c.dims(i)?.iter().map(|&d| d as usize).collect()))
        .collect::<HalResult<_>>()?;
    let oq = c.out_q(0);
    let o = out0(outs)?;
    match &mut o.data {
        DataMut::U8(out) => {
            // Inputs in another quantization than the output's (NNAPI 1.2) are requantized
            // first.
            let requantized: SmallVec<[Option<Vec<u8>>; 8]> = (0..n)
                .map(|i| {
                    let q = c.q(i);
                    if (q.scale, q.zero_point) == (oq.scale, oq.zero_point) {
                        return Ok(None);
                    }
                    let x = c.u(i)?;
                    let mut y = vec![0; x.len()];
                    ew::requantize_u8(x, q, oq, &mut y);
                    Ok(Some(y))
                })
                .collect::<HalResult<_>>()?;
            let parts: SmallVec<[(&[u8], &[usize]); 8]> = (0..n)
                .map(|i| {
                    let data = match &requantized[i] {
                        Some(y) => y.as_slice(),
                        None => c.u(i)?,
                    };
                    Ok((data, dims[i].as_slice()))
                })
                .collect::<HalResult<_>>()?;
            transform::concatenation(&parts, *axis, out);
        }
        DataMut::F32(out) => {
            let parts: SmallVec<[(&[f32], &[usize]); 8]> = (0..n)
                .map(|i| Ok((c.f(i)?, dims[i].as_slice())))
                .collect::<HalResult<_>>()?;
            transform::concatenation(&parts, *axis, out);
        }
        DataMut::I32(_) | DataMut::I16(_) => return Err(mismatch(c)),
    }
    Ok(())
}

fn block_rearrange(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Block { block } = c.params else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let b = *block as usize;
    let d2s = c.op.ty == OperationType::DepthToSpace;
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(i), DataMut::F32(o)) if d2s => transform::depth_to_space(i, s, b, o),
        (DataRef::F32(i), DataMut::F32(o)) => transform::space_to_depth(i, s, b, o),
        (DataRef::U8(i), DataMut::U8(o)) if d2s => transform::depth_to_space(i, s, b, o),
        (DataRef::U8(i), DataMut::U8(o)) => transform::space_to_depth(i, s, b, o),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn resize_bilinear(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Resize {
        height,
        width,
        align_corners,
        half_pixel_centers,
    } = *c.params
    else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let mode = transform::ResizeMode {
        align_corners,
        half_pixel_centers,
    };
    let (h, w) = (height as usize, width as usize);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => transform::resize_bilinear(x, s, h, w, mode, y),
        (DataRef::U8(x), DataMut::U8(y)) => transform::resize_bilinear(x, s, h, w, mode, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn resize_nearest(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Resize {
        height,
        width,
        align_corners,
        half_pixel_centers,
    } = *c.params
    else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let mode = transform::ResizeMode {
        align_corners,
        half_pixel_centers,
    };
    let (h, w) = (height as usize, width as usize);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => nd::resize_nearest(x, s, h, w, mode, y),
        (DataRef::U8(x), DataMut::U8(y)) => nd::resize_nearest(x, s, h, w, mode, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
