//! Micro-kernels and the one dispatch table that picks them (docs/design.md §8).
//!
//! A micro-kernel computes one register tile of an operation (for example a 7×32 block of a
//! float32 GEMM) on raw pointers; the operator loops of each family (for example
//! [`crate::conv::f32`]) tile the whole operation over it and split the tiles over the thread
//! pool. Kernels are named
//! `<dtype>_<op>_<isa>_<tile>` (`f32_gemm_avx512_7x32`) and live in one file per instruction
//! set: [`generic`] (portable Rust, every platform) and `x86_64/{avx2,avx512,avx512vnni}.rs`,
//! `aarch64/{neon,dotprod}.rs`. All intrinsics and inline assembly stay under those folders.
//!
//! [`Ukernels`] gathers one entry per kernel family. [`Ukernels::generic`] fills every slot
//! with the portable kernel; each instruction-set level then overrides the slots it does
//! better, in order (AVX2, then AVX-512, then AVX-512 VNNI, then AMX; NEON, then dotprod), so a level
//! always has a complete table. The table is chosen once per process by runtime feature
//! detection ([`best`]); `NNHAL_ISA` lowers the choice for tests and comparisons, and
//! [`table`] gives any supported level explicitly.

use std::fmt;
use std::sync::OnceLock;

pub mod f32_small;
pub mod generic;
pub mod quant8;
pub(crate) mod simd;
pub mod tile;

#[cfg(target_arch = "x86_64")]
pub mod x86_64;

#[cfg(target_arch = "aarch64")]
pub mod aarch64;

/// An instruction-set level. Levels of one architecture are ordered: each includes the ones
/// before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust only.
    Generic,
    /// x86_64 AVX2 with FMA3.
    Avx2,
    /// x86_64 AVX-512 F, BW, DQ and VL.
    Avx512,
    /// AVX-512 with VNNI (`vpdpbusd`).
    Avx512Vnni,
    /// AVX-512 VNNI with AMX-INT8 tiles for the uint8 GEMMs, when the operating system grants
    /// the tile state and the start-up self-test passes ([`x86_64::amx::usable`]).
    Avx512Amx,
    /// aarch64 Advanced SIMD.
    Neon,
    /// aarch64 Advanced SIMD with the dot-product extension (`sdot`/`udot`).
    Dotprod,
}

impl Isa {
    /// Every level of the architecture this was compiled for, lowest first.
    pub const fn levels() -> &'static [Isa] {
        #[cfg(target_arch = "x86_64")]
        {
            &[
                Isa::Generic,
                Isa::Avx2,
                Isa::Avx512,
                Isa::Avx512Vnni,
                Isa::Avx512Amx,
            ]
        }
        #[cfg(target_arch = "aarch64")]
        {
            &[Isa::Generic, Isa::Neon, Isa::Dotprod]
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            &[Isa::Generic]
        }
    }

    /// The name `NNHAL_ISA` and `--isa` accept.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512vnni",
            Isa::Avx512Amx => "avx512amx",
            Isa::Neon => "neon",
            Isa::Dotprod => "dotprod",
        }
    }

    /// The level called `name` on this architecture.
    pub fn parse(name: &str) -> Result<Isa, IsaError> {
        Isa::levels()
            .iter()
            .copied()
            .find(|l| l.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| IsaError::Unknown(name.to_string()))
    }

    /// Whether this processor can run the level.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Generic => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            // Without the `avx512` feature the levels are compiled out and never selected.
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Isa::Avx512 => {
                Isa::Avx2.is_supported()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Isa::Avx512Vnni => {
                Isa::Avx512.is_supported() && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Isa::Avx512Amx => Isa::Avx512Vnni.is_supported() && x86_64::amx::usable(),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::Dotprod => {
                Isa::Neon.is_supported() && std::arch::is_aarch64_feature_detected!("dotprod")
            }
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The highest level this processor supports.
    pub fn detect() -> Isa {
        Isa::levels()
            .iter()
            .rev()
            .copied()
            .find(|l| l.is_supported())
            .unwrap_or(Isa::Generic)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a level cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    #[error("unknown instruction set {0:?} (this build knows: {known})", known = known())]
    Unknown(String),
    #[error("this processor does not support {0}")]
    Unsupported(Isa),
}

fn known() -> String {
    Isa::levels()
        .iter()
        .map(|l| l.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Most rows any float32 GEMM micro-kernel computes at once.
pub const F32_GEMM_MAX_MR: usize = 8;

/// One call of a float32 GEMM micro-kernel: `R` output rows (`R` is fixed by the kernel
/// chosen, see [`F32Gemm::kernel`]) by `nc` output columns,
/// `c[r][j] = clamp(bias[j] + Σ_k a[r][k] · b[k][j], min, max)` with `K = ks · kc`.
///
/// The A rows are given indirectly (an "indirect GEMM"): row `r` is `ks` segments of `kc`
/// contiguous values, segment `s` starting at `*a.add(s·R + r)`. A plain matrix is one
/// segment per row; a convolution passes one segment per filter row (`kw · in_c` values that
/// are contiguous in the NHWC input), so it needs no im2col copy except at the image borders,
/// and padding rows point at a shared zero segment.
///
/// Row `r` of C starts at `c + r·c_stride` and receives `nc` values. `w` points at the first
/// of `ceil(nc / nr)` consecutive packed blocks, each `[bias: nr][k = 0: nr weights]…
/// [k = K − 1: nr]` with the columns past the last real one zero-filled, so a kernel reads
/// whole blocks and only its stores are cut to `nc`.
///
/// `next` and `next_len` name packed weights the caller reads after this call (`next_len`
/// values, possibly none): a kernel may prefetch them while it computes, spread over its K
/// loop, but never reads them; they need not be readable at all.
#[derive(Clone, Copy, Debug)]
pub struct F32GemmArgs {
    pub a: *const *const f32,
    pub ks: usize,
    pub kc: usize,
    pub w: *const f32,
    pub c: *mut f32,
    pub c_stride: usize,
    pub nc: usize,
    pub min: f32,
    pub max: f32,
    pub next: *const f32,
    pub next_len: usize,
}

/// A float32 GEMM micro-kernel.
///
/// # Safety
/// The pointer table must hold `ks · R` pointers, each readable for `kc` values; the packed
/// blocks must be readable for `ceil(nc / nr) · (ks · kc + 1) · nr` values and every C row
/// writable for `nc` values; C must not overlap A, the table or the packed blocks. The
/// processor must support the kernel's instruction set (guaranteed for kernels taken from a
/// [`table`]).
pub type F32GemmFn = unsafe fn(&F32GemmArgs);

/// The float32 GEMM family: a register tile of `mr` rows by `nr` columns, with one kernel per
/// row count `1..=mr` so row tails cost no wasted work and never touch rows outside C.
#[derive(Clone, Copy, Debug)]
pub struct F32Gemm {
    /// Kernel name for reports, e.g. `f32_gemm_avx512_7x32`.
    pub name: &'static str,
    pub mr: usize,
    pub nr: usize,
    /// `rows[r − 1]` computes `r` rows; entries past `mr` are unused.
    pub rows: [F32GemmFn; F32_GEMM_MAX_MR],
}

impl F32Gemm {
    /// The kernel computing `rows` rows, `1 ≤ rows ≤ mr`.
    #[inline]
    pub fn kernel(&self, rows: usize) -> F32GemmFn {
        debug_assert!((1..=self.mr).contains(&rows));
        self.rows[rows - 1]
    }
}

/// One kernel per family, all of the same instruction-set level or below.
#[derive(Clone, Debug)]
pub struct Ukernels {
    /// The level this table was built for (its best kernels may come from lower levels).
    pub isa: Isa,
    /// Float32 GEMM with bias and clamp: 1×1 convolutions, fully connected layers, and every
    /// other convolution after an im2col of its input.
    pub f32_gemm: F32Gemm,
    /// float32 DEPTHWISE_CONV_2D.
    pub f32_dw: f32_small::F32Dw,
    /// float32 AVERAGE_POOL_2D and MAX_POOL_2D.
    pub f32_pool: f32_small::F32Pool,
    /// float32 element-wise operations and SOFTMAX.
    pub f32_vec: f32_small::F32Vec,
    /// uint8 GEMM tile (CONV_2D, FULLY_CONNECTED).
    pub u8_gemm: quant8::U8Gemm,
    /// Row sums (zero-point corrections) of the uint8 GEMM.
    pub u8_row_sum: quant8::U8RowSum,
    /// uint8 depthwise convolution row.
    pub u8_dw: quant8::U8Dw,
    /// The byte dot-product form of the uint8 depthwise row, for filters that fit signed
    /// bytes; `None` below the level that has it.
    /// The tap-pair form of the uint8 depthwise row (int16 weight pairs, two taps per
    /// multiply-add), for tables whose byte dot-product form is absent or does not fit;
    /// `None` where the level's [`quant8::U8Dw`] is the faster form.
    pub u8_dw2: Option<quant8::U8Dw2>,
    pub u8_dw4: Option<quant8::U8Dw4>,
    /// The tile-matrix form of the uint8 GEMM (AMX), for products of enough rows; `None`
    /// below the level that has it.
    pub u8_tiles: Option<tile::U8Tiles>,
    /// Same-shape quant8 ADD, SUB and MUL in vector arithmetic; `None` where the 64 KiB
    /// table of every byte pair is the faster form (the portable level).
    pub u8_binary: Option<quant8::U8BinaryKernel>,
    /// QUANTIZE and DEQUANTIZE between float32 and bytes in vector arithmetic; `None` at the
    /// portable level (the reference loops).
    pub u8_convert: Option<quant8::U8Convert>,
}

impl Ukernels {
    /// The portable table: every slot filled with the generic kernel.
    pub fn generic() -> Ukernels {
        Ukernels {
            isa: Isa::Generic,
            f32_gemm: generic::F32_GEMM,
            f32_dw: generic::f32_small::F32_DW,
            f32_pool: generic::f32_small::F32_POOL,
            f32_vec: generic::f32_small::F32_VEC,
            u8_gemm: generic::U8_GEMM,
            u8_row_sum: generic::U8_ROW_SUM,
            u8_dw: generic::U8_DW,
            u8_dw2: None,
            u8_dw4: None,
            u8_tiles: None,
            u8_binary: None,
            u8_convert: None,
        }
    }

    /// The generic table with every level up to `isa` applied on top, lowest first.
    fn build(isa: Isa) -> Ukernels {
        #[allow(unused_mut)]
        let mut t = Ukernels::generic();
        #[cfg(target_arch = "x86_64")]
        x86_64::apply(&mut t, isa);
        #[cfg(target_arch = "aarch64")]
        aarch64::apply(&mut t, isa);
        t.isa = isa;
        t
    }
}

/// The table for `isa`, built once per process.
pub fn table(isa: Isa) -> Result<&'static Ukernels, IsaError> {
    static TABLES: [OnceLock<Ukernels>; 7] = [const { OnceLock::new() }; 7];
    if !Isa::levels().contains(&isa) {
        return Err(IsaError::Unknown(isa.name().to_string()));
    }
    if !isa.is_supported() {
        return Err(IsaError::Unsupported(isa));
    }
    Ok(TABLES[isa as usize].get_or_init(|| Ukernels::build(isa)))
}

/// The level [`best`] uses: the highest the processor supports, or the one `NNHAL_ISA` names
/// when that is supported (it can only lower the choice). An unusable `NNHAL_ISA` is reported
/// as an error so a forced comparison never silently runs something else.
pub fn configured_isa() -> Result<Isa, IsaError> {
    match std::env::var("NNHAL_ISA") {
        Ok(name) if !name.trim().is_empty() => {
            let isa = Isa::parse(&name)?;
            if isa.is_supported() {
                Ok(isa)
            } else {
                Err(IsaError::Unsupported(isa))
            }
        }
        _ => Ok(Isa::detect()),
    }
}

/// The process-wide table: [`configured_isa`], falling back to the detected level when
/// `NNHAL_ISA` is unusable.
pub fn best() -> &'static Ukernels {
    let isa = configured_isa().unwrap_or_else(|_| Isa::detect());
    table(isa).unwrap_or_else(|_| table(Isa::Generic).expect("generic is always supported"))
}
