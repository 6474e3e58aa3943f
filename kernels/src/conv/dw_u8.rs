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
//! 128, and otherwise when its values happen to.

use std::cell::RefCell;

use super::u8::{
    col_requant, put_cols, put_conv_quant, read_cols, read_conv_quant, requant8, split_units,
    ConvQuant,
};
use crate::aligned::AlignedBuf;
use crate::persist::{self, Persist, PersistError, Source};
use crate::quant::ChannelRequant;
use crate::ukernels::quant8::{
    dw4_col_constants, dw4_lane, Requant8, U8Dw, U8Dw4, U8Dw4Args, U8DwArgs, DW4_BLOCK,
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
}

#[derive(Debug)]
struct FastDw4 {
    dw: U8Dw4,
    w: AlignedBuf<u8>,
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
            .and_then(|dw| pack_dw4(dw, ntaps, out_c, &w, cols.as_ref()));
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
            DwImpl::Fast(f) => f.dw.name,
            DwImpl::Reference { .. } => "reference",
        }
    }
}

/// Repacks the int32 packing `w` (biases already holding the zero-point term) for the byte
/// dot-product kernel, or `None` when some channel has a weight outside −128..=127 and another
/// outside −127..=128 (neither the weights nor their negations fit signed bytes).
///
/// A channel whose weights fit only negated is packed as `−w` with bias `−bias`; the kernel
/// negates its sum back, `−(−bias + Σ a·(−w)) = bias + Σ a·w` (modulo 2^32, as the reference).
fn pack_dw4(
    dw: U8Dw4,
    ntaps: usize,
    out_c: usize,
    w: &AlignedBuf<i32>,
    cols: Option<&AlignedBuf<i32>>,
) -> Option<FastDw4> {
    let per_block = (1 + ntaps) * DW_BLOCK;
    let at =
        |oc: usize, slot: usize| w[(oc / DW_BLOCK) * per_block + slot * DW_BLOCK + oc % DW_BLOCK];
    let groups = ntaps.div_ceil(4);
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
            // In −128..=127 after the sign, checked above.
            out[base + 64 * (DW4_HEAD_SLOTS + 4 * (t / 4) + k) + t % 4] =
                (at(oc, 1 + t) * sign) as i8 as u8;
        }
    }
    Some(FastDw4 {
        dw,
        w: out,
        negate,
        left_shift,
    })
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
                    .and_then(|dw| pack_dw4(dw, taps, out_c, &w, cols.as_ref()));
                DwImpl::Fast(FastDw {
                    dw: uk.u8_dw,
                    w,
                    za,
                    rq,
                    cols,
                    dw4,
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
    // A depthwise multiply-add costs about ten GEMM ones (no dot product, a requantization
    // per nine of them).
    let work = w.output.len() * w.filter_h * w.filter_w * 10;
    split_units(units, work, |rows| {
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
    // The interior run's padding taps walk a zero row `ow·stride_w·c` long, and the stride is
    // the model's word: past a bound (a stride of millions makes it gigabytes), every pixel is
    // its own call instead, which reads `c` bytes of the row.
    let zero_len = match w.output.w.checked_mul(step).and_then(|n| n.checked_add(c)) {
        Some(n) if n <= ZERO_ROW_MAX => n,
        _ => {
            hi = lo;
            c
        }
    };
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let s = &mut *s;
        if s.zero_row.len() < zero_len || s.zero_row.first() != Some(&f.za) {
            s.zero_row.clear();
            s.zero_row.resize(zero_len, f.za);
        }
        let zeros = s.zero_row.as_ptr();
        let mut call = |taps: &mut Vec<*const u8>, ox: usize, width: usize| {
            taps.clear();
            for fy in 0..w.filter_h {
                for fx in 0..w.filter_w {
                    taps.push(match tap_offset(w, b, oy, ox, fy, fx) {
                        Some(off) => input[off..off + c].as_ptr(),
                        None => zeros,
                    });
                }
            }
            let out = &mut row[ox * c..(ox + width) * c];
            if let Some(d4) = &f.dw4 {
                let args = U8Dw4Args {
                    taps: taps.as_ptr(),
                    pixel_step: step,
                    ntaps,
                    width,
                    channels: c,
                    w: d4.w.as_ptr(),
                    out: out.as_mut_ptr(),
                    out_stride: c,
                    rq: f.rq,
                    per_channel: f.cols.is_some(),
                    negate: d4.negate,
                    left_shift: d4.left_shift,
                };
                // SAFETY: taps, pixels and output as for the int32 kernel below; the packing
                // was built by `pack_dw4` for these `ntaps` and `c` channels.
                unsafe { (d4.dw.kernel)(&args) };
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
            call(taps, ox, 1);
        }
        if hi > lo {
            call(taps, lo, hi - lo);
        }
    });
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
