//! NNAPI 1.2's BOOL `layout` input on the image operations (CONV_2D, DEPTHWISE_CONV_2D, the
//! pools, DEPTH_TO_SPACE, SPACE_TO_DEPTH, RESIZE_BILINEAR): an NCHW model fed the transpose of
//! an NHWC model's input must give the transpose of its output, bit for bit (the same NHWC
//! kernels run between the transposes), on the static arena path and on the per-execution
//! path (unspecified output dimensions); `layout` false is the NHWC operation.

use nnhal::hal::memory::{create_memfd, MappedPool, Memory};
use nnhal::hal::OperandLifeTime::*;
use nnhal::hal::OperandType::*;
use nnhal::hal::*;
use nnhal::Driver;

/// A constant input of the operation: type, dimensions, little-endian bytes.
struct Const(OperandType, Vec<u32>, Vec<u8>);

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn scalars(v: &[i32]) -> Vec<Const> {
    v.iter()
        .map(|&x| Const(Int32, vec![], i32s(&[x])))
        .collect()
}

/// One operation: input 0 a model input of `ty`, then `consts`, then (when `layout` is
/// given) the BOOL layout; one output of `ty`, declared `out_dims`.
fn model(
    op: OperationType,
    ty: OperandType,
    in_dims: &[u32],
    consts: &[Const],
    layout: Option<bool>,
    out_dims: &[u32],
    out_scale: f32,
) -> Model {
    let quant = |mut o: Operand, ty: OperandType, scale: f32| {
        match ty {
            TensorQuant8Asymm => {
                o.scale = scale;
                o.zero_point = 3;
            }
            TensorInt32 => o.scale = 0.25,
            _ => {}
        }
        o
    };
    let mut m = Model::default();
    m.operands
        .push(quant(Operand::new(ty, in_dims, ModelInput), ty, 0.5));
    let mut with_layout: Vec<Const> = consts
        .iter()
        .map(|c| Const(c.0, c.1.clone(), c.2.clone()))
        .collect();
    if let Some(nchw) = layout {
        with_layout.push(Const(Bool, vec![], vec![nchw as u8]));
    }
    for c in &with_layout {
        while !m.operand_values.len().is_multiple_of(4) {
            m.operand_values.push(0);
        }
        let mut o = quant(Operand::new(c.0, &c.1, ConstantCopy), c.0, 0.5);
        o.location = DataLocation {
            pool_index: 0,
            offset: m.operand_values.len() as u32,
            length: c.2.len() as u32,
        };
        m.operand_values.extend_from_slice(&c.2);
        m.operands.push(o);
    }
    let n = m.operands.len() as u32;
    for o in &mut m.operands {
        o.number_of_consumers = 1;
    }
    m.operands.push(quant(
        Operand::new(ty, out_dims, ModelOutput),
        ty,
        out_scale,
    ));
    m.operations = vec![Operation {
        operation_type: op.raw(),
        inputs: (0..n).collect(),
        outputs: vec![n],
    }];
    m.input_indexes = vec![0];
    m.output_indexes = vec![n];
    m
}

/// Prepares and runs `m` on `input` (little-endian bytes); returns the output bytes and shape.
fn run(m: Model, input: &[u8], in_dims: &[u32], out_bytes: usize) -> (Vec<u8>, Vec<u32>) {
    let driver = Driver::new(1).unwrap();
    assert!(driver.supported_operations(&m).unwrap()[0], "supported");
    let prepared = driver.prepare_model(m).unwrap();
    let pool_in = Memory::shared(
        create_memfd("in", input, input.len() as u64, true).unwrap(),
        input.len() as u64,
    );
    let pool_out = Memory::shared(
        create_memfd("out", &[], out_bytes as u64, false).unwrap(),
        out_bytes as u64,
    );
    let arg = |pool, length: usize, dims: &[u32]| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index: pool,
            offset: 0,
            length: length as u32,
        },
        dimensions: dims.to_vec(),
    };
    let request = Request {
        inputs: vec![arg(0, input.len(), in_dims)],
        outputs: vec![arg(1, out_bytes, &[])],
        pools: vec![pool_in, pool_out.clone()],
    };
    let result = prepared.execute(&request).unwrap();
    let out = MappedPool::map(&pool_out, "out")
        .unwrap()
        .read_vec(0, out_bytes)
        .unwrap();
    (out, result.output_shapes[0].clone())
}

/// `[n, h, w, c]` element-sized chunks of `bytes` rearranged to `[n, c, h, w]` (or back when
/// `to_nhwc`).
fn transpose(bytes: &[u8], nhwc: [u32; 4], size: usize, to_nhwc: bool) -> Vec<u8> {
    let [n, h, w, c] = nhwc.map(|d| d as usize);
    let mut out = vec![0; bytes.len()];
    for b in 0..n {
        for y in 0..h {
            for x in 0..w {
                for k in 0..c {
                    let i = ((b * h + y) * w + x) * c + k;
                    let j = ((b * c + k) * h + y) * w + x;
                    let (from, to) = if to_nhwc { (j, i) } else { (i, j) };
                    out[to * size..][..size].copy_from_slice(&bytes[from * size..][..size]);
                }
            }
        }
    }
    out
}

fn nchw(d: [u32; 4]) -> Vec<u32> {
    vec![d[0], d[3], d[1], d[2]]
}

/// Runs `op` as NHWC without the flag, NHWC with `layout` false and NCHW with `layout` true
/// (declared and unspecified output shapes) and checks they agree exactly.
#[allow(clippy::too_many_arguments)]
fn check(
    op: OperationType,
    ty: OperandType,
    in_dims: [u32; 4],
    consts: &[Const],
    out_dims: [u32; 4],
    out_scale: f32,
) {
    let size = if ty == TensorFloat32 { 4 } else { 1 };
    let count = in_dims.iter().product::<u32>() as usize;
    let input: Vec<u8> = if ty == TensorFloat32 {
        f32s(
            &(0..count)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
                .collect::<Vec<_>>(),
        )
    } else {
        (0..count).map(|i| (i * 37 % 251) as u8).collect()
    };
    let out_bytes = out_dims.iter().product::<u32>() as usize * size;
    let m = |layout, dims: &[u32], out: &[u32]| model(op, ty, dims, consts, layout, out, out_scale);
    let (want, shape) = run(m(None, &in_dims, &out_dims), &input, &in_dims, out_bytes);
    assert_eq!(shape, out_dims);
    assert!(want.iter().any(|&b| b != 0), "{op}: output all zero");
    let (nhwc, _) = run(
        m(Some(false), &in_dims, &out_dims),
        &input,
        &in_dims,
        out_bytes,
    );
    assert_eq!(nhwc, want, "{op} {ty}: layout false");
    let x = transpose(&input, in_dims, size, false);
    for declared in [nchw(out_dims), vec![0; 4]] {
        let (got, shape) = run(
            m(Some(true), &nchw(in_dims), &declared),
            &x,
            &nchw(in_dims),
            out_bytes,
        );
        assert_eq!(shape, nchw(out_dims), "{op} {ty}: NCHW output shape");
        assert_eq!(
            transpose(&got, out_dims, size, true),
            want,
            "{op} {ty}: NCHW output (declared {declared:?})"
        );
    }
}

#[test]
fn conv_2d_nchw_matches_nhwc() {
    let filter = |n: usize| {
        (0..n)
            .map(|i| (i % 7) as f32 * 0.25 - 0.5)
            .collect::<Vec<_>>()
    };
    let mut consts = vec![
        Const(TensorFloat32, vec![3, 2, 2, 2], f32s(&filter(24))),
        Const(TensorFloat32, vec![3], f32s(&[0.5, -1.0, 0.25])),
    ];
    consts.extend(scalars(&[1, 2, 1, 0])); // SAME, strides (2, 1), no activation
    check(
        OperationType::Conv2d,
        TensorFloat32,
        [2, 5, 4, 2],
        &consts,
        [2, 5, 2, 3],
        0.0,
    );
    let mut consts = vec![
        Const(
            TensorQuant8Asymm,
            vec![3, 2, 2, 2],
            (0..24).map(|i| (i * 29 % 256) as u8).collect(),
        ),
        Const(TensorInt32, vec![3], i32s(&[100, -200, 7])),
    ];
    consts.extend(scalars(&[0, 1, 1, 0, 1, 1, 1])); // explicit padding, relu
    check(
        OperationType::Conv2d,
        TensorQuant8Asymm,
        [1, 4, 3, 2],
        &consts,
        [1, 4, 3, 3],
        8.0,
    );
}

#[test]
fn depthwise_conv_2d_nchw_matches_nhwc() {
    let mut consts = vec![
        Const(
            TensorFloat32,
            vec![1, 2, 2, 4],
            f32s(&(0..16).map(|i| i as f32 * 0.125 - 1.0).collect::<Vec<_>>()),
        ),
        Const(TensorFloat32, vec![4], f32s(&[0.5, -1.0, 0.25, 2.0])),
    ];
    consts.extend(scalars(&[2, 1, 1, 2, 0])); // VALID, strides (1, 1), multiplier 2
    check(
        OperationType::DepthwiseConv2d,
        TensorFloat32,
        [1, 4, 5, 2],
        &consts,
        [1, 3, 4, 4],
        0.0,
    );
    let mut consts = vec![
        Const(
            TensorQuant8Asymm,
            vec![1, 2, 2, 2],
            (0..8).map(|i| (i * 61 % 256) as u8).collect(),
        ),
        Const(TensorInt32, vec![2], i32s(&[50, -20])),
    ];
    consts.extend(scalars(&[1, 1, 1, 1, 0])); // SAME, multiplier 1
    check(
        OperationType::DepthwiseConv2d,
        TensorQuant8Asymm,
        [2, 3, 3, 2],
        &consts,
        [2, 3, 3, 2],
        8.0,
    );
}

#[test]
fn pools_nchw_match_nhwc() {
    // SAME, strides (2, 2), filter 2×2, no activation.
    let window = scalars(&[1, 2, 2, 2, 2, 0]);
    for (op, ty) in [
        (OperationType::AveragePool2d, TensorFloat32),
        (OperationType::AveragePool2d, TensorQuant8Asymm),
        (OperationType::MaxPool2d, TensorFloat32),
        (OperationType::MaxPool2d, TensorQuant8Asymm),
        (OperationType::L2Pool2d, TensorFloat32),
    ] {
        check(op, ty, [2, 5, 4, 3], &window, [2, 3, 2, 3], 0.5);
    }
}

#[test]
fn block_rearrangements_and_resize_nchw_match_nhwc() {
    let block = scalars(&[2]);
    for ty in [TensorFloat32, TensorQuant8Asymm] {
        check(
            OperationType::DepthToSpace,
            ty,
            [1, 2, 3, 8],
            &block,
            [1, 4, 6, 2],
            0.5,
        );
        check(
            OperationType::SpaceToDepth,
            ty,
            [2, 4, 2, 3],
            &block,
            [2, 2, 1, 12],
            0.5,
        );
    }
    // Output width 5, height 3.
    for ty in [TensorFloat32, TensorQuant8Asymm] {
        check(
            OperationType::ResizeBilinear,
            ty,
            [1, 2, 3, 2],
            &scalars(&[5, 3]),
            [1, 3, 5, 2],
            0.5,
        );
    }
}

#[test]
fn conv_dilation_factors_run_as_the_zero_spread_filter() {
    let filter = || {
        Const(
            TensorFloat32,
            vec![2, 2, 2, 1],
            f32s(&[1.0, -2.0, 0.5, 3.0, -1.0, 0.25, 2.0, 1.5]),
        )
    };
    let tail = |consts: &mut Vec<Const>| {
        consts.push(Const(TensorFloat32, vec![2], f32s(&[0.5, -0.5])));
        consts.extend(scalars(&[2, 1, 1, 0])); // VALID, strides (1, 1)
    };
    let input = f32s(&(0..16).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>());
    let dims = [1, 4, 4, 1];
    let with = |dilation: [i32; 2], out: &[u32]| {
        let mut consts = vec![filter()];
        tail(&mut consts);
        consts.push(Const(Bool, vec![], vec![0]));
        consts.extend(scalars(&dilation));
        model(
            OperationType::Conv2d,
            TensorFloat32,
            &dims,
            &consts,
            None,
            out,
            0.0,
        )
    };
    let mut consts = vec![filter()];
    tail(&mut consts);
    let plain = model(
        OperationType::Conv2d,
        TensorFloat32,
        &dims,
        &consts,
        None,
        &[1, 3, 3, 2],
        0.0,
    );
    let (want, _) = run(plain, &input, &dims, 72);
    let (got, _) = run(with([1, 1], &[1, 3, 3, 2]), &input, &dims, 72);
    assert_eq!(got, want);
    // Width dilation 2: the 2×2 filter spans 2×3, the same as a 2×3 filter with a zero
    // middle column.
    let mut consts = vec![Const(
        TensorFloat32,
        vec![2, 2, 3, 1],
        f32s(&[
            1.0, 0.0, -2.0, 0.5, 0.0, 3.0, -1.0, 0.0, 0.25, 2.0, 0.0, 1.5,
        ]),
    )];
    tail(&mut consts);
    let spread = model(
        OperationType::Conv2d,
        TensorFloat32,
        &dims,
        &consts,
        None,
        &[1, 3, 2, 2],
        0.0,
    );
    let (want, _) = run(spread, &input, &dims, 48);
    let dilated = with([2, 1], &[1, 3, 2, 2]);
    let driver = Driver::new(1).unwrap();
    assert_eq!(driver.supported_operations(&dilated).unwrap(), [true]);
    let (got, _) = run(dilated, &input, &dims, 48);
    assert_eq!(got, want);
}
