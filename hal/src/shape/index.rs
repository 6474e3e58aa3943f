//! Signatures and shape rules of the indexing family (NeuralNetworks.h `OperationCode`):
//! NNAPI 1.2's GATHER (51) on float32, int32 and quant8, and NNAPI 1.3's FILL (100, float32
//! and int32 values) and RANK (101, any tensor the driver stores). Signed quant8 runs as its
//! unsigned image.

use super::{element_count, one, InferError, Inferred, Ins, Params, Res, MAX_MOVE_RANK};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Float32 as SF, Int32 as SI, TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant8Asymm as Q, TensorQuant8Symm as Q8S, TensorQuant8SymmPerChannel as QC,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Gather => {
            const S: &[Signature] = &[
                sig(&[F, SI, I], &[F]),
                sig(&[I, SI, I], &[I]),
                sig(&[Q, SI, I], &[Q]),
            ];
            S
        }
        Fill => {
            const S: &[Signature] = &[sig(&[I, SF], &[F]), sig(&[I, SI], &[I])];
            S
        }
        Rank => {
            const S: &[Signature] = &[
                sig(&[F], &[SI]),
                sig(&[I], &[SI]),
                sig(&[Q], &[SI]),
                sig(&[B8], &[SI]),
                sig(&[Q8S], &[SI]),
                sig(&[QC], &[SI]),
            ];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Gather => gather(ins),
        Fill => fill(ins),
        // An INT32 scalar, whatever the input.
        Rank => ins.dims(0).and_then(|_| one(vec![], Params::Plain)),
        _ => return None,
    })
}

/// GATHER: the input's axes before `axis`, then the indices' axes, then the input's after
/// `axis` (rank: input rank + indices rank − 1). Only the indices' shape is needed here;
/// their values are checked when the operation runs.
fn gather(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let rank = d.len() as i32;
    let a = ins.i32(1)?;
    check!(
        (-rank..rank).contains(&a),
        "axis {a} is outside [-{rank}, {rank})"
    );
    let axis = a.rem_euclid(rank) as usize;
    let idx = ins.dims(2)?;
    let mut out = d[..axis].to_vec();
    out.extend_from_slice(idx);
    out.extend_from_slice(&d[axis + 1..]);
    check!(
        out.len() <= MAX_MOVE_RANK,
        "the output would have rank {}, above {MAX_MOVE_RANK}",
        out.len()
    );
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Gather { axis: axis as u32 })
}

/// FILL: the output's dimensions are the values of input 0 (each at least 1).
fn fill(ins: &Ins) -> Res<Inferred> {
    let s = ins.dims_rank(0, 1, "dimensions")?;
    let b = ins.bytes(0)?;
    check!(
        b.len() == s[0] as usize * 4,
        "dimensions tensor has {} bytes for {} elements",
        b.len(),
        s[0]
    );
    let mut out = Vec::with_capacity(s[0] as usize);
    for (k, c) in b.chunks_exact(4).enumerate() {
        let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        check!(
            v > 0,
            "dimension {k} of the output is {v}, must be positive"
        );
        out.push(v as u32);
    }
    // The count is checked before any buffer of that size exists.
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Plain)
}

#[cfg(test)]
mod tests {
    use super::super::{infer, Arg, InferError, Params};
    use crate::types::OperandType::{self, *};
    use crate::types::OperationType::{Fill, Gather, Rank};

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

    #[test]
    fn gather_output_takes_the_indices_axes_in_place_of_the_axis() {
        let d = [2u32, 3, 4];
        for (axis, want_axis, want) in [
            (0, 0, vec![5, 2, 3, 4]),
            (1, 1, vec![2, 5, 2, 4]),
            (-1, 2, vec![2, 3, 5, 2]),
            (-3, 0, vec![5, 2, 3, 4]),
        ] {
            let a = bytes(&[axis]);
            let r = infer(
                Gather,
                &[
                    arg(TensorFloat32, &d, None),
                    arg(Int32, &[], Some(&a)),
                    // Index values are not needed for the shape.
                    arg(TensorInt32, &[5, 2], None),
                ],
            )
            .unwrap();
            assert_eq!(r.outputs, vec![want], "axis {axis}");
            assert_eq!(r.params, Params::Gather { axis: want_axis });
        }
        for axis in [3, -4] {
            let a = bytes(&[axis]);
            let r = infer(
                Gather,
                &[
                    arg(TensorFloat32, &d, None),
                    arg(Int32, &[], Some(&a)),
                    arg(TensorInt32, &[1], None),
                ],
            );
            assert!(matches!(r, Err(InferError::Invalid(_))), "axis {axis}");
        }
    }

    #[test]
    fn fill_takes_its_shape_from_the_values_of_input_0() {
        let v = 1.5f32.to_le_bytes();
        let run = |dims: &[i32]| {
            let b = bytes(dims);
            let n = [dims.len() as u32];
            infer(
                Fill,
                &[arg(TensorInt32, &n, Some(&b)), arg(Float32, &[], Some(&v))],
            )
        };
        assert_eq!(run(&[2, 3, 1]).unwrap().outputs, vec![vec![2, 3, 1]]);
        for bad in [&[0, 2][..], &[-1], &[1 << 16, 1 << 16]] {
            assert!(matches!(run(bad), Err(InferError::Invalid(_))), "{bad:?}");
        }
        // Unknown until the dimensions' values are.
        let n = [2u32];
        assert_eq!(
            infer(
                Fill,
                &[arg(TensorInt32, &n, None), arg(Float32, &[], Some(&v))]
            ),
            Err(InferError::Unknown)
        );
    }

    #[test]
    fn rank_is_a_scalar() {
        let r = infer(Rank, &[arg(TensorQuant8Asymm, &[1, 2, 3], None)]).unwrap();
        assert_eq!(r.outputs, vec![Vec::<u32>::new()]);
    }
}
