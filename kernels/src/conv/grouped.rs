//! GROUPED_CONV_2D (NNAPI 1.2, `OperationType` 55): the input channels split into `groups`
//! equal slices, each convolved (as CONV_2D) with its own slice of the output channels'
//! filters. Filter `[out_c, kh, kw, in_c / groups]`, output channel `oc` reads input channels
//! `g·(in_c/groups) ..` of its group `g = oc / (out_c/groups)`.
//!
//! The reference loops here are the test oracles. The fast form runs each group as a CONV_2D
//! on the packed GEMM of [`crate::conv::f32`] / [`crate::conv::u8`]: the group's input channels
//! are gathered into a contiguous NHWC slice, convolved, and its output channels scattered
//! back.

use super::{FilterQuant, FilterShape};
use crate::conv::f32::{self as fast_f32, PackedConvF32};
use crate::conv::u8::{self as fast_u8, ConvQuant, PackedConvU8};
use crate::persist::{self, Persist, PersistError, Source};
use crate::quant::RequantizeAny;
use crate::ukernels::Ukernels;
use crate::{Activation, KernelError, Nhwc, QuantParams, Window};

/// Taps of one output pixel: for each (fy, fx) inside the input, the input (y, x).
fn for_each_tap(w: &Window, oy: usize, ox: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
    for fy in 0..w.filter_h {
        let y = (oy * w.stride_h + fy) as isize - w.padding.top as isize;
        if y < 0 || y >= w.input.h as isize {
            continue;
        }
        for fx in 0..w.filter_w {
            let x = (ox * w.stride_w + fx) as isize - w.padding.left as isize;
            if x < 0 || x >= w.input.w as isize {
                continue;
            }
            f(fy, fx, y as usize, x as usize);
        }
    }
}

/// GROUPED_CONV_2D float32 reference. `filter` is `[out_c, kh, kw, in_c / groups]`.
pub fn grouped_conv2d_f32(
    w: &Window,
    groups: usize,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    let (in_c, out_c) = (w.input.c, w.output.c);
    let (fd, ogd) = (in_c / groups, out_c / groups);
    let mut o = 0;
    for b in 0..w.output.n {
        for oy in 0..w.output.h {
            for ox in 0..w.output.w {
                for (oc, &bias_c) in bias.iter().enumerate().take(out_c) {
                    let g = oc / ogd;
                    let mut sum = 0.0f32;
                    for_each_tap(w, oy, ox, |fy, fx, y, x| {
                        let i0 = w.input.offset(b, y, x, g * fd);
                        let f0 = ((oc * w.filter_h + fy) * w.filter_w + fx) * fd;
                        for k in 0..fd {
                            sum += filter[f0 + k] * input[i0 + k];
                        }
                    });
                    output[o] = act.apply_f32(sum + bias_c);
                    o += 1;
                }
            }
        }
    }
}

/// The per-output-channel requantizers of a quantized convolution with `out_c` channels, as
/// the reference builds them (its `QuantizeMultiplier` of `input_scale · filter_scale[c] /
/// output_scale`, any multiplier a shift of at most 30 holds). Errors where the reference does.
pub fn requantizers(
    input: QuantParams,
    filter: FilterQuant,
    out_c: usize,
    output: QuantParams,
    act: Activation,
) -> Result<Vec<RequantizeAny>, KernelError> {
    if let FilterQuant::Channel(scales) = filter {
        if scales.len() != out_c {
            return Err(KernelError::InvalidData(format!(
                "{} channel scales for {out_c} output channels",
                scales.len()
            )));
        }
    }
    (0..out_c)
        .map(|c| {
            let fq = match filter {
                FilterQuant::Tensor(q) => q,
                FilterQuant::Channel(scales) => QuantParams::new(scales[c], 0),
            };
            let rq = RequantizeAny::for_conv(input, fq, output, act).ok_or_else(|| {
                KernelError::InvalidData(format!(
                    "output channel {c}: multiplier {} · {} / {} cannot be quantized",
                    input.scale, fq.scale, output.scale
                ))
            })?;
            if rq.min > rq.max {
                return Err(KernelError::InvalidData(format!(
                    "empty activation range {}..={} for output zero point {}",
                    rq.min, rq.max, output.zero_point
                )));
            }
            Ok(rq)
        })
        .collect()
}

/// GROUPED_CONV_2D quant8 reference: uint8 input and output, a uint8 filter with one zero
/// point or an int8 per-channel filter ([`FilterQuant`]), int32 bias. The accumulator
/// `Σ (a − za)(w − zw) + bias` is requantized per output channel.
#[allow(clippy::too_many_arguments)]
pub fn grouped_conv2d_u8(
    w: &Window,
    groups: usize,
    input: &[u8],
    input_q: QuantParams,
    filter: &[u8],
    filter_q: FilterQuant,
    bias: &[i32],
    output_q: QuantParams,
    act: Activation,
    output: &mut [u8],
) -> Result<(), KernelError> {
    let (in_c, out_c) = (w.input.c, w.output.c);
    let rq = requantizers(input_q, filter_q, out_c, output_q, act)?;
    let fv = filter_q.values(filter);
    let (fd, ogd) = (in_c / groups, out_c / groups);
    let za = input_q.zero_point;
    let mut o = 0;
    for b in 0..w.output.n {
        for oy in 0..w.output.h {
            for ox in 0..w.output.w {
                for (oc, (&bias_c, rq_c)) in bias.iter().zip(&rq).enumerate().take(out_c) {
                    let g = oc / ogd;
                    let mut sum = 0i32;
                    for_each_tap(w, oy, ox, |fy, fx, y, x| {
                        let i0 = w.input.offset(b, y, x, g * fd);
                        let f0 = ((oc * w.filter_h + fy) * w.filter_w + fx) * fd;
                        for k in 0..fd {
                            let a = i32::from(input[i0 + k]) - za;
                            sum = sum.wrapping_add(a.wrapping_mul(fv[f0 + k]));
                        }
                    });
                    output[o] = rq_c.apply(sum.wrapping_add(bias_c));
                    o += 1;
                }
            }
        }
    }
    Ok(())
}

/// The image: the per-group shape, the group count, then each group's kind (0 float32, 1
/// uint8) and GEMM image, every group checked to hold the shape.
impl Persist for PackedGrouped {
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_shape(out, self.shape);
        persist::put_usize(out, self.groups.len());
        for g in &self.groups {
            match g {
                GroupGemm::F32(p) => {
                    out.push(0);
                    p.persist(out);
                }
                GroupGemm::U8(p) => {
                    out.push(1);
                    p.persist(out);
                }
            }
        }
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let shape = src.shape()?;
        let n = src.usize()?;
        if n == 0 {
            return Err(PersistError("no groups".into()));
        }
        let mut groups = Vec::new();
        for _ in 0..n {
            let (s, g) = match src.u8()? {
                0 => {
                    let p = PackedConvF32::restore(uk, src)?;
                    (p.shape(), GroupGemm::F32(p))
                }
                1 => {
                    let p = PackedConvU8::restore(uk, src)?;
                    (p.shape(), GroupGemm::U8(p))
                }
                tag => return Err(PersistError(format!("group kind {tag}"))),
            };
            if s != shape {
                return Err(PersistError("a group of another shape".into()));
            }
            groups.push(g);
        }
        Ok(PackedGrouped { groups, shape })
    }
}

/// One group's packed CONV_2D.
#[derive(Debug)]
enum GroupGemm {
    F32(PackedConvF32),
    U8(PackedConvU8),
}

/// A GROUPED_CONV_2D filter packed as one CONV_2D GEMM per group.
#[derive(Debug)]
pub struct PackedGrouped {
    groups: Vec<GroupGemm>,
    /// The filter of one group: `[out_c / groups, kh, kw, in_c / groups]`.
    shape: FilterShape,
}

impl PackedGrouped {
    /// Packs a float32 filter `[out_c, kh, kw, in_c / groups]` (`shape.in_c` is the per-group
    /// depth) and bias for `groups` groups.
    pub fn pack_f32(
        uk: &Ukernels,
        shape: FilterShape,
        groups: usize,
        filter: &[f32],
        bias: &[f32],
    ) -> PackedGrouped {
        let g_shape = FilterShape {
            out_c: shape.out_c / groups,
            ..shape
        };
        let (per_f, per_b) = (g_shape.out_c * g_shape.taps(), g_shape.out_c);
        let groups = (0..groups)
            .map(|g| {
                GroupGemm::F32(PackedConvF32::pack(
                    uk,
                    g_shape,
                    &filter[g * per_f..(g + 1) * per_f],
                    &bias[g * per_b..(g + 1) * per_b],
                ))
            })
            .collect();
        PackedGrouped {
            groups,
            shape: g_shape,
        }
    }

    /// Packs a uint8 filter with one zero point (the per-group GEMMs requantize in their
    /// epilogue). `None` when the GEMM cannot represent the parameters (a multiplier of 1 or
    /// more, which the reference loop takes).
    pub fn pack_u8(
        uk: &Ukernels,
        shape: FilterShape,
        groups: usize,
        filter: &[u8],
        bias: &[i32],
        q: ConvQuant,
    ) -> Option<PackedGrouped> {
        let g_shape = FilterShape {
            out_c: shape.out_c / groups,
            ..shape
        };
        let (per_f, per_b) = (g_shape.out_c * g_shape.taps(), g_shape.out_c);
        let groups = (0..groups)
            .map(|g| {
                let p = PackedConvU8::pack(
                    uk,
                    g_shape,
                    &filter[g * per_f..(g + 1) * per_f],
                    &bias[g * per_b..(g + 1) * per_b],
                    q,
                )
                .ok()?;
                // The packer's own fallback is the 1.0 reference loop; the grouped reference
                // is the one to run then.
                (p.kernel_name() != "reference").then_some(GroupGemm::U8(p))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PackedGrouped {
            groups,
            shape: g_shape,
        })
    }

    /// Packs a uint8 filter `[out_c, kh, kw, in_c / groups]` with zero point `filter_zp` and
    /// one requantizer per output channel ([`requantizers`]): a per-channel filter passed as
    /// its unsigned image with zero point 128, or a per-tensor filter whose multiplier is 1 or
    /// more. `None` when the GEMM cannot represent the parameters.
    #[allow(clippy::too_many_arguments)]
    pub fn pack_u8_requant(
        uk: &Ukernels,
        shape: FilterShape,
        groups: usize,
        filter: &[u8],
        filter_zp: i32,
        bias: &[i32],
        input: QuantParams,
        rq: &[RequantizeAny],
    ) -> Option<PackedGrouped> {
        if groups == 0 || !shape.out_c.is_multiple_of(groups) || rq.len() != shape.out_c {
            return None;
        }
        let g_shape = FilterShape {
            out_c: shape.out_c / groups,
            ..shape
        };
        let (per_f, per_b) = (g_shape.out_c * g_shape.taps(), g_shape.out_c);
        if filter.len() != groups * per_f || bias.len() != groups * per_b {
            return None;
        }
        let groups = (0..groups)
            .map(|g| {
                PackedConvU8::pack_requant(
                    uk,
                    g_shape,
                    &filter[g * per_f..(g + 1) * per_f],
                    filter_zp,
                    &bias[g * per_b..(g + 1) * per_b],
                    input,
                    &rq[g * per_b..(g + 1) * per_b],
                )
                .map(GroupGemm::U8)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PackedGrouped {
            groups,
            shape: g_shape,
        })
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// The filter extents of the whole operation, `[out_c, kh, kw, in_c / groups]`.
    pub fn shape(&self) -> FilterShape {
        FilterShape {
            out_c: self.shape.out_c * self.groups.len(),
            ..self.shape
        }
    }
}

/// Runs every group of `packed` on `w` (the whole operation's window): the group's input
/// channels are gathered into a contiguous NHWC image, convolved by its GEMM into a scratch
/// image and scattered into the output channels.
fn run_groups<T: GroupScratch>(
    w: &Window,
    packed: &PackedGrouped,
    input: &[T],
    output: &mut [T],
    mut conv: impl FnMut(&GroupGemm, &Window, &[T], &mut [T]),
) {
    let s = packed.shape;
    let gw = Window {
        input: Nhwc::new(w.input.n, w.input.h, w.input.w, s.in_c),
        output: Nhwc::new(w.output.n, w.output.h, w.output.w, s.out_c),
        ..*w
    };
    let (in_c, out_c) = (w.input.c, w.output.c);
    T::with_scratch(gw.input.len(), gw.output.len(), |gin, gout| {
        for (g, gemm) in packed.groups.iter().enumerate() {
            for (dst, src) in gin.chunks_exact_mut(s.in_c).zip(input.chunks_exact(in_c)) {
                dst.copy_from_slice(&src[g * s.in_c..(g + 1) * s.in_c]);
            }
            conv(gemm, &gw, gin, gout);
            for (src, dst) in gout
                .chunks_exact(s.out_c)
                .zip(output.chunks_exact_mut(out_c))
            {
                dst[g * s.out_c..(g + 1) * s.out_c].copy_from_slice(src);
            }
        }
    });
}

/// Element types whose per-group gather and scatter images live in a per-thread buffer that
/// grows to the largest operation seen and is then reused, so the steady state allocates
/// nothing.
trait GroupScratch: Copy + Default + 'static {
    /// Runs `f` on an input image of `n_in` and an output image of `n_out` elements (contents
    /// unspecified: `f` overwrites both).
    fn with_scratch(n_in: usize, n_out: usize, f: impl FnOnce(&mut [Self], &mut [Self]));
}

macro_rules! group_scratch {
    ($t:ty, $key:ident) => {
        thread_local! {
            static $key: std::cell::RefCell<(Vec<$t>, Vec<$t>)> =
                const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
        }
        impl GroupScratch for $t {
            fn with_scratch(n_in: usize, n_out: usize, f: impl FnOnce(&mut [Self], &mut [Self])) {
                $key.with(|s| {
                    // A nested call on this thread (none today) would find the buffers
                    // borrowed; it gets fresh ones instead of a panic.
                    let Ok(mut s) = s.try_borrow_mut() else {
                        return f(
                            &mut vec![<$t>::default(); n_in],
                            &mut vec![<$t>::default(); n_out],
                        );
                    };
                    let (a, b) = &mut *s;
                    if a.len() < n_in {
                        a.resize(n_in, <$t>::default());
                    }
                    if b.len() < n_out {
                        b.resize(n_out, <$t>::default());
                    }
                    f(&mut a[..n_in], &mut b[..n_out])
                })
            }
        }
    };
}
group_scratch!(f32, GROUP_SCRATCH_F32);
group_scratch!(u8, GROUP_SCRATCH_U8);

/// GROUPED_CONV_2D float32 on the packed GEMMs; equal to [`grouped_conv2d_f32`] up to the
/// order of the float sums.
pub fn grouped_conv2d_f32_fast(
    w: &Window,
    packed: &PackedGrouped,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    run_groups(w, packed, input, output, |gemm, gw, x, y| {
        if let GroupGemm::F32(p) = gemm {
            fast_f32::conv2d_f32(gw, p, x, act, y);
        }
    });
}

/// GROUPED_CONV_2D uint8 on the packed GEMMs (per-tensor or per-channel filter); bit-exact
/// with [`grouped_conv2d_u8`].
pub fn grouped_conv2d_u8_fast(w: &Window, packed: &PackedGrouped, input: &[u8], output: &mut [u8]) {
    run_groups(w, packed, input, output, |gemm, gw, x, y| {
        if let GroupGemm::U8(p) = gemm {
            fast_u8::conv2d_u8(gw, p, x, y);
        }
    });
}
