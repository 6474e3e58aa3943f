//! uint8 CONV_2D and FULLY_CONNECTED on the GEMM micro-kernel of the table
//! ([`crate::ukernels::quant8::U8Gemm`]), bit-exact with [`crate::conv::reference::conv2d_u8`] and
//! [`crate::conv::reference::fully_connected_u8`].
//!
//! Zero-point algebra. With `s` the slot's weight shift, stored weights `w' = w − s` and
//! `zw' = zw − s`, over the K taps of one output:
//!
//! `Σ (a − za)(w − zw) = Σ a·w' − zw'·Σa − za·Σw' + K·za·zw'`
//!
//! The last two terms are per output channel and go into the packed bias at packing time;
//! `−zw'·Σa` is per output pixel and is computed once per row of A (a pass over A that costs
//! about 1/N of the GEMM). Everything holds modulo 2^32, so wrapping int32 arithmetic in any
//! order gives exactly the reference's wrapping accumulator. Spatial padding taps are
//! materialised as `a = za` (their `(a − za)` is 0 and they count in K); the bytes that round K
//! up to a multiple of 4 are `a = 0` with `w' = 0` and count nowhere.
//!
//! 1×1 stride-1 unpadded convolutions and FULLY_CONNECTED run the GEMM directly on the input
//! rows; every other convolution copies panels of im2col rows into a per-thread scratch buffer.
//!
//! Parameters the fast path cannot represent but the reference accepts (zero points outside
//! 0..=255, a right shift above 31) are delegated to the reference kernels unchanged.

use std::cell::RefCell;
use std::ops::Range;

use super::FilterShape;
use crate::aligned::AlignedBuf;
use crate::conv::reference::taps;
use crate::parallel::{pays_to_split, speed, split_rows, MIN_U8_MACS};
use crate::persist::{self, Persist, PersistError, Source as Image};
use crate::quant::{ChannelRequant, Requantize, RequantizeAny};
use crate::ukernels::quant8::{
    fuse_cols, Requant8, U8Gemm, U8GemmArgs, U8RowSum, FUSED_GROUP, FUSED_GROUP_LEN,
};
use crate::ukernels::tile::{
    SoftTiles, TileBackend, TileConfig, TileUnit, U8EpilogueArgs, U8Tiles, EPILOGUE_COL_BLOCK,
    TILE_KB, TILE_MR, TILE_NR,
};
use crate::ukernels::Ukernels;
use crate::{Activation, KernelError, QuantParams, Window};

/// Quantization of a convolution-like op: input/filter/output params and the fused activation.
#[derive(Clone, Copy, Debug)]
pub struct ConvQuant {
    pub input: QuantParams,
    pub filter: QuantParams,
    pub output: QuantParams,
    pub act: Activation,
}

/// The requantizer of `q` as the reference builds it. `Err` exactly when the reference
/// fails; `Ok(None)` when the reference works but the fast kernels cannot represent the
/// parameters.
pub(crate) fn requant8(q: &ConvQuant) -> Result<Option<Requant8>, KernelError> {
    let rq = Requantize::for_conv(q.input, q.filter, q.output, q.act).ok_or_else(|| {
        KernelError::InvalidData(format!(
            "quantized multiplier {} · {} / {} is not in [0, 1)",
            q.input.scale, q.filter.scale, q.output.scale
        ))
    })?;
    if rq.min > rq.max {
        return Err(KernelError::InvalidData(format!(
            "empty activation range {}..={} for output zero point {}",
            rq.min, rq.max, q.output.zero_point
        )));
    }
    let byte = |z: i32| (0..=255).contains(&z);
    let representable = byte(q.input.zero_point)
        && byte(q.filter.zero_point)
        && byte(q.output.zero_point)
        && (0..=31).contains(&rq.right_shift);
    if !representable {
        return Ok(None);
    }
    Ok(Some(Requant8 {
        multiplier: rq.multiplier,
        shift: rq.right_shift as u32,
        zero_point: rq.zero_point,
        lo: rq.min - rq.zero_point,
        hi: rq.max - rq.zero_point,
    }))
}

/// The per-channel requantizers `rq` in the kernels' form: the shared zero point and bounds
/// as a [`Requant8`] (its multiplier and shift those of channel 0), and the per-column
/// constants in blocks of `width` columns ([`crate::ukernels::quant8::ColRequant`]; the
/// columns past the last channel requantize with multiplier 0). `None` when the kernels cannot
/// represent them (no channels, a zero point or bound outside 0..=255, a shift out of range).
pub(crate) fn col_requant(
    rq: &[RequantizeAny],
    width: usize,
) -> Option<(Requant8, AlignedBuf<i32>)> {
    let n = rq.len();
    let first = *rq.first()?;
    let byte = |z: i32| (0..=255).contains(&z);
    if !(byte(first.zero_point) && byte(first.min) && byte(first.max) && first.min <= first.max) {
        return None;
    }
    let mut cols = AlignedBuf::<i32>::zeroed(n.div_ceil(width) * 3 * width);
    for (c, ch) in rq.iter().enumerate() {
        let shared = (ch.zero_point, ch.min, ch.max) == (first.zero_point, first.min, first.max);
        if !(shared
            && ch.multiplier >= 0
            && (0..=30).contains(&ch.left_shift)
            && (0..=31).contains(&ch.right_shift))
        {
            return None;
        }
        let base = (c / width) * 3 * width + c % width;
        cols[base] = ch.multiplier;
        cols[base + width] = ch.left_shift;
        cols[base + 2 * width] = ch.right_shift;
    }
    let head = Requant8 {
        multiplier: first.multiplier,
        shift: first.right_shift as u32,
        zero_point: first.zero_point,
        lo: first.min - first.zero_point,
        hi: first.max - first.zero_point,
    };
    Some((head, cols))
}

/// Output base pointer shared by the tasks of one operation, each of which writes a disjoint
/// set of output elements: the requantized bytes, or (second pointer non-null) the raw int32
/// sums at the same element offsets.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub *mut u8, pub *mut i32);
// SAFETY: the pointer is only dereferenced by micro-kernels on output regions that the
// operator loop hands to exactly one task, so sharing it between threads creates no aliasing.
unsafe impl Send for OutPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The address `offset` bytes past the base (computing it is safe; writing through it is
    /// the caller's business).
    #[inline]
    pub(crate) fn at(self, offset: usize) -> *mut u8 {
        self.0.wrapping_add(offset)
    }

    /// The raw-sum address `offset` values past the base, or null when there is none.
    #[inline]
    pub(crate) fn raw_at(self, offset: usize) -> *mut i32 {
        if self.1.is_null() {
            self.1
        } else {
            self.1.wrapping_add(offset)
        }
    }
}

/// Runs `body` on `units` work units: on a pool worker and when `work` (the operation's cost
/// in GEMM multiply-adds) is worth it, split into about two contiguous ranges per thread (one
/// fork-join); otherwise in one piece on the calling thread.
pub(crate) fn split_units(units: usize, work: usize, body: impl Fn(Range<usize>) + Sync) {
    let threads = if work >= MIN_U8_MACS {
        crate::parallel::threads()
    } else {
        1
    };
    let chunks = (2 * threads).min(units);
    if threads <= 1 || chunks <= 1 {
        body(0..units);
        return;
    }
    crate::parallel::for_parts(chunks, |c| {
        body(c * units / chunks..(c + 1) * units / chunks)
    });
}

/// Packed weights of a uint8 CONV_2D or FULLY_CONNECTED for one kernel table.
#[derive(Debug)]
pub struct PackedConvU8 {
    shape: FilterShape,
    imp: ConvImpl,
}

#[derive(Debug)]
enum ConvImpl {
    Fast(FastConv),
    Reference {
        filter: Vec<u8>,
        bias: Vec<i32>,
        q: ConvQuant,
    },
}

#[derive(Debug)]
struct FastConv {
    gemm: U8Gemm,
    row_sum: U8RowSum,
    /// Taps per output (`kh·kw·in_c`) and that rounded up to a multiple of 4.
    k: usize,
    kp: usize,
    /// Blocks of `nr` channels: `kp/4` groups of `nr × 4` bytes each.
    w: AlignedBuf<u8>,
    /// `bias + K·za·zw' − za·Σw'` per channel, padded to whole blocks.
    bias: AlignedBuf<i32>,
    /// `zw' = zw − weight_shift`.
    zw: i32,
    za: u8,
    rq: Requant8,
    /// Per-channel requantization ([`crate::ukernels::quant8::ColRequant`] blocks of `nr`), or
    /// `None` for the per-tensor `rq`.
    cols: Option<AlignedBuf<i32>>,
    /// `cols` in the fused form ([`crate::ukernels::quant8::ColFused`] blocks of `nr`) when
    /// every left shift is 0. Derived from `cols` (at packing and at restoring), never stored.
    fused: Option<AlignedBuf<i64>>,
    /// The tile-matrix form, when the table has one.
    tiles: Option<Box<TilePack>>,
}

/// The weights of the tile path ([`crate::ukernels::tile`]): blocks of [`TILE_NR`] channels,
/// `kp/4` groups of `64 × 4` bytes each (a group is one k-quad row of four B tiles, so a B
/// tile is 16 consecutive groups read with a 256-byte stride), signed (`w − 128`).
#[derive(Debug)]
struct TilePack {
    unit: U8Tiles,
    w: AlignedBuf<u8>,
    /// `bias + K·za·zw' − za·Σw'` per channel, padded to whole blocks.
    bias: AlignedBuf<i32>,
    /// `zw' = zw − 128`.
    zw: i32,
    /// Per-channel requantization in blocks of [`EPILOGUE_COL_BLOCK`] columns, or `None`.
    cols: Option<AlignedBuf<i32>>,
}

impl PackedConvU8 {
    /// `filter` is `[out_c, kh, kw, in_c]` u8, `bias` `[out_c]` i32 (FULLY_CONNECTED: `kh = kw = 1`).
    /// Errors exactly when the reference would (multiplier not representable, empty
    /// activation range).
    pub fn pack(
        uk: &Ukernels,
        shape: FilterShape,
        filter: &[u8],
        bias: &[i32],
        q: ConvQuant,
    ) -> Result<PackedConvU8, KernelError> {
        let (n, k) = (shape.out_c, shape.taps());
        assert_eq!(filter.len(), n * k, "filter length");
        assert_eq!(bias.len(), n, "bias length");
        let Some(rq) = requant8(&q)? else {
            return Ok(PackedConvU8 {
                shape,
                imp: ConvImpl::Reference {
                    filter: filter.to_vec(),
                    bias: bias.to_vec(),
                    q,
                },
            });
        };
        Ok(Self::fast(uk, shape, filter, bias, &q, rq, None))
    }

    /// A convolution with a TENSOR_QUANT8_SYMM_PER_CHANNEL filter: `filter_image` is the
    /// filter's unsigned image (`int8 + 128`, zero point 128), `rq` the per-channel
    /// requantizers ([`ChannelRequant::per_channel`]). `None` when the kernels cannot represent
    /// the parameters (the caller keeps the reference); bit-exact with
    /// [`crate::conv::reference::conv2d_u8_channels`] otherwise.
    pub fn pack_channels(
        uk: &Ukernels,
        shape: FilterShape,
        filter_image: &[u8],
        bias: &[i32],
        input: QuantParams,
        rq: &ChannelRequant,
    ) -> Option<PackedConvU8> {
        Self::pack_requant(uk, shape, filter_image, 128, bias, input, rq.as_slice())
    }

    /// A uint8 filter with zero point `filter_zp` and one requantizer per output channel
    /// (`rq[c]`, any multiplier a left shift of at most 30 holds; all with the same zero point
    /// and bounds): the accumulator of channel `c` is `Σ (a − za)(w − filter_zp) + bias[c]`,
    /// requantized by `rq[c]`. `None` when the kernels cannot represent the parameters.
    pub fn pack_requant(
        uk: &Ukernels,
        shape: FilterShape,
        filter: &[u8],
        filter_zp: i32,
        bias: &[i32],
        input: QuantParams,
        rq: &[RequantizeAny],
    ) -> Option<PackedConvU8> {
        let (n, k) = (shape.out_c, shape.taps());
        if filter.len() != n * k || bias.len() != n || rq.len() != n {
            return None;
        }
        let byte = |z: i32| (0..=255).contains(&z);
        if !(byte(input.zero_point) && byte(filter_zp)) {
            return None;
        }
        let (head, cols) = col_requant(rq, uk.u8_gemm.nr)?;
        let tile_cols = uk
            .u8_tiles
            .and_then(|_| col_requant(rq, EPILOGUE_COL_BLOCK))
            .map(|(_, c)| c);
        let filter_image = filter;
        let q = ConvQuant {
            input,
            filter: QuantParams::new(1.0, filter_zp),
            output: QuantParams::new(1.0, head.zero_point),
            act: Activation::None,
        };
        Some(Self::fast(
            uk,
            shape,
            filter_image,
            bias,
            &q,
            head,
            Some((cols, tile_cols)),
        ))
    }

    /// A GEMM without requantization ([`fully_connected_u8_raw`]): `filter` `[out_c, in_c]`
    /// (`shape` with `kh = kw = 1`) with zero point `filter_zp`, input zero point `input_zp`.
    /// `None` when a zero point is outside 0..=255.
    pub fn pack_raw(
        uk: &Ukernels,
        shape: FilterShape,
        filter: &[u8],
        filter_zp: i32,
        input_zp: i32,
    ) -> Option<PackedConvU8> {
        let byte = |z: i32| (0..=255).contains(&z);
        if !(byte(filter_zp) && byte(input_zp)) || filter.len() != shape.out_c * shape.taps() {
            return None;
        }
        let q = ConvQuant {
            input: QuantParams::new(1.0, input_zp),
            filter: QuantParams::new(1.0, filter_zp),
            output: QuantParams::new(1.0, 0),
            act: Activation::None,
        };
        let rq = Requant8 {
            multiplier: 0,
            shift: 0,
            zero_point: 0,
            lo: 0,
            hi: 255,
        };
        let bias = vec![0; shape.out_c];
        Some(Self::fast(uk, shape, filter, &bias, &q, rq, None))
    }

    /// Packs for the table's GEMM (and its tile form, if any); only the zero points of `q`
    /// are read. `cols`: the per-channel constants in blocks of the GEMM's `nr` and, when they
    /// are representable, of [`EPILOGUE_COL_BLOCK`].
    fn fast(
        uk: &Ukernels,
        shape: FilterShape,
        filter: &[u8],
        bias: &[i32],
        q: &ConvQuant,
        rq: Requant8,
        cols: Option<(AlignedBuf<i32>, Option<AlignedBuf<i32>>)>,
    ) -> PackedConvU8 {
        let (n, k) = (shape.out_c, shape.taps());
        let g = uk.u8_gemm;
        let kp = k.div_ceil(4) * 4;
        let za = q.input.zero_point;
        let zw = q.filter.zero_point - g.weight_shift;
        let (w, pb) = pack_blocks(filter, bias, n, k, g.nr, g.weight_shift, za, zw);
        let (cols, tile_cols) = match cols {
            Some((c, t)) => (Some(c), t.map(Some)),
            None => (None, Some(None)),
        };
        // A per-channel table the tile epilogue cannot take keeps the register-tile kernel.
        let tiles = uk.u8_tiles.zip(tile_cols).map(|(unit, cols)| {
            let zw = q.filter.zero_point - 128;
            let (w, bias) = pack_blocks(filter, bias, n, k, TILE_NR, 128, za, zw);
            Box::new(TilePack {
                unit,
                w,
                bias,
                zw,
                cols,
            })
        });
        PackedConvU8 {
            shape,
            imp: ConvImpl::Fast(FastConv {
                gemm: g,
                row_sum: uk.u8_row_sum,
                k,
                kp,
                w,
                bias: pb,
                zw,
                za: za as u8,
                rq,
                fused: cols.as_ref().and_then(|c| fuse_cols(c, g.nr)),
                cols,
                tiles,
            }),
        }
    }

    /// The tile kernel that runs products of enough rows, if any.
    pub fn tile_kernel_name(&self) -> Option<&'static str> {
        match &self.imp {
            ConvImpl::Fast(f) => f.tiles.as_ref().map(|t| t.unit.name),
            ConvImpl::Reference { .. } => None,
        }
    }

    /// The filter extents this was packed for.
    pub fn shape(&self) -> FilterShape {
        self.shape
    }

    /// The micro-kernel that runs this convolution, or `"reference"`.
    pub fn kernel_name(&self) -> &'static str {
        match &self.imp {
            ConvImpl::Fast(f) => f.gemm.name,
            ConvImpl::Reference { .. } => "reference",
        }
    }
}

/// What [`PackedConvU8`]'s image starts its implementation with.
const IMAGE_REFERENCE: u8 = 0;
const IMAGE_FAST: u8 = 1;

pub(crate) fn put_conv_quant(out: &mut Vec<u8>, q: &ConvQuant) {
    for p in [q.input, q.filter, q.output] {
        persist::put_quant(out, p);
    }
    persist::put_act(out, q.act);
}

pub(crate) fn read_conv_quant(src: &mut Image<'_>) -> Result<ConvQuant, PersistError> {
    Ok(ConvQuant {
        input: src.quant()?,
        filter: src.quant()?,
        output: src.quant()?,
        act: src.act()?,
    })
}

/// Optional per-channel requantization constants in blocks of `width` columns for `n`
/// channels, each within the ranges [`col_requant`] builds (the kernels shift by them).
pub(crate) fn read_cols(
    src: &mut Image<'_>,
    n: usize,
    width: usize,
) -> Result<Option<AlignedBuf<i32>>, PersistError> {
    if src.u8()? == 0 {
        return Ok(None);
    }
    let cols: AlignedBuf<i32> = src.buf(n.div_ceil(width) * 3 * width)?;
    for block in cols.chunks_exact(3 * width) {
        let (m, rest) = block.split_at(width);
        let (left, right) = rest.split_at(width);
        if m.iter().any(|&v| v < 0)
            || left.iter().any(|v| !(0..=30).contains(v))
            || right.iter().any(|v| !(0..=31).contains(v))
        {
            return Err(PersistError("per-channel requantizer out of range".into()));
        }
    }
    Ok(Some(cols))
}

pub(crate) fn put_cols(out: &mut Vec<u8>, cols: Option<&AlignedBuf<i32>>) {
    match cols {
        None => out.push(0),
        Some(c) => {
            out.push(1);
            persist::put_slice(out, c);
        }
    }
}

impl Persist for PackedConvU8 {
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_shape(out, self.shape);
        match &self.imp {
            ConvImpl::Reference { filter, bias, q } => {
                out.push(IMAGE_REFERENCE);
                persist::put_slice(out, filter);
                persist::put_slice(out, bias);
                put_conv_quant(out, q);
            }
            ConvImpl::Fast(f) => {
                out.push(IMAGE_FAST);
                persist::put_u32(out, f.zw as u32);
                out.push(f.za);
                persist::put_requant8(out, &f.rq);
                persist::put_slice(out, &f.w);
                persist::put_slice(out, &f.bias);
                put_cols(out, f.cols.as_ref());
                match &f.tiles {
                    None => out.push(0),
                    Some(t) => {
                        out.push(1);
                        persist::put_u32(out, t.zw as u32);
                        persist::put_slice(out, &t.w);
                        persist::put_slice(out, &t.bias);
                        put_cols(out, t.cols.as_ref());
                    }
                }
            }
        }
    }

    fn restore(uk: &Ukernels, src: &mut Image<'_>) -> Result<Self, PersistError> {
        let shape = src.shape()?;
        let (n, k) = (shape.out_c, shape.taps());
        let imp = match src.u8()? {
            IMAGE_REFERENCE => ConvImpl::Reference {
                filter: src.vec(n * k)?,
                bias: src.vec(n)?,
                q: read_conv_quant(src)?,
            },
            IMAGE_FAST => {
                let g = uk.u8_gemm;
                let kp = k.div_ceil(4) * 4;
                let zw = src.i32()?;
                let za = src.u8()?;
                let rq = src.requant8()?;
                let blocks = n.div_ceil(g.nr);
                let w = src.buf(blocks * kp * g.nr)?;
                let bias = src.buf(blocks * g.nr)?;
                let cols = read_cols(src, n, g.nr)?;
                let tiles = match src.u8()? {
                    0 => None,
                    _ => {
                        let unit = uk.u8_tiles.ok_or_else(|| {
                            PersistError("tile weights for a table without tiles".into())
                        })?;
                        let zw = src.i32()?;
                        let blocks = n.div_ceil(TILE_NR);
                        Some(Box::new(TilePack {
                            unit,
                            zw,
                            w: src.buf(blocks * kp * TILE_NR)?,
                            bias: src.buf(blocks * TILE_NR)?,
                            cols: read_cols(src, n, EPILOGUE_COL_BLOCK)?,
                        }))
                    }
                };
                ConvImpl::Fast(FastConv {
                    gemm: g,
                    row_sum: uk.u8_row_sum,
                    k,
                    kp,
                    w,
                    bias,
                    zw,
                    za,
                    rq,
                    fused: cols.as_ref().and_then(|c| fuse_cols(c, g.nr)),
                    cols,
                    tiles,
                })
            }
            tag => return Err(PersistError(format!("uint8 convolution kind {tag}"))),
        };
        Ok(PackedConvU8 { shape, imp })
    }
}

/// Packs the `[n, k]` filter into blocks of `nr` channels, `ceil(k/4)` groups of `nr × 4`
/// bytes (four consecutive k per channel, zero-filled), each weight stored as `w − shift`, and
/// the per-channel bias `bias + K·za·zw − za·Σ(w − shift)` (`zw` already shifted).
#[allow(clippy::too_many_arguments)]
fn pack_blocks(
    filter: &[u8],
    bias: &[i32],
    n: usize,
    k: usize,
    nr: usize,
    shift: i32,
    za: i32,
    zw: i32,
) -> (AlignedBuf<u8>, AlignedBuf<i32>) {
    let kp = k.div_ceil(4) * 4;
    let blocks = n.div_ceil(nr);
    let mut w = AlignedBuf::<u8>::zeroed(blocks * kp * nr);
    let mut pb = AlignedBuf::<i32>::zeroed(blocks * nr);
    let k_za_zw = (k as i32).wrapping_mul(za).wrapping_mul(zw);
    for (oc, row) in filter.chunks_exact(k.max(1)).take(n).enumerate() {
        let base = (oc / nr) * kp * nr + (oc % nr) * 4;
        let mut sum = 0i32;
        for (kk, &f) in row.iter().enumerate() {
            let v = i32::from(f) - shift;
            sum = sum.wrapping_add(v);
            // Two's-complement byte: a signed value for shift 128, the raw byte for 0.
            w[base + (kk / 4) * nr * 4 + kk % 4] = v as u8;
        }
        pb[oc] = bias[oc]
            .wrapping_add(k_za_zw)
            .wrapping_sub(za.wrapping_mul(sum));
    }
    if k == 0 {
        for (oc, &b) in bias.iter().enumerate() {
            pb[oc] = b;
        }
    }
    (w, pb)
}

/// Where the rows of A come from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Row `m` is `a[m·stride .. m·stride + k]`.
    Direct { a: &'a [u8], stride: usize },
    /// Row `m` is the im2col row of output pixel `m` of `w`.
    Im2col { w: &'a Window, input: &'a [u8] },
}

/// Rows per A panel: the row corrections of a panel live in a stack array of this size.
const PANEL_MAX: usize = 64;

/// A per-thread im2col panel. Its row layout `(k, kp)` is remembered: the bytes from `k` to
/// `kp` of every row are zeroed when the panel is (re)laid out and never written afterwards.
#[derive(Default)]
struct Im2col {
    buf: AlignedBuf<u8>,
    layout: (usize, usize),
}

thread_local! {
    static IM2COL: RefCell<Im2col> = RefCell::new(Im2col::default());
}

/// CONV_2D, uint8, bit-exact with [`crate::conv::reference::conv2d_u8`]. `input` and `output` are
/// NHWC with the extents of `w`; the filter extents must be the packed ones.
pub fn conv2d_u8(w: &Window, packed: &PackedConvU8, input: &[u8], output: &mut [u8]) {
    let s = packed.shape;
    assert_eq!(
        (w.filter_h, w.filter_w, w.input.c, w.output.c),
        (s.kh, s.kw, s.in_c, s.out_c),
        "filter extents"
    );
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert_eq!(w.input.n, w.output.n, "batch");
    match &packed.imp {
        ConvImpl::Reference { filter, bias, q } => crate::conv::reference::conv2d_u8(
            w, input, q.input, filter, q.filter, bias, q.output, q.act, output,
        )
        .expect("parameters validated at packing"),
        ConvImpl::Fast(f) => {
            let m = w.output.n * w.output.h * w.output.w;
            let direct = s.kh == 1
                && s.kw == 1
                && w.stride_h == 1
                && w.stride_w == 1
                && w.padding == crate::Padding::default()
                && (w.output.h, w.output.w) == (w.input.h, w.input.w);
            let src = if direct {
                Source::Direct {
                    a: input,
                    stride: s.in_c,
                }
            } else {
                assert!(w.stride_h > 0 && w.stride_w > 0, "stride");
                Source::Im2col { w, input }
            };
            let out = OutPtr(output.as_mut_ptr(), std::ptr::null_mut());
            run_gemm(f, s.out_c, m, src, out);
        }
    }
}

/// FULLY_CONNECTED, uint8, bit-exact with [`crate::conv::reference::fully_connected_u8`]: `input`
/// is `[rows, in_c]`, `output` is `[rows, out_c]` (packed with `kh = kw = 1`).
pub fn fully_connected_u8(packed: &PackedConvU8, rows: usize, input: &[u8], output: &mut [u8]) {
    let s = packed.shape;
    let k = s.taps();
    assert_eq!(input.len(), rows * k, "input length");
    assert_eq!(output.len(), rows * s.out_c, "output length");
    match &packed.imp {
        ConvImpl::Reference { filter, bias, q } => crate::conv::reference::fully_connected_u8(
            rows, k, s.out_c, input, q.input, filter, q.filter, bias, q.output, q.act, output,
        )
        .expect("parameters validated at packing"),
        ConvImpl::Fast(f) => run_gemm(
            f,
            s.out_c,
            rows,
            Source::Direct {
                a: input,
                stride: k,
            },
            OutPtr(output.as_mut_ptr(), std::ptr::null_mut()),
        ),
    }
}

/// FULLY_CONNECTED without requantization, for a GEMM packed by
/// [`PackedConvU8::pack_raw`]: `raw[r·out_c + n] = Σ_k (input[r][k] − za)·(w[n][k] − zw)`
/// (wrapping int32), split over the pool like [`fully_connected_u8`].
pub fn fully_connected_u8_raw(packed: &PackedConvU8, rows: usize, input: &[u8], raw: &mut [i32]) {
    let s = packed.shape;
    let k = s.taps();
    assert_eq!(input.len(), rows * k, "input length");
    assert_eq!(raw.len(), rows * s.out_c, "output length");
    let ConvImpl::Fast(f) = &packed.imp else {
        unreachable!("pack_raw packs for the GEMM only");
    };
    let src = Source::Direct {
        a: input,
        stride: k,
    };
    run_gemm(
        f,
        s.out_c,
        rows,
        src,
        OutPtr(std::ptr::null_mut(), raw.as_mut_ptr()),
    );
}

/// The whole `m × n` product, split once over the pool: along M when there are enough row
/// tiles; otherwise (the small late layers, FULLY_CONNECTED of one row) over the cells of
/// one row tile × one channel block, channel block by channel block, so that the threads get
/// equal shares whatever the counts of tiles and blocks (7 tiles × 5 blocks is 18 + 17 cells
/// on two threads, where whole tiles would be 4 + 3) and each thread streams only its own
/// blocks of weights.
fn run_gemm(f: &FastConv, n: usize, m: usize, src: Source<'_>, out: OutPtr) {
    if m == 0 || n == 0 {
        return;
    }
    if let Some(t) = f.tiles.as_ref().filter(|t| m >= t.unit.min_rows && f.k > 0) {
        run_tiles(f, t, n, m, src, out);
        return;
    }
    let g = f.gemm;
    let tiles = m.div_ceil(g.mr);
    let blocks = n.div_ceil(g.nr);
    let threads = crate::parallel::threads();
    let work = m * n * f.k;
    if tiles >= 4 * threads {
        split_units(tiles, work, |t| {
            let rows = t.start * g.mr..(t.end * g.mr).min(m);
            region(f, n, src, out, rows, 0..blocks);
        });
    } else {
        // A product of few rows is bound by reading its weights (one pass over `n·kp` bytes,
        // most of them from beyond the core's own caches) as much as by its multiply-adds.
        let split = work >= MIN_U8_MACS || pays_to_split(n * f.kp, speed::U8_WEIGHT_BYTES);
        split_rows(tiles * blocks, split, |c| {
            cells(f, n, m, src, out, tiles, c)
        });
    }
}

/// The cells `c` of the `m × n` product, numbered channel block by channel block (cell `i` is
/// row tile `i % tiles` of block `i / tiles`): whole blocks in one [`region`], the partial
/// blocks at the ends of the range in one each.
fn cells(
    f: &FastConv,
    n: usize,
    m: usize,
    src: Source<'_>,
    out: OutPtr,
    tiles: usize,
    c: Range<usize>,
) {
    let mr = f.gemm.mr;
    let mut i = c.start;
    while i < c.end {
        let (b, t0) = (i / tiles, i % tiles);
        let whole = (c.end - i) / tiles;
        if t0 == 0 && whole > 0 {
            region(f, n, src, out, 0..m, b..b + whole);
            i += whole * tiles;
        } else {
            let t1 = tiles.min(t0 + (c.end - i));
            region(f, n, src, out, t0 * mr..(t1 * mr).min(m), b..b + 1);
            i += t1 - t0;
        }
    }
}

/// Computes output rows `rows` × channel blocks `blocks`, panel by panel.
fn region(
    f: &FastConv,
    n: usize,
    src: Source<'_>,
    out: OutPtr,
    rows: Range<usize>,
    blocks: Range<usize>,
) {
    let g = f.gemm;
    let panel = (PANEL_MAX / g.mr).max(1) * g.mr;
    let mut p0 = rows.start;
    while p0 < rows.end {
        let np = panel.min(rows.end - p0);
        match src {
            Source::Direct { a, stride } => {
                let a = &a[p0 * stride..(p0 + np - 1) * stride + f.k];
                panel_gemm(f, n, a, stride, f.k, p0, np, out, blocks.clone());
            }
            Source::Im2col { w, input } => IM2COL.with(|s| {
                let mut s = s.borrow_mut();
                if s.layout != (f.k, f.kp) || s.buf.len() < panel * f.kp {
                    if s.buf.len() < panel * f.kp {
                        s.buf = AlignedBuf::zeroed(panel * f.kp);
                    } else {
                        s.buf.fill(0);
                    }
                    s.layout = (f.k, f.kp);
                }
                let a = &mut s.buf[..np * f.kp];
                im2col_panel(w, input, f.za, p0, a, f.kp);
                panel_gemm(f, n, a, f.kp, f.kp, p0, np, out, blocks.clone());
            }),
        }
        p0 += np;
    }
}

/// `dst.copy_from_slice(src)` for the short spans of im2col (a window row of a thin input
/// is a few bytes): fixed-size, possibly overlapping moves instead of a `memcpy` call.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    /// Copies `src[..N]` and `src[n − N..]` through registers.
    #[inline(always)]
    fn ends<const N: usize>(dst: &mut [u8], src: &[u8]) {
        let n = dst.len();
        let head: [u8; N] = src[..N].try_into().unwrap();
        let tail: [u8; N] = src[n - N..].try_into().unwrap();
        dst[..N].copy_from_slice(&head);
        dst[n - N..].copy_from_slice(&tail);
    }
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    match n {
        33.. => dst.copy_from_slice(src),
        16..=32 => ends::<16>(dst, src),
        8..=15 => ends::<8>(dst, src),
        4..=7 => ends::<4>(dst, src),
        2..=3 => ends::<2>(dst, src),
        1 => dst[0] = src[0],
        0 => {}
    }
}

/// Writes the im2col rows (the first `kh·kw·in_c` of every `kp` bytes: the taps, padding as
/// `za`) of the output pixels `p0 ..` into `panel`.
///
/// An output row is walked in runs: the columns whose windows lie inside the input (all of
/// them but a few at the borders) advance a source offset by `stride_w·in_c` per pixel and
/// copy their `kh` spans with no clipping, which keeps the thin first convolution (3-channel
/// spans of 9 bytes) from spending more on gathering its rows than on multiplying them.
fn im2col_panel(w: &Window, input: &[u8], za: u8, p0: usize, panel: &mut [u8], kp: usize) {
    let per_image = w.output.h * w.output.w;
    let (mut b, yx) = (p0 / per_image, p0 % per_image);
    let (mut oy, mut ox) = (yx / w.output.w, yx % w.output.w);
    let c = w.input.c;
    let span = w.filter_w * c;
    let k = w.filter_h * span;
    if k == 0 || kp == 0 {
        return;
    }
    // Output columns x_lo..x_hi have their whole window inside the input horizontally.
    let x_lo = w.padding.left.div_ceil(w.stride_w).min(w.output.w);
    let x_hi = (w.input.w + w.padding.left)
        .checked_sub(w.filter_w)
        .map_or(0, |d| d / w.stride_w + 1)
        .clamp(x_lo, w.output.w);
    let row_stride = w.input.w * c;
    let step = w.stride_w * c;
    let mut left = panel.len() / kp;
    let mut rows = panel.chunks_exact_mut(kp);
    while left > 0 {
        let ty = taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h);
        let end = (ox + left).min(w.output.w);
        while ox < end {
            if ty.len == w.filter_h && (x_lo..x_hi).contains(&ox) {
                let run_end = end.min(x_hi);
                let start = w
                    .input
                    .offset(b, ty.first_input, ox * w.stride_w - w.padding.left, 0);
                let run = InsideRun {
                    start,
                    step,
                    row_stride,
                    span,
                    kh: w.filter_h,
                };
                run.write(&mut rows, run_end - ox, input, k);
                left -= run_end - ox;
                ox = run_end;
            } else {
                let row = rows.next().expect("a panel row per pixel");
                let tx = taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w);
                let (head, body) = (tx.first_tap * c, tx.len * c);
                if ty.len == w.filter_h && body == span {
                    let start = w.input.offset(b, ty.first_input, tx.first_input, 0);
                    inside_row(&mut row[..k], input, start, row_stride, span);
                } else {
                    im2col_border_row(
                        input,
                        za,
                        &ty,
                        head,
                        body,
                        span,
                        |iy| w.input.offset(b, iy, tx.first_input, 0),
                        &mut row[..k],
                    );
                }
                left -= 1;
                ox += 1;
            }
        }
        if ox == w.output.w {
            ox = 0;
            oy += 1;
            if oy == w.output.h {
                oy = 0;
                b += 1;
            }
        }
    }
}

/// Consecutive output pixels of one output row whose windows lie inside the input: pixel `i`
/// reads `kh` spans of `span` bytes, `row_stride` apart from `start + i·step`.
struct InsideRun {
    start: usize,
    step: usize,
    row_stride: usize,
    span: usize,
    kh: usize,
}

impl InsideRun {
    /// Writes the first `k` bytes of the next `count` rows of `rows`. Spans of at most 16 bytes
    /// are 16-byte moves written in order (each correct over its own bytes, its excess
    /// rewritten by the next span), all but those that would pass `k`, which are exact
    /// copies; the bounds of the input are checked once for the whole run.
    #[inline]
    fn write<'a>(
        &self,
        rows: &mut impl Iterator<Item = &'a mut [u8]>,
        count: usize,
        input: &[u8],
        k: usize,
    ) {
        let Some(last) = count.checked_sub(1) else {
            return;
        };
        let end = self.start + last * self.step + (self.kh - 1) * self.row_stride + 16;
        if self.span > 16 || end > input.len() {
            let mut start = self.start;
            for row in rows.take(count) {
                inside_row(&mut row[..k], input, start, self.row_stride, self.span);
                start += self.step;
            }
            return;
        }
        let wide = (0..self.kh)
            .take_while(|fy| fy * self.span + 16 <= k)
            .count();
        let mut start = self.start;
        for row in rows.take(count) {
            let row = &mut row[..k];
            let mut src = start;
            for at in (0..wide).map(|fy| fy * self.span) {
                let v: [u8; 16] = input[src..src + 16].try_into().unwrap();
                row[at..at + 16].copy_from_slice(&v);
                src += self.row_stride;
            }
            for at in (wide..self.kh).map(|fy| fy * self.span) {
                copy_short(&mut row[at..at + self.span], &input[src..src + self.span]);
                src += self.row_stride;
            }
            start += self.step;
        }
    }
}

/// The im2col row of a window inside the input: `kh` spans of `kw·c` bytes, `row_stride`
/// apart from `start`.
#[inline]
fn inside_row(row: &mut [u8], input: &[u8], start: usize, row_stride: usize, span: usize) {
    if span <= 16 {
        window_row(row, input, start, row_stride, span);
    } else {
        for (seg, src) in row
            .chunks_exact_mut(span)
            .zip(input[start..].chunks(row_stride))
        {
            copy_short(seg, &src[..span]);
        }
    }
}

/// One im2col row of a window inside the input whose spans (`kw·c` bytes, `row_stride` apart
/// from `start`) are at most 16 bytes, as in a first convolution on a 3-channel image (spans of
/// 9): each span but the last is one 16-byte move, whose bytes past the span are rewritten by
/// the spans after it (written in order, each correct over its own bytes); a move that would
/// pass the row's `k` bytes or the input's end is the exact copy.
#[inline]
fn window_row(row: &mut [u8], input: &[u8], start: usize, row_stride: usize, span: usize) {
    let k = row.len();
    let mut src = start;
    for at in (0..k).step_by(span.max(1)) {
        if at + 16 <= k && src + 16 <= input.len() {
            let v: [u8; 16] = input[src..src + 16].try_into().unwrap();
            row[at..at + 16].copy_from_slice(&v);
        } else {
            copy_short(&mut row[at..at + span], &input[src..src + span]);
        }
        src += row_stride;
    }
}

/// One im2col row of a window that touches the padding: rows outside the input and the
/// clipped columns are `za`.
#[allow(clippy::too_many_arguments)]
fn im2col_border_row(
    input: &[u8],
    za: u8,
    ty: &crate::conv::reference::Taps,
    head: usize,
    body: usize,
    span: usize,
    row_start: impl Fn(usize) -> usize,
    row: &mut [u8],
) {
    for (fy, seg) in row.chunks_exact_mut(span).enumerate() {
        if fy < ty.first_tap || fy >= ty.first_tap + ty.len || body == 0 {
            seg.fill(za);
            continue;
        }
        let start = row_start(ty.first_input + (fy - ty.first_tap));
        if body < span {
            seg[..head].fill(za);
            seg[head + body..].fill(za);
        }
        copy_short(&mut seg[head..head + body], &input[start..start + body]);
    }
}

/// One panel of `np ≤ PANEL_MAX` rows starting at output row `p0`, whose A rows are `k`
/// bytes at `a[i·stride ..]`: row corrections, then every channel block × row tile.
#[allow(clippy::too_many_arguments)]
fn panel_gemm(
    f: &FastConv,
    n: usize,
    a: &[u8],
    stride: usize,
    k: usize,
    p0: usize,
    np: usize,
    out: OutPtr,
    blocks: Range<usize>,
) {
    let g = f.gemm;
    assert!(np <= PANEL_MAX && (np - 1) * stride + k <= a.len());
    let mut corr = [0i32; PANEL_MAX];
    if f.zw != 0 {
        // SAFETY: rows i < np are `k` bytes at `a[i·stride ..]` inside `a` (asserted above)
        // and `corr` has room for `np ≤ PANEL_MAX` values.
        unsafe { (f.row_sum.kernel)(a.as_ptr(), stride, np, k, f.zw, corr.as_mut_ptr()) };
    }
    let block_bytes = f.kp * g.nr;
    for j in blocks {
        let w = &f.w[j * block_bytes..(j + 1) * block_bytes];
        let bias = &f.bias[j * g.nr..(j + 1) * g.nr];
        let cols = g.nr.min(n - j * g.nr);
        // One call per row tile, or one for the whole panel when the kernel walks the tiles.
        let step = if g.any_rows { np } else { g.mr };
        let mut t0 = 0;
        while t0 < np {
            let rows = step.min(np - t0);
            let args = U8GemmArgs {
                a: a[t0 * stride..].as_ptr(),
                a_stride: stride,
                rows,
                k,
                w: w.as_ptr(),
                bias: bias.as_ptr(),
                row_corr: corr[t0..].as_ptr(),
                corr_zero: f.zw == 0,
                out: out.at((p0 + t0) * n + j * g.nr),
                raw: out.raw_at((p0 + t0) * n + j * g.nr),
                out_stride: n,
                cols,
                rq: f.rq,
                col_rq: f
                    .cols
                    .as_ref()
                    .map_or(std::ptr::null(), |c| c[j * 3 * g.nr..].as_ptr()),
                col_fused: f.fused.as_ref().map_or(std::ptr::null(), |c| {
                    c[j * (g.nr / FUSED_GROUP) * FUSED_GROUP_LEN..].as_ptr()
                }),
            };
            // SAFETY: rows t0..t0+rows (at most `mr` unless the slot takes any) of the panel
            // are `k` bytes each inside `a` (asserted above), the weight block and bias are
            // whole packed blocks of this slot's layout, `corr` has a value per row, `col_rq`
            // is null or the block's 3·nr constants, `col_fused` null or the block's fused
            // ones, and the output rows p0+t0.. with `cols ≤ nr` columns from channel j·nr lie
            // inside the `m × n` output that this task alone writes (run_gemm splits disjoint
            // row or block ranges).
            unsafe { (g.kernel)(&args) };
            t0 += rows;
        }
    }
}

/// Per-thread buffers of the tile path: A rows that cannot be read in place (im2col rows, rows
/// whose length is not a multiple of 4, the rows of a last partial tile padded to 16), the row
/// corrections of a panel, and one 16 × 64 int32 accumulator block.
#[derive(Default)]
struct TileScratch {
    panel: AlignedBuf<u8>,
    /// The `(k, kp)` row layout `panel` was zeroed for (see [`Im2col`]).
    layout: (usize, usize),
    tail: AlignedBuf<u8>,
    corr: Vec<i32>,
    acc: AlignedBuf<i32>,
}

thread_local! {
    static TILE_SCRATCH: RefCell<TileScratch> = RefCell::new(TileScratch::default());
}

/// Most bytes of A one tile panel holds; the rows of a panel share one pass over each block of
/// B (so a weight block of `kp × 64` bytes is read from memory once per panel and then hit in
/// the cache for each of its row tiles).
const TILE_PANEL_BYTES: usize = 256 << 10;

/// The `m × n` product on the tile path, split over the pool like [`run_gemm`]: by row tiles of
/// 16 when there are enough, by 64-channel blocks otherwise.
fn run_tiles(f: &FastConv, t: &TilePack, n: usize, m: usize, src: Source<'_>, out: OutPtr) {
    let tiles = m.div_ceil(TILE_MR);
    let blocks = n.div_ceil(TILE_NR);
    let threads = crate::parallel::threads();
    let work = m * n * f.k;
    if tiles >= 4 * threads || tiles >= blocks {
        split_units(tiles, work, |r| {
            let rows = r.start * TILE_MR..(r.end * TILE_MR).min(m);
            tile_region(f, t, n, src, out, rows, 0..blocks);
        });
    } else {
        split_units(blocks, work, |b| tile_region(f, t, n, src, out, 0..m, b));
    }
}

/// Output rows `rows` × channel blocks `blocks` on the slot's tile unit.
fn tile_region(
    f: &FastConv,
    t: &TilePack,
    n: usize,
    src: Source<'_>,
    out: OutPtr,
    rows: Range<usize>,
    blocks: Range<usize>,
) {
    match t.unit.unit {
        TileUnit::Software => {
            tile_region_on(&mut SoftTiles::default(), f, t, n, src, out, rows, blocks)
        }
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        TileUnit::Amx => tile_region_on(
            &mut crate::ukernels::x86_64::amx::AmxTiles,
            f,
            t,
            n,
            src,
            out,
            rows,
            blocks,
        ),
    }
}

/// [`tile_region`] on `unit`: one tile configuration for the region, then panel by panel the
/// row corrections, then every channel block × row tile of the panel (a block of B stays hot
/// across the panel's row tiles), each tile product followed by the exact requantization.
#[allow(clippy::too_many_arguments)]
fn tile_region_on<B: TileBackend>(
    unit: &mut B,
    f: &FastConv,
    t: &TilePack,
    n: usize,
    src: Source<'_>,
    out: OutPtr,
    rows: Range<usize>,
    blocks: Range<usize>,
) {
    let (k, kp) = (f.k, f.kp);
    let in_place = matches!(src, Source::Direct { .. }) && k == kp;
    let panel = (TILE_PANEL_BYTES / kp.max(1) / TILE_MR).clamp(1, 16) * TILE_MR;
    TILE_SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        if !in_place && (s.layout != (k, kp) || s.panel.len() < panel * kp) {
            s.panel = AlignedBuf::zeroed(panel * kp);
            s.layout = (k, kp);
        }
        if s.tail.len() < TILE_MR * kp {
            s.tail = AlignedBuf::zeroed(TILE_MR * kp);
        }
        if s.acc.len() < TILE_MR * TILE_NR {
            s.acc = AlignedBuf::zeroed(TILE_MR * TILE_NR);
        }
        if s.corr.len() < panel {
            s.corr.resize(panel, 0);
        }
        // SAFETY: this thread's configuration for rows of `kp` bytes; the tile unit of the
        // slot is usable (the table holds it only then).
        unsafe { unit.configure(&TileConfig::gemm(kp)) };
        let mut p0 = rows.start;
        while p0 < rows.end {
            let np = panel.min(rows.end - p0);
            // The panel's A rows: `np` rows `stride` apart at `a`, each `kp` bytes readable.
            let (a, stride): (&[u8], usize) = match src {
                Source::Direct { a, stride } if in_place => {
                    (&a[p0 * stride..(p0 + np - 1) * stride + k], stride)
                }
                Source::Direct { a, stride } => {
                    for (i, row) in s.panel.chunks_exact_mut(kp).take(np).enumerate() {
                        row[..k].copy_from_slice(&a[(p0 + i) * stride..(p0 + i) * stride + k]);
                    }
                    (&s.panel[..np * kp], kp)
                }
                Source::Im2col { w, input } => {
                    im2col_panel(w, input, f.za, p0, &mut s.panel[..np * kp], kp);
                    (&s.panel[..np * kp], kp)
                }
            };
            let corr = &mut s.corr[..np];
            if t.zw != 0 {
                // SAFETY: rows i < np are `k` bytes at `a[i·stride ..]` inside `a` and `corr`
                // has room for `np` values.
                unsafe { (f.row_sum.kernel)(a.as_ptr(), stride, np, k, t.zw, corr.as_mut_ptr()) };
            } else {
                corr.fill(0);
            }
            // A last partial tile is copied into 16 rows of its own, so the unit never reads
            // outside A; its rows past the panel hold whatever they held and are never stored.
            let full = np / TILE_MR * TILE_MR;
            if full < np {
                for (i, row) in s.tail.chunks_exact_mut(kp).take(np - full).enumerate() {
                    let at = (full + i) * stride;
                    row.copy_from_slice(&a[at..at + kp]);
                }
            }
            let block_bytes = kp * TILE_NR;
            for j in blocks.clone() {
                let w = &t.w[j * block_bytes..(j + 1) * block_bytes];
                let cols = TILE_NR.min(n - j * TILE_NR);
                let mut t0 = 0;
                while t0 < np {
                    let rows = TILE_MR.min(np - t0);
                    let (at, lda) = if rows == TILE_MR {
                        (a[t0 * stride..].as_ptr(), stride)
                    } else {
                        (s.tail.as_ptr(), kp)
                    };
                    // SAFETY: 16 rows of `kp` bytes `lda` apart at `at` (full tiles inside the
                    // panel: `(t0 + 15)·stride + kp ≤ a.len()`; the partial one in `tail`),
                    // `kp/4` k-quad rows of 256 bytes in the block `w`, and 16 × 64 values in
                    // `acc`.
                    unsafe {
                        unit.block(
                            at,
                            lda,
                            w.as_ptr(),
                            kp / TILE_KB,
                            kp % TILE_KB != 0,
                            s.acc.as_mut_ptr(),
                        )
                    };
                    let at = (p0 + t0) * n + j * TILE_NR;
                    let args = U8EpilogueArgs {
                        acc: s.acc.as_ptr(),
                        acc_stride: TILE_NR,
                        rows,
                        cols,
                        bias: t.bias[j * TILE_NR..].as_ptr(),
                        row_corr: s.corr[t0..].as_ptr(),
                        out: out.at(at),
                        out_stride: n,
                        rq: f.rq,
                        col_rq: t.cols.as_ref().map_or(std::ptr::null(), |c| {
                            c[j * (TILE_NR / EPILOGUE_COL_BLOCK) * 3 * EPILOGUE_COL_BLOCK..]
                                .as_ptr()
                        }),
                        raw: out.raw_at(at),
                    };
                    // SAFETY: `acc` holds the block, the bias block 64 values, `corr` a value per
                    // row, `col_rq` is null or the block's constants, and the output rows
                    // p0+t0.. with `cols` columns from channel 64j lie inside the `m × n` output
                    // this task alone writes (run_tiles splits disjoint rows or blocks).
                    unsafe { (t.unit.epilogue)(&args) };
                    t0 += rows;
                }
            }
            p0 += np;
        }
        unit.release();
    });
}
