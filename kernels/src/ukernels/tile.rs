//! The tile-matrix form of the uint8 GEMM (docs/design.md §8): the slot, the tile backend
//! interface the operator loop in [`crate::conv::u8`] drives, and a software model of the tile
//! instructions.
//!
//! A tile unit (x86 AMX-INT8) holds eight 2-D registers of at most 16 rows × 64 bytes, shaped
//! by a 64-byte configuration (LDTILECFG, palette 1). `TDPBUSD c, a, b` adds to each int32
//! `c[m][n]` the four products `u8(a[m][4k + i]) · s8(b[k][4n + i])` for every k-quad row `k`
//! of `b`: the same unsigned × signed dot product of four bytes as `vpdpbusd`, with B in the
//! same "four consecutive k per column" order as the packed VNNI blocks. Sums wrap modulo 2^32,
//! as the reference's int32 accumulator does, so a tile product equals the VNNI product bit for
//! bit and the zero-point algebra and requantization of [`crate::conv::u8`] carry over.
//!
//! The operator loop is written once over [`TileBackend`]; [`SoftTiles`] executes the same
//! instruction sequence on in-memory tiles, following the instruction definitions (rows and
//! column bytes from the configuration, everything past them zero), so the packing, tails,
//! zero points and requantization of the tile path are tested on every x86_64 machine, with
//! or without a tile unit.

use super::quant8::{ColRequant, Requant8};

/// Output columns of one packed weight block of the tile path: four 16-column tiles.
pub const TILE_NR: usize = 64;
/// Rows of A per tile.
pub const TILE_MR: usize = 16;
/// Bytes of K per full A tile (16 k-quads).
pub const TILE_KB: usize = 64;

/// The palette-1 configuration LDTILECFG loads: rows and bytes per row of tiles 0..8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileConfig {
    pub rows: [u8; 8],
    pub colsb: [u16; 8],
}

impl TileConfig {
    /// The configuration of the uint8 GEMM with `k` bytes per A row (a multiple of 4):
    /// tiles 0–3 the 16 × 16 int32 accumulators, 4 and 5 a full 64-byte K step of A and B,
    /// 6 and 7 the K remainder (`k mod 64` bytes of A, `(k mod 64)/4` k-quad rows of B), left
    /// unconfigured when there is none.
    pub fn gemm(k: usize) -> TileConfig {
        debug_assert_eq!(k % 4, 0);
        let tail = k % TILE_KB;
        let mut c = TileConfig::default();
        for t in 0..6 {
            c.rows[t] = TILE_MR as u8;
            c.colsb[t] = 64;
        }
        if tail != 0 {
            c.rows[6] = TILE_MR as u8;
            c.colsb[6] = tail as u16;
            c.rows[7] = (tail / 4) as u8;
            c.colsb[7] = 64;
        }
        c
    }

    /// The 64-byte memory form: palette 1, start row 0, then `colsb[16]` and `rows[16]`.
    pub fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = 1;
        for t in 0..8 {
            b[16 + 2 * t..18 + 2 * t].copy_from_slice(&self.colsb[t].to_le_bytes());
            b[48 + t] = self.rows[t];
        }
        b
    }
}

/// What the uint8 tile operator loop needs from a tile unit. All blocks of one operation on
/// one thread run between one [`TileBackend::configure`] and one [`TileBackend::release`].
pub trait TileBackend {
    /// Loads `cfg` (LDTILECFG) on this thread.
    ///
    /// # Safety
    /// The tile unit is usable by this process (see the hardware backend's detection).
    unsafe fn configure(&mut self, cfg: &TileConfig);

    /// One 16 × 64 int32 block of `A·B` into `c` (16 rows of 64 values, 256 bytes apart),
    /// with the [`TileConfig::gemm`] configuration loaded: the accumulators zeroed, then for
    /// each of `kb` full K steps one A tile from `a` (row stride `lda`) and four B tiles (at
    /// `b + 64·j`, row stride 256), then, if `tail`, the remainder tiles 6 and 7 the same way,
    /// then the four accumulators stored.
    ///
    /// # Safety
    /// 16 rows of `64·kb` (+ the tail's bytes) at `a`, `lda` apart, and `kb·16` (+ the tail's
    /// rows) k-quad rows of 256 bytes at `b` are readable; `c` is writable for 16 × 64 values.
    unsafe fn block(
        &mut self,
        a: *const u8,
        lda: usize,
        b: *const u8,
        kb: usize,
        tail: bool,
        c: *mut i32,
    );

    /// Returns the tiles to their initial state (TILERELEASE).
    fn release(&mut self);
}

/// A software model of the tile registers and of TILELOADD, TDPBUSD, TILESTORED and TILEZERO.
#[derive(Clone)]
pub struct SoftTiles {
    cfg: TileConfig,
    tiles: [[u8; 1024]; 8],
}

impl Default for SoftTiles {
    fn default() -> Self {
        SoftTiles {
            cfg: TileConfig::default(),
            tiles: [[0; 1024]; 8],
        }
    }
}

impl SoftTiles {
    /// TILEZERO.
    pub fn tilezero(&mut self, t: usize) {
        self.tiles[t] = [0; 1024];
    }

    /// TILELOADD: the configured rows × column bytes from `base + r·stride`, the rest of the
    /// tile zeroed.
    ///
    /// # Safety
    /// The configured rows × column bytes are readable.
    pub unsafe fn tileloadd(&mut self, t: usize, base: *const u8, stride: usize) {
        let (rows, colsb) = (self.cfg.rows[t] as usize, self.cfg.colsb[t] as usize);
        assert!(rows > 0 && colsb > 0, "tile {t} is not configured");
        self.tiles[t] = [0; 1024];
        for r in 0..rows {
            // SAFETY: the caller's contract.
            let src = unsafe { std::slice::from_raw_parts(base.add(r * stride), colsb) };
            self.tiles[t][r * 64..r * 64 + colsb].copy_from_slice(src);
        }
    }

    /// TILESTORED: the configured rows × column bytes to `base + r·stride`.
    ///
    /// # Safety
    /// The configured rows × column bytes are writable.
    pub unsafe fn tilestored(&self, t: usize, base: *mut u8, stride: usize) {
        let (rows, colsb) = (self.cfg.rows[t] as usize, self.cfg.colsb[t] as usize);
        assert!(rows > 0 && colsb > 0, "tile {t} is not configured");
        for r in 0..rows {
            // SAFETY: the caller's contract.
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(r * stride), colsb) };
            dst.copy_from_slice(&self.tiles[t][r * 64..r * 64 + colsb]);
        }
    }

    /// TDPBUSD `c += a·b`: the shapes must agree as the instruction requires (`a` and `c` the
    /// same rows, `a`'s k-quads `b`'s rows, `b` and `c` the same column bytes); each int32 of
    /// `c` gains the wrapping sum of its unsigned × signed byte products.
    pub fn tdpbusd(&mut self, c: usize, a: usize, b: usize) {
        let cfg = self.cfg;
        let (m, kq, n) = (
            cfg.rows[c] as usize,
            cfg.colsb[a] as usize / 4,
            cfg.colsb[c] as usize / 4,
        );
        assert!(
            cfg.rows[a] as usize == m && cfg.rows[b] as usize == kq && cfg.colsb[b] == cfg.colsb[c],
            "tdpbusd tmm{c}, tmm{a}, tmm{b}: shapes {cfg:?} disagree"
        );
        let (ta, tb) = (self.tiles[a], self.tiles[b]);
        let tc = &mut self.tiles[c];
        for row in 0..m {
            for col in 0..n {
                let at = row * 64 + 4 * col;
                let mut acc = i32::from_le_bytes(tc[at..at + 4].try_into().unwrap());
                for k in 0..kq {
                    for i in 0..4 {
                        let x = i32::from(ta[row * 64 + 4 * k + i]);
                        let w = i32::from(tb[k * 64 + 4 * col + i] as i8);
                        acc = acc.wrapping_add(x * w);
                    }
                }
                tc[at..at + 4].copy_from_slice(&acc.to_le_bytes());
            }
        }
    }
}

impl TileBackend for SoftTiles {
    unsafe fn configure(&mut self, cfg: &TileConfig) {
        self.cfg = *cfg;
        self.tiles = [[0; 1024]; 8];
    }

    unsafe fn block(
        &mut self,
        a: *const u8,
        lda: usize,
        b: *const u8,
        kb: usize,
        tail: bool,
        c: *mut i32,
    ) {
        for t in 0..4 {
            self.tilezero(t);
        }
        let steps = (0..kb).map(|s| (4, 5, s)).chain(tail.then_some((6, 7, kb)));
        for (ta, tb, s) in steps {
            // SAFETY: step s of A and B is inside what the caller made readable.
            unsafe {
                self.tileloadd(ta, a.add(s * TILE_KB), lda);
                for j in 0..4 {
                    self.tileloadd(tb, b.add(s * 16 * 256 + 64 * j), 256);
                    self.tdpbusd(j, ta, tb);
                }
            }
        }
        for j in 0..4 {
            // SAFETY: 16 rows of 64 int32 at `c` are writable.
            unsafe { self.tilestored(j, c.add(16 * j).cast(), 256) };
        }
    }

    fn release(&mut self) {
        *self = SoftTiles::default();
    }
}

/// Which tile unit runs the uint8 tile path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileUnit {
    /// [`SoftTiles`] (tests, and comparisons on processors without a tile unit).
    Software,
    /// The processor's AMX-INT8 (`x86_64::amx`).
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    Amx,
}

/// The epilogue of a tile block: for row `r < rows`, column `n < cols (≤ 64)`,
/// `requant(acc[r·acc_stride + n] + bias[n] + row_corr[r])` (wrapping int32) at
/// `out + r·out_stride + n`, or the sum itself at `raw + r·out_stride + n` when `raw` is
/// non-null, exactly as [`super::quant8::U8GemmArgs`] defines them. `col_rq` is null or the
/// [`ColRequant`] constants of the block's columns in blocks of 32 (`B = 32`), one after the
/// other; `bias` holds 64 values.
#[derive(Clone, Copy, Debug)]
pub struct U8EpilogueArgs {
    pub acc: *const i32,
    pub acc_stride: usize,
    pub rows: usize,
    pub cols: usize,
    pub bias: *const i32,
    pub row_corr: *const i32,
    pub out: *mut u8,
    pub out_stride: usize,
    pub rq: Requant8,
    pub col_rq: ColRequant,
    pub raw: *mut i32,
}

/// A tile epilogue kernel. Callers uphold the memory contract of [`U8EpilogueArgs`].
pub type U8EpilogueFn = unsafe fn(&U8EpilogueArgs);

/// Per-column requantization blocks of the tile path hold this many columns.
pub const EPILOGUE_COL_BLOCK: usize = 32;

/// The uint8 tile slot: the unit, the epilogue, and from how many rows of A the operator
/// loop prefers it over the register-tile kernel ([`super::quant8::U8Gemm`]).
#[derive(Clone, Copy, Debug)]
pub struct U8Tiles {
    pub unit: TileUnit,
    pub epilogue: U8EpilogueFn,
    pub min_rows: usize,
    pub name: &'static str,
}

/// The scalar epilogue every vector epilogue must agree with.
///
/// # Safety
/// The contract of [`U8EpilogueArgs`].
pub unsafe fn u8_epilogue_generic(p: &U8EpilogueArgs) {
    for r in 0..p.rows {
        // SAFETY: `row_corr` holds `rows` values.
        let corr = unsafe { *p.row_corr.add(r) };
        for n in 0..p.cols {
            // SAFETY: the accumulator rows hold `cols` values, the bias 64.
            let x = unsafe { *p.acc.add(r * p.acc_stride + n) }
                .wrapping_add(unsafe { *p.bias.add(n) })
                .wrapping_add(corr);
            let at = r * p.out_stride + n;
            if !p.raw.is_null() {
                // SAFETY: row r of the raw sums has `cols` writable values.
                unsafe { *p.raw.add(at) = x };
                continue;
            }
            let q = if p.col_rq.is_null() {
                p.rq.apply(x)
            } else {
                let base =
                    (n / EPILOGUE_COL_BLOCK) * 3 * EPILOGUE_COL_BLOCK + n % EPILOGUE_COL_BLOCK;
                // SAFETY: the column's three constants lie in its block.
                let (m, l, s) = unsafe {
                    (
                        *p.col_rq.add(base),
                        *p.col_rq.add(base + EPILOGUE_COL_BLOCK),
                        *p.col_rq.add(base + 2 * EPILOGUE_COL_BLOCK),
                    )
                };
                p.rq.apply_col(x, m, l, s)
            };
            // SAFETY: row r of the output has `cols` writable bytes.
            unsafe { *p.out.add(at) = q };
        }
    }
}

/// The software tile slot (tests and comparisons): the model, the scalar epilogue, used for
/// every row count.
pub const U8_TILES_SOFTWARE: U8Tiles = U8Tiles {
    unit: TileUnit::Software,
    epilogue: u8_epilogue_generic,
    min_rows: 1,
    name: "u8_gemm_tiles_software_16x64",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_bytes_follow_the_palette_layout() {
        let c = TileConfig::gemm(27 + 1 + 64);
        let b = c.bytes();
        assert_eq!(b[0], 1);
        assert_eq!(u16::from_le_bytes([b[16], b[17]]), 64);
        assert_eq!(u16::from_le_bytes([b[28], b[29]]), 28);
        assert_eq!((b[48], b[54], b[55]), (16, 16, 7));
        assert_eq!(TileConfig::gemm(128).rows[6], 0);
    }

    #[test]
    fn the_model_multiplies_unsigned_by_signed_quads() {
        let mut t = SoftTiles::default();
        let mut cfg = TileConfig::default();
        // C: 2 rows × 3 columns; A: 2 rows × 2 quads; B: 2 quads × 3 columns.
        (cfg.rows[0], cfg.colsb[0]) = (2, 12);
        (cfg.rows[1], cfg.colsb[1]) = (2, 8);
        (cfg.rows[2], cfg.colsb[2]) = (2, 12);
        // SAFETY: a model only.
        unsafe { t.configure(&cfg) };
        let a: Vec<u8> = (0..16).map(|i| 250 - 3 * i as u8).collect();
        let b: Vec<u8> = (0..24).map(|i| (i as u8).wrapping_mul(37)).collect();
        let mut c = [7i32; 6];
        // SAFETY: the buffers hold the configured rows × bytes.
        unsafe {
            t.tileloadd(0, c.as_ptr().cast(), 12);
            t.tileloadd(1, a.as_ptr(), 8);
            t.tileloadd(2, b.as_ptr(), 12);
        }
        t.tdpbusd(0, 1, 2);
        // SAFETY: as above.
        unsafe { t.tilestored(0, c.as_mut_ptr().cast(), 12) };
        for m in 0..2 {
            for n in 0..3 {
                let mut want = 7i32;
                for k in 0..8 {
                    let w = b[(k / 4) * 12 + 4 * n + k % 4] as i8;
                    want += i32::from(a[m * 8 + k]) * i32::from(w);
                }
                assert_eq!(c[m * 3 + n], want, "({m}, {n})");
            }
        }
    }
}
