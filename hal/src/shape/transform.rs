//! Signatures and shape rules of the data-movement family (types.hal 1.0 `OperationType`):
//! CONCATENATION (2), DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and
//! SPACE_TO_DEPTH (26), with NNAPI 1.2's optional NCHW `layout` and RESIZE_BILINEAR's later
//! forms (scales, NNAPI 1.3's `align_corners` / `half_pixel_centers`).

use super::{
    element_count, mul, one, rank_at_most, InferError, Inferred, Ins, Params, Res, MAX_ELEMENTS,
};
use crate::ops::{sig, Arity, Signature};
use crate::types::{OperandType, OperationType};

use crate::types::OperandType::{
    Bool as B, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I,
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
        Reshape => {
            const S: &[Signature] = &[sig(&[F, I], &[F]), sig(&[Q, I], &[Q])];
            S
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
        ResizeBilinear => resize_bilinear(ins),
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
