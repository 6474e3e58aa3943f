//! Float32 CONV_2D and FULLY_CONNECTED on the GEMM micro-kernel of a [`Ukernels`] table.
//!
//! A convolution in NHWC is the GEMM `C[M × N] = A[M × K] · B[K × N] + bias`, with one row per
//! output pixel (`M = batch · out_h · out_w`), `N = out_c` and `K = kh · kw · in_c`: the HAL
//! filter layout `[out_c, kh, kw, in_c]` is already `Bᵀ`. The micro-kernel takes its A rows
//! indirectly, as one pointer per row and filter row (see [`F32GemmArgs`]): a 1×1, stride-1,
//! unpadded convolution and FULLY_CONNECTED point straight at the input rows; any other
//! convolution points each filter row of each output pixel at the `kw · in_c` input values it
//! covers, which are contiguous in NHWC. Filter rows that fall wholly into the padding point at
//! a zero segment stored with the weights; only windows cut by the left or right border are
//! gathered (padding as zeros) into a reusable per-thread scratch, so there is no im2col pass
//! and no allocation per call once a thread has seen its largest layer.
//!
//! Loop order: the output columns are walked in panels of packed weights small enough to stay
//! in L2 while every row tile of the task streams past them; within a panel one micro-kernel
//! call covers one row tile and all of the panel's column blocks, so the tile's A rows stay
//! in L1 across them.
//!
//! Threads: called on a pool worker, one fork-join splits the output into a few equal tasks
//! per thread, over row tiles when every thread gets several and over column blocks when
//! there are too few rows for that (the 7×7 and 1×1 layers) — over (column block, row tile)
//! cells when the blocks do not share evenly between the threads. A row split whose weights
//! outgrow half an L2 cuts each thread's share of the row tiles into column pieces, so every
//! thread streams the filter once. Row tiles are dealt to the threads in order, like every
//! other operator's rows, so each thread reads the rows it wrote in the operation before; the
//! weights are read by every thread, but they are never written.

use std::cell::RefCell;
use std::sync::OnceLock;

use super::FilterShape;
use crate::aligned::AlignedBuf;
use crate::conv::reference::taps;
use crate::parallel::MIN_F32_MACS;
use crate::persist::{self, Persist, PersistError, Source};
use crate::ukernels::{F32Gemm, F32GemmArgs, Ukernels, F32_GEMM_MAX_MR};
use crate::{Activation, Window};

/// Bytes of packed weights one column panel may hold: a quarter of Zen 4's 1 MiB L2, leaving
/// room for the A rows a task streams and for the other data of the layer.
const PANEL_BYTES: usize = 256 << 10;

/// Row tiles each thread must get for a split over row tiles; with fewer the work is split
/// over column blocks instead. (The 14×14 layers of MobileNet have 28 tiles of 7 rows: split
/// by rows on two threads, the model ran 1–2 % faster than with them split by columns, and
/// 2–5 % faster when the two processors sat on different dies, where the depthwise after a
/// column split reads half of every pixel from the other core.)
const MIN_ROW_TILES_PER_THREAD: usize = 4;

/// Packed weights above which a row split cuts each thread's share of the row tiles into
/// column pieces (see [`share_pieces`]): half of Zen 4's L2, past which the filter, the share's
/// A rows and its outputs no longer all stay in L2 from one part to the next.
const SHARE_BY_COLUMNS_BYTES: usize = 512 << 10;

/// Parts per pool thread when splitting over row tiles and over column blocks.
const ROW_PARTS_PER_THREAD: usize = 4;
const COLUMN_PARTS_PER_THREAD: usize = 2;

/// Filter and bias of one CONV_2D or FULLY_CONNECTED, packed for one GEMM micro-kernel.
///
/// Layout: per block of `nr` output channels, `[bias: nr][k = 0: nr weights]…[k = K − 1: nr]`
/// with `K = kh · kw · in_c` in the filter's own `(ky, kx, c)` order and the channels past
/// `out_c` zero-filled, blocks back to back in a 64-byte aligned buffer.
#[derive(Clone, Debug)]
pub struct PackedConvF32 {
    shape: FilterShape,
    gemm: F32Gemm,
    weights: AlignedBuf<f32>,
    /// `kw · in_c` zeros: the A segment of a filter row lying in the padding.
    zeros: AlignedBuf<f32>,
    /// Where each A segment of the first window this filter ran over lies (a plan executes the
    /// same geometry every time), so later calls turn offsets into pointers instead of
    /// recomputing the window arithmetic per row tile.
    segments: OnceLock<Option<SegmentPlan>>,
}

/// Segment sources of every output pixel of one convolution geometry: entry `m · kh + ky` is
/// the input offset of segment (pixel `m`, filter row `ky`), [`SEG_ZEROS`] or [`SEG_GATHER`].
#[derive(Clone, Debug)]
struct SegmentPlan {
    window: Window,
    offsets: Vec<u32>,
}

/// The segment lies wholly in the vertical padding: the zero segment.
const SEG_ZEROS: u32 = u32::MAX;
/// The segment is cut by the horizontal padding: gathered per call.
const SEG_GATHER: u32 = u32::MAX - 1;

/// Largest plan kept (entries), 4 MiB: bigger geometries recompute per row tile.
const SEG_PLAN_MAX: usize = 1 << 20;

impl SegmentPlan {
    /// The plan of `w` for `packed`, by running [`indirection`] over every row tile once and
    /// recording where each pointer went; `None` if it would be too large.
    fn new(w: &Window, packed: &PackedConvF32, input: &[f32]) -> Option<SegmentPlan> {
        let kh = w.filter_h;
        let m = w.output.n * w.output.h * w.output.w;
        if m * kh > SEG_PLAN_MAX || input.len() >= SEG_GATHER as usize {
            return None;
        }
        let seg = w.filter_w * w.input.c;
        let mr = packed.gemm.mr;
        let mut scratch = vec![0.0; mr * kh * seg];
        let mut ptrs = vec![std::ptr::null(); mr * kh];
        let mut offsets = vec![0; m * kh];
        let (base, zeros) = (input.as_ptr_range(), packed.zeros.as_ptr());
        for m0 in (0..m).step_by(mr) {
            let rows = mr.min(m - m0);
            let ptrs = &mut ptrs[..rows * kh];
            indirection(w, input, &packed.zeros, m0, &mut scratch, ptrs);
            for (i, &p) in ptrs.iter().enumerate() {
                let (ky, r) = (i / rows, i % rows);
                offsets[(m0 + r) * kh + ky] = if p == zeros {
                    SEG_ZEROS
                } else if base.contains(&p) {
                    // In range: the offset is below input.len() < SEG_GATHER.
                    (p as usize - base.start as usize) as u32 / std::mem::size_of::<f32>() as u32
                } else {
                    SEG_GATHER
                };
            }
        }
        Some(SegmentPlan {
            window: *w,
            offsets,
        })
    }
}

impl PackedConvF32 {
    /// CONV_2D filter `[out_c, kh, kw, in_c]` row-major + bias `[out_c]` (FULLY_CONNECTED:
    /// `kh = kw = 1`), packed for the float32 GEMM kernel of `uk`.
    pub fn pack(uk: &Ukernels, shape: FilterShape, filter: &[f32], bias: &[f32]) -> PackedConvF32 {
        assert_eq!(filter.len(), shape.out_c * shape.taps(), "filter length");
        assert_eq!(bias.len(), shape.out_c, "bias length");
        let gemm = uk.f32_gemm;
        let (k, nr) = (shape.taps(), gemm.nr);
        let block = nr * (k + 1);
        let mut weights = AlignedBuf::zeroed(shape.out_c.div_ceil(nr) * block);
        for (j, blk) in weights.chunks_exact_mut(block).enumerate() {
            let first = j * nr;
            for (i, oc) in (first..shape.out_c.min(first + nr)).enumerate() {
                blk[i] = bias[oc];
                let row = &filter[oc * k..(oc + 1) * k];
                for (kk, &v) in row.iter().enumerate() {
                    blk[nr * (kk + 1) + i] = v;
                }
            }
        }
        PackedConvF32 {
            shape,
            gemm,
            weights,
            zeros: AlignedBuf::zeroed(shape.kw * shape.in_c),
            segments: OnceLock::new(),
        }
    }

    pub fn shape(&self) -> FilterShape {
        self.shape
    }

    /// Size of the packed weights and biases (and the zero segment).
    pub fn packed_bytes(&self) -> usize {
        (self.weights.len() + self.zeros.len()) * std::mem::size_of::<f32>()
    }

    /// Name of the micro-kernel the weights were packed for.
    pub fn kernel_name(&self) -> &'static str {
        self.gemm.name
    }
}

impl Persist for PackedConvF32 {
    /// The shape and the packed blocks; the zero segment and the segment plan are rebuilt.
    fn persist(&self, out: &mut Vec<u8>) {
        persist::put_shape(out, self.shape);
        persist::put_slice(out, &self.weights);
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let shape = src.shape()?;
        let gemm = uk.f32_gemm;
        let block = gemm.nr * (shape.taps() + 1);
        let weights = src.buf(shape.out_c.div_ceil(gemm.nr) * block)?;
        Ok(PackedConvF32 {
            shape,
            gemm,
            weights,
            zeros: AlignedBuf::zeroed(shape.kw * shape.in_c),
            segments: OnceLock::new(),
        })
    }
}

/// CONV_2D float32, NHWC, explicit padding (padded taps contribute 0), fused activation, any batch.
/// Equal to [`crate::conv::reference::conv2d_f32`] up to the order of the float sums (and a NaN sum
/// stays NaN under RELU, where the reference's `max(x, 0)` gives 0).
pub fn conv2d_f32(
    w: &Window,
    packed: &PackedConvF32,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    let s = packed.shape;
    assert_eq!(
        (s.out_c, s.kh, s.kw, s.in_c),
        (w.output.c, w.filter_h, w.filter_w, w.input.c),
        "filter shape does not match the window"
    );
    assert_eq!(w.input.n, w.output.n, "batch");
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert!(w.stride_h > 0 && w.stride_w > 0, "stride");
    assert!(s.kh > 0 && s.kw > 0, "empty filter window");
    let pointwise = s.kh == 1
        && s.kw == 1
        && w.padding == crate::Padding::default()
        && (w.input.h, w.input.w) == (w.output.h, w.output.w)
        && (w.stride_h == 1 || w.input.h == 1)
        && (w.stride_w == 1 || w.input.w == 1);
    let rows = if pointwise {
        Rows::Direct(input)
    } else {
        let plan = packed
            .segments
            .get_or_init(|| SegmentPlan::new(w, packed, input))
            .as_ref()
            .filter(|p| p.window == *w);
        Rows::Conv { w, input, plan }
    };
    Gemm::new(packed, rows, w.output.n * w.output.h * w.output.w, act).execute(output);
}

/// FULLY_CONNECTED float32: `rows × in_c` input to `rows × out_c` output (reference:
/// [`crate::conv::reference::fully_connected_f32`]).
pub fn fully_connected_f32(
    packed: &PackedConvF32,
    rows: usize,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    let s = packed.shape;
    assert_eq!(input.len(), rows * s.taps(), "input length");
    assert_eq!(output.len(), rows * s.out_c, "output length");
    Gemm::new(packed, Rows::Direct(input), rows, act).execute(output);
}

/// Where the rows of A come from.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// A is the `M × K` row-major slice itself.
    Direct(&'a [f32]),
    /// Row `m` is the receptive field of output pixel `m` of a convolution, one segment per
    /// filter row; `plan`, if any, is the segment plan of this window.
    Conv {
        w: &'a Window,
        input: &'a [f32],
        plan: Option<&'a SegmentPlan>,
    },
}

/// One GEMM over a packed filter: `m` rows, `out_c` columns, `taps` deep.
struct Gemm<'a> {
    packed: &'a PackedConvF32,
    rows: Rows<'a>,
    m: usize,
    min: f32,
    max: f32,
}

/// A rectangle of the output: row tiles' rows `m0..m1` by column blocks `b0..b1`.
#[derive(Clone, Copy, Debug)]
struct Task {
    m0: usize,
    m1: usize,
    b0: usize,
    b1: usize,
}

/// The output as a raw pointer that parallel tasks share.
#[derive(Clone, Copy)]
struct OutPtr {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the pointer comes from one `&mut [f32]` borrowed for the whole fork-join, and the
// tasks of `Gemm::execute` cover disjoint output rectangles, so no element is written by two
// threads and nothing else touches the slice meanwhile.
unsafe impl Send for OutPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for OutPtr {}

/// Per-thread buffers of the convolution path, grown on first need.
struct Scratch {
    /// Border segments, `mr · K` values: segment (row r, filter row ky) at `(r·kh + ky)·seg`.
    rows: Vec<f32>,
    /// The micro-kernel's pointer table for one row tile, `kh · mr` entries.
    ptrs: Vec<*const f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            rows: Vec::new(),
            ptrs: Vec::new(),
        })
    };
}

impl<'a> Gemm<'a> {
    fn new(packed: &'a PackedConvF32, rows: Rows<'a>, m: usize, act: Activation) -> Self {
        let (min, max) = act.range_f32();
        Gemm {
            packed,
            rows,
            m,
            min,
            max,
        }
    }

    fn execute(&self, output: &mut [f32]) {
        let g = &self.packed.gemm;
        let n = self.packed.shape.out_c;
        debug_assert_eq!(output.len(), self.m * n);
        if self.m == 0 || n == 0 {
            return;
        }
        let out = OutPtr {
            ptr: output.as_mut_ptr(),
            len: output.len(),
        };
        let (tiles, blocks) = (self.m.div_ceil(g.mr), n.div_ceil(g.nr));
        let whole = Task {
            m0: 0,
            m1: self.m,
            b0: 0,
            b1: blocks,
        };
        let threads = crate::parallel::threads();
        let macs = self.m * n * self.packed.shape.taps().max(1);
        if threads <= 1 || macs < MIN_F32_MACS {
            self.run(whole, out);
            return;
        }
        let by_rows = tiles >= MIN_ROW_TILES_PER_THREAD * threads || blocks < threads;
        // Column splits deal whole column blocks when they share evenly between the threads;
        // otherwise (5 blocks of MobileNet v2's N = 160 on 2 threads would be 3 against 2)
        // they deal (block, row tile) cells, block by block, so the shares differ by at most
        // one row tile.
        let cells = !by_rows && !blocks.is_multiple_of(threads);
        let units = if by_rows {
            tiles
        } else if cells {
            blocks * tiles
        } else {
            blocks
        };
        // A few parts per thread, so a worker that wakes late still takes its share by
        // stealing instead of leaving the whole second half to the first thread. Column parts
        // each re-read all of A, so they stay coarser.
        let per_thread = if by_rows {
            ROW_PARTS_PER_THREAD
        } else {
            COLUMN_PARTS_PER_THREAD
        };
        let parts = (threads * per_thread).min(units);
        if parts <= 1 {
            self.run(whole, out);
            return;
        }
        // A row split whose weights outgrow half an L2 cuts each thread's share of the
        // rows into column pieces instead of shorter row ranges: a piece of the filter streams
        // all the share's rows past it once, where a quarter of the rows would go through
        // every panel, reading the whole filter from L3 once per part (the 14×14×512 layers:
        // 1 MiB of weights four times per thread instead of once). Each thread still writes
        // only its own rows, so the operators around it read what their own core wrote.
        let weight_bytes = self.packed.weights.len() * std::mem::size_of::<f32>();
        if let Some(pieces) = share_pieces(tiles, blocks, threads, weight_bytes) {
            let part = |i: usize| {
                let (s, j) = (i / pieces, i % pieces);
                let (t0, t1) = (s * tiles / threads, (s + 1) * tiles / threads);
                self.run(
                    Task {
                        m0: t0 * g.mr,
                        m1: (t1 * g.mr).min(self.m),
                        b0: j * blocks / pieces,
                        b1: (j + 1) * blocks / pieces,
                    },
                    out,
                );
            };
            crate::parallel::for_parts(threads * pieces, part);
            return;
        }
        let part = |i: usize| {
            let (u0, u1) = (i * units / parts, (i + 1) * units / parts);
            if by_rows {
                self.run(
                    Task {
                        m0: u0 * g.mr,
                        m1: (u1 * g.mr).min(self.m),
                        ..whole
                    },
                    out,
                );
            } else if cells {
                self.run_cells(u0, u1, tiles, out);
            } else {
                self.run(
                    Task {
                        b0: u0,
                        b1: u1,
                        ..whole
                    },
                    out,
                );
            }
        };
        crate::parallel::for_parts(parts, part);
    }

    /// Computes cells `u0..u1` of the (column block, row tile) grid numbered block by block:
    /// a partial block's tiles, whole blocks, the next block's first tiles.
    fn run_cells(&self, u0: usize, u1: usize, tiles: usize, out: OutPtr) {
        let mr = self.packed.gemm.mr;
        let mut u = u0;
        while u < u1 {
            let (b, t) = (u / tiles, u % tiles);
            let task = if t == 0 && u1 - u >= tiles {
                let whole = (u1 - u) / tiles;
                u += whole * tiles;
                Task {
                    m0: 0,
                    m1: self.m,
                    b0: b,
                    b1: b + whole,
                }
            } else {
                let t1 = tiles.min(t + (u1 - u));
                u += t1 - t;
                Task {
                    m0: t * mr,
                    m1: (t1 * mr).min(self.m),
                    b0: b,
                    b1: b + 1,
                }
            };
            self.run(task, out);
        }
    }

    /// Computes the output rectangle `t`.
    fn run(&self, t: Task, out: OutPtr) {
        let g = &self.packed.gemm;
        let (n, k) = (self.packed.shape.out_c, self.packed.shape.taps());
        let (ks, kc) = match self.rows {
            Rows::Direct(_) => (1, k),
            Rows::Conv { w, .. } => (w.filter_h, w.filter_w * w.input.c),
        };
        let block = g.nr * (k + 1);
        // Equal panels of at most PANEL_BYTES, so no panel is a sliver that re-reads all of A
        // for one block.
        let max_panel = (PANEL_BYTES / (block * std::mem::size_of::<f32>())).max(1);
        let panel = (t.b1 - t.b0)
            .div_ceil((t.b1 - t.b0).div_ceil(max_panel).max(1))
            .max(1);
        let weights = self.packed.weights.as_slice();
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            if let Rows::Conv { .. } = self.rows {
                if scratch.rows.len() < g.mr * k {
                    scratch.rows.resize(g.mr * k, 0.0);
                }
                if scratch.ptrs.len() < g.mr * ks {
                    scratch.ptrs.resize(g.mr * ks, std::ptr::null());
                }
            }
            let mut direct = [std::ptr::null::<f32>(); F32_GEMM_MAX_MR];
            let mut p0 = t.b0;
            while p0 < t.b1 {
                let p1 = (p0 + panel).min(t.b1);
                let col0 = p0 * g.nr;
                let nc = (p1 * g.nr).min(n) - col0;
                let w = &weights[p0 * block..p1 * block];
                // The next panel of this task, prefetched a share per row tile while this one
                // is computed: with few row tiles (the 7×7 layers) the first pass over a
                // panel otherwise waits on its weights arriving from L3 or memory.
                let next = &weights[p1 * block..(p1 + panel).min(t.b1) * block];
                let share = next.len().div_ceil((t.m1 - t.m0).div_ceil(g.mr));
                let mut m0 = t.m0;
                while m0 < t.m1 {
                    let rows = g.mr.min(t.m1 - m0);
                    let table: &[*const f32] = match self.rows {
                        Rows::Direct(a) => {
                            let a = &a[m0 * k..(m0 + rows) * k];
                            for (r, p) in direct[..rows].iter_mut().enumerate() {
                                *p = a[r * k..].as_ptr();
                            }
                            &direct[..rows]
                        }
                        Rows::Conv { w, input, plan } => {
                            let ptrs = &mut scratch.ptrs[..rows * ks];
                            let planned = plan.is_some_and(|plan| {
                                from_plan(plan, input, &self.packed.zeros, m0, ptrs)
                            });
                            if !planned {
                                indirection(
                                    w,
                                    input,
                                    &self.packed.zeros,
                                    m0,
                                    &mut scratch.rows,
                                    ptrs,
                                );
                            }
                            ptrs
                        }
                    };
                    let c0 = m0 * n + col0;
                    assert!(c0 + (rows - 1) * n + nc <= out.len, "output rectangle");
                    let at = ((m0 - t.m0) / g.mr * share).min(next.len());
                    let next = &next[at..(at + share).min(next.len())];
                    let args = F32GemmArgs {
                        a: table.as_ptr(),
                        ks,
                        kc,
                        w: w.as_ptr(),
                        c: out.ptr.wrapping_add(c0),
                        c_stride: n,
                        nc,
                        min: self.min,
                        max: self.max,
                        next: next.as_ptr(),
                        next_len: next.len(),
                    };
                    // SAFETY: `table` holds ks·rows pointers, each to kc readable values (the
                    // input, the zero segment or the scratch, see `indirection`); `w` holds the
                    // p1 − p0 ≥ ceil(nc / nr) packed blocks of (k + 1)·nr values; C rows
                    // m0..m0 + rows, columns col0..col0 + nc lie inside the output (asserted
                    // above), which is a separate `&mut` borrow from everything the kernel
                    // reads, and belong to this task alone (see `OutPtr`). The kernel came
                    // from a table, so the processor runs it.
                    unsafe { g.kernel(rows)(&args) };
                    m0 += rows;
                }
                p0 = p1;
            }
        });
    }
}

/// Column pieces per thread of a GEMM of `tiles` row tiles over `threads` whose packed
/// weights take `weight_bytes` in `blocks` column blocks, when it is split over row tiles and
/// each thread's share of the rows is better cut by columns than into shorter row ranges (see
/// [`Gemm::execute`]); `None` otherwise.
fn share_pieces(tiles: usize, blocks: usize, threads: usize, weight_bytes: usize) -> Option<usize> {
    let pieces = ROW_PARTS_PER_THREAD.min(blocks);
    // More threads than home ranges would deal shares to the wrong threads.
    (tiles >= MIN_ROW_TILES_PER_THREAD * threads
        && weight_bytes > SHARE_BY_COLUMNS_BYTES
        && pieces > 1
        && (2..=crate::parallel::MAX_HOMES).contains(&threads))
    .then_some(pieces)
}

/// Fills `ptrs` as [`indirection`] does, from the plan of this window; `false` (and `ptrs`
/// partly written) if one of the tile's segments has to be gathered.
fn from_plan(
    plan: &SegmentPlan,
    input: &[f32],
    zeros: &[f32],
    m0: usize,
    ptrs: &mut [*const f32],
) -> bool {
    let kh = plan.window.filter_h;
    let rows = ptrs.len() / kh;
    let offsets = &plan.offsets[m0 * kh..(m0 + rows) * kh];
    let (base, zero) = (input.as_ptr(), zeros.as_ptr());
    for (r, offs) in offsets.chunks_exact(kh).enumerate() {
        for (ky, &o) in offs.iter().enumerate() {
            ptrs[ky * rows + r] = match o {
                SEG_ZEROS => zero,
                SEG_GATHER => return false,
                // Recorded from a pointer into an input of this window's length.
                o => base.wrapping_add(o as usize),
            };
        }
    }
    true
}

/// Fills `ptrs` (`kh · rows` entries, filter row major) with the A segments of output pixels
/// `m0..m0 + rows`: segment (r, ky) is the `seg = kw · in_c` input values under filter row `ky`
/// of pixel `m0 + r`. Windows inside the input point into it, filter rows in the vertical
/// padding point at `zeros`, and windows cut by the horizontal padding are gathered into
/// `scratch` (padding as zeros).
fn indirection(
    w: &Window,
    input: &[f32],
    zeros: &[f32],
    m0: usize,
    scratch: &mut [f32],
    ptrs: &mut [*const f32],
) {
    let kh = w.filter_h;
    let in_c = w.input.c;
    let seg = w.filter_w * in_c;
    let rows = ptrs.len() / kh;
    debug_assert!(zeros.len() >= seg && scratch.len() >= rows * kh * seg);
    let (oh, ow) = (w.output.h, w.output.w);
    let (sw, pl) = (w.stride_w, w.padding.left);
    // Output columns whose window lies wholly inside the input row: ox·sw ≥ pl and
    // ox·sw − pl + kw ≤ in_w.
    let inner_lo = pl.div_ceil(sw);
    let inner_hi = if w.input.w + pl >= w.filter_w {
        (w.input.w + pl - w.filter_w) / sw + 1
    } else {
        0
    };
    let mut gathered = false;
    let mut r0 = 0;
    while r0 < rows {
        // A run of pixels of one output row shares its vertical window.
        let m = m0 + r0;
        let (b, oy, ox0) = (m / (oh * ow), (m / ow) % oh, m % ow);
        let run = (ow - ox0).min(rows - r0);
        let ty = taps(oy, w.stride_h, w.padding.top, kh, w.input.h);
        for ky in 0..kh {
            let slots = &mut ptrs[ky * rows + r0..ky * rows + r0 + run];
            if ky < ty.first_tap || ky >= ty.first_tap + ty.len {
                slots.fill(zeros.as_ptr());
                continue;
            }
            let row_base = w
                .input
                .offset(b, ty.first_input + (ky - ty.first_tap), 0, 0);
            // Pixels i_lo..i_hi of the run have their window inside the input: consecutive
            // spans `sw · in_c` apart, bounds-checked once.
            let i_lo = inner_lo.saturating_sub(ox0).min(run);
            let i_hi = inner_hi.saturating_sub(ox0).clamp(i_lo, run);
            if i_lo < i_hi {
                let step = sw * in_c;
                let first = row_base + ((ox0 + i_lo) * sw - pl) * in_c;
                let end = first + (i_hi - i_lo - 1) * step + seg;
                let base = input[first..end].as_ptr();
                for (j, slot) in slots[i_lo..i_hi].iter_mut().enumerate() {
                    *slot = base.wrapping_add(j * step);
                }
            }
            for i in (0..i_lo).chain(i_hi..run) {
                let ox = ox0 + i;
                let tx = taps(ox, sw, pl, w.filter_w, w.input.w);
                let (x0, x1) = (tx.first_tap * in_c, (tx.first_tap + tx.len) * in_c);
                let src = row_base + tx.first_input * in_c;
                let at = ((r0 + i) * kh + ky) * seg;
                let d = &mut scratch[at..at + seg];
                zero_span(&mut d[..x0]);
                copy_span(&mut d[x0..x1], &input[src..src + (x1 - x0)]);
                zero_span(&mut d[x1..]);
                // Pointed at once the scratch is no longer written (below).
                slots[i] = std::ptr::null();
                gathered = true;
            }
        }
        r0 += run;
    }
    if gathered {
        let base = scratch.as_ptr();
        for (i, slot) in ptrs.iter_mut().enumerate() {
            if slot.is_null() {
                let (ky, r) = (i / rows, i % rows);
                *slot = base.wrapping_add((r * kh + ky) * seg);
            }
        }
    }
}

/// `dst.copy_from_slice(src)` in fixed-size pieces, which compile to plain vector moves.
#[inline(always)]
fn copy_span(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(16);
    let mut s = src.chunks_exact(16);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    let (mut d, mut s) = (d.into_remainder(), s.remainder());
    for piece in [8, 4, 2, 1] {
        if d.len() >= piece {
            let (dh, dt) = d.split_at_mut(piece);
            dh.copy_from_slice(&s[..piece]);
            (d, s) = (dt, &s[piece..]);
        }
    }
}

/// `dst.fill(0.0)` in fixed-size pieces (see [`copy_span`]).
#[inline(always)]
fn zero_span(dst: &mut [f32]) {
    let mut d = dst.chunks_exact_mut(16);
    for d in &mut d {
        d.copy_from_slice(&[0.0; 16]);
    }
    let mut d = d.into_remainder();
    for piece in [8, 4, 2, 1] {
        if d.len() >= piece {
            let (dh, dt) = d.split_at_mut(piece);
            dh.copy_from_slice(&[0.0; 16][..piece]);
            d = dt;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_shares_go_by_columns_only_when_the_weights_outgrow_half_an_l2() {
        let bytes = |k: usize, n: usize| n.div_ceil(32) * 32 * (k + 1) * 4;
        // MobileNet v1's 14×14×512 pointwise layers: 1 MiB of weights, four pieces per share.
        assert_eq!(share_pieces(28, 16, 2, bytes(512, 512)), Some(4));
        // 14×14, 256 to 512 channels: 526 KB, also by pieces.
        assert_eq!(share_pieces(28, 16, 2, bytes(256, 512)), Some(4));
        // 28×28×256: 263 KB, which stays in L2 across parts: split by row ranges as before.
        assert_eq!(share_pieces(112, 8, 2, bytes(256, 256)), None);
        // Column splits (7×7: 7 tiles), one thread, a single block and oversized teams keep
        // their split.
        assert_eq!(share_pieces(7, 32, 2, bytes(1024, 1024)), None);
        assert_eq!(share_pieces(28, 16, 1, bytes(512, 512)), None);
        assert_eq!(share_pieces(28, 1, 2, bytes(4096, 32)), None);
        assert_eq!(share_pieces(80, 16, 9, bytes(512, 512)), None);
        // Fewer blocks than pieces: one block per piece.
        assert_eq!(share_pieces(8, 3, 2, bytes(4096, 96)), Some(3));
        assert_eq!(
            share_pieces(8, 3, 2, SHARE_BY_COLUMNS_BYTES),
            None,
            "the threshold is strict"
        );
    }
}
