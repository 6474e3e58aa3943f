//! AMX-INT8: the hardware [`TileBackend`] of the uint8 tile path, its detection and its
//! start-up self-test, and the AVX-512 tile epilogue.
//!
//! Stable Rust has no AMX intrinsics and no `amx-*` target features; the instructions are
//! written as `asm!` mnemonics, which the assembler accepts without a target feature, and tile
//! registers appear only as clobbers. The level is offered only when (once per process)
//! CPUID reports AMX-TILE and AMX-INT8 with the 16-row × 64-byte palette, XCR0 enables the
//! tile state, the kernel grants this process the tile data state
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`; without it the first tile
//! instruction raises SIGILL), and a self-test passes: one tile product against the software
//! model, and tile contents held across a few yields of the thread (a lost tile state on
//! a context switch would corrupt results silently).

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::avx512::{
    mask16, narrow2_512, requant_q512, rq512, rq512_cols32, store32, store_row_cols32,
    store_row_raw32,
};
use crate::ukernels::tile::{
    SoftTiles, TileBackend, TileConfig, TileUnit, U8EpilogueArgs, U8Tiles, EPILOGUE_COL_BLOCK,
};
use crate::ukernels::Ukernels;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.u8_tiles = Some(U8Tiles {
        unit: TileUnit::Amx,
        epilogue: u8_epilogue_avx512,
        // Below a full tile of rows the register-tile kernel wastes less.
        min_rows: 16,
        name: "u8_gemm_amx_16x64",
    });
}

/// The hardware tile unit. Only built by the operator loop when [`usable`] said yes.
#[derive(Default)]
pub struct AmxTiles;

impl TileBackend for AmxTiles {
    unsafe fn configure(&mut self, cfg: &TileConfig) {
        let bytes = cfg.bytes();
        // SAFETY: the tile unit is usable (caller contract) and `bytes` is a valid palette-1
        // configuration of 64 readable bytes.
        unsafe { asm!("ldtilecfg [{p}]", p = in(reg) bytes.as_ptr(), options(nostack, readonly)) };
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
        // The whole block is one asm statement, so no code between the tile instructions can
        // touch the tiles. Every memory operand names its stride register (`[base + s*1]`):
        // without an index the assembler encodes a stride of 0.
        // SAFETY: configured by `configure` on this thread; the reads and writes stay inside
        // what the caller's contract makes readable and writable.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                "test {kb}, {kb}",
                "jz 3f",
                "2:",
                "tileloadd tmm4, [{a} + {lda}*1]",
                "tileloadd tmm5, [{b} + {bs}*1]",
                "tdpbusd tmm0, tmm4, tmm5",
                "tileloadd tmm5, [{b} + {bs}*1 + 64]",
                "tdpbusd tmm1, tmm4, tmm5",
                "tileloadd tmm5, [{b} + {bs}*1 + 128]",
                "tdpbusd tmm2, tmm4, tmm5",
                "tileloadd tmm5, [{b} + {bs}*1 + 192]",
                "tdpbusd tmm3, tmm4, tmm5",
                "add {a}, 64",
                "add {b}, 4096",
                "dec {kb}",
                "jnz 2b",
                "3:",
                "test {tail}, {tail}",
                "jz 4f",
                "tileloadd tmm6, [{a} + {lda}*1]",
                "tileloadd tmm7, [{b} + {bs}*1]",
                "tdpbusd tmm0, tmm6, tmm7",
                "tileloadd tmm7, [{b} + {bs}*1 + 64]",
                "tdpbusd tmm1, tmm6, tmm7",
                "tileloadd tmm7, [{b} + {bs}*1 + 128]",
                "tdpbusd tmm2, tmm6, tmm7",
                "tileloadd tmm7, [{b} + {bs}*1 + 192]",
                "tdpbusd tmm3, tmm6, tmm7",
                "4:",
                "tilestored [{c} + {bs}*1], tmm0",
                "tilestored [{c} + {bs}*1 + 64], tmm1",
                "tilestored [{c} + {bs}*1 + 128], tmm2",
                "tilestored [{c} + {bs}*1 + 192], tmm3",
                a = inout(reg) a => _,
                lda = in(reg) lda,
                b = inout(reg) b => _,
                bs = in(reg) 256usize,
                kb = inout(reg) kb => _,
                tail = in(reg) usize::from(tail),
                c = in(reg) c,
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
                options(nostack),
            );
        }
    }

    fn release(&mut self) {
        // SAFETY: TILERELEASE only returns the tile state to its initial configuration; this
        // backend exists only where the tile unit is usable.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}

/// Whether this process may run AMX-INT8, decided once.
pub fn usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| processor_has_amx() && request_permission() && self_test())
}

/// CPUID and XCR0: AMX-TILE and AMX-INT8, the tile state enabled by the OS, and palette 1 with
/// 64-byte rows, 8 tiles and 16 rows.
fn processor_has_amx() -> bool {
    if !std::arch::is_x86_feature_detected!("xsave") {
        return false;
    }
    // CPUID exists on every x86_64 processor (a safe intrinsic there).
    let max = __cpuid(0).eax;
    if max < 0x1D {
        return false;
    }
    let l7 = __cpuid_count(7, 0);
    let (tile, int8) = (l7.edx >> 24 & 1 == 1, l7.edx >> 25 & 1 == 1);
    if !(tile && int8) {
        return false;
    }
    // SAFETY: XSAVE (and so XGETBV) is supported, checked above.
    let xcr0 = unsafe { xcr0() };
    if xcr0 >> 17 & 3 != 3 {
        return false;
    }
    // Leaf 0x1D exists (max ≥ 0x1D).
    let palette = __cpuid_count(0x1D, 1);
    palette.ebx & 0xFFFF == 64 && palette.ebx >> 16 >= 8 && palette.ecx & 0xFFFF >= 16
}

/// XCR0.
///
/// # Safety
/// The processor supports XSAVE and the OS enabled it (`is_x86_feature_detected!("xsave")`).
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: XGETBV with ECX = 0 exists when XSAVE is enabled (caller contract).
    unsafe { _xgetbv(0) }
}

/// `arch_prctl(ARCH_GET_XCOMP_PERM)`, then `ARCH_REQ_XCOMP_PERM(XFEATURE_XTILEDATA)` when the
/// tile data state is not yet permitted, then the check that it is. Permission is per process
/// and kept for its lifetime.
fn request_permission() -> bool {
    const SYS_ARCH_PRCTL: usize = 158;
    const ARCH_GET_XCOMP_PERM: usize = 0x1022;
    const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
    const XFEATURE_XTILEDATA: usize = 18;
    let get = || {
        let mut mask = 0u64;
        // SAFETY: arch_prctl(ARCH_GET_XCOMP_PERM, &mask) writes 8 bytes to `mask`; the
        // syscall instruction clobbers rcx and r11 only.
        let rc = unsafe { syscall2(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_PERM, &raw mut mask as usize) };
        (rc == 0).then_some(mask)
    };
    let permitted = |mask: Option<u64>| mask.is_some_and(|m| m >> XFEATURE_XTILEDATA & 1 == 1);
    if permitted(get()) {
        return true;
    }
    // SAFETY: arch_prctl(ARCH_REQ_XCOMP_PERM, 18) only changes this process's permissions.
    let rc = unsafe { syscall2(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
    rc == 0 && permitted(get())
}

/// A Linux system call with two arguments; returns the kernel's result (negative errno).
///
/// # Safety
/// The call and its arguments must be valid for this process.
unsafe fn syscall2(nr: usize, a0: usize, a1: usize) -> isize {
    let ret: isize;
    // SAFETY: the caller's contract; `syscall` clobbers rcx and r11 and reads the arguments
    // from rdi and rsi.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a0,
            in("rsi") a1,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A tile product of every shape feature (full K steps and a remainder, signed weights,
/// large bytes) against the software model, then tile contents held across yields.
fn self_test() -> bool {
    const K: usize = 64 + 28;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut byte = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 24) as u8
    };
    let lda = K + 4;
    let a: Vec<u8> = (0..16 * lda).map(|_| byte()).collect();
    let b: Vec<u8> = (0..K / 4 * 256).map(|_| byte()).collect();
    let cfg = TileConfig::gemm(K);
    let run = |unit: &mut dyn TileBackend| {
        let mut c = vec![0i32; 16 * 64];
        // SAFETY: `a` holds 16 rows of K bytes `lda` apart, `b` K/4 rows of 256 bytes, `c`
        // 16 × 64 values; the unit is usable (permission granted above).
        unsafe {
            unit.configure(&cfg);
            unit.block(a.as_ptr(), lda, b.as_ptr(), K / 64, true, c.as_mut_ptr());
        }
        unit.release();
        c
    };
    if run(&mut AmxTiles) != run(&mut SoftTiles::default()) {
        return false;
    }
    // Tile 4 (16 × 64 bytes) loaded, the thread yielded and slept, then stored back.
    let mut back = vec![0u8; 16 * 64];
    // SAFETY: as above; `a` holds 16 rows of 64 bytes `lda` apart, `back` 16 rows of 64.
    unsafe {
        AmxTiles.configure(&cfg);
        asm!("tileloadd tmm4, [{a} + {s}*1]", a = in(reg) a.as_ptr(), s = in(reg) lda,
             out("tmm4") _, options(nostack, readonly));
    }
    for i in 0..4 {
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_micros(200 * (i + 1)));
    }
    // SAFETY: the configuration and tile 4 are still this thread's (what is checked).
    unsafe {
        asm!("tilestored [{p} + {s}*1], tmm4", p = in(reg) back.as_mut_ptr(), s = in(reg) 64usize,
             options(nostack));
    }
    AmxTiles.release();
    (0..16).all(|r| back[r * 64..r * 64 + 64] == a[r * lda..r * lda + 64])
}

/// [`crate::ukernels::tile::u8_epilogue_generic`] with AVX-512: 32 columns per step, the
/// requantization of the VNNI GEMM tile (`requant_q512` and `narrow2_512`, or the per-column
/// form), so both paths round identically.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and `p` satisfies [`U8EpilogueArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_epilogue_avx512(p: &U8EpilogueArgs) {
    let c = rq512(&p.rq);
    for h in 0..p.cols.div_ceil(32) {
        let cols = (p.cols - 32 * h).min(32);
        // SAFETY: the bias holds 64 values.
        let bias = unsafe {
            [
                _mm512_loadu_si512(p.bias.add(32 * h).cast()),
                _mm512_loadu_si512(p.bias.add(32 * h + 16).cast()),
            ]
        };
        let cols_rq = (p.raw.is_null() && !p.col_rq.is_null()).then(|| {
            // SAFETY: a non-null `col_rq` holds the constants of every 32-column block.
            unsafe { rq512_cols32(&p.rq, p.col_rq.add(h * 3 * EPILOGUE_COL_BLOCK)) }
        });
        let masks = [mask16(cols), mask16(cols.saturating_sub(16))];
        for r in 0..p.rows {
            // SAFETY: `row_corr` holds `rows` values; row r of the accumulators holds the
            // block's columns (masked loads read only the first `cols`).
            let x = unsafe {
                let corr = _mm512_set1_epi32(*p.row_corr.add(r));
                let row = p.acc.add(r * p.acc_stride + 32 * h);
                std::array::from_fn::<_, 2, _>(|v| {
                    let acc = _mm512_maskz_loadu_epi32(masks[v], row.add(16 * v).cast());
                    _mm512_add_epi32(_mm512_add_epi32(acc, bias[v]), corr)
                })
            };
            let at = r * p.out_stride + 32 * h;
            // SAFETY: row r of the output (or of the raw sums) has `cols` writable values
            // from column 32h.
            unsafe {
                if !p.raw.is_null() {
                    store_row_raw32(p.raw.wrapping_add(at), cols, x);
                } else if let Some(cq) = &cols_rq {
                    store_row_cols32(p.out.wrapping_add(at), cols, x, cq);
                } else {
                    let bytes = narrow2_512(requant_q512(x[0], &c), requant_q512(x[1], &c), &c);
                    store32(p.out.wrapping_add(at), cols, bytes);
                }
            }
        }
    }
}
