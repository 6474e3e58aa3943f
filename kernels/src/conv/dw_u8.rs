//! uint8 DEPTHWISE_CONV_2D on the depthwise row micro-kernel of the table
//! ([`crate::ukernels::quant8::U8Dw`]), bit-exact with
//! [`crate::conv::reference::depthwise_conv2d_u8`].
//!
//! Zero-point algebra: with `w' = w − zw` (packed as int32) and every padding tap read as
//! `a = za` from a buffer of zero points, `Σ_taps (a − za)·w' = Σ_taps a·w' − za·Σ_taps w'`,
//! and the second term is per channel, so it goes into the packed bias. Padding taps then
//! contribute `(za − za)·w' = 0`, exactly as the reference's clipped window. All of it holds
//! modulo 2^32, matching the reference's wrapping accumulator.
//!
//! Rows of output pixels are the unit of work. In a row, the columns whose window lies inside
//! the input horizontally are one kernel call whose tap pointers advance by `stride_w·c` per
//! pixel (a vertically padded tap walks along a per-thread row of zero points); each border
//! column is a call of its own with per-tap pointers. Depth multipliers other than 1 run a
//! portable loop on the same packed weights.
//!
//! Where the table has a byte dot-product kernel ([`crate::ukernels::quant8::U8Dw4`]) and every
//! channel's `w'` fits a signed byte (or its negation does: `w'` in −127..=128, packed as
//! `−w'` with bias `−bias`, the kernel negating the sum back), the rows with multiplier 1 run it
//! on a second packing of the same weights: four taps per multiply-accumulate instead of one.
//! Per-channel int8 filters always fit; a uint8 filter fits whenever its zero point is 127 or
//! 128, and otherwise when its values happen to. At stride 1 a last block of at most 32
//! channels (the tails of 32, 96 or 144) takes a third path, tap quads: the row's input
//! columns interleaved once into the byte quads the dot product reads, then two output pixels
//! per vector (`row_quads`). Filters of 3 columns and at most 4 rows at horizontal stride 1
//! run each row's interior columns on a fourth path (`cols3`): every input column's tap quads
//! are built once, in registers, and feed the three output pixels that read the column, a
//! third of the per-pixel kernel's loads and unpacks (5–10 % faster on MobileNet v2's stride-1
//! layers of 14×14 to 56×56; at stride 2, where two pixels share one column of three, it
//! measured slower on the layers with a narrow channel tail, so those keep the per-pixel
//! kernel).
//!
//! Where the table has no byte dot-product kernel, or the weights do not fit it, and the table
//! has a tap-pair kernel ([`crate::ukernels::quant8::U8Dw2`], the AVX2 level), the rows with
//! multiplier 1 run that on a third packing of the same weights: `w'` as int16 pairs of two
//! taps (in −255..=255, so a pair sum of byte products is exact in int32), two taps per
//! multiply-add instead of one. 3×3 filters at horizontal stride 1 run each row's interior
//! columns on its 3-column form: rows 0 and 1 of every input column interleaved once for the
//! three pixels over it, adjacent row-2 columns once for the two pixels reading them. Like the
//! byte packing, it is rebuilt from the int32 one when a cache is restored.
//!
//! The rows are split over threads where the work passes a few microseconds at this kernel's
//! speed ([`crate::parallel::pays_to_split`]).

use std::cell::{Cell, RefCell};

use super::u8::{
    col_requant, put_cols, put_conv_quant, read_cols, read_conv_quant, requant8, ConvQuant,
};
use crate::aligned::AlignedBuf;
use crate::parallel::{pays_to_split, speed, split_rows};
use crate::persist::{self, Persist, PersistError, Source};
use crate::quant::ChannelRequant;
use crate::ukernels::quant8::{
    dw4_col_constants, dw4_lane, dw4_quad_bytes, Requant8, U8Dw, U8Dw2, U8Dw2Args, U8Dw2ColsArgs,
    U8Dw4, U8Dw4Args, U8Dw4ColsArgs, U8Dw4QuadsArgs, U8Dw4RowArgs, U8DwArgs, DW4_BLOCK,
    DW4_COL_ADD, DW4_COL_LEFT, DW4_COL_MULT, DW4_COL_SHIFT, DW4_HEAD_SLOTS, DW_BLOCK,
};
use crate::ukernels::Ukernels;
use crate::{KernelError, QuantParams, Window};

/// Packed weights of a uint8 DEPTHWISE_CONV_2D for one kernel table.
#[derive(Debug)]
pub struct PackedDwU8 {
    kh: usize,
    kw: usize,
    out_c: usize,
    imp: DwImpl,
}

#[derive(Debug)]
enum DwImpl {
    Fast(FastDw),
    Reference {
        filter: Vec<u8>,
        bias: Vec<i32>,
        q: ConvQuant,
    },
}

#[derive(Debug)]
struct FastDw {
    dw: U8Dw,
    /// Per block of `DW_BLOCK` channels: biases, then `kh·kw` weight blocks.
    w: AlignedBuf<i32>,
    za: u8,
    rq: Requant8,
    /// Per-channel requantization ([`crate::ukernels::quant8::ColRequant`] blocks of
    /// `DW_BLOCK`), or `None` for the per-tensor `rq`.
    cols: Option<AlignedBuf<i32>>,
    /// The byte dot-product packing ([`U8Dw4Args`]) of the same weights, when the table has
    /// that kernel and every channel's weights (or their negations) fit signed bytes; rows
    /// with depth multiplier 1 use it.
    dw4: Option<FastDw4>,
    /// The tap-pair packing ([`U8Dw2Args`]) of the same weights, when the table has that
    /// kernel and no byte dot-product packing was made; rows with depth multiplier 1 use it.
    dw2: Option<Box<FastDw2>>,
}

#[derive(Debug)]
struct FastDw2 {
    dw: U8Dw2,
    w: AlignedBuf<u8>,
    /// For 3×3 filters, the packing of the 3-column kernel ([`U8Dw2ColsArgs`]).
    w3: Option<AlignedBuf<u8>>,
}

#[derive(Debug)]
struct FastDw4 {
    dw: U8Dw4,
    /// Taps in order, `ceil(ntaps/4)` groups: the per-pixel kernel's packing.
    w: AlignedBuf<u8>,
    /// Filter columns in runs of four rows, `ceil(kh/4)·kw` groups, a last block of at most
    /// 32 channels repeated in the high half: the packing of the tap-quad row path.
    wq: AlignedBuf<u8>,
    negate: bool,
    /// Whether any per-channel left shift is nonzero.
    left_shift: bool,
}

impl PackedDwU8 {
    /// `filter` is `[1, kh, kw, out_c]`, `bias` `[out_c]`. Errors exactly when the reference
    /// would (multiplier not representable, empty activation range).
    pub fn pack(
        uk: &Ukernels,
        kh: usize,
        kw: usize,
        out_c: usize,
        filter: &[u8],
        bias: &[i32],
        q: ConvQuant,
    ) -> Result<PackedDwU8, KernelError> {
        assert_eq!(filter.len(), kh * kw * out_c, "filter length");
        assert_eq!(bias.len(), out_c, "bias length");
        let Some(rq) = requant8(&q)? else {
            return Ok(PackedDwU8 {
                kh,
                kw,
                out_c,
                imp: DwImpl::Reference {
                    filter: filter.to_vec(),
                    bias: bias.to_vec(),
                    q,
                },
            });
        };
        Ok(Self::fast(uk, kh, kw, out_c, filter, bias, &q, rq, None))
    }

    /// A depthwise convolution with a TENSOR_QUANT8_SYMM_PER_CHANNEL filter `[1, kh, kw,
    /// out_c]`: `filter_image` is its unsigned image (zero point 128), `rq` the per-channel
    /// requantizers. `None` when the kernels cannot represent the parameters (the caller keeps
    /// the reference); bit-exact with
    /// [`crate::conv::reference::depthwise_conv2d_u8_channels`] otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn pack_channels(
        uk: &Ukernels,
        kh: usize,
        kw: usize,
        out_c: usize,
        filter_image: &[u8],
        bias: &[i32],
        input: QuantParams,
        rq: &ChannelRequant,
    ) -> Option<PackedDwU8> {
        if filter_image.len() != kh * kw * out_c || bias.len() != out_c || rq.channels() != out_c {
            return None;
        }
        if !(0..=255).contains(&input.zero_point) {
            return None;
        }
        let (head, cols) = col_requant(rq.as_slice(), DW_BLOCK)?;
        let q = ConvQuant {
            input,
            filter: QuantParams::new(1.0, 128),
            output: QuantParams::new(1.0, head.zero_point),
            act: crate::Activation::None,
        };
        Some(Self::fast(
            uk,
            kh,
            kw,
            out_c,
            filter_image,
            bias,
            &q,
            head,
            Some(cols),
        ))
    }

    /// Packs for the table's depthwise kernel; only the zero points of `q` are read.
    #[allow(clippy::too_many_arguments)]
    fn fast(
        uk: &Ukernels,
        kh: usize,
        kw: usize,
        out_c: usize,
        filter: &[u8],
        bias: &[i32],
        q: &ConvQuant,
        rq: Requant8,
        cols: Option<AlignedBuf<i32>>,
    ) -> PackedDwU8 {
        let ntaps = kh * kw;
        let per_block = (1 + ntaps) * DW_BLOCK;
        let mut w = AlignedBuf::<i32>::zeroed(out_c.div_ceil(DW_BLOCK) * per_block);
        let (za, zw) = (q.input.zero_point, q.filter.zero_point);
        for (oc, &b) in bias.iter().enumerate() {
            let base = (oc / DW_BLOCK) * per_block + oc % DW_BLOCK;
            let mut sum = 0i32;
            for t in 0..ntaps {
                let v = i32::from(filter[t * out_c + oc]) - zw;
                sum = sum.wrapping_add(v);
                w[base + (1 + t) * DW_BLOCK] = v;
            }
            w[base] = b.wrapping_sub(za.wrapping_mul(sum));
        }
        let dw4 = uk
            .u8_dw4
            .and_then(|dw| pack_dw4(dw, kh, kw, out_c, &w, cols.as_ref()));
        let dw2 = pack_dw2(uk, dw4.is_some(), (kh, kw), out_c, &w);
        PackedDwU8 {
            kh,
            kw,
            out_c,
            imp: DwImpl::Fast(FastDw {
                dw: uk.u8_dw,
                w,
                za: za as u8,
                rq,
                cols,
                dw4,
                dw2,
            }),
        }
    }

    /// The filter extents `(kh, kw, out_c)` this was packed for.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.kh, self.kw, self.out_c)
    }

    /// The micro-kernel that runs this convolution with depth multiplier 1, or `"reference"`.
    pub fn kernel_name(&self) -> &'static str {
        match &self.imp {
            DwImpl::Fast(FastDw { dw4: Some(d), .. }) => d.dw.name,
            DwImpl::Fast(FastDw { dw2: Some(d), .. }) => d.dw.name,
            DwImpl::Fast(f) => f.dw.name,
            DwImpl::Reference { .. } => "reference",
        }
    }
}

/// Repacks the int32 packing `w` (biases already holding the zero-point term) for the table's
/// tap-pair kernel ([`U8Dw2Args`]), when it has one and `dw4` (a byte dot-product packing
/// was made) is false.
fn pack_dw2(
    uk: &Ukernels,
    dw4: bool,
    (kh, kw): (usize, usize),
    out_c: usize,
    w: &[i32],
) -> Option<Box<FastDw2>> {
    let ntaps = kh * kw;
    let dw = uk.u8_dw2.filter(|_| !dw4)?;
    let per_block = (1 + ntaps) * DW_BLOCK;
    let pairs = ntaps.div_ceil(2);
    let block_len = 64 * (1 + pairs);
    let mut out = AlignedBuf::<u8>::zeroed(out_c.div_ceil(DW_BLOCK) * block_len);
    for (src, dst) in w
        .chunks_exact(per_block)
        .zip(out.chunks_exact_mut(block_len))
    {
        for (cc, &b) in src[..DW_BLOCK].iter().enumerate() {
            dst[4 * cc..4 * cc + 4].copy_from_slice(&b.to_le_bytes());
        }
        for t in 0..ntaps {
            let slot = 64 * (1 + t / 2) + 2 * (t % 2);
            for (cc, &v) in src[(1 + t) * DW_BLOCK..(2 + t) * DW_BLOCK]
                .iter()
                .enumerate()
            {
                // In −255..=255 (a filter byte minus its zero point).
                let v = v as i16;
                dst[slot + 4 * cc..slot + 4 * cc + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    // The 3-column packing: biases, then rows 0 and 1 of each filter column as pairs, then
    // row 2's pairs (w20, w21) and (0, w22).
    let w3 = (kh == 3 && kw == 3).then(|| {
        let mut w3 = AlignedBuf::<u8>::zeroed(out_c.div_ceil(DW_BLOCK) * 6 * 64);
        for (src, dst) in w.chunks_exact(per_block).zip(w3.chunks_exact_mut(6 * 64)) {
            dst[..64].copy_from_slice(crate::aligned::bytes_of(&src[..DW_BLOCK]));
            let tap = |t: usize, cc: usize| src[(1 + t) * DW_BLOCK + cc];
            let mut put = |slot: usize, half: usize, cc: usize, v: i32| {
                let o = 64 * (1 + slot) + 4 * cc + 2 * half;
                // In −255..=255 (a filter byte minus its zero point).
                dst[o..o + 2].copy_from_slice(&(v as i16).to_le_bytes());
            };
            for cc in 0..DW_BLOCK {
                for fx in 0..3 {
                    put(fx, 0, cc, tap(fx, cc));
                    put(fx, 1, cc, tap(3 + fx, cc));
                }
                put(3, 0, cc, tap(6, cc));
                put(3, 1, cc, tap(7, cc));
                put(4, 1, cc, tap(8, cc));
            }
        }
        w3
    });
    Some(Box::new(FastDw2 { dw, w: out, w3 }))
}

/// Repacks the int32 packing `w` (biases already holding the zero-point term) for the byte
/// dot-product kernel, or `None` when some channel has a weight outside −128..=127 and another
/// outside −127..=128 (neither the weights nor their negations fit signed bytes).
///
/// A channel whose weights fit only negated is packed as `−w` with bias `−bias`; the kernel
/// negates its sum back, `−(−bias + Σ a·(−w)) = bias + Σ a·w` (modulo 2^32, as the reference).
fn pack_dw4(
    dw: U8Dw4,
    kh: usize,
    kw: usize,
    out_c: usize,
    w: &AlignedBuf<i32>,
    cols: Option<&AlignedBuf<i32>>,
) -> Option<FastDw4> {
    let ntaps = kh * kw;
    let (w4, negate, left_shift) =
        pack_dw4_order(ntaps, out_c, w, cols, ntaps.div_ceil(4), |t| (t / 4, t % 4))?;
    // Group `(fy/4)·kw + fx` holds rows 4·(fy/4).. of filter column `fx`, the order of the
    // row kernel's quads (see `row_quads`).
    let (mut wq, ..) = pack_dw4_order(ntaps, out_c, w, cols, dw4_groups(kh, kw), |t| {
        let (fy, fx) = (t / kw, t % kw);
        ((fy / 4) * kw + fx, fy % 4)
    })?;
    // A last block of at most 32 channels repeats them in the high half of every slot: the
    // row kernel runs two pixels per vector there.
    let tail = out_c % DW4_BLOCK;
    if (1..=DW4_BLOCK / 2).contains(&tail) {
        let block_len = (DW4_HEAD_SLOTS + 4 * dw4_groups(kh, kw)) * 64;
        let block = (out_c / DW4_BLOCK) * block_len;
        for slot in wq[block..block + block_len].chunks_exact_mut(64) {
            slot.copy_within(0..32, 32);
        }
    }
    Some(FastDw4 {
        dw,
        w: w4,
        wq,
        negate,
        left_shift,
    })
}

/// One [`U8Dw4Args`] packing of the int32 packing `w` with `groups` weight groups, tap `t`
/// going to byte `j` of group `g` for `(g, j) = place(t)`; with whether any channel is negated
/// and any left shift nonzero.
fn pack_dw4_order(
    ntaps: usize,
    out_c: usize,
    w: &AlignedBuf<i32>,
    cols: Option<&AlignedBuf<i32>>,
    groups: usize,
    place: impl Fn(usize) -> (usize, usize),
) -> Option<(AlignedBuf<u8>, bool, bool)> {
    let per_block = (1 + ntaps) * DW_BLOCK;
    let at =
        |oc: usize, slot: usize| w[(oc / DW_BLOCK) * per_block + slot * DW_BLOCK + oc % DW_BLOCK];
    let block_len = (DW4_HEAD_SLOTS + 4 * groups) * 64;
    let mut out = AlignedBuf::<u8>::zeroed(out_c.div_ceil(DW4_BLOCK) * block_len);
    let (mut negate, mut left_shift) = (false, false);
    for oc in 0..out_c {
        let taps = (0..ntaps).map(|t| at(oc, 1 + t));
        let sign = if taps.clone().all(|v| (-128..=127).contains(&v)) {
            1
        } else if taps.clone().all(|v| (-127..=128).contains(&v)) {
            negate = true;
            -1
        } else {
            return None;
        };
        let (k, lane) = dw4_lane(oc % DW4_BLOCK);
        let block = (oc / DW4_BLOCK) * block_len;
        let base = block + 4 * lane;
        let mut put = |slot: usize, v: i32| {
            let o = base + 64 * (slot + k);
            out[o..o + 4].copy_from_slice(&v.to_le_bytes());
        };
        put(0, at(oc, 0).wrapping_mul(sign));
        put(4, if sign < 0 { -1 } else { 0 });
        if let Some(cols) = cols {
            let cb = (oc / DW_BLOCK) * 3 * DW_BLOCK + oc % DW_BLOCK;
            let (m, l, r) = (cols[cb], cols[cb + DW_BLOCK], cols[cb + 2 * DW_BLOCK]);
            // The kernel's 64-bit epilogue needs these ranges (the cache decoder and
            // `col_requant` check them too); anything else keeps the int32 kernel.
            if m < 0 || !(0..=30).contains(&l) {
                return None;
            }
            // The correction is implied by the shift (see `dw4_col_constants`).
            let (add, _, shift) = dw4_col_constants(r)?;
            left_shift |= l != 0;
            let col = |j: usize| 8 + 4 * j;
            put(col(DW4_COL_MULT), m);
            put(col(DW4_COL_LEFT), l);
            let odd = lane % 2;
            for (j, v) in [(DW4_COL_ADD, add), (DW4_COL_SHIFT, shift)] {
                let o = block + 64 * (col(j + odd) + k) + 8 * (lane / 2);
                out[o..o + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        for t in 0..ntaps {
            let (g, j) = place(t);
            // In −128..=127 after the sign, checked above.
            out[base + 64 * (DW4_HEAD_SLOTS + 4 * g + k) + j] = (at(oc, 1 + t) * sign) as i8 as u8;
        }
    }
    Some((out, negate, left_shift))
}

/// Weight groups of four taps in the byte dot-product packing: each filter column's rows in
/// runs of four.
fn dw4_groups(kh: usize, kw: usize) -> usize {
    kh.div_ceil(4) * kw
}

/// The image is a plain dump of the fields: `kh`, `kw`, `out_c`, then the implementation
/// (0: the reference's filter, bias and quantization; 1: the fast kernel's `za`, `rq`, `w`
/// and optional `cols`; the byte dot-product packing is rebuilt from those).
impl Persist for PackedDwU8 {
    fn persist(&self, out: &mut Vec<u8>) {
        for v in [self.kh, self.kw, self.out_c] {
            persist::put_usize(out, v);
        }
        match &self.imp {
            DwImpl::Reference { filter, bias, q } => {
                out.push(0);
                persist::put_slice(out, filter);
                persist::put_slice(out, bias);
                put_conv_quant(out, q);
            }
            DwImpl::Fast(f) => {
                out.push(1);
                out.push(f.za);
                persist::put_requant8(out, &f.rq);
                persist::put_slice(out, &f.w);
                put_cols(out, f.cols.as_ref());
            }
        }
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let (kh, kw, out_c) = (src.usize()?, src.usize()?, src.usize()?);
        let taps = kh
            .checked_mul(kw)
            .filter(|&t| t > 0 && out_c > 0 && t.checked_mul(out_c).is_some())
            .ok_or_else(|| PersistError(format!("depthwise filter {kh}×{kw}×{out_c}")))?;
        let imp = match src.u8()? {
            0 => DwImpl::Reference {
                filter: src.vec(taps * out_c)?,
                bias: src.vec(out_c)?,
                q: read_conv_quant(src)?,
            },
            1 => {
                let za = src.u8()?;
                let rq = src.requant8()?;
                let per_block = (1 + taps) * DW_BLOCK;
                let w = src.buf(out_c.div_ceil(DW_BLOCK) * per_block)?;
                let cols = read_cols(src, out_c, DW_BLOCK)?;
                // The byte dot-product packing is derived from `w` and `cols` alone (a
                // depthwise filter is small), so it is rebuilt for this table, not stored.
                let dw4 = uk
                    .u8_dw4
                    .and_then(|dw| pack_dw4(dw, kh, kw, out_c, &w, cols.as_ref()));
                let dw2 = pack_dw2(uk, dw4.is_some(), (kh, kw), out_c, &w);
                DwImpl::Fast(FastDw {
                    dw: uk.u8_dw,
                    w,
                    za,
                    rq,
                    cols,
                    dw4,
                    dw2,
                })
            }
            tag => return Err(PersistError(format!("uint8 depthwise kind {tag}"))),
        };
        Ok(PackedDwU8 { kh, kw, out_c, imp })
    }
}

/// Per-thread scratch of the depthwise rows: the tap pointers of one kernel call and a run of
/// input zero points long enough to stand in for a whole padded input row.
#[derive(Default)]
struct Scratch {
    taps: Vec<*const u8>,
    zero_row: Vec<u8>,
    /// The byte dot-product kernel's tap quads of one channel block of an output row.
    quads: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// DEPTHWISE_CONV_2D, uint8, bit-exact with [`crate::conv::reference::depthwise_conv2d_u8`]: output
/// channel `ic·multiplier + j` reads input channel `ic`.
pub fn depthwise_conv2d_u8(
    w: &Window,
    multiplier: usize,
    packed: &PackedDwU8,
    input: &[u8],
    output: &mut [u8],
) {
    assert_eq!(
        (w.filter_h, w.filter_w, w.output.c),
        (packed.kh, packed.kw, packed.out_c),
        "filter extents"
    );
    assert_eq!(w.output.c, w.input.c * multiplier, "output depth");
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert_eq!(w.input.n, w.output.n, "batch");
    let f = match &packed.imp {
        DwImpl::Reference { filter, bias, q } => {
            crate::conv::reference::depthwise_conv2d_u8(
                w, multiplier, input, q.input, filter, q.filter, bias, q.output, q.act, output,
            )
            .expect("parameters validated at packing");
            return;
        }
        DwImpl::Fast(f) => f,
    };
    let row_len = w.output.w * w.output.c;
    let units = w.output.n * w.output.h;
    if row_len == 0 || units == 0 {
        return;
    }
    assert!(w.stride_h > 0 && w.stride_w > 0, "stride");
    let out = super::u8::OutPtr(output.as_mut_ptr(), std::ptr::null_mut());
    let macs = w.output.len().saturating_mul(w.filter_h * w.filter_w);
    let split = pays_to_split(macs, speed::U8_DEPTHWISE_MACS);
    split_rows(units, split, |rows| {
        for r in rows {
            // SAFETY: `r < n·out_h`, so the row lies inside `output`, and this task is the
            // only one given row `r`.
            let row = unsafe { std::slice::from_raw_parts_mut(out.at(r * row_len), row_len) };
            let (b, oy) = (r / w.output.h, r % w.output.h);
            if multiplier == 1 {
                row_fast(w, f, input, b, oy, row);
            } else {
                row_multiplier(w, multiplier, f, input, b, oy, row);
            }
        }
    });
}

/// Input offset of tap (fy, fx) of output pixel (oy, ox), or `None` in the padding.
#[inline]
fn tap_offset(w: &Window, b: usize, oy: usize, ox: usize, fy: usize, fx: usize) -> Option<usize> {
    let iy = (oy * w.stride_h + fy).checked_sub(w.padding.top)?;
    let ix = (ox * w.stride_w + fx).checked_sub(w.padding.left)?;
    (iy < w.input.h && ix < w.input.w).then(|| w.input.offset(b, iy, ix, 0))
}

/// The output columns whose whole window is inside the input horizontally.
fn interior_columns(w: &Window) -> (usize, usize) {
    let ow = w.output.w;
    let lo = w.padding.left.div_ceil(w.stride_w).min(ow);
    let hi = if w.input.w + w.padding.left >= w.filter_w {
        ((w.input.w + w.padding.left - w.filter_w) / w.stride_w + 1).min(ow)
    } else {
        0
    };
    (lo, hi.max(lo))
}

/// The longest zero row an interior run may use (see `row_fast`).
const ZERO_ROW_MAX: usize = 1 << 20;

/// One output row: every border pixel is its own kernel call with per-tap pointers (padding
/// taps on the zero row); the interior columns are one call whose taps advance by
/// `stride_w·c` per pixel (a vertically padded tap walks along the zero row).
fn row_fast(w: &Window, f: &FastDw, input: &[u8], b: usize, oy: usize, row: &mut [u8]) {
    let c = w.output.c;
    let step = w.stride_w * c;
    let ntaps = w.filter_h * w.filter_w;
    let (lo, mut hi) = interior_columns(w);
    // The interior run's padding taps walk a zero row `ow·stride_w·c` long (plus the two
    // columns past the last pixel's first that a 3-column run reads from the row's start), and
    // the stride is the model's word: past a bound (a stride of millions makes it gigabytes),
    // every pixel is its own call instead, which reads `c` bytes of the row.
    let zero_len = match w
        .output
        .w
        .checked_mul(step)
        .and_then(|n| n.checked_add(c.checked_mul(3)?))
    {
        Some(n) if n <= ZERO_ROW_MAX => n,
        _ => {
            hi = lo;
            c
        }
    };
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let s = &mut *s;
        // The channels the per-pixel kernels run: all of them, or those before a tail that
        // went through tap quads.
        let c_main = match &f.dw4 {
            Some(d4) => row_quads(w, f, d4, input, b, oy, row, s),
            None => c,
        };
        if c_main == 0 {
            return;
        }
        if s.zero_row.len() < zero_len || s.zero_row.first() != Some(&f.za) {
            s.zero_row.clear();
            s.zero_row.resize(zero_len, f.za);
        }
        let zeros = s.zero_row.as_ptr();
        let mut call = |taps: &mut Vec<*const u8>, ox: usize, width: usize, interior: bool| {
            if let (Some(d4), true) = (&f.dw4, interior) {
                if cols3(w, f, d4, input, b, oy, ox, width, zeros, c_main, row) {
                    return;
                }
            }
            if let (Some(d2), true) = (&f.dw2, interior) {
                if cols3_pairs(w, f, d2, input, b, oy, ox, width, zeros, row) {
                    return;
                }
            }
            taps.clear();
            let tap = |fy: usize, fx: usize| match tap_offset(w, b, oy, ox, fy, fx) {
                Some(off) => input[off..off + c].as_ptr(),
                None => zeros,
            };
            // Where the 3-column path takes the interior runs, the other pixels read the same
            // column-ordered packing (`wq`: group `fx` holds filter rows 0..4 of column `fx`,
            // zero weights past `kh`, whose taps repeat row 0's), so a row's sweep over the
            // channel blocks touches one packing, not two (with many channels the two passed
            // the L1 cache).
            let column_order = f.dw4.is_some() && cols3_fits(w);
            if column_order {
                for fx in 0..3 {
                    taps.extend((0..4).map(|j| tap(if j < w.filter_h { j } else { 0 }, fx)));
                }
            } else {
                for fy in 0..w.filter_h {
                    taps.extend((0..w.filter_w).map(|fx| tap(fy, fx)));
                }
            }
            let out = &mut row[ox * c..(ox + width) * c];
            if let Some(d4) = &f.dw4 {
                let (packing, ntaps) = if column_order {
                    (&d4.wq, 12)
                } else {
                    (&d4.w, ntaps)
                };
                let args = U8Dw4Args {
                    taps: taps.as_ptr(),
                    pixel_step: step,
                    ntaps,
                    width,
                    channels: c_main,
                    w: packing.as_ptr(),
                    out: out.as_mut_ptr(),
                    out_stride: c,
                    rq: f.rq,
                    per_channel: f.cols.is_some(),
                    negate: d4.negate,
                    left_shift: d4.left_shift,
                };
                // SAFETY: taps, pixels and output as for the int32 kernel below (of the `c`
                // channels it reads and writes the first `c_main`); the packing was built by
                // `pack_dw4` for these `ntaps` and `c` channels (the column-ordered one has
                // `ceil(kh/4)·3 = 3` groups of four taps, the 12 given here, in its order;
                // its last block's repeated high half is not read by the per-pixel kernel,
                // which runs a block of at most 32 channels on its low half).
                unsafe { (d4.dw.kernel)(&args) };
                return;
            }
            if let Some(d2) = &f.dw2 {
                // An odd tap count pairs its last tap with itself, against a zero weight.
                if ntaps % 2 == 1 {
                    taps.push(taps[ntaps - 1]);
                }
                let args = U8Dw2Args {
                    taps: taps.as_ptr(),
                    pixel_step: step,
                    pairs: ntaps.div_ceil(2),
                    width,
                    channels: c,
                    w: d2.w.as_ptr(),
                    out: out.as_mut_ptr(),
                    out_stride: c,
                    rq: f.rq,
                    col_rq: f.cols.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                };
                // SAFETY: taps, pixels, output and `col_rq` as for the int32 kernel below (the
                // repeated last tap is one of them); `pack_dw2` built the packing for these
                // `ntaps` (`ceil(ntaps/2)` pairs) and `c` channels.
                unsafe { (d2.dw.kernel)(&args) };
                return;
            }
            let args = U8DwArgs {
                taps: taps.as_ptr(),
                pixel_step: step,
                ntaps,
                width,
                channels: c,
                w: f.w.as_ptr(),
                out: out.as_mut_ptr(),
                out_stride: c,
                rq: f.rq,
                col_rq: f.cols.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            };
            // SAFETY: `taps` holds `ntaps` pointers. For a single pixel each addresses `c`
            // readable bytes. For the interior run every pixel's window is inside the input
            // horizontally, so an in-bounds tap advanced by `p·stride_w·c` stays inside its
            // input row, and a padding tap stays inside the zero row (`ow·step + c` bytes; an
            // interior run only exists when that length was allocated).
            // The packed weights cover `ceil(c/16)` blocks of `1 + ntaps` groups, `col_rq` is
            // null or `ceil(c/16)` blocks of constants, and `out` holds `width` pixels of `c`
            // bytes.
            unsafe { (f.dw.kernel)(&args) };
        };
        let taps = &mut s.taps;
        for ox in (0..lo).chain(hi..w.output.w) {
            call(taps, ox, 1, false);
        }
        if hi > lo {
            call(taps, lo, hi - lo, true);
        }
    });
}

/// Whether the window's filter and stride suit the byte kernel's 3-column path
/// ([`U8Dw4ColsArgs`]): 3 columns, at most 4 rows, horizontal stride 1.
fn cols3_fits(w: &Window) -> bool {
    w.filter_w == 3 && w.filter_h <= 4 && w.stride_w == 1
}

/// Whether [`depthwise_conv2d_u8`] with depth multiplier 1 runs the interior columns of
/// `w`'s rows on the byte kernel's 3-column path: how the tests check that their cases reach
/// it.
#[doc(hidden)]
pub fn runs_column_path(w: &Window, packed: &PackedDwU8) -> bool {
    let (lo, hi) = interior_columns(w);
    let zero_row_fits = w
        .output
        .w
        .checked_mul(w.stride_w * w.output.c)
        .and_then(|n| n.checked_add(w.output.c.checked_mul(3)?))
        .is_some_and(|n| n <= ZERO_ROW_MAX);
    matches!(&packed.imp, DwImpl::Fast(FastDw { dw4: Some(_), .. }))
        && cols3_fits(w)
        && hi > lo
        && zero_row_fits
}

/// The interior run `ox..ox + width` of an output row on the byte kernel's 3-column path
/// ([`U8Dw4ColsArgs`]), which builds each input column's tap quads once for the pixels
/// sharing it: filters of 3 columns and at most 4 rows, horizontal stride 1. Returns
/// whether it ran (otherwise the per-pixel kernel takes the run).
#[allow(clippy::too_many_arguments)]
fn cols3(
    w: &Window,
    f: &FastDw,
    d4: &FastDw4,
    input: &[u8],
    b: usize,
    oy: usize,
    ox: usize,
    width: usize,
    zeros: *const u8,
    channels: usize,
    row: &mut [u8],
) -> bool {
    if !cols3_fits(w) || width == 0 {
        return false;
    }
    let c = w.output.c;
    // Every pixel of the run has its window inside the input horizontally, so a row inside
    // the input vertically starts at tap (fy, 0) of pixel `ox`; a row in the padding reads
    // the zero row from its start.
    let rows = std::array::from_fn(|fy| {
        if fy >= w.filter_h {
            return std::ptr::null();
        }
        match tap_offset(w, b, oy, ox, fy, 0) {
            Some(off) => input[off..].as_ptr(),
            None => zeros,
        }
    });
    let out = &mut row[ox * c..(ox + width) * c];
    let args = U8Dw4ColsArgs {
        rows,
        kh: w.filter_h,
        pixel_bytes: c,
        width,
        channels,
        w: d4.wq.as_ptr(),
        out: out.as_mut_ptr(),
        out_stride: c,
        rq: f.rq,
        per_channel: f.cols.is_some(),
        negate: d4.negate,
        left_shift: d4.left_shift,
    };
    // SAFETY: pixel `p < width` of the run reads input columns `ox + p − left + fx`,
    // `fx < 3`, all inside the input row (the run is interior), `channels ≤ c` bytes each; a
    // padding row reads bytes below `(width + 2)·c ≤ ow·c + 2·c` of the zero row, which is
    // longer (`row_fast`). `wq` is the column-ordered packing
    // with `ceil(kh/4)·3 = 3` weight groups per block for these `c` channels, and `out`
    // holds `width` pixels of `c` bytes.
    unsafe { (d4.dw.cols3)(&args) };
    true
}

/// The interior run `ox..ox + width` of an output row on the tap-pair kernel's 3-column path
/// ([`U8Dw2ColsArgs`]): 3×3 filters at horizontal stride 1. Returns whether it ran
/// (otherwise the per-pixel kernel takes the run).
#[allow(clippy::too_many_arguments)]
fn cols3_pairs(
    w: &Window,
    f: &FastDw,
    d2: &FastDw2,
    input: &[u8],
    b: usize,
    oy: usize,
    ox: usize,
    width: usize,
    zeros: *const u8,
    row: &mut [u8],
) -> bool {
    let Some(w3) = &d2.w3 else { return false };
    if w.stride_w != 1 || width == 0 {
        return false;
    }
    let c = w.output.c;
    // As in `cols3`: a row inside the input starts at tap (fy, 0) of pixel `ox`, a row in the
    // padding reads the zero row from its start.
    let rows = std::array::from_fn(|fy| match tap_offset(w, b, oy, ox, fy, 0) {
        Some(off) => input[off..].as_ptr(),
        None => zeros,
    });
    let out = &mut row[ox * c..(ox + width) * c];
    let args = U8Dw2ColsArgs {
        rows,
        pixel_bytes: c,
        width,
        channels: c,
        w: w3.as_ptr(),
        out: out.as_mut_ptr(),
        out_stride: c,
        rq: f.rq,
        col_rq: f.cols.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
    };
    // SAFETY: pixel `p < width` of the run reads input columns `ox + p − left + fx`, `fx < 3`,
    // all inside the input row (the run is interior), `c` bytes each; a padding row reads
    // below `(width + 2)·c ≤ ow·c + 2·c` bytes of the zero row, which is longer (`row_fast`).
    // `w3` is the 3-column packing for these `c` channels, `col_rq` null or `ceil(c/16)`
    // blocks of constants, and `out` holds `width` pixels of `c` bytes.
    unsafe { (d2.dw.cols3)(&args) };
    true
}

/// The longest buffer of tap quads the byte kernel's row path uses (see `row_quads`).
const QUADS_MAX: usize = 1 << 20;

thread_local! {
    /// Set while every channel block at every stride up to the filter width goes through
    /// tap quads on this thread ([`with_all_quads`]).
    static ALL_QUADS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every channel block of every row at every horizontal stride up to the
/// filter width going through tap quads on this thread (see `row_quads`): how the tests reach
/// the quad layout's full blocks and wider strides. Splits inside `f` run on this thread too,
/// so the setting holds for the whole call.
#[doc(hidden)]
pub fn with_all_quads<R>(f: impl FnOnce() -> R) -> R {
    let was = ALL_QUADS.with(|s| s.replace(true));
    let r = crate::parallel::in_part(f);
    ALL_QUADS.with(|s| s.set(was));
    r
}

/// One output row's last channel block, when it has at most 32 channels, on the byte
/// dot-product kernel through tap quads: each row group's padded input columns are
/// interleaved once ([`crate::ukernels::quant8::U8Dw4QuadsArgs`]), then every output pixel,
/// border ones included, reads its taps' quads from there, two pixels per vector. Returns the
/// channels left to the per-pixel kernel (`c` when nothing was written here).
///
/// Only stride 1 and such narrow tails take this path (the tails of 32, 96 or 144 channels
/// of MobileNet v2, where it measured 6–14 % faster). For whole 64-channel blocks the quads'
/// stores cost about what the per-pixel unpacks they save do (±3 % at stride 1, 7–20 % slower
/// at stride 2 and on 7×7 rows), so those keep the per-pixel kernel; the layout and kernels
/// handle them and any stride up to `kw`, which the tests reach through [`with_all_quads`].
/// Rows whose quads pass [`QUADS_MAX`] keep the per-pixel kernel too.
#[allow(clippy::too_many_arguments)]
fn row_quads(
    w: &Window,
    f: &FastDw,
    d4: &FastDw4,
    input: &[u8],
    b: usize,
    oy: usize,
    row: &mut [u8],
    s: &mut Scratch,
) -> usize {
    let (kh, kw, sw) = (w.filter_h, w.filter_w, w.stride_w);
    let c = w.output.c;
    let all = ALL_QUADS.with(Cell::get);
    let tail = c % DW4_BLOCK;
    let first = if all {
        0
    } else if sw == 1 && (1..=DW4_BLOCK / 2).contains(&tail) {
        c / DW4_BLOCK
    } else {
        return c;
    };
    if sw > kw {
        return c;
    }
    let row_groups = kh.div_ceil(4);
    // Padded columns read by the row, and the buffer for 64-byte quads of all of them.
    let Some((per_phase, len)) = (w.output.w - 1)
        .checked_mul(sw)
        .and_then(|n| n.checked_add(kw))
        .map(|cols| cols.div_ceil(sw))
        .and_then(|pp| {
            let len = pp
                .checked_mul(sw)?
                .checked_mul(row_groups)?
                .checked_mul(4 * 64)?;
            Some((pp, len))
        })
        .filter(|&(_, len)| len <= QUADS_MAX)
    else {
        return c;
    };
    // 64 bytes of alignment and the 32 readable bytes past the last quad of a pixel pair.
    s.quads.resize(len + 128, 0);
    let start = s.quads.as_ptr().align_offset(64).min(64);
    let quads = s.quads[start..].as_mut_ptr();
    let groups = dw4_groups(kh, kw);
    let block_len = (DW4_HEAD_SLOTS + 4 * groups) * 64;
    let taps = &mut s.taps;
    for blk in first..c.div_ceil(DW4_BLOCK) {
        let off = blk * DW4_BLOCK;
        let n = (c - off).min(DW4_BLOCK);
        let e = dw4_quad_bytes(n);
        let plane = sw * per_phase * e;
        let k_step = row_groups * plane;
        for g in 0..row_groups {
            let rows = std::array::from_fn(|j| {
                let fy = 4 * g + j;
                (fy < kh)
                    .then(|| (oy * w.stride_h + fy).checked_sub(w.padding.top))
                    .flatten()
                    .filter(|&iy| iy < w.input.h)
                    .map_or(std::ptr::null(), |iy| {
                        input[w.input.offset(b, iy, 0, off)..].as_ptr()
                    })
            });
            let args = U8Dw4QuadsArgs {
                rows,
                pixel_bytes: c,
                in_w: w.input.w,
                pad_left: w.padding.left,
                stride: sw,
                per_phase,
                n,
                za: f.za,
                out: quads.wrapping_add(g * plane),
                k_step,
            };
            // SAFETY: each non-null row is input row `iy` of batch `b` from channel `off`:
            // `in_w` pixels of `c ≥ off + n` bytes. Column `pc < sw·per_phase` of group `g`,
            // vector `k`, goes to `(k·row_groups + g)·plane + ((pc mod sw)·per_phase + pc/sw)·e`
            // bytes past `quads`, below `4·row_groups·plane ≤ len`.
            unsafe { (d4.dw.quads)(&args) };
        }
        taps.clear();
        for g in 0..row_groups {
            taps.extend((0..kw).map(|fx| {
                quads
                    .wrapping_add(g * plane + ((fx % sw) * per_phase + fx / sw) * e)
                    .cast_const()
            }));
        }
        let args = U8Dw4RowArgs {
            quads: taps.as_ptr(),
            k_step,
            groups,
            width: w.output.w,
            n,
            w: d4.wq[blk * block_len..].as_ptr(),
            out: row[off..].as_mut_ptr(),
            out_stride: c,
            rq: f.rq,
            per_channel: f.cols.is_some(),
            negate: d4.negate,
            left_shift: d4.left_shift,
        };
        // SAFETY: pixel `px` reads column `px·sw + fx ≤ (ow − 1)·sw + kw − 1` of each group,
        // index `px + fx/sw < per_phase` of phase `fx mod sw`, written above; a pixel pair's
        // second half may reach 64 bytes past the last quad, inside the buffer's slack.
        // The packing of block `blk` is `block_len` bytes with `4·groups` weight slots, and
        // `row` holds `ow` pixels of `c` bytes, of which channels `off..off + n` are written.
        unsafe { (d4.dw.row)(&args) };
    }
    first * DW4_BLOCK
}

/// Depth multiplier ≠ 1: portable loop over the packed weights.
fn row_multiplier(
    w: &Window,
    m: usize,
    f: &FastDw,
    input: &[u8],
    b: usize,
    oy: usize,
    row: &mut [u8],
) {
    let c = w.output.c;
    let per_block = (1 + w.filter_h * w.filter_w) * DW_BLOCK;
    for (ox, px) in row.chunks_exact_mut(c).enumerate() {
        for (oc, o) in px.iter_mut().enumerate() {
            let base = (oc / DW_BLOCK) * per_block + oc % DW_BLOCK;
            let mut acc = f.w[base];
            for fy in 0..w.filter_h {
                for fx in 0..w.filter_w {
                    let t = fy * w.filter_w + fx;
                    let a = match tap_offset(w, b, oy, ox, fy, fx) {
                        Some(off) => input[off + oc / m],
                        None => f.za,
                    };
                    acc = acc.wrapping_add(i32::from(a) * f.w[base + (1 + t) * DW_BLOCK]);
                }
            }
            *o = match &f.cols {
                None => f.rq.apply(acc),
                Some(cols) => {
                    let base = (oc / DW_BLOCK) * 3 * DW_BLOCK + oc % DW_BLOCK;
                    let (m, l, r) = (cols[base], cols[base + DW_BLOCK], cols[base + 2 * DW_BLOCK]);
                    f.rq.apply_col(acc, m, l, r)
                }
            };
        }
    }
}
