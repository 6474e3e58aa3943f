//! Table slots and argument blocks of the uint8 (TENSOR_QUANT8_ASYMM) micro-kernel families:
//! the GEMM tile behind CONV_2D and FULLY_CONNECTED, and the depthwise convolution row.
//!
//! Both families compute the reference's `Σ (a − za)·(w − zw) + bias` modulo 2^32 through an
//! algebraically equal form that needs no zero-point subtraction in the inner loop (the operator
//! loops in [`crate::conv::u8`] and [`crate::conv::dw_u8`] fold the zero-point terms into packed
//! biases and per-row corrections), then requantize with [`Requant8`], which reproduces
//! [`crate::quant::Requantize::apply`] bit for bit.

use crate::quant::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul};

/// Per-tensor requantization constants in the form the kernels use.
///
/// `apply(acc) = clamp(RoundingDivideByPOT(SRDHM(acc, multiplier), shift), lo, hi) + zero_point`.
/// With the zero point in 0..=255 and the activation bounds in 0..=255, clamping before adding
/// the zero point (bounds shifted by it) equals the reference's saturating add followed by the
/// clamp, and no step can overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requant8 {
    /// Q31 multiplier in [2^30, 2^31), or 0.
    pub multiplier: i32,
    /// Right shift, 0..=31.
    pub shift: u32,
    /// Output zero point, 0..=255.
    pub zero_point: i32,
    /// Activation minimum minus the zero point.
    pub lo: i32,
    /// Activation maximum minus the zero point.
    pub hi: i32,
}

impl Requant8 {
    /// The scalar form every vector kernel must agree with.
    #[inline]
    pub fn apply(&self, acc: i32) -> u8 {
        let x = rounding_divide_by_pot(
            saturating_rounding_doubling_high_mul(acc, self.multiplier),
            self.shift as i32,
        );
        (x.clamp(self.lo, self.hi) + self.zero_point) as u8
    }

    /// The per-column form every vector kernel must agree with when the arguments carry
    /// per-column constants ([`ColRequant`]): `acc` is first multiplied by `2^left` (wrapping,
    /// the reference's left shift for a real multiplier of 1 or more), then scaled by
    /// `multiplier` and rounded right by `right`; the zero point and bounds are this one's.
    #[inline]
    pub fn apply_col(&self, acc: i32, multiplier: i32, left: i32, right: i32) -> u8 {
        let x = rounding_divide_by_pot(
            saturating_rounding_doubling_high_mul(acc.wrapping_shl(left as u32), multiplier),
            right,
        );
        (x.clamp(self.lo, self.hi) + self.zero_point) as u8
    }
}

/// Per-column requantization constants of one packed block of `B` columns (`B` is the GEMM's
/// `nr`, or [`DW_BLOCK`] for the depthwise rows), as `3·B` int32 values laid out
/// `[multiplier; B][left shift; B][right shift; B]`: column `j` of the block is requantized by
/// [`Requant8::apply_col`]`(acc, multiplier[j], left[j], right[j])`. Multipliers are Q31 in
/// `[2^30, 2^31)` or 0, left shifts 0..=30, right shifts 0..=31. A null pointer in the kernel
/// arguments means every column uses the per-tensor [`Requant8`] instead.
pub type ColRequant = *const i32;

/// Columns per group of [`ColFused`] constants (one 512-bit vector of int32 lanes).
pub const FUSED_GROUP: usize = 16;

/// int64 values per group of [`FUSED_GROUP`] columns in a [`ColFused`] block.
pub const FUSED_GROUP_LEN: usize = 64;

/// Per-column requantization constants of one packed block of `B` columns (a multiple of
/// [`FUSED_GROUP`]) for layers whose left shifts are all 0, precomputed so that an epilogue
/// needs one 64-bit add, one compare-and-subtract and one 64-bit arithmetic shift per lane
/// (both roundings fused, see [`fused_col`]). Each group of 16 columns holds
/// [`FUSED_GROUP_LEN`] int64 values: for the even columns then the odd columns (lane `j` of
/// a run is column `2j` or `2j + 1` of the group), four runs of 8: the multiplier, the
/// addend, the threshold and the shift of [`fused_col`]. Null when the layer has a left
/// shift or its constants are per tensor.
pub type ColFused = *const i64;

/// The fused constants `(multiplier, addend, threshold, shift)` of a column with multiplier
/// `m` and right shift `s` (no left shift): for every int32 `acc`, with `P = acc·m` in 64
/// bits, `(P + addend − [P < threshold]·2^31) >> shift` (arithmetic) is
/// `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc, m), s)`. `None` when `m` or
/// `s` is outside the ranges of [`ColRequant`].
///
/// SaturatingRoundingDoublingHighMul is `h = floor((P + 2^30) / 2^31)` (it cannot saturate:
/// `m ≥ 0`). For `s ≥ 1`, RoundingDivideByPOT rounds half away from zero:
/// `floor((h + 2^(s−1) − [h < 0]) / 2^s)`. Nested floors of divisions by positive integers
/// merge (`floor((floor(A / b) + r) / c) = floor((A + r·b) / (b·c))`), which gives
/// `floor((P + 2^30 + 2^(30+s) − [h < 0]·2^31) / 2^(31+s))`, and `h < 0` exactly when
/// `P < −2^30`. For `s = 0` the result is `h` itself: addend `2^30`, a threshold no `P`
/// is below, shift 31. `|P| < 2^62` and the addends stay below 2^62, so no step overflows.
pub fn fused_col(m: i32, s: i32) -> Option<[i64; 4]> {
    if m < 0 || !(0..=31).contains(&s) {
        return None;
    }
    Some(if s == 0 {
        [i64::from(m), 1 << 30, i64::MIN, 31]
    } else {
        [
            i64::from(m),
            (1 << 30) + (1i64 << (30 + s)),
            -(1 << 30),
            31 + i64::from(s),
        ]
    })
}

/// The [`ColFused`] blocks of `B = width` columns for the [`ColRequant`] blocks `cols` (also
/// of `width` columns), or `None` when a left shift is not 0, `width` is not a multiple of
/// [`FUSED_GROUP`] or a value is out of range.
pub fn fuse_cols(cols: &[i32], width: usize) -> Option<crate::aligned::AlignedBuf<i64>> {
    if width == 0 || !width.is_multiple_of(FUSED_GROUP) || !cols.len().is_multiple_of(3 * width) {
        return None;
    }
    let groups = width / FUSED_GROUP;
    let blocks = cols.len() / (3 * width);
    let mut out = crate::aligned::AlignedBuf::<i64>::zeroed(blocks * groups * FUSED_GROUP_LEN);
    for (b, block) in cols.chunks_exact(3 * width).enumerate() {
        let (mult, rest) = block.split_at(width);
        let (left, right) = rest.split_at(width);
        if left.iter().any(|&l| l != 0) {
            return None;
        }
        for col in 0..width {
            let c = fused_col(mult[col], right[col])?;
            let (g, j) = (col / FUSED_GROUP, col % FUSED_GROUP);
            let base = (b * groups + g) * FUSED_GROUP_LEN + (j % 2) * 32 + j / 2;
            for (run, v) in c.into_iter().enumerate() {
                out[base + 8 * run] = v;
            }
        }
    }
    Some(out)
}

/// One register tile of the uint8 GEMM: `rows ≤ mr` rows of A (any number of rows for a
/// kernel whose slot has [`U8Gemm::any_rows`]) times one packed block of `nr` output channels.
///
/// For row `r < rows` and column `n < cols` the kernel stores
/// `requant(Σ_k a[r][k]·w[k][n] + bias[n] + row_corr[r])` (int32 arithmetic wrapping) at
/// `out + r·out_stride + n`, where `w` is the stored weight (`weight − weight_shift`, see
/// [`U8Gemm`]).
///
/// Memory contract: row `r` of A is the `k` bytes at `a + r·a_stride` (nothing past them is
/// read); `w` holds `ceil(k/4)` groups of `nr × 4` bytes (four consecutive k per channel, k
/// rounded up with zeros) and is 64-byte aligned; `bias` holds `nr` values; `row_corr` holds
/// `rows` values; only the `cols` bytes of each of the `rows` output rows are written.
#[derive(Clone, Copy, Debug)]
pub struct U8GemmArgs {
    pub a: *const u8,
    pub a_stride: usize,
    pub rows: usize,
    pub k: usize,
    pub w: *const u8,
    pub bias: *const i32,
    pub row_corr: *const i32,
    /// Every `row_corr` value is 0 (the filter's zero point equals the weight shift): a
    /// kernel may skip adding them.
    pub corr_zero: bool,
    pub out: *mut u8,
    pub out_stride: usize,
    pub cols: usize,
    pub rq: Requant8,
    /// Null, or this block's per-column constants ([`ColRequant`], `B = nr`).
    pub col_rq: ColRequant,
    /// Null, or the same per-column requantization as `col_rq` in the [`ColFused`] form
    /// (`B = nr`); kernels may read either.
    pub col_fused: ColFused,
    /// Null, or where the unrequantized sums go instead of `out`: for `r < rows`, `n < cols`,
    /// `Σ_k a[r][k]·w[k][n] + bias[n] + row_corr[r]` (wrapping) at `raw + r·out_stride + n`
    /// (`out_stride` then counts int32 values; `out`, `rq` and `col_rq` are unused).
    pub raw: *mut i32,
}

/// A uint8 GEMM tile kernel. Callers uphold the memory contract of [`U8GemmArgs`].
pub type U8GemmFn = unsafe fn(&U8GemmArgs);

/// The uint8 GEMM slot: tile shape, how weights are stored and the kernel.
#[derive(Clone, Copy, Debug)]
pub struct U8Gemm {
    pub mr: usize,
    pub nr: usize,
    /// Subtracted from every uint8 weight at packing time: 128 for kernels that multiply
    /// unsigned activations by signed bytes (`vpdpbusd`), 0 for unsigned × unsigned (`udot`).
    pub weight_shift: i32,
    /// The kernel takes any `rows` (it walks them in tiles of `mr` itself, with the block's
    /// constants set up once per call); otherwise `rows ≤ mr`.
    pub any_rows: bool,
    pub kernel: U8GemmFn,
    pub name: &'static str,
}

/// Row corrections of the uint8 GEMM: for `r < rows`, `out[r] = −scale · Σ_k a[r][k]`
/// (wrapping int32), where row `r` is the `k` bytes at `a + r·stride` (nothing else is read)
/// and `out` holds `rows` values.
pub type U8RowSumFn =
    unsafe fn(a: *const u8, stride: usize, rows: usize, k: usize, scale: i32, out: *mut i32);

/// The row-correction slot of the uint8 GEMM.
#[derive(Clone, Copy, Debug)]
pub struct U8RowSum {
    pub kernel: U8RowSumFn,
    pub name: &'static str,
}

/// Channels per packed block of the depthwise weights.
pub const DW_BLOCK: usize = 16;

/// A run of output pixels of a depthwise convolution with depth multiplier 1.
///
/// Tap `t` of pixel `p < width` is the `channels` input bytes at `taps[t] + p·pixel_step`
/// (a padding tap points into a run of bytes equal to the input zero point). Pixel `p` writes
/// `channels` bytes at `out + p·out_stride`: `requant(bias[c] + Σ_t tap_t[c]·w_t[c])`,
/// wrapping int32.
///
/// `w` is packed per block of [`DW_BLOCK`] channels: the bias block, then one block per tap,
/// `(1 + ntaps)·DW_BLOCK` int32 per channel block (tails zero-filled), 64-byte aligned. Each
/// weight is `filter − filter_zero_point` (in −255..=255), each bias already holds
/// `bias − input_zero_point·Σ_t w_t`.
#[derive(Clone, Copy, Debug)]
pub struct U8DwArgs {
    pub taps: *const *const u8,
    pub pixel_step: usize,
    pub ntaps: usize,
    pub width: usize,
    pub channels: usize,
    pub w: *const i32,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    /// Null, or per-column constants for all `ceil(channels / DW_BLOCK)` blocks, one
    /// [`ColRequant`] block (`B = DW_BLOCK`) after the other.
    pub col_rq: ColRequant,
}

/// A uint8 depthwise row kernel. Callers uphold the memory contract of [`U8DwArgs`].
pub type U8DwFn = unsafe fn(&U8DwArgs);

/// The uint8 depthwise slot.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw {
    pub kernel: U8DwFn,
    pub name: &'static str,
}

/// A run of output pixels of a depthwise convolution with depth multiplier 1, two taps per
/// multiply-add: the contract of [`U8DwArgs`] with the taps taken in pairs.
///
/// `taps` holds `2·pairs` pointers (an odd tap count repeats its last pointer, with a zero
/// weight); tap `t` of pixel `p < width` is the `channels` input bytes at
/// `taps[t] + p·pixel_step`. Pixel `p` writes `channels` bytes at `out + p·out_stride`:
/// `requant(bias[c] + Σ_t tap_t[c]·w_t[c])`, wrapping int32.
///
/// `w` is packed per block of [`DW_BLOCK`] channels, `64·(1 + pairs)` bytes per block, 64-byte
/// aligned: the block's 16 int32 biases (each already holding
/// `bias − input_zero_point·Σ_t w_t`), then per pair `j` 16 int16 pairs
/// `(w_2j[c], w_2j+1[c])`, channel `c` of the block at int16 `2c` and `2c + 1` (tails and the
/// padding tap zero). Each weight is `filter − filter_zero_point`, in −255..=255, so a pair
/// sum `x_a·w_a + x_b·w_b` of bytes `x` is below 2^17 in magnitude: exact in `vpmaddwd`-style
/// int32 lanes.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw2Args {
    pub taps: *const *const u8,
    pub pixel_step: usize,
    pub pairs: usize,
    pub width: usize,
    pub channels: usize,
    pub w: *const u8,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    /// Null, or per-column constants for all `ceil(channels / DW_BLOCK)` blocks, one
    /// [`ColRequant`] block (`B = DW_BLOCK`) after the other.
    pub col_rq: ColRequant,
}

/// The interior run of an output row of a 3×3 depthwise convolution at horizontal stride 1 on
/// tap pairs shared between pixels ([`U8Dw2`]'s `cols3`).
///
/// Row `fy` of the window of pixel `p < width` is the `3` input columns at
/// `rows[fy] + (p + fx)·pixel_bytes`, `fx < 3`, `channels` bytes each (a padding row points
/// into a run of input zero points at least `(width + 2)·pixel_bytes` long). Pixel `p` writes
/// `channels` bytes at `out + p·out_stride`, as [`U8Dw2Args`].
///
/// `w` is packed per block of [`DW_BLOCK`] channels, `64·6` bytes per block, 64-byte aligned:
/// the 16 int32 biases, then five slots of 16 int16 pairs (channel `c` at int16 `2c`,
/// `2c + 1`): `(w[0][fx], w[1][fx])` for `fx < 3` (rows 0 and 1 of an input column, interleaved
/// once per column and read by the three pixels over it), `(w[2][0], w[2][1])` and
/// `(0, w[2][2])` (adjacent columns of row 2, interleaved once per column pair and read by
/// two pixels).
#[derive(Clone, Copy, Debug)]
pub struct U8Dw2ColsArgs {
    pub rows: [*const u8; 3],
    pub pixel_bytes: usize,
    pub width: usize,
    pub channels: usize,
    pub w: *const u8,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    /// As in [`U8Dw2Args`].
    pub col_rq: ColRequant,
}

/// A uint8 depthwise row kernel on tap pairs. Callers uphold the memory contract of
/// [`U8Dw2Args`].
pub type U8Dw2Fn = unsafe fn(&U8Dw2Args);

/// The tap-pair uint8 depthwise slot.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw2 {
    pub kernel: U8Dw2Fn,
    /// The 3×3 stride-1 interior runs ([`U8Dw2ColsArgs`]).
    pub cols3: unsafe fn(&U8Dw2ColsArgs),
    pub name: &'static str,
}

/// Channels per packed block of the byte dot-product depthwise kernel ([`U8Dw4`]).
pub const DW4_BLOCK: usize = 64;

/// 64-byte slots before the weight groups in each [`DW4_BLOCK`]-channel block of a
/// [`U8Dw4Args`] packing: 4 bias, 4 sign, then [`DW4_COL_SLOTS`] groups of 4 per-channel
/// requantization slots.
pub const DW4_HEAD_SLOTS: usize = 8 + 4 * DW4_COL_SLOTS;

/// Per-channel requantization constants of a [`U8Dw4Args`] packing, one group of 4 slots
/// each (vector `k` in slot `8 + 4·j + k` for constant `j`), precomputed so that the kernel's
/// epilogue is a 64-bit multiply, add and arithmetic shift per lane (see
/// [`dw4_col_constants`]): multiplier and left shift (int32 lanes), then in 64-bit lanes (lane
/// `i` for the int32 lane `2i` — "even" — or `2i + 1` — "odd") the rounding addend of the
/// even and of the odd lanes, and the 64-bit right shift of each. The negative-product
/// correction is `2^31` wherever the shift exceeds 31 and 0 elsewhere, so it needs no slot.
pub const DW4_COL_SLOTS: usize = 6;

/// Constant `j` of [`DW4_COL_SLOTS`]: the multipliers.
pub const DW4_COL_MULT: usize = 0;
/// Constant `j`: the left shifts.
pub const DW4_COL_LEFT: usize = 1;
/// Constant `j`: the rounding addends of the even lanes (the odd ones at `j + 1`).
pub const DW4_COL_ADD: usize = 2;
/// Constant `j`: the 64-bit right shifts of the even lanes (the odd ones at `j + 1`).
pub const DW4_COL_SHIFT: usize = 4;

/// The 64-bit constants `(addend, correction, shift)` that requantize a channel with
/// multiplier `m` and right shift `s` (0..=31) in one step, as [`Requant8::apply_col`] after
/// its left shift.
///
/// With `P = x·m` (64-bit, `x` the left-shifted accumulator), SaturatingRoundingDoublingHighMul
/// is `h = floor((P + 2^30) / 2^31)`, and for `s ≥ 1` RoundingDivideByPOT (half away from
/// zero) is `floor((h + 2^(s−1) − [h < 0]) / 2^s)`. Nested floors of divisions by positive
/// integers merge, `floor((floor(A / b) + r) / c) = floor((A + r·b) / (b·c))`, and `h < 0`
/// exactly when `P < −2^30`, so the result is
/// `(P + 2^30 + 2^(30+s) − [P < −2^30]·correction) >> (31 + s)`: addend `2^30 + 2^(30+s)`,
/// correction `2^31`, shift `31 + s`. For `s = 0` it is `(P + 2^30) >> 31`: addend `2^30`,
/// correction 0 (the shift is then 31, and the correction applies exactly where the shift
/// exceeds 31). `|P| < 2^62` and the addend is below `2^62`, so no step overflows 64 bits.
#[inline]
pub fn dw4_col_constants(s: i32) -> Option<(i64, i64, i64)> {
    match s {
        0 => Some((1 << 30, 0, 31)),
        1..=31 => Some(((1 << 30) + (1i64 << (30 + s)), 1 << 31, 31 + i64::from(s))),
        _ => None,
    }
}

/// Where channel `cc < DW4_BLOCK` of a block sits in the kernel's accumulators: the vector
/// `k` (0..4) and the int32 lane `p` (0..16) in it.
///
/// The kernel interleaves four taps of 64 channels with byte then word unpacks, which work per
/// 128-bit lane: channel `16L + 4k + i` lands in lane `4L + i` of vector `k`. Narrowing the
/// four vectors with the matching packs restores the natural channel order, so only the packed
/// constants need this order.
#[inline]
pub fn dw4_lane(cc: usize) -> (usize, usize) {
    let (l, r) = (cc / 16, cc % 16);
    (r / 4, 4 * l + r % 4)
}

/// A run of output pixels of a depthwise convolution with depth multiplier 1, four taps per
/// `vpdpbusd`-style byte dot product (unsigned input bytes × signed weight bytes).
///
/// Taps, pixels and outputs as in [`U8DwArgs`]. Channel `c` computes
/// `acc = bias[c] + Σ_t tap_t[c]·w_t[c]` (wrapping int32), then `acc' = −acc` where its sign
/// slot is −1 (kept as `acc` where it is 0), and writes `requant(acc')`.
///
/// `w` is 64-byte aligned and packed per block of [`DW4_BLOCK`] channels, in 64-byte slots,
/// each 16 int32 lanes in the order of [`dw4_lane`] (slot `s + k` for vector `k`):
/// bias (`s = 0`), sign 0 or −1 (`s = 4`), the per-channel requantization constants
/// ([`DW4_COL_SLOTS`] groups from `s = 8`, read only when `per_channel`; each channel's
/// multiplier, left and right shift as in [`ColRequant`]), then for each group
/// `g < ceil(ntaps/4)` the weights (`s = DW4_HEAD_SLOTS + 4g`): lane `p` of vector `k` holds, in
/// byte `j`, the signed weight of tap `4g + j` (0 past `ntaps`). A block is
/// `(DW4_HEAD_SLOTS + 4·ceil(ntaps/4))·64` bytes; channels past `channels` are zero.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw4Args {
    pub taps: *const *const u8,
    pub pixel_step: usize,
    pub ntaps: usize,
    pub width: usize,
    pub channels: usize,
    pub w: *const u8,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    /// Whether the per-channel slots replace the multiplier and shift of `rq`.
    pub per_channel: bool,
    /// Whether any per-channel left shift is nonzero (the kernel skips them otherwise).
    pub left_shift: bool,
    /// Whether any sign slot is −1.
    pub negate: bool,
}

/// A byte dot-product depthwise row kernel. Callers uphold the contract of [`U8Dw4Args`].
pub type U8Dw4Fn = unsafe fn(&U8Dw4Args);

/// The byte dot-product depthwise slot: used for filters whose every `filter − zero_point`
/// (or its negation, per channel) fits a signed byte.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw4 {
    pub kernel: U8Dw4Fn,
    pub name: &'static str,
    /// Builds one row group's tap quads of one channel block ([`U8Dw4QuadsArgs`]).
    pub quads: U8Dw4QuadsFn,
    /// One channel block of an output row from the quads ([`U8Dw4RowArgs`]).
    pub row: U8Dw4RowFn,
    /// A run of output pixels of a 3-column filter, each input column's quads built once in
    /// registers ([`U8Dw4ColsArgs`]).
    pub cols3: U8Dw4ColsFn,
}

/// Bytes per channel in a column vector of a [`U8Dw4QuadsArgs`] buffer: a block of more
/// than half of [`DW4_BLOCK`] channels stores whole 64-byte vectors, a smaller one their low
/// halves, so two output pixels share one vector in [`U8Dw4RowArgs`].
#[inline]
pub fn dw4_quad_bytes(n: usize) -> usize {
    if n > DW4_BLOCK / 2 {
        64
    } else {
        32
    }
}

/// Interleaves four input rows of one channel block into the byte quads of
/// [`U8Dw4Args`]' weight groups, once per output row, so each quad is built once however many
/// output pixels and filter columns read it.
///
/// Row `r < 4` is `rows[r]` (the input row's first pixel, already advanced to the block's
/// first channel; pixel `i` at `rows[r] + i·pixel_bytes`), or null for a row outside the
/// input or past the filter: its bytes are `za`. Padded column `pc < stride·per_phase` reads
/// input pixel `pc − pad_left` when that lies in `0..in_w` and the row is not null, else `za`;
/// of a pixel the `n ≤ 64` channels are read (channels past `n` hold 0 or `za`: their weights
/// are 0, or with `E = 32` they are not stored). The quads (vectors `k < 4` in
/// the order of [`dw4_lane`]) go to `out + k·k_step + ((pc mod stride)·per_phase + pc / stride)·E`,
/// `E = dw4_quad_bytes(n)`, whole vectors or their low halves: column `pc` and `pc + stride`
/// are neighbours, the order in which the output pixels read them.
#[derive(Clone, Copy, Debug)]
pub struct U8Dw4QuadsArgs {
    pub rows: [*const u8; 4],
    pub pixel_bytes: usize,
    pub in_w: usize,
    pub pad_left: usize,
    pub stride: usize,
    pub per_phase: usize,
    pub n: usize,
    pub za: u8,
    pub out: *mut u8,
    pub k_step: usize,
}

/// A [`U8Dw4QuadsArgs`] kernel. Callers uphold its contract.
pub type U8Dw4QuadsFn = unsafe fn(&U8Dw4QuadsArgs);

/// One channel block (`n ≤ 64` channels) of a run of output pixels from the quads of
/// [`U8Dw4QuadsArgs`]: weight group `g < groups` of pixel `p < width` reads vector `k` at
/// `quads[g] + k·k_step + p·E` (`E = dw4_quad_bytes(n)`; with `E = 32`, the 64 bytes there are
/// pixels `p` and `p + 1`, the second half read but unused past the last pixel, so the
/// buffer holds 32 readable bytes past the last quad). `w` is this block's packing in the
/// layout of [`U8Dw4Args`] with `ntaps = 4·groups`; when `n ≤ 32` its channels `0..32` are
/// repeated in channels `32..64`. Pixel `p` writes its `n` bytes at `out + p·out_stride`; the
/// epilogue is that of [`U8Dw4Args`].
#[derive(Clone, Copy, Debug)]
pub struct U8Dw4RowArgs {
    pub quads: *const *const u8,
    pub k_step: usize,
    pub groups: usize,
    pub width: usize,
    pub n: usize,
    pub w: *const u8,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    pub per_channel: bool,
    pub left_shift: bool,
    pub negate: bool,
}

/// A [`U8Dw4RowArgs`] kernel. Callers uphold its contract.
pub type U8Dw4RowFn = unsafe fn(&U8Dw4RowArgs);

/// A run of output pixels of a depthwise convolution with depth multiplier 1, a filter of
/// `kh ≤ 4` rows and 3 columns at horizontal stride 1, every window inside the input
/// horizontally: each input column's four rows are interleaved into tap quads once, in
/// registers, and feed the three output pixels that read the column instead of being rebuilt
/// per pixel and tap.
///
/// Filter row `fy < kh` reads `rows[fy]`: tap `(fy, fx)` of pixel `p < width` is the
/// `channels` bytes at `rows[fy] + (p + fx)·pixel_bytes`, all readable (a padded row
/// points to a run of input zero points that long). `w` is the packing of [`U8Dw4Args`] with
/// the weight groups in filter-column order: group `fx` holds, in byte `j`, the weight of tap
/// `(j, fx)` (0 for `j ≥ kh`); a last block of at most 32 channels may repeat them in the
/// high half (those lanes are computed and not stored). Pixel `p` writes `channels` bytes at
/// `out + p·out_stride`; the epilogue is that of [`U8Dw4Args`].
#[derive(Clone, Copy, Debug)]
pub struct U8Dw4ColsArgs {
    pub rows: [*const u8; 4],
    pub kh: usize,
    pub pixel_bytes: usize,
    pub width: usize,
    pub channels: usize,
    pub w: *const u8,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    pub per_channel: bool,
    pub left_shift: bool,
    pub negate: bool,
}

/// A [`U8Dw4ColsArgs`] kernel. Callers uphold its contract.
pub type U8Dw4ColsFn = unsafe fn(&U8Dw4ColsArgs);

/// Which same-shape quant8 binary operation a [`U8Binary`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum U8BinaryOp {
    /// ADD, or SUB with input 1's multiplier negated.
    AddSub,
    /// MUL: the product of the centred inputs, requantized once.
    Mul,
}

/// The constants of a same-shape quant8 ADD, SUB or MUL in the form the vector kernels take
/// ([`crate::elementwise::reference::add_u8`], [`crate::elementwise::reference::sub_u8`],
/// [`crate::elementwise::reference::mul_u8`]).
///
/// ADD/SUB: each input `q` is centred, shifted left by 20 and rescaled,
/// `t(q) = RoundingDivideByPOT(SRDHM((q − zp) · 2^20, mult), shift)` (the magnitude of `mult`
/// in [2^30, 2^31), or 0; input 1's negated for SUB), and `out.apply(t_a + t_b)` is the result.
/// `|t| < 2^28`, so the sum cannot overflow. MUL: `out.apply((a − zp_a) · (b − zp_b))`, the
/// product exact in int32; the input multipliers are unused (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U8Binary {
    pub op: U8BinaryOp,
    /// Input zero points, 0..=255.
    pub a_zp: i32,
    pub b_zp: i32,
    /// Input rescale multipliers (any int32) and right shifts (0..=31), ADD/SUB only.
    pub a_mult: i32,
    pub a_shift: u32,
    pub b_mult: i32,
    pub b_shift: u32,
    /// The output requantization, zero point and activation bounds.
    pub out: Requant8,
}

impl U8Binary {
    /// One input's rescale for ADD/SUB.
    #[inline]
    pub fn rescale(q: u8, zp: i32, mult: i32, shift: u32) -> i32 {
        let x = (i32::from(q) - zp) << crate::elementwise::reference::ADD_LEFT_SHIFT;
        rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, mult), shift as i32)
    }

    /// The scalar form every vector kernel must agree with.
    #[inline]
    pub fn apply(&self, a: u8, b: u8) -> u8 {
        match self.op {
            U8BinaryOp::AddSub => {
                let ta = Self::rescale(a, self.a_zp, self.a_mult, self.a_shift);
                let tb = Self::rescale(b, self.b_zp, self.b_mult, self.b_shift);
                self.out.apply(ta.wrapping_add(tb))
            }
            U8BinaryOp::Mul => self
                .out
                .apply((i32::from(a) - self.a_zp) * (i32::from(b) - self.b_zp)),
        }
    }
}

/// A same-shape quant8 binary kernel: `out[i] = p.apply(a[i], b[i])` for `i < n`.
///
/// # Safety
/// `a` and `b` are readable and `out` writable for `n` bytes; the processor supports the
/// kernel's level (guaranteed for kernels taken from a [`crate::ukernels::table`]).
pub type U8BinaryFn = unsafe fn(a: *const u8, b: *const u8, out: *mut u8, n: usize, p: &U8Binary);

/// The same-shape quant8 ADD/SUB/MUL slot.
#[derive(Clone, Copy, Debug)]
pub struct U8BinaryKernel {
    pub kernel: U8BinaryFn,
    pub name: &'static str,
}

/// DEQUANTIZE of `n` bytes: for `i < n`, `out[i] = scale · ((src[i] ^ flip) − zero_point)`, the
/// difference taken in wrapping int32 arithmetic and converted to float32 with the rounding of
/// Rust's `as` (nearest, ties to even), the product one float32 multiplication, exactly as
/// [`crate::quantize::reference`] computes it. `flip` is 0 for TENSOR_QUANT8_ASYMM and `0x80`
/// (with `zero_point` 128) for the int8 bytes of TENSOR_QUANT8_SYMM, whose value is then
/// `(b ^ 0x80) − 128`.
///
/// # Safety
/// `src` is readable for `n` bytes, `out` writable for `n` values, and the processor supports
/// the kernel's level (guaranteed for kernels taken from a [`crate::ukernels::table`]).
pub type U8DequantizeFn =
    unsafe fn(src: *const u8, n: usize, flip: u8, zero_point: i32, scale: f32, out: *mut f32);

/// QUANTIZE of `n` float32 values to bytes: for `i < n`, `out[i]` is `zero_point +
/// round(src[i] / scale)` in float32 (`round` half away from zero, one division), clamped as
/// the reference's `max(0, min(255, ·))` (a NaN gives 255) and converted, exactly as
/// [`crate::quantize::reference::quantize_u8`] computes it.
///
/// # Safety
/// `src` is readable for `n` values, `out` writable for `n` bytes, and the processor supports
/// the kernel's level.
pub type U8QuantizeFn =
    unsafe fn(src: *const f32, n: usize, scale: f32, zero_point: f32, out: *mut u8);

/// The vector QUANTIZE and DEQUANTIZE slot.
#[derive(Clone, Copy, Debug)]
pub struct U8Convert {
    pub dequantize: U8DequantizeFn,
    pub quantize: U8QuantizeFn,
    pub name: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused form of [`fused_col`] evaluated in plain 64-bit arithmetic.
    fn fused(acc: i32, c: [i64; 4]) -> i32 {
        let p = i64::from(acc) * c[0];
        let u = p + c[1] - if p < c[2] { 1 << 31 } else { 0 };
        (u >> c[3]) as i32
    }

    /// Both roundings fused into one shift equal the two steps for every right shift, the
    /// multipliers at the ends of their range and accumulators at and near the int32
    /// extremes, at the rounding ties and around zero.
    #[test]
    fn fused_column_constants_equal_the_two_roundings() {
        let mut accs: Vec<i32> = vec![i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1, 0, 1, -1];
        for e in 0..31 {
            let t = 1i32 << e;
            accs.extend([t, -t, t - 1, 1 - t, t + 1, -t - 1]);
        }
        let mut x = 0x2545_f491u32;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            accs.push(x as i32);
            accs.push((x as i32) >> (x % 31));
        }
        let mults = [
            0,
            1,
            1 << 30,
            (1 << 30) + 1,
            0x5555_5555,
            i32::MAX - 1,
            i32::MAX,
        ];
        for s in 0..=31 {
            for &m in &mults {
                let c = fused_col(m, s).unwrap();
                for &acc in &accs {
                    let want =
                        rounding_divide_by_pot(saturating_rounding_doubling_high_mul(acc, m), s);
                    assert_eq!(fused(acc, c), want, "acc {acc} multiplier {m} shift {s}");
                }
            }
        }
        assert_eq!(fused_col(-1, 3), None);
        assert_eq!(fused_col(1 << 30, 32), None);
        assert_eq!(fused_col(1 << 30, -1), None);
    }

    /// The layout of [`fuse_cols`]: group, parity and lane of each column, and the refusals.
    #[test]
    fn fused_blocks_follow_the_column_layout() {
        let width = 32;
        let mut cols = vec![0i32; 2 * 3 * width];
        for c in 0..2 * width {
            let base = (c / width) * 3 * width + c % width;
            cols[base] = (1 << 30) + c as i32;
            cols[base + 2 * width] = (c % 32) as i32;
        }
        let f = fuse_cols(&cols, width).unwrap();
        assert_eq!(f.len(), 2 * 2 * FUSED_GROUP_LEN);
        for c in 0..2 * width {
            let (b, col) = (c / width, c % width);
            let (g, j) = (col / FUSED_GROUP, col % FUSED_GROUP);
            let base = (b * 2 + g) * FUSED_GROUP_LEN + (j % 2) * 32 + j / 2;
            let want = fused_col((1 << 30) + c as i32, (c % 32) as i32).unwrap();
            let got = [f[base], f[base + 8], f[base + 16], f[base + 24]];
            assert_eq!(got, want, "column {c}");
        }
        let mut left = cols.clone();
        left[width + 5] = 1;
        assert!(fuse_cols(&left, width).is_none());
        let mut right = cols.clone();
        right[2 * width] = 32;
        assert!(fuse_cols(&right, width).is_none());
        assert!(fuse_cols(&cols[..3 * 8], 8).is_none());
    }
}
