//! Signatures and shape rules of the data-movement family (types.hal 1.0 `OperationType`):
//! CONCATENATION (2), DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and
//! SPACE_TO_DEPTH (26), with NNAPI 1.2's optional NCHW `layout` and RESIZE_BILINEAR's later
//! forms (scales, NNAPI 1.3's `align_corners` / `half_pixel_centers`); and NNAPI 1.1's
//! (NeuralNetworks.h `OperationCode`) BATCH_TO_SPACE_ND (29) and SPACE_TO_BATCH_ND (33) with
//! NNAPI 1.2's `layout`, PAD (32), SQUEEZE (34), STRIDED_SLICE (35) and TRANSPOSE (37); and
//! NNAPI 1.2's RESIZE_NEAREST_NEIGHBOR (94), whose `layout` is required and whose forms and
//! output extents are RESIZE_BILINEAR's.
//! NNAPI 1.2's CHANNEL_SHUFFLE (46), EXPAND_DIMS (50), PAD_V2 (69), SLICE (86), SPLIT (87) and
//! TILE (89), on float32, int32 (not PAD_V2 and CHANNEL_SHUFFLE, which the specification
//! gives no int32 form) and quant8; signed quant8 runs as its unsigned image.

use super::{
    element_count, i32_list, mul, one, rank_at_most, InferError, Inferred, Ins, Params, Res,
    MAX_ELEMENTS, MAX_MOVE_RANK,
};
use crate::ops::{sig, Arity, Signature};
use crate::types::{OperandType, OperationType};

use crate::types::OperandType::{
    Bool as B, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorInt32 as TI,
    TensorQuant8Asymm as Q,
};

const BLOCK: &[Signature] = &[
    sig(&[F, SI], &[F]),
    sig(&[Q, SI], &[Q]),
    sig(&[F, SI, B], &[F]),
    sig(&[Q, SI, B], &[Q]),
];

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Concatenation => return Some(Arity::Concatenation(&[F, Q])),
        DepthToSpace | SpaceToDepth => BLOCK,
        Reshape | Pad | Squeeze | Transpose => {
            const S: &[Signature] = &[sig(&[F, I], &[F]), sig(&[Q, I], &[Q])];
            S
        }
        BatchToSpaceNd => {
            const S: &[Signature] = &[
                sig(&[F, I], &[F]),
                sig(&[Q, I], &[Q]),
                sig(&[F, I, B], &[F]),
                sig(&[Q, I, B], &[Q]),
            ];
            S
        }
        SpaceToBatchNd => {
            const S: &[Signature] = &[
                sig(&[F, I, I], &[F]),
                sig(&[Q, I, I], &[Q]),
                sig(&[F, I, I, B], &[F]),
                sig(&[Q, I, I, B], &[Q]),
            ];
            S
        }
        StridedSlice => {
            const S: &[Signature] = &[
                sig(&[F, I, I, I, SI, SI, SI], &[F]),
                sig(&[Q, I, I, I, SI, SI, SI], &[Q]),
            ];
            S
        }
        PadV2 => {
            // The pad value is a scalar of the input's domain: FLOAT32, or INT32 for quant8.
            const S: &[Signature] = &[sig(&[F, I, SF], &[F]), sig(&[Q, I, SI], &[Q])];
            S
        }
        ExpandDims => {
            const S: &[Signature] = &[
                sig(&[F, SI], &[F]),
                sig(&[I, SI], &[I]),
                sig(&[Q, SI], &[Q]),
            ];
            S
        }
        Tile | Slice => {
            const S: &[Signature] = &[sig(&[F, I], &[F]), sig(&[I, I], &[I]), sig(&[Q, I], &[Q])];
            const SLICE: &[Signature] = &[
                sig(&[F, I, I], &[F]),
                sig(&[TI, I, I], &[TI]),
                sig(&[Q, I, I], &[Q]),
            ];
            if op == Slice {
                SLICE
            } else {
                S
            }
        }
        ChannelShuffle => {
            const S: &[Signature] = &[sig(&[F, SI, SI], &[F]), sig(&[Q, SI, SI], &[Q])];
            S
        }
        // Every output of SPLIT has the input's type; the signature names it once.
        Split => {
            const S: &[Signature] = &[
                sig(&[F, SI, SI], &[F]),
                sig(&[I, SI, SI], &[I]),
                sig(&[Q, SI, SI], &[Q]),
            ];
            return Some(Arity::RepeatOutputs(S));
        }
        ResizeBilinear => {
            // Later forms: uint8, FLOAT32 scales instead of sizes, and after the layout the
            // NNAPI 1.3 `align_corners` / `half_pixel_centers` flags.
            const S: &[Signature] = &[
                sig(&[F, SI, SI], &[F]),
                sig(&[F, SI, SI, B], &[F]),
                sig(&[F, SI, SI, B, B, B], &[F]),
                sig(&[F, SF, SF], &[F]),
                sig(&[F, SF, SF, B], &[F]),
                sig(&[F, SF, SF, B, B, B], &[F]),
                sig(&[Q, SI, SI], &[Q]),
                sig(&[Q, SI, SI, B], &[Q]),
                sig(&[Q, SI, SI, B, B, B], &[Q]),
                sig(&[Q, SF, SF], &[Q]),
                sig(&[Q, SF, SF, B], &[Q]),
                sig(&[Q, SF, SF, B, B, B], &[Q]),
            ];
            S
        }
        ResizeNearestNeighbor => {
            // The layout is required; NNAPI 1.3 adds align_corners and half_pixel_centers.
            const S: &[Signature] = &[
                sig(&[F, SI, SI, B], &[F]),
                sig(&[F, SI, SI, B, B], &[F]),
                sig(&[F, SI, SI, B, B, B], &[F]),
                sig(&[F, SF, SF, B], &[F]),
                sig(&[F, SF, SF, B, B], &[F]),
                sig(&[F, SF, SF, B, B, B], &[F]),
                sig(&[Q, SI, SI, B], &[Q]),
                sig(&[Q, SI, SI, B, B], &[Q]),
                sig(&[Q, SI, SI, B, B, B], &[Q]),
                sig(&[Q, SF, SF, B], &[Q]),
                sig(&[Q, SF, SF, B, B], &[Q]),
                sig(&[Q, SF, SF, B, B, B], &[Q]),
            ];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters (of the NHWC form), for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Concatenation => concatenation(ins),
        DepthToSpace | SpaceToDepth => block(op, ins),
        Reshape => reshape(ins),
        ResizeBilinear | ResizeNearestNeighbor => resize_bilinear(ins),
        Pad => pad(ins),
        Squeeze => squeeze(ins),
        Transpose => transpose(ins),
        StridedSlice => strided_slice(ins),
        SpaceToBatchNd => space_to_batch(ins),
        BatchToSpaceNd => batch_to_space(ins),
        PadV2 => pad(ins),
        ExpandDims => expand_dims(ins),
        Tile => tile(ins),
        ChannelShuffle => channel_shuffle(ins),
        Slice => slice(ins),
        Split => split(ins),
        _ => return None,
    })
}

fn concatenation(ins: &Ins) -> Res<Inferred> {
    let n = ins.args.len() - 1;
    check!(n >= 1, "CONCATENATION needs at least one tensor");
    let first = ins.dims(0)?;
    rank_at_most(first, 4, "input 0")?;
    let axis = ins.i32(n)?;
    check!(
        axis >= 0 && (axis as usize) < first.len(),
        "axis {axis} is outside 0..{}",
        first.len()
    );
    let axis = axis as usize;
    let mut out = first.to_vec();
    for i in 1..n {
        let d = ins.dims(i)?;
        check!(
            d.len() == first.len(),
            "input {i} has rank {}, input 0 has {}",
            d.len(),
            first.len()
        );
        for (k, (&x, &y)) in d.iter().zip(first).enumerate() {
            check!(
                k == axis || x == y,
                "input {i} differs from input 0 at dimension {k}: {x} vs {y}"
            );
        }
        out[axis] = out[axis]
            .checked_add(d[axis])
            .filter(|&v| u64::from(v) <= MAX_ELEMENTS)
            .ok_or_else(|| InferError::Invalid("concatenated extent overflows".into()))?;
    }
    one(out, Params::Concat { axis })
}

fn block(op: OperationType, ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let block = ins.positive(1, "block size")?;
    let bb = mul(block, block)?;
    let out = if op == OperationType::DepthToSpace {
        check!(
            d[3] % bb == 0,
            "depth {} is not divisible by block² {bb}",
            d[3]
        );
        vec![d[0], mul(d[1], block)?, mul(d[2], block)?, d[3] / bb]
    } else {
        check!(
            d[1] % block == 0 && d[2] % block == 0,
            "height {} and width {} must be divisible by the block size {block}",
            d[1],
            d[2]
        );
        vec![d[0], d[1] / block, d[2] / block, mul(d[3], bb)?]
    };
    one(out, Params::Block { block })
}

fn reshape(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let s = ins.dims_rank(1, 1, "shape")?;
    let bytes = ins.bytes(1)?;
    check!(
        bytes.len() == s[0] as usize * 4,
        "shape tensor has {} bytes",
        bytes.len()
    );
    let total = element_count(d).map_err(InferError::Invalid)?;
    let mut out = Vec::with_capacity(s[0] as usize);
    let mut unknown = None;
    let mut known: u64 = 1;
    for (i, c) in bytes.chunks_exact(4).enumerate() {
        let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if v == -1 {
            check!(unknown.is_none(), "shape has more than one -1");
            unknown = Some(i);
            out.push(1);
        } else {
            check!(v > 0, "shape entry {i} is {v}");
            known = known.saturating_mul(v as u64);
            out.push(v as u32);
        }
    }
    if let Some(i) = unknown {
        check!(total % known == 0, "cannot reshape {d:?} to {out:?}");
        out[i] = (total / known) as u32;
    } else {
        check!(known == total, "cannot reshape {total} elements to {out:?}");
    }
    one(out, Params::Plain)
}

fn resize_bilinear(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let (width, height) = if ins.get(1)?.ty == OperandType::Float32 {
        // NNAPI 1.2: scales; the output extent is the input's times the scale, floored.
        let scaled = |i: usize, extent: u32, what: &str| -> Res<u32> {
            let s = ins.f32(i)?;
            let v = (extent as f32 * s).floor();
            check!(
                s > 0.0 && v >= 1.0 && v <= MAX_ELEMENTS as f32,
                "{what} scale {s} (input {i}) gives no valid output extent"
            );
            Ok(v as u32)
        };
        (scaled(1, d[2], "width")?, scaled(2, d[1], "height")?)
    } else {
        (
            ins.positive(1, "output width")?,
            ins.positive(2, "output height")?,
        )
    };
    let flag = |i: usize| -> Res<bool> {
        if !ins.present(i) {
            return Ok(false);
        }
        let b = ins.bytes(i)?;
        check!(b.len() == 1, "BOOL input {i} has {} bytes", b.len());
        Ok(b[0] != 0)
    };
    let (align_corners, half_pixel_centers) = (flag(3)?, flag(4)?);
    check!(
        !(align_corners && half_pixel_centers),
        "align_corners and half_pixel_centers cannot both be true"
    );
    let out = vec![d[0], height, width, d[3]];
    element_count(&out).map_err(InferError::Invalid)?;
    one(
        out,
        Params::Resize {
            height,
            width,
            align_corners,
            half_pixel_centers,
        },
    )
}

fn pad(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let p = ins.dims_rank(1, 2, "paddings")?;
    check!(
        p[0] as usize == d.len() && p[1] == 2,
        "paddings must have shape [{}, 2], has {p:?}",
        d.len()
    );
    let v = i32_list_2d(ins, 1, d.len() * 2, "paddings")?;
    let (mut before, mut after, mut out) = (vec![], vec![], vec![]);
    for (k, (&x, pair)) in d.iter().zip(v.chunks_exact(2)).enumerate() {
        check!(
            pair[0] >= 0 && pair[1] >= 0,
            "paddings of axis {k} must not be negative, are {pair:?}"
        );
        let (b, a) = (pair[0] as u32, pair[1] as u32);
        let extent = u64::from(x) + u64::from(b) + u64::from(a);
        check!(
            extent <= MAX_ELEMENTS,
            "padded extent {extent} of axis {k} is too large"
        );
        before.push(b);
        after.push(a);
        out.push(extent as u32);
    }
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Pad { before, after })
}

/// The values of a TENSOR_INT32 input of any rank whose shape the caller checked, `len`
/// elements.
fn i32_list_2d(ins: &Ins, i: usize, len: usize, what: &str) -> Res<Vec<i32>> {
    let b = ins.bytes(i)?;
    check!(
        b.len() == len * 4,
        "{what} (input {i}) has {} bytes for {len} elements",
        b.len()
    );
    Ok(b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn squeeze(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let rank = d.len() as i32;
    let squeezed: Vec<bool> = if ins.present(1) {
        let mut s = vec![false; d.len()];
        for (k, &a) in i32_list(ins, 1, None, "squeeze dimensions")?
            .iter()
            .enumerate()
        {
            check!(
                (-rank..rank).contains(&a),
                "squeeze dimension {a} (entry {k}) is outside -{rank}..{rank}"
            );
            let a = a.rem_euclid(rank) as usize;
            check!(
                d[a] == 1,
                "dimension {a} has extent {}, only extent 1 can be squeezed",
                d[a]
            );
            s[a] = true;
        }
        s
    } else {
        d.iter().map(|&x| x == 1).collect()
    };
    let mut out: Vec<u32> = d
        .iter()
        .zip(&squeezed)
        .filter(|(_, &s)| !s)
        .map(|(&x, _)| x)
        .collect();
    if out.is_empty() {
        out.push(1);
    }
    one(out, Params::Plain)
}

fn transpose(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let perm: Vec<u32> = if ins.present(1) {
        let p = i32_list(ins, 1, Some(d.len()), "permutation")?;
        let mut seen = vec![false; d.len()];
        for (k, &a) in p.iter().enumerate() {
            check!(
                a >= 0 && (a as usize) < d.len() && !seen[a as usize],
                "permutation entry {k} ({a}) is outside 0..{} or repeated",
                d.len()
            );
            seen[a as usize] = true;
        }
        p.iter().map(|&a| a as u32).collect()
    } else {
        // The reference reverses the axes of a matrix when the permutation is omitted.
        check!(
            d.len() == 2,
            "without a permutation the input must have rank 2, has {}",
            d.len()
        );
        vec![1, 0]
    };
    let out = perm.iter().map(|&a| d[a as usize]).collect();
    one(out, Params::Transpose { perm })
}

/// The reference's clamping of a STRIDED_SLICE bound into `0..=dim` (positive stride) or
/// `-1..dim` (negative stride), negative indices counting from the end.
fn clamped_index(index: i32, dim: i32, positive: bool) -> i32 {
    let rem = |x: i32| (x % dim + dim) % dim;
    if positive {
        if index >= dim {
            dim
        } else {
            rem(index.clamp(-dim, dim))
        }
    } else if index < -dim {
        -1
    } else {
        rem(index.clamp(-dim, dim - 1))
    }
}

fn strided_slice(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let n = d.len();
    let begin = i32_list(ins, 1, Some(n), "begin")?;
    let end = i32_list(ins, 2, Some(n), "end")?;
    let strides = i32_list(ins, 3, Some(n), "strides")?;
    let (begin_mask, end_mask, shrink_mask) = (ins.i32(4)?, ins.i32(5)?, ins.i32(6)?);
    let (mut first, mut count, mut out) = (vec![], vec![], vec![]);
    let mut fault = None;
    for k in 0..n {
        let dim = d[k] as i32;
        let s = strides[k];
        check!(s != 0, "stride of axis {k} is 0");
        let positive = s > 0;
        let bit = |mask: i32| mask & (1 << k) != 0;
        let b = match (bit(begin_mask), positive) {
            (true, true) => 0,
            (true, false) => dim - 1,
            (false, _) => clamped_index(begin[k], dim, positive),
        };
        let e = match (bit(end_mask), positive) {
            (true, true) => dim,
            (true, false) => -1,
            (false, _) => clamped_index(end[k], dim, positive),
        };
        // ceil((e − b) / s), at least 0; |e − b| ≤ dim + 1, so nothing overflows.
        let (num, den) = (i64::from(e - b), i64::from(s));
        let c = if (num > 0) == (den > 0) && num != 0 {
            (num.abs() + den.abs() - 1) / den.abs()
        } else {
            0
        };
        if bit(shrink_mask) {
            if !positive || c != 1 {
                fault.get_or_insert_with(|| {
                    format!("axis {k} is shrunk but takes {c} elements with stride {s}")
                });
            }
            // A shrunk axis takes its one element (a faulty one never runs).
            count.push(1);
        } else {
            check!(c > 0, "axis {k} takes no element");
            count.push(c as u32);
            out.push(c as u32);
        }
        // b is a valid index whenever the axis takes an element.
        first.push(b.clamp(0, dim - 1) as u32);
    }
    if out.is_empty() {
        out.push(1);
    }
    one(
        out,
        Params::StridedSlice {
            begin: first,
            step: strides,
            count,
            fault,
        },
    )
}

/// The block sizes of input `i`: two positive values (height, width).
fn block_shape(ins: &Ins, i: usize) -> Res<[u32; 2]> {
    let b = i32_list(ins, i, Some(2), "block shape")?;
    check!(
        b[0] > 0 && b[1] > 0,
        "block sizes must be positive, are {b:?}"
    );
    Ok([b[0] as u32, b[1] as u32])
}

fn space_to_batch(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let block = block_shape(ins, 1)?;
    let p = ins.dims_rank(2, 2, "paddings")?;
    check!(p == [2, 2], "paddings must have shape [2, 2], has {p:?}");
    let v = i32_list_2d(ins, 2, 4, "paddings")?;
    check!(
        v.iter().all(|&x| x >= 0),
        "paddings must not be negative, are {v:?}"
    );
    let pad = [v[0] as u32, v[1] as u32, v[2] as u32, v[3] as u32];
    let padded = |x: u32, a: u32, b: u32| -> Res<u64> {
        let t = u64::from(x) + u64::from(a) + u64::from(b);
        check!(t <= MAX_ELEMENTS, "padded extent {t} is too large");
        Ok(t)
    };
    let (h, w) = (padded(d[1], pad[0], pad[1])?, padded(d[2], pad[2], pad[3])?);
    check!(
        h % u64::from(block[0]) == 0 && w % u64::from(block[1]) == 0,
        "padded height {h} and width {w} must be multiples of the block {block:?}"
    );
    let out = vec![
        mul(d[0], mul(block[0], block[1])?)?,
        (h / u64::from(block[0])) as u32,
        (w / u64::from(block[1])) as u32,
        d[3],
    ];
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::SpaceToBatch { block, pad })
}

fn batch_to_space(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let block = block_shape(ins, 1)?;
    let bb = mul(block[0], block[1])?;
    check!(
        d[0] % bb == 0,
        "batch {} must be a multiple of the block product {bb}",
        d[0]
    );
    let out = vec![d[0] / bb, mul(d[1], block[0])?, mul(d[2], block[1])?, d[3]];
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::BatchToSpace { block })
}

/// An axis input `i` of a tensor of rank `rank`, in `-rank..rank` (negative counting from the
/// end), as an index.
fn axis(ins: &Ins, i: usize, rank: usize) -> Res<usize> {
    let a = ins.i32(i)?;
    let r = rank as i32;
    check!(
        (-r..r).contains(&a),
        "axis {a} (input {i}) is outside [-{r}, {r})"
    );
    Ok(a.rem_euclid(r) as usize)
}

/// EXPAND_DIMS: an axis of extent 1 inserted at `axis` in `-rank-1..=rank`.
fn expand_dims(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let a = ins.i32(1)?;
    let r = d.len() as i32;
    check!(
        (-r - 1..=r).contains(&a),
        "axis {a} is outside [-{}, {r}]",
        r + 1
    );
    let at = if a < 0 { a + r + 1 } else { a } as usize;
    let mut out = d.to_vec();
    out.insert(at, 1);
    one(out, Params::Plain)
}

/// TILE: axis `k` repeated `multiples[k]` times (each at least 1).
fn tile(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, MAX_MOVE_RANK, "input")?;
    let m = i32_list(ins, 1, Some(d.len()), "multiples")?;
    let mut out = Vec::with_capacity(d.len());
    for (k, (&x, &times)) in d.iter().zip(&m).enumerate() {
        check!(
            times > 0,
            "multiple of axis {k} must be positive, is {times}"
        );
        out.push(mul(x, times as u32)?);
    }
    element_count(&out).map_err(InferError::Invalid)?;
    one(
        out,
        Params::Tile {
            multiples: m.iter().map(|&x| x as u32).collect(),
        },
    )
}

/// CHANNEL_SHUFFLE: `groups` (positive, dividing the axis' extent) along `axis`.
fn channel_shuffle(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let groups = ins.positive(1, "number of groups")?;
    let axis = axis(ins, 2, d.len())?;
    check!(
        d[axis] % groups == 0,
        "extent {} of axis {axis} is not divisible by {groups} groups",
        d[axis]
    );
    one(
        d.to_vec(),
        Params::ChannelShuffle {
            groups,
            axis: axis as u32,
        },
    )
}

/// SLICE: per axis `size[k]` elements from `begin[k]`; a size of −1 takes the rest of the
/// axis. The slice must lie inside the input and take at least one element per axis.
fn slice(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, MAX_MOVE_RANK, "input")?;
    let n = d.len();
    let begin = i32_list(ins, 1, Some(n), "begin")?;
    let size = i32_list(ins, 2, Some(n), "size")?;
    let (mut first, mut count) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for k in 0..n {
        let (dim, b, s) = (i64::from(d[k]), i64::from(begin[k]), i64::from(size[k]));
        check!(
            (0..dim).contains(&b),
            "begin {b} of axis {k} is outside 0..{dim}"
        );
        let s = if s == -1 { dim - b } else { s };
        check!(
            s >= 1 && b + s <= dim,
            "size {} of axis {k} from {b} does not fit the extent {dim}",
            size[k]
        );
        first.push(b as u32);
        count.push(s as u32);
    }
    one(
        count.clone(),
        Params::StridedSlice {
            begin: first,
            step: vec![1; n],
            count,
            fault: None,
        },
    )
}

/// SPLIT: `num_splits` equal parts along `axis`, one output each.
fn split(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let axis = axis(ins, 1, d.len())?;
    let parts = ins.positive(2, "number of splits")?;
    check!(
        d[axis] % parts == 0,
        "extent {} of axis {axis} is not divisible into {parts} equal parts",
        d[axis]
    );
    let mut part = d.to_vec();
    part[axis] /= parts;
    Ok(Inferred {
        outputs: vec![part; parts as usize],
        params: Params::Split { axis: axis as u32 },
    })
}

#[cfg(test)]
mod tests {
    use super::super::{infer, Arg, InferError, Params};
    use crate::types::OperandType::{self, *};
    use crate::types::OperationType::{self as Op, *};

    fn arg<'a>(ty: OperandType, dims: &'a [u32], value: Option<&'a [u8]>) -> Option<Arg<'a>> {
        Some(Arg {
            ty,
            dims,
            scale: 0.0,
            zero_point: 0,
            value,
        })
    }

    fn bytes(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Infers `op` on a float32 input of dimensions `d` and INT32 scalars `scalars`.
    fn with_scalars(op: Op, d: &[u32], scalars: &[i32]) -> Result<Vec<Vec<u32>>, InferError> {
        let b: Vec<Vec<u8>> = scalars.iter().map(|&s| bytes(&[s])).collect();
        let mut args = vec![arg(TensorFloat32, d, None)];
        args.extend(b.iter().map(|v| arg(Int32, &[], Some(v))));
        infer(op, &args).map(|r| r.outputs)
    }

    #[test]
    fn expand_dims_takes_axes_from_minus_rank_minus_one_to_rank() {
        let d = [2u32, 3];
        for (axis, want) in [
            (0, vec![1, 2, 3]),
            (2, vec![2, 3, 1]),
            (-1, vec![2, 3, 1]),
            (-3, vec![1, 2, 3]),
        ] {
            assert_eq!(with_scalars(ExpandDims, &d, &[axis]).unwrap(), vec![want]);
        }
        for axis in [3, -4] {
            assert!(with_scalars(ExpandDims, &d, &[axis]).is_err(), "{axis}");
        }
    }

    #[test]
    fn split_makes_equal_parts_along_a_possibly_negative_axis() {
        let d = [2u32, 6];
        assert_eq!(
            with_scalars(Split, &d, &[-1, 3]).unwrap(),
            vec![vec![2, 2]; 3]
        );
        assert_eq!(
            with_scalars(Split, &d, &[0, 2]).unwrap(),
            vec![vec![1, 6]; 2]
        );
        for (axis, parts) in [(1, 4), (2, 1), (-3, 1), (0, 0), (0, -1)] {
            assert!(with_scalars(Split, &d, &[axis, parts]).is_err());
        }
    }

    #[test]
    fn channel_shuffle_needs_groups_dividing_the_axis() {
        let d = [1u32, 2, 6];
        let r = infer(
            ChannelShuffle,
            &[
                arg(TensorFloat32, &d, None),
                arg(Int32, &[], Some(&bytes(&[3]))),
                arg(Int32, &[], Some(&bytes(&[-1]))),
            ],
        )
        .unwrap();
        assert_eq!(r.outputs, vec![d.to_vec()]);
        assert_eq!(r.params, Params::ChannelShuffle { groups: 3, axis: 2 });
        for (groups, axis) in [(4, 2), (0, 2), (3, 3), (2, -4)] {
            assert!(with_scalars(ChannelShuffle, &d, &[groups, axis]).is_err());
        }
    }

    fn slice(d: &[u32], begin: &[i32], size: &[i32]) -> Result<(Vec<u32>, Params), InferError> {
        let (b, s) = (bytes(begin), bytes(size));
        let n = [d.len() as u32];
        infer(
            Slice,
            &[
                arg(TensorFloat32, d, None),
                arg(TensorInt32, &n, Some(&b)),
                arg(TensorInt32, &n, Some(&s)),
            ],
        )
        .map(|r| (r.outputs[0].clone(), r.params))
    }

    #[test]
    fn slice_size_minus_one_runs_to_the_end_and_the_slice_must_fit() {
        let d = [3u32, 4];
        let (out, p) = slice(&d, &[1, 1], &[-1, 2]).unwrap();
        assert_eq!(out, vec![2, 2]);
        assert_eq!(
            p,
            Params::StridedSlice {
                begin: vec![1, 1],
                step: vec![1, 1],
                count: vec![2, 2],
                fault: None
            }
        );
        assert_eq!(slice(&d, &[2, 3], &[1, 1]).unwrap().0, vec![1, 1]);
        for (b, s) in [
            ([2, 0], [2, 1]),
            ([3, 0], [-1, 1]),
            ([-1, 0], [1, 1]),
            ([0, 0], [0, 1]),
            ([0, 0], [1, -2]),
        ] {
            assert!(
                matches!(slice(&d, &b, &s), Err(InferError::Invalid(_))),
                "{b:?} {s:?}"
            );
        }
    }

    #[test]
    fn tile_multiplies_each_extent_and_refuses_overflow() {
        let run = |d: &[u32], m: &[i32]| {
            let b = bytes(m);
            let n = [m.len() as u32];
            infer(
                Tile,
                &[arg(TensorFloat32, d, None), arg(TensorInt32, &n, Some(&b))],
            )
        };
        let r = run(&[2, 3], &[3, 1]).unwrap();
        assert_eq!(r.outputs, vec![vec![6, 3]]);
        assert_eq!(
            r.params,
            Params::Tile {
                multiples: vec![3, 1]
            }
        );
        for bad in [&[0, 1][..], &[1, -2], &[1 << 30, 4], &[1]] {
            assert!(
                matches!(run(&[2, 3], bad), Err(InferError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn pad_v2_shapes_as_pad() {
        let p = bytes(&[1, 0, 2, 3]);
        let v = 0.5f32.to_le_bytes();
        let r = infer(
            PadV2,
            &[
                arg(TensorFloat32, &[2, 2], None),
                arg(TensorInt32, &[2, 2], Some(&p)),
                arg(Float32, &[], Some(&v)),
            ],
        )
        .unwrap();
        assert_eq!(r.outputs, vec![vec![3, 7]]);
    }
}
