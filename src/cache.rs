//! Compilation cache: what `prepareModel` writes into the client's cache files and
//! `prepareModelFromCache` reads back (AIDL `IDevice`, "compilation caching";
//! docs/hal-contract.md, "Compilation caching").
//!
//! The driver asks for one model-cache file and one data-cache file
//! ([`MODEL_CACHE_FILES`], [`DATA_CACHE_FILES`]). Both start with the same header and end with
//! a CRC-32 (crate `crc32fast`) over every byte before it:
//!
//! | field | bytes |
//! |---|---|
//! | magic `NNHALCCH` | 8 |
//! | format version ([`FORMAT_VERSION`]) | 4 |
//! | kind: 1 model, 2 data | 4 |
//! | build (crate version), length-prefixed | 2 + n |
//! | kernel level (`NNHAL_ISA` name), length-prefixed | 2 + n |
//! | tile geometry the plan was packed for (float32 GEMM mr, nr; uint8 GEMM mr, nr, weight shift; float32 depthwise lanes) | 24 |
//! | the client's 32-byte token | 32 |
//! | payload length | 8 |
//! | payload | n |
//! | CRC-32 of everything above | 4 |
//!
//! The model file's payload is the validated model in a compact canonical encoding
//! ([`encode_model`]): CONSTANT_REFERENCE constants are copied into it as CONSTANT_COPY
//! values, so the cache never depends on the client's memory pools, and the values only
//! packed operations read are left out (their type, extents and length stay). The data
//! file's payload binds it to its model file (that file's CRC-32) and holds the plan's packed
//! constants as images ([`encode_packed`], written by `nnhal_kernels::persist`), which a
//! restore reads back ([`decode_packed`]) instead of packing again. The images are in memory
//! byte order and sized for the tile geometry: both are bound by the header's kernel level
//! and tile fields.
//!
//! A cache is untrusted input (bad-input classes BI-80…BI-84 in docs/bad-inputs.md): any
//! damage the checksum catches, a header written for another build, kernel level, tile
//! geometry or token, or a file of the wrong kind is a miss, which the service answers with
//! GENERAL_FAILURE. A cache that passes the checksum still goes through the normal model
//! validator, and every length and index in it is checked, so a forged cache is trusted no
//! further than a model from the app. Files are read with `pread` into owned buffers (never
//! mapped: a file shrunk while read cannot raise SIGBUS), bounded by [`MAX_CACHE_FILE_BYTES`].
//! The data file is read once, in order ([`restore_packed`]): each packed image goes from the
//! file straight into the buffer the plan keeps, the CRC-32 computed over the bytes as they
//! arrive, and compared before anything read is returned; on a kernel pool of several threads
//! a large image is read in contiguous shares, one per thread, whose CRC-32s are combined in
//! file order (`crc32fast`'s `combine`). The buffers are carved from one
//! huge-page-advised mapping sized from the file (`nnhal_kernels::aligned::Region`), which
//! the restored plan holds. A cache is written without building the data file in memory
//! ([`write_files`]): the packed section goes to the file a piece at a time.
//!
//! Models with referenced subgraphs (IF, WHILE) are prepared without writing a cache.

use crate::executor::Packed;
use crate::plan::{Plan, StoredPack};
use nnhal_hal::{
    ChannelQuant, DataLocation, HalError, HalResult, Model, Operand, OperandLifeTime, Operation,
};
use nnhal_kernels::aligned::Region;
use nnhal_kernels::parallel;
use nnhal_kernels::persist::{self, Persist, Source};
use nnhal_kernels::quant::ChannelRequant;
use nnhal_kernels::ukernels::Ukernels;
use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;

/// Model-cache files the driver asks for (`NumberOfCacheFiles::numModelCache`).
pub const MODEL_CACHE_FILES: usize = 1;
/// Data-cache files the driver asks for (`NumberOfCacheFiles::numDataCache`).
pub const DATA_CACHE_FILES: usize = 1;
/// Bytes of a cache token (`IDevice::BYTE_SIZE_OF_CACHE_TOKEN`).
pub const TOKEN_BYTES: usize = 32;
/// Version of the file layout; raised whenever the header, the model encoding or a packed
/// encoding changes, so older caches are misses instead of misreads.
pub const FORMAT_VERSION: u32 = 3;
/// Largest cache file read back: the largest model the service accepts (256 MiB of
/// constants) plus its packed copy, with room for headers.
pub const MAX_CACHE_FILE_BYTES: u64 = 1 << 30;

const MAGIC: [u8; 8] = *b"NNHALCCH";
const BUILD: &str = env!("CARGO_PKG_VERSION");
const KIND_MODEL: u32 = 1;
const KIND_DATA: u32 = 2;

/// Where a phase of a cache write or restore started, for the timings logged under
/// `nnhal::cache` at debug level: wall time, the thread's CPU time and its minor page faults
/// (which the buffers a restore fills and the page cache a write fills are mostly made of).
pub(crate) struct Phase {
    wall: std::time::Instant,
    cpu: Option<std::time::Duration>,
    faults: Option<u64>,
}

impl Phase {
    /// Now; the CPU time and faults only read when the debug log is on.
    pub(crate) fn start() -> Phase {
        let on = log::log_enabled!(target: "nnhal::cache", log::Level::Debug);
        Phase {
            wall: std::time::Instant::now(),
            cpu: on.then(thread_cpu).flatten(),
            faults: on.then(thread_faults).flatten(),
        }
    }

    /// What the phase took so far: `"W ms"`, with `" (cpu C ms, F faults)"` where known.
    pub(crate) fn took(&self) -> String {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let mut out = format!("{:.3} ms", ms(self.wall.elapsed()));
        if let (Some(c0), Some(c1), Some(f0), Some(f1)) =
            (self.cpu, thread_cpu(), self.faults, thread_faults())
        {
            out += &format!(
                " (cpu {:.3} ms, {} faults)",
                ms(c1.saturating_sub(c0)),
                f1.saturating_sub(f0)
            );
        }
        out
    }
}

fn thread_cpu() -> Option<std::time::Duration> {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(std::time::Duration::from)
}

/// Minor page faults of the calling thread (`/proc/thread-self/stat`, field 10).
fn thread_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// A cache miss or damage: always GENERAL_FAILURE (the contract's answer when a cache cannot
/// be used), never INVALID_ARGUMENT, since the client cannot have known.
fn miss(why: impl std::fmt::Display) -> HalError {
    HalError::GeneralFailure(format!("compilation cache not usable: {why}"))
}

/// The two file images one preparation writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheImage {
    pub model: Vec<u8>,
    pub data: Vec<u8>,
}

/// What the packed layout depends on, written into and checked against every header.
fn binding(kernels: &Ukernels) -> (Vec<u8>, [u32; 6]) {
    let isa = kernels.isa.name().as_bytes().to_vec();
    let tiles = [
        kernels.f32_gemm.mr as u32,
        kernels.f32_gemm.nr as u32,
        kernels.u8_gemm.mr as u32,
        kernels.u8_gemm.nr as u32,
        kernels.u8_gemm.weight_shift as u32,
        kernels.f32_dw.lanes as u32,
    ];
    (isa, tiles)
}

/// Wraps the payload `parts` (concatenated) in a header for `kernels` and `token`, and
/// appends the checksum.
fn seal(kind: u32, kernels: &Ukernels, token: &[u8; TOKEN_BYTES], parts: &[&[u8]]) -> Vec<u8> {
    let payload_len: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(payload_len + 128);
    put_header(&mut out, kind, kernels, token, payload_len as u64);
    for part in parts {
        out.extend_from_slice(part);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Appends the header of a file of `kind` for `kernels` and `token` whose payload has
/// `payload_len` bytes (its length does not depend on `payload_len`).
fn put_header(
    out: &mut Vec<u8>,
    kind: u32,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
    payload_len: u64,
) {
    let (isa, tiles) = binding(kernels);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    for s in [BUILD.as_bytes(), &isa] {
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
        out.extend_from_slice(s);
    }
    for t in tiles {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(token);
    out.extend_from_slice(&payload_len.to_le_bytes());
}

/// Checks every header field of a cache file read from `r` against `kind`, `kernels` and
/// `token`; the payload is what `r` has left after it.
fn header(
    r: &mut Source<'_>,
    kind: u32,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<()> {
    let what = if kind == KIND_MODEL { "model" } else { "data" };
    let truncated = |e: persist::PersistError| miss(format!("{what} cache file: {e}"));
    let mut magic = [0u8; 8];
    r.fill(&mut magic).map_err(truncated)?;
    if magic != MAGIC {
        return Err(miss(format!("{what} cache file is not an nnhal cache")));
    }
    let version = r.u32().map_err(truncated)?;
    if version != FORMAT_VERSION {
        return Err(miss(format!(
            "{what} cache file has format {version}, this build reads {FORMAT_VERSION}"
        )));
    }
    let found = r.u32().map_err(truncated)?;
    if found != kind {
        return Err(miss(format!(
            "the {what} cache handle holds another kind of file"
        )));
    }
    let mut short_bytes = || -> HalResult<Vec<u8>> {
        let mut n = [0u8; 2];
        r.fill(&mut n).map_err(truncated)?;
        let mut v = vec![0u8; usize::from(u16::from_le_bytes(n))];
        r.fill(&mut v).map_err(truncated)?;
        Ok(v)
    };
    let (isa, tiles) = binding(kernels);
    let build = short_bytes()?;
    if build != BUILD.as_bytes() {
        return Err(miss(format!(
            "{what} cache file was written by build {:?}, this is {BUILD}",
            String::from_utf8_lossy(&build)
        )));
    }
    let level = short_bytes()?;
    if level != isa {
        return Err(miss(format!(
            "{what} cache file was packed for kernel level {:?}, this driver runs {}",
            String::from_utf8_lossy(&level),
            kernels.isa
        )));
    }
    for t in tiles {
        if r.u32().map_err(truncated)? != t {
            return Err(miss(format!(
                "{what} cache file was packed for another tile geometry"
            )));
        }
    }
    let mut found = [0u8; TOKEN_BYTES];
    r.fill(&mut found).map_err(truncated)?;
    if &found != token {
        return Err(miss(format!(
            "{what} cache file was written for another token"
        )));
    }
    let mut len = [0u8; 8];
    r.fill(&mut len).map_err(truncated)?;
    if u64::from_le_bytes(len) != r.left() as u64 {
        return Err(miss(format!(
            "{what} cache file's payload length disagrees with its size"
        )));
    }
    Ok(())
}

/// Checks the checksum and every header field of `file` against `kind`, `kernels` and
/// `token`; returns the payload.
fn open<'a>(
    file: &'a [u8],
    kind: u32,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<&'a [u8]> {
    let what = if kind == KIND_MODEL { "model" } else { "data" };
    let body_len = file
        .len()
        .checked_sub(4)
        .ok_or_else(|| miss(format!("{what} cache file has {} bytes", file.len())))?;
    let (body, sum) = file.split_at(body_len);
    if crc32fast::hash(body).to_le_bytes() != sum {
        return Err(miss(format!("{what} cache file is damaged (checksum)")));
    }
    let mut r = Source::new(body);
    header(&mut r, kind, kernels, token)?;
    Ok(&body[body.len() - r.left()..])
}

/// Checks the model cache file's checksum and header; returns its payload ([`encode_model`]).
pub fn open_model<'a>(
    file: &'a [u8],
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<&'a [u8]> {
    open(file, KIND_MODEL, kernels, token)
}

/// The cache files for a prepared model: `model` is [`encode_model`]'s output, `packed` the
/// plan's packed section ([`encode_packed`]).
pub fn seal_image(
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
    model: &[u8],
    packed: &[u8],
) -> CacheImage {
    let model = seal(KIND_MODEL, kernels, token, &[model]);
    let data = seal(
        KIND_DATA,
        kernels,
        token,
        &[&model[model.len() - 4..], packed],
    );
    CacheImage { model, data }
}

/// Opens both files of a cache: the model encoding and the packed section, each file's
/// checksum and header checked, and the data file checked to belong to this model file.
pub fn open_image<'a>(
    model: &'a [u8],
    data: &'a [u8],
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<(&'a [u8], &'a [u8])> {
    let model_payload = open(model, KIND_MODEL, kernels, token)?;
    let data_payload = open(data, KIND_DATA, kernels, token)?;
    let (bound, packed) = data_payload
        .split_at_checked(4)
        .ok_or_else(|| miss("data cache file is too short"))?;
    if bound != &model[model.len() - 4..] {
        return Err(miss(
            "the data cache file belongs to another model cache file",
        ));
    }
    Ok((model_payload, packed))
}

/// What the data file says about one operation's packed constants.
const PACKED_NONE: u8 = 0;
/// The operation's packed constants are rebuilt at restore from the model's constants.
const PACKED_REBUILT: u8 = 1;
/// The operation's packed constants are stored: a variant kind, the image's length and the
/// image ([`Persist`]).
const PACKED_STORED: u8 = 2;

/// Variant kinds of a stored entry.
const KIND_CONV_F32: u8 = 1;
const KIND_DW_F32: u8 = 2;
const KIND_CONV_U8: u8 = 3;
const KIND_DW_U8: u8 = 4;
const KIND_BINARY_U8: u8 = 5;
const KIND_GROUPED: u8 = 6;
const KIND_TRANSPOSE_F32: u8 = 7;
const KIND_TRANSPOSE_U8: u8 = 8;
const KIND_PER_CHANNEL: u8 = 9;

fn put_stored(out: &mut Vec<u8>, kind: u8, image: &dyn Fn(&mut Vec<u8>)) {
    out.push(PACKED_STORED);
    out.push(kind);
    let at = out.len();
    out.extend_from_slice(&0u64.to_le_bytes());
    image(out);
    let len = (out.len() - at - 8) as u64;
    out[at..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// The data file's packed section: one entry per operation of the main graph, in model
/// order, with the image of what the plan packed for it, so that a restore does not pack
/// again. `Recurrent` (float32 LSTM/RNN cells with their scratch pools) is rebuilt from the
/// model's constants at restore instead. The match is exhaustive so that a new [`Packed`]
/// variant does not compile without a decision here.
///
/// Also returns, by operand, the constants the model file need not carry: those the plan
/// dropped after packing them ([`Plan::released_constants`]) that no rebuilt entry reads.
pub fn encode_packed(plan: &Plan) -> (Vec<u8>, Vec<bool>) {
    let mut out = Vec::new();
    let omit = encode_packed_into(plan, &mut out, &mut |_| Ok(()))
        .unwrap_or_else(|e: std::convert::Infallible| match e {});
    (out, omit)
}

/// [`encode_packed`] in pieces: appends to `out` and, after every entry, hands `out` to
/// `flush`, which may take its bytes away (write them out) so that the section is never
/// whole in memory. Returns what [`encode_packed`] does beside the section.
fn encode_packed_into<E>(
    plan: &Plan,
    out: &mut Vec<u8>,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
) -> Result<Vec<bool>, E> {
    let steps: Vec<Option<&Packed>> = plan.packed_steps().collect();
    put_u32(out, steps.len() as u32);
    for packed in steps {
        let out = &mut *out;
        match packed {
            None => out.push(PACKED_NONE),
            Some(Packed::ConvF32(p)) => put_stored(out, KIND_CONV_F32, &|o| p.persist(o)),
            Some(Packed::DwF32(p)) => put_stored(out, KIND_DW_F32, &|o| p.persist(o)),
            Some(Packed::ConvU8(p)) => put_stored(out, KIND_CONV_U8, &|o| p.persist(o)),
            Some(Packed::DwU8(p)) => put_stored(out, KIND_DW_U8, &|o| p.persist(o)),
            Some(Packed::BinaryU8(p)) => put_stored(out, KIND_BINARY_U8, &|o| p.persist(o)),
            Some(Packed::Grouped(p)) => put_stored(out, KIND_GROUPED, &|o| p.persist(o)),
            Some(Packed::TransposeF32(p)) => put_stored(out, KIND_TRANSPOSE_F32, &|o| p.persist(o)),
            Some(Packed::TransposeU8(p)) => put_stored(out, KIND_TRANSPOSE_U8, &|o| p.persist(o)),
            Some(Packed::PerChannel { filter, bias, rq }) => {
                put_stored(out, KIND_PER_CHANNEL, &|o| {
                    persist::put_slice(o, filter.as_slice());
                    persist::put_slice(o, bias.as_slice());
                    rq.persist(o);
                })
            }
            Some(Packed::Recurrent(_)) => out.push(PACKED_REBUILT),
        }
        flush(out)?;
    }
    Ok(values_left_out(plan))
}

/// By operand, the constants the model file need not carry: those the plan dropped after
/// packing them ([`Plan::released_constants`]) that no rebuilt entry reads.
fn values_left_out(plan: &Plan) -> Vec<bool> {
    let mut omit = plan.released_constants();
    for (k, packed) in plan.packed_steps().enumerate() {
        if let Some(Packed::Recurrent(_)) = packed {
            for &i in &plan.model().operations[k].inputs {
                omit[i] = false;
            }
        }
    }
    omit
}

fn restore<P: Persist>(kernels: &Ukernels, mut src: Source<'_>) -> HalResult<P> {
    let packed = P::restore(kernels, &mut src).map_err(miss)?;
    if !src.is_empty() {
        return Err(miss("a packed image has bytes after its end"));
    }
    Ok(packed)
}

/// A `PerChannel` entry: the filter image, the bias and the requantizers (their lengths are
/// checked against the operation by [`crate::executor::packed_fits`]).
fn per_channel(kernels: &Ukernels, mut src: Source<'_>) -> HalResult<Packed> {
    let filter = src.vec_any().map_err(miss)?;
    let bias = src.vec_any().map_err(miss)?;
    let rq = ChannelRequant::restore(kernels, &mut src).map_err(miss)?;
    if !src.is_empty() {
        return Err(miss("a packed image has bytes after its end"));
    }
    Ok(Packed::PerChannel { filter, bias, rq })
}

/// Reads a packed section back for the validated model it came with: one known entry per
/// operation, every stored image read for `kernels` (each length checked against its
/// geometry), nothing left over. Whether each stored variant fits its operation is checked
/// when the plan is built ([`crate::executor::packed_fits`]).
pub fn decode_packed(
    packed: &[u8],
    operations: usize,
    kernels: &Ukernels,
) -> HalResult<Vec<StoredPack>> {
    decode_entries(&mut Source::new(packed), operations, kernels)
}

fn decode_entries(
    r: &mut Source<'_>,
    operations: usize,
    kernels: &Ukernels,
) -> HalResult<Vec<StoredPack>> {
    let n = r.u32().map_err(miss)? as usize;
    if n != operations {
        return Err(miss(format!(
            "packed section has {n} entries for {operations} operations"
        )));
    }
    if n > r.left() {
        return Err(miss(format!("count {n} exceeds the bytes left")));
    }
    let mut entries = Vec::with_capacity(n);
    for k in 0..n {
        let entry = match r.u8().map_err(miss)? {
            PACKED_NONE => StoredPack::Nothing,
            PACKED_REBUILT => StoredPack::Rebuild,
            PACKED_STORED => {
                let kind = r.u8().map_err(miss)?;
                let mut len = [0u8; 8];
                r.fill(&mut len).map_err(miss)?;
                let len = usize::try_from(u64::from_le_bytes(len))
                    .map_err(|_| miss("packed image length"))?;
                let image = r.take(len).map_err(miss)?;
                let uk = kernels;
                StoredPack::Packed(Box::new(match kind {
                    KIND_CONV_F32 => Packed::ConvF32(restore(uk, image)?),
                    KIND_DW_F32 => Packed::DwF32(restore(uk, image)?),
                    KIND_CONV_U8 => Packed::ConvU8(restore(uk, image)?),
                    KIND_DW_U8 => Packed::DwU8(restore(uk, image)?),
                    KIND_BINARY_U8 => Packed::BinaryU8(restore(uk, image)?),
                    KIND_GROUPED => Packed::Grouped(restore(uk, image)?),
                    KIND_TRANSPOSE_F32 => Packed::TransposeF32(restore(uk, image)?),
                    KIND_TRANSPOSE_U8 => Packed::TransposeU8(restore(uk, image)?),
                    KIND_PER_CHANNEL => per_channel(uk, image)?,
                    _ => return Err(miss(format!("packed entry {k} has variant {kind}"))),
                }))
            }
            tag => return Err(miss(format!("packed entry {k} has kind {tag}"))),
        };
        entries.push(entry);
    }
    if !r.is_empty() {
        return Err(miss("packed section has bytes after its end"));
    }
    Ok(entries)
}

/// The data cache file as a restore gets it: in memory, or a descriptor it reads with `pread`.
#[derive(Clone, Copy)]
pub enum DataFile<'a> {
    Bytes(&'a [u8]),
    Fd(BorrowedFd<'a>),
}

/// Bytes a checked read asks the file for at a time: small enough that the checksum reads
/// them back from the cache the copy left them in.
const READ_CHUNK: usize = 256 << 10;

/// Reads buffered for the header and the small values between images.
const SMALL_READ: usize = 64 << 10;

/// Bytes per thread below which a read is not split: the wake-up of a helper and the
/// combination of the CRC-32s cost a few microseconds, the copy of this many bytes some tens.
const SPLIT_READ: usize = 512 << 10;

/// A cache file read once, in order, the checksum computed over exactly the bytes read: large
/// values (packed panels) go from the file straight into their own buffers, small ones
/// through a little buffer. Nothing read is trusted until [`Checked::finish`] has compared
/// the checksum; reading past the checksummed part, or a file that ends early (shrunk while
/// read), is an error.
struct Checked<'f> {
    file: Either<'f>,
    /// Next offset to read from the file.
    at: u64,
    /// End of the checksummed part: the offset of the stored CRC-32.
    end: u64,
    small: Vec<u8>,
    /// Start of the unread bytes of `small`.
    pos: usize,
    hasher: crc32fast::Hasher,
    /// Where the packed buffers are carved from, once the header has been read.
    region: Option<Region>,
}

enum Either<'f> {
    Bytes(&'f [u8]),
    File(File),
}

impl Checked<'_> {
    /// Fills `dst` from the file at `at` (the checksum does not see these bytes).
    fn read_at(&self, dst: &mut [u8], at: u64) -> Result<(), String> {
        match &self.file {
            Either::Bytes(b) => {
                let start = usize::try_from(at).map_err(|e| e.to_string())?;
                let src = b
                    .get(start..)
                    .and_then(|b| b.get(..dst.len()))
                    .ok_or("the file ends early")?;
                dst.copy_from_slice(src);
            }
            Either::File(f) => {
                let mut filled = 0;
                while filled < dst.len() {
                    match f.read_at(&mut dst[filled..], at + filled as u64) {
                        Ok(0) => return Err("the file ends early (shrunk while read)".into()),
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("cannot read: {e}")),
                    }
                }
            }
        }
        Ok(())
    }

    /// Fills `dst` with the next bytes of the checksummed part, hashing them chunk by chunk.
    /// A large read is split over the threads of the pool the restore runs on
    /// ([`parallel::for_parts`]): each part reads and hashes its own contiguous share, and the
    /// shares' CRC-32s are combined in file order, which gives the CRC-32 of the whole read
    /// (the copy out of the page cache and the hashing are most of a restore's time; on a
    /// 2-vCPU host the read phase of a 17 MB file went from 6.5–7.2 ms to 4.6–5.6 ms).
    fn pull(&mut self, dst: &mut [u8]) -> Result<(), String> {
        if dst.len() as u64 > self.end - self.at {
            return Err("read past the end".into());
        }
        let parts = parallel::threads().min(dst.len() / SPLIT_READ).max(1);
        if parts == 1 {
            let mut hasher = std::mem::take(&mut self.hasher);
            let read = self.read_hashed(dst, self.at, &mut hasher);
            self.hasher = hasher;
            read?;
            self.at += dst.len() as u64;
            return Ok(());
        }
        let share = dst.len().div_ceil(parts).next_multiple_of(READ_CHUNK);
        let at = self.at;
        let shares: Vec<_> = dst
            .chunks_mut(share)
            .enumerate()
            .map(|(i, d)| std::sync::Mutex::new((at + (i * share) as u64, d, None)))
            .collect();
        let this = &*self;
        parallel::for_parts(shares.len(), |i| {
            let mut share = shares[i].lock().unwrap_or_else(|e| e.into_inner());
            let (at, ref mut d, ref mut out) = *share;
            let mut hasher = crc32fast::Hasher::new();
            *out = Some(this.read_hashed(d, at, &mut hasher).map(|()| hasher));
        });
        for share in shares {
            let (_, d, out) = share.into_inner().unwrap_or_else(|e| e.into_inner());
            let crc = out.ok_or("a part of a read did not run")??;
            self.hasher.combine(&crc);
            self.at += d.len() as u64;
        }
        Ok(())
    }

    /// Fills `dst` from the file at `at` a chunk at a time, each chunk hashed into `hasher`
    /// while the copy has left it in the cache.
    fn read_hashed(
        &self,
        dst: &mut [u8],
        mut at: u64,
        hasher: &mut crc32fast::Hasher,
    ) -> Result<(), String> {
        for chunk in dst.chunks_mut(READ_CHUNK) {
            self.read_at(chunk, at)?;
            hasher.update(chunk);
            at += chunk.len() as u64;
        }
        Ok(())
    }

    /// Checks that every byte before the checksum was read, that the stored checksum matches
    /// them and that the file did not grow.
    fn finish(self) -> HalResult<()> {
        let what = "data cache file";
        if self.at != self.end || self.pos != self.small.len() {
            return Err(miss(format!("{what} was not read to its end")));
        }
        let mut sum = [0u8; 4];
        self.read_at(&mut sum, self.end)
            .map_err(|e| miss(format!("{what}: {e}")))?;
        if u32::from_le_bytes(sum) != self.hasher.clone().finalize() {
            return Err(miss(format!("{what} is damaged (checksum)")));
        }
        if self.read_at(&mut [0u8], self.end + 4).is_ok() {
            return Err(miss(format!("{what} grew while read")));
        }
        Ok(())
    }
}

impl persist::Stream for Checked<'_> {
    fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<(), persist::PersistError> {
        let fail = |e: String| persist::PersistError(format!("data cache file: {e}"));
        let buffered = (self.small.len() - self.pos).min(dst.len());
        let (head, rest) = dst.split_at_mut(buffered);
        head.copy_from_slice(&self.small[self.pos..self.pos + buffered]);
        self.pos += buffered;
        dst = rest;
        if dst.is_empty() {
            return Ok(());
        }
        if dst.len() >= SMALL_READ {
            return self.pull(dst).map_err(fail);
        }
        let want = (SMALL_READ as u64).min(self.end - self.at) as usize;
        if want < dst.len() {
            return Err(fail("read past the end".into()));
        }
        let mut small = std::mem::take(&mut self.small);
        small.resize(want, 0);
        let pulled = self.pull(&mut small);
        self.small = small;
        self.pos = self.small.len();
        pulled.map_err(fail)?;
        dst.copy_from_slice(&self.small[..dst.len()]);
        self.pos = dst.len();
        Ok(())
    }

    fn region(&mut self) -> Option<&mut Region> {
        self.region.as_mut()
    }
}

/// Reads the data cache file for the model file `model_file` (already opened,
/// [`open_model`]) and the validated model's `operations`: its header checked as
/// [`open_image`] does, then every packed image read straight into the buffer it is restored
/// in, the checksum computed on the way and compared before anything read is returned. A
/// file that changes while read is a miss (a shrunk file ends early, a grown or rewritten
/// one fails the checksum or the final size check).
pub fn restore_packed(
    data: DataFile<'_>,
    model_file: &[u8],
    operations: usize,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<Vec<StoredPack>> {
    let what = "data cache";
    let (file, size) = match data {
        DataFile::Bytes(b) => (Either::Bytes(b), b.len() as u64),
        DataFile::Fd(fd) => {
            let file = file_of(fd, what)?;
            let size = file
                .metadata()
                .map_err(|e| miss(format!("{what}: {e}")))?
                .len();
            (Either::File(file), size)
        }
    };
    read_packed(file, size, model_file, operations, kernels, token)
}

/// [`restore_packed`] from `file`, whose size was `size` when the restore began.
fn read_packed(
    file: Either<'_>,
    size: u64,
    model_file: &[u8],
    operations: usize,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
) -> HalResult<Vec<StoredPack>> {
    let what = "data cache";
    if size > MAX_CACHE_FILE_BYTES {
        return Err(miss(format!("{what} file has {size} bytes")));
    }
    let end = size
        .checked_sub(4)
        .ok_or_else(|| miss(format!("{what} file has {size} bytes")))?;
    let mut checked = Checked {
        file,
        at: 0,
        end,
        small: Vec::new(),
        pos: 0,
        hasher: crc32fast::Hasher::new(),
        region: None,
    };
    let left = {
        let mut r = Source::streamed(&mut checked, end as usize);
        header(&mut r, KIND_DATA, kernels, token)?;
        let mut bound = [0u8; 4];
        r.fill(&mut bound)
            .map_err(|_| miss("data cache file is too short"))?;
        if model_file.len() < 4 || bound != model_file[model_file.len() - 4..] {
            return Err(miss(
                "the data cache file belongs to another model cache file",
            ));
        }
        r.left()
    };
    // Every packed buffer is read out of the bytes left, so they fit in a region of that size
    // (the few bytes of alignment between buffers come from its slack, or a buffer that finds
    // no room is allocated on its own).
    checked.region = Region::new(left);
    let entries = decode_entries(
        &mut Source::streamed(&mut checked, left),
        operations,
        kernels,
    );
    // The checksum decides first: a damaged file is reported as damaged, whatever its
    // decoding said.
    checked.finish()?;
    entries
}

/// A bounds-checked little-endian reader: every read past the end is a miss.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> HalResult<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n).ok_or_else(|| {
            miss(format!(
                "truncated: {n} bytes wanted, {} left",
                self.rest.len()
            ))
        })?;
        self.rest = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> HalResult<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u32(&mut self) -> HalResult<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn i32(&mut self) -> HalResult<i32> {
        self.array().map(i32::from_le_bytes)
    }

    /// A count of items of at least `min_item` bytes each, refused when the rest of the input
    /// cannot hold that many (a forged count never drives a large allocation).
    pub(crate) fn count(&mut self, min_item: usize) -> HalResult<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item.max(1)) > self.rest.len() {
            return Err(miss(format!("count {n} exceeds the bytes left")));
        }
        Ok(n)
    }

    fn u32s(&mut self) -> HalResult<Vec<u32>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.u32()).collect()
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32s(out: &mut Vec<u8>, v: &[u32]) {
    put_u32(out, v.len() as u32);
    for &x in v {
        put_u32(out, x);
    }
}

/// A model that passed validation as the cache keeps it ([`cacheable_model`]): its
/// `operand_values` start `shared` bytes in; those first bytes are the values of the model
/// being prepared, read from it when the cache is written instead of copied at validation.
pub struct KeptModel {
    model: Model,
    shared: usize,
}

impl KeptModel {
    /// [`encode_model`] of the kept model, whose first values are `shared` (the prepared
    /// model's own).
    pub fn encode(&self, shared: &[u8], omit: &[bool]) -> Vec<u8> {
        let own = &self.model.operand_values;
        let at = self.shared;
        encode_with(&self.model, omit, &|range: std::ops::Range<usize>| {
            if range.end <= at {
                shared.get(range)
            } else {
                own.get(range.start.checked_sub(at)?..range.end - at)
            }
        })
    }
}

/// A model that passed validation as the cache keeps it: every CONSTANT_REFERENCE value
/// copied in as a CONSTANT_COPY one (read through `constant`, which gets the operand index),
/// so the cache never depends on the client's memory pools. With `share`, the model's own
/// `operandValues` are not copied: the caller hands them to [`KeptModel::encode`] (the
/// model it prepares must be this one). `None` when the model cannot be cached: it has
/// referenced subgraphs, or its constants pass the 4 GiB a CONSTANT_COPY offset can
/// address.
pub fn cacheable_model(
    model: &Model,
    mut constant: impl FnMut(usize) -> HalResult<Vec<u8>>,
    share: bool,
) -> HalResult<Option<KeptModel>> {
    if !model.referenced.is_empty() {
        return Ok(None);
    }
    let shared = if share { model.operand_values.len() } else { 0 };
    let mut values = if share {
        Vec::new()
    } else {
        model.operand_values.clone()
    };
    let mut operands = model.operands.clone();
    for (i, o) in operands.iter_mut().enumerate() {
        if o.lifetime == OperandLifeTime::ConstantReference.raw() {
            let bytes = constant(i)?;
            // CONSTANT_COPY values are read at any offset (they are copied before decoding),
            // but keeping them 4-aligned keeps the encoding the same shape as a client's.
            while !(shared + values.len()).is_multiple_of(4) {
                values.push(0);
            }
            let (Ok(offset), Ok(length)) = (
                u32::try_from(shared + values.len()),
                u32::try_from(bytes.len()),
            ) else {
                return Ok(None);
            };
            values.extend_from_slice(&bytes);
            o.lifetime = OperandLifeTime::ConstantCopy.raw();
            o.location = DataLocation {
                pool_index: 0,
                offset,
                length,
            };
        }
    }
    if u32::try_from(shared + values.len()).is_err() {
        return Ok(None);
    }
    Ok(Some(KeptModel {
        model: Model {
            operands,
            operations: model.operations.clone(),
            input_indexes: model.input_indexes.clone(),
            output_indexes: model.output_indexes.clone(),
            operand_values: values,
            pools: Vec::new(),
            referenced: Vec::new(),
            relax_computation_float32_to_float16: model.relax_computation_float32_to_float16,
        },
        shared,
    }))
}

/// Marks, in an encoded operand's pool index, a CONSTANT_COPY value the model file leaves
/// out because only packed entries of the data file read it.
const VALUE_NOT_STORED: u32 = u32::MAX;

/// Largest value left out of a model file: the service's limit on a model's constants.
const MAX_VALUE_NOT_STORED: u32 = 1 << 28;

/// The canonical encoding of a model from [`cacheable_model`]. The values of the constants
/// marked in `omit` are left out (their type, extents and length are kept, so validation
/// checks them as before); everything else is copied.
pub fn encode_model(model: &Model, omit: &[bool]) -> Vec<u8> {
    let values = &model.operand_values;
    encode_with(model, omit, &|range| values.get(range))
}

/// [`encode_model`] with the model's values read through `value` (by byte range).
fn encode_with<'v>(
    model: &Model,
    omit: &[bool],
    value: &dyn Fn(std::ops::Range<usize>) -> Option<&'v [u8]>,
) -> Vec<u8> {
    let mut values = Vec::new();
    let mut operands = model.operands.clone();
    for (i, o) in operands.iter_mut().enumerate() {
        if o.lifetime != OperandLifeTime::ConstantCopy.raw() {
            continue;
        }
        let start = o.location.offset as usize;
        let range = start..start + o.location.length as usize;
        let bytes = value(range).unwrap_or_default();
        if omit.get(i).copied().unwrap_or(false) && o.location.length <= MAX_VALUE_NOT_STORED {
            o.location.pool_index = VALUE_NOT_STORED;
            o.location.offset = 0;
            continue;
        }
        while !values.len().is_multiple_of(4) {
            values.push(0);
        }
        o.location.offset = values.len() as u32;
        values.extend_from_slice(bytes);
    }
    let mut out = Vec::with_capacity(values.len() + operands.len() * 48 + 64);
    put_u32(
        &mut out,
        u32::from(model.relax_computation_float32_to_float16),
    );
    put_u32(&mut out, operands.len() as u32);
    for o in &operands {
        put_u32(&mut out, o.operand_type as u32);
        put_u32s(&mut out, &o.dimensions);
        put_u32(&mut out, o.number_of_consumers);
        put_u32(&mut out, o.scale.to_bits());
        put_u32(&mut out, o.zero_point as u32);
        put_u32(&mut out, o.lifetime as u32);
        put_u32(&mut out, o.location.pool_index);
        put_u32(&mut out, o.location.offset);
        put_u32(&mut out, o.location.length);
        match &o.channel_quant {
            None => put_u32(&mut out, 0),
            Some(q) => {
                put_u32(&mut out, 1);
                put_u32(&mut out, q.channel_dim);
                put_u32(&mut out, q.scales.len() as u32);
                for s in &q.scales {
                    put_u32(&mut out, s.to_bits());
                }
            }
        }
    }
    put_u32(&mut out, model.operations.len() as u32);
    for op in &model.operations {
        put_u32(&mut out, op.operation_type as u32);
        put_u32s(&mut out, &op.inputs);
        put_u32s(&mut out, &op.outputs);
    }
    put_u32s(&mut out, &model.input_indexes);
    put_u32s(&mut out, &model.output_indexes);
    put_u32(&mut out, values.len() as u32);
    out.extend_from_slice(&values);
    out
}

/// Reads back [`encode_model`]'s output. Only the encoding is checked here (every count
/// against the bytes left, nothing left over); the model itself goes through the validator
/// next, like any model from a client. A value the file left out reads as zeros from one
/// zero-filled region after the stored values (allocated zeroed, so its pages are not
/// touched unless read); the second result marks those operands, whose decoded values the
/// plan does not need (their packed entries replace them).
pub fn decode_model(bytes: &[u8]) -> HalResult<(Model, Vec<bool>)> {
    let mut r = Reader::new(bytes);
    let relax = match r.u32()? {
        0 => false,
        1 => true,
        v => return Err(miss(format!("relaxComputation flag {v}"))),
    };
    // Fixed part of an operand: type, dimension count, consumers, scale, zero point,
    // lifetime, location (3), channel-quant flag.
    let n = r.count(40)?;
    let mut operands = Vec::with_capacity(n);
    for _ in 0..n {
        let operand_type = r.i32()?;
        let dimensions = r.u32s()?;
        let number_of_consumers = r.u32()?;
        let scale = f32::from_bits(r.u32()?);
        let zero_point = r.i32()?;
        let lifetime = r.i32()?;
        let location = DataLocation {
            pool_index: r.u32()?,
            offset: r.u32()?,
            length: r.u32()?,
        };
        let channel_quant = match r.u32()? {
            0 => None,
            1 => {
                let channel_dim = r.u32()?;
                let k = r.count(4)?;
                let scales = (0..k)
                    .map(|_| r.u32().map(f32::from_bits))
                    .collect::<HalResult<_>>()?;
                Some(ChannelQuant {
                    scales,
                    channel_dim,
                })
            }
            v => return Err(miss(format!("channel-quant flag {v}"))),
        };
        operands.push(Operand {
            operand_type,
            dimensions,
            number_of_consumers,
            scale,
            zero_point,
            lifetime,
            location,
            channel_quant,
        });
    }
    let n = r.count(12)?;
    let mut operations = Vec::with_capacity(n);
    for _ in 0..n {
        operations.push(Operation {
            operation_type: r.i32()?,
            inputs: r.u32s()?,
            outputs: r.u32s()?,
        });
    }
    let input_indexes = r.u32s()?;
    let output_indexes = r.u32s()?;
    let n = r.count(1)?;
    let stored = r.bytes(n)?;
    if !r.is_empty() {
        return Err(miss("model encoding has bytes after its end"));
    }
    let stub = n.next_multiple_of(4);
    let mut omitted = vec![false; operands.len()];
    let mut stub_len = 0u32;
    for (i, o) in operands.iter_mut().enumerate() {
        if o.lifetime == OperandLifeTime::ConstantCopy.raw()
            && o.location.pool_index == VALUE_NOT_STORED
        {
            if o.location.length > MAX_VALUE_NOT_STORED {
                return Err(miss(format!(
                    "a value of {} bytes left out",
                    o.location.length
                )));
            }
            stub_len = stub_len.max(o.location.length);
            o.location = DataLocation {
                pool_index: 0,
                offset: u32::try_from(stub).map_err(|_| miss("values too long"))?,
                length: o.location.length,
            };
            omitted[i] = true;
        }
    }
    let mut operand_values = zeros(stub + stub_len as usize);
    operand_values[..n].copy_from_slice(stored);
    Ok((
        Model {
            operands,
            operations,
            input_indexes,
            output_indexes,
            operand_values,
            pools: Vec::new(),
            referenced: Vec::new(),
            relax_computation_float32_to_float16: relax,
        },
        omitted,
    ))
}

/// `len` zero bytes that cost no pass over memory when `len` is large. A zeroed request is
/// only free when the allocator serves it from a fresh mapping, and the C allocator serves
/// requests of a few MiB from its heap once large blocks have been freed (its mapping
/// threshold grows up to 32 MiB), which then costs a 4 MiB zeroing for the stand-in of a
/// MobileNet's left-out logits weights: a sixth of a warm restore. Asking for a capacity past
/// that threshold always gets a fresh mapping; the pages past the stored values are never
/// touched, so the capacity only takes address space.
fn zeros(len: usize) -> Vec<u8> {
    const SMALL: usize = 1 << 20;
    const FRESH: usize = 64 << 20;
    if len < SMALL {
        return vec![0; len];
    }
    let Ok(layout) = std::alloc::Layout::array::<u8>(len.max(FRESH)) else {
        return vec![0; len];
    };
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return vec![0; len];
    }
    // SAFETY: `ptr` comes from the global allocator with `layout` (alignment 1, `capacity`
    // bytes, all zero and so initialised), and `len` ≤ that capacity.
    unsafe { Vec::from_raw_parts(ptr, len, layout.size()) }
}

fn file_of(fd: BorrowedFd<'_>, what: &str) -> HalResult<File> {
    fd.try_clone_to_owned()
        .map(File::from)
        .map_err(|e| miss(format!("{what}: cannot duplicate the descriptor: {e}")))
}

/// Reads a whole cache file with `pread` into an owned buffer. A file that changes size
/// while read is read as far as it goes (the checksum then decides); one longer than
/// [`MAX_CACHE_FILE_BYTES`] is a miss. A descriptor opened write-only fails here.
pub fn read_file(fd: BorrowedFd<'_>, what: &str) -> HalResult<Vec<u8>> {
    let file = file_of(fd, what)?;
    let size = file
        .metadata()
        .map_err(|e| miss(format!("{what}: {e}")))?
        .len();
    if size > MAX_CACHE_FILE_BYTES {
        return Err(miss(format!("{what} has {size} bytes")));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(size as usize + 1)
        .map_err(|_| miss(format!("{what}: cannot allocate {size} bytes")))?;
    buf.resize(size as usize + 1, 0);
    let mut filled = 0usize;
    loop {
        if filled == buf.len() {
            // Grown while read: keep reading, within the bound.
            if buf.len() as u64 > MAX_CACHE_FILE_BYTES {
                return Err(miss(format!(
                    "{what} grew past {MAX_CACHE_FILE_BYTES} bytes"
                )));
            }
            let more = buf.len().min(1 << 20);
            buf.try_reserve(more)
                .map_err(|_| miss(format!("{what}: cannot allocate")))?;
            buf.resize(buf.len() + more, 0);
        }
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(miss(format!("{what}: cannot read: {e}"))),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Replaces the contents of a cache file with `bytes`. A descriptor opened read-only (or
/// any other write error) fails here; the service then prepares without caching.
pub fn write_file(fd: BorrowedFd<'_>, bytes: &[u8], what: &str) -> HalResult<()> {
    let file = file_of(fd, what)?;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all_at(bytes, 0))
        .and_then(|()| file.set_len(bytes.len() as u64));
    if let Err(e) = written {
        // A half-written file would fail its checksum anyway; an empty one says so sooner.
        let _ = file.set_len(0);
        return Err(miss(format!("{what}: cannot write: {e}")));
    }
    Ok(())
}

/// Empties a cache file whose preparation was not cached, so that what an earlier
/// preparation left there is not restored for this token.
pub fn clear_file(fd: BorrowedFd<'_>) {
    if let Ok(file) = fd.try_clone_to_owned().map(File::from) {
        let _ = file.set_len(0);
    }
}

/// A cache token as the interface gives it: exactly [`TOKEN_BYTES`] bytes, INVALID_ARGUMENT
/// otherwise (whether or not cache files come with it).
pub fn token(token: &[u8]) -> HalResult<[u8; TOKEN_BYTES]> {
    token.try_into().map_err(|_| {
        HalError::InvalidArgument(format!(
            "cache token has {} bytes, {TOKEN_BYTES} expected",
            token.len()
        ))
    })
}

/// Writes a preparation's cache into its two files; a failure (a read-only handle, a full
/// disk) only means the next start prepares from scratch, so it is logged, never reported.
/// `None` (a model that cannot be cached) empties both files.
pub fn write_image(image: Option<&CacheImage>, model: BorrowedFd<'_>, data: BorrowedFd<'_>) {
    let Some(image) = image else {
        clear_file(model);
        clear_file(data);
        log::info!("this model is prepared without a compilation cache (referenced subgraphs)");
        return;
    };
    let started = std::time::Instant::now();
    let written = write_file(model, &image.model, "model cache")
        .and_then(|()| write_file(data, &image.data, "data cache"));
    log::debug!(
        target: "nnhal::cache",
        "write: files written {:.3} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    if let Err(e) = written {
        clear_file(model);
        log::info!("compilation cache not written: {e}");
    }
}

/// Bytes of the packed section gathered before they go to the data file.
const WRITE_CHUNK: usize = 1 << 20;

/// Writes a prepared model's cache into its two files: `model` is the model as the cache
/// keeps it ([`cacheable_model`]) and the values it shares with the prepared model (`None`,
/// a model that cannot be cached, empties both files), `plan` the plan prepared from it. The files hold what [`seal_image`] builds, but the data
/// file is written as its packed section is encoded, a piece at a time, and its checksum
/// combined from the header's and the payload's: the section (the size of the model's
/// packed constants) is never whole in memory. A failure (a read-only handle, a full disk)
/// only means the next start prepares from scratch, so it is logged, never reported.
pub fn write_files(
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
    model: Option<(&KeptModel, &[u8])>,
    plan: &Plan,
    model_fd: BorrowedFd<'_>,
    data_fd: BorrowedFd<'_>,
) {
    let Some((model, shared)) = model else {
        write_image(None, model_fd, data_fd);
        return;
    };
    let started = Phase::start();
    let model_file = seal(
        KIND_MODEL,
        kernels,
        token,
        &[&model.encode(shared, &values_left_out(plan))],
    );
    let bound: [u8; 4] = model_file[model_file.len() - 4..]
        .try_into()
        .expect("a sealed file ends with its checksum");
    let encoded = started.took();
    let writing = Phase::start();
    let written = write_file(model_fd, &model_file, "model cache")
        .and_then(|()| write_data_file(data_fd, kernels, token, bound, plan));
    log::debug!(
        target: "nnhal::cache",
        "write: model file encoded {encoded}, files written {}",
        writing.took()
    );
    if let Err(e) = written {
        clear_file(model_fd);
        log::info!("compilation cache not written: {e}");
    }
}

/// The data file's payload written at increasing offsets after room left for its header,
/// hashed as it goes.
struct Appender<'f> {
    file: &'f File,
    at: u64,
    hasher: crc32fast::Hasher,
}

impl Appender<'_> {
    fn append(&mut self, bytes: &mut Vec<u8>) -> std::io::Result<()> {
        self.hasher.update(bytes);
        self.file.write_all_at(bytes, self.at)?;
        self.at += bytes.len() as u64;
        bytes.clear();
        Ok(())
    }
}

/// Writes the data file of [`seal_image`] for `plan`, bound to the model file whose checksum
/// is `bound`, streaming its packed section ([`write_files`]).
fn write_data_file(
    fd: BorrowedFd<'_>,
    kernels: &Ukernels,
    token: &[u8; TOKEN_BYTES],
    bound: [u8; 4],
    plan: &Plan,
) -> HalResult<()> {
    let what = "data cache";
    let file = file_of(fd, what)?;
    let mut header = Vec::new();
    put_header(&mut header, KIND_DATA, kernels, token, 0);
    let start = header.len() as u64;
    let mut payload = Appender {
        file: &file,
        at: start,
        hasher: crc32fast::Hasher::new(),
    };
    let written = file.set_len(0).and_then(|()| {
        let mut out = Vec::with_capacity(WRITE_CHUNK);
        out.extend_from_slice(&bound);
        encode_packed_into::<std::io::Error>(plan, &mut out, &mut |out| {
            if out.len() >= WRITE_CHUNK {
                payload.append(out)?;
            }
            Ok(())
        })?;
        payload.append(&mut out)?;
        // The header is written last, once the payload's length is known; its checksum
        // and the payload's combine into the file's.
        header.clear();
        put_header(&mut header, KIND_DATA, kernels, token, payload.at - start);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.combine(&payload.hasher);
        file.write_all_at(&header, 0)?;
        file.write_all_at(&crc.finalize().to_le_bytes(), payload.at)
    });
    if let Err(e) = written {
        let _ = file.set_len(0);
        return Err(miss(format!("{what}: cannot write: {e}")));
    }
    Ok(())
}

/// Checks the handle lists of a restore (a list of the wrong length is a miss) and reads the
/// model cache file; the data file is read by [`restore_packed`].
pub fn read_model_file(model: &[BorrowedFd<'_>], data: &[BorrowedFd<'_>]) -> HalResult<Vec<u8>> {
    if model.len() != MODEL_CACHE_FILES || data.len() != DATA_CACHE_FILES {
        return Err(miss(format!(
            "{} model and {} data cache handles, {MODEL_CACHE_FILES} and {DATA_CACHE_FILES} \
             expected",
            model.len(),
            data.len()
        )));
    }
    read_file(model[0], "model cache")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nnhal_kernels::ukernels;

    #[test]
    fn headers_bind_kind_token_and_every_byte() {
        let k = ukernels::best();
        let token = [7u8; TOKEN_BYTES];
        let image = seal_image(k, &token, b"model bytes", b"packed");
        let (m, p) = open_image(&image.model, &image.data, k, &token).unwrap();
        assert_eq!((m, p), (&b"model bytes"[..], &b"packed"[..]));
        // Swapped handles, another token, every byte flipped, shrunk, grown: all misses.
        assert!(open_image(&image.data, &image.model, k, &token).is_err());
        assert!(open_image(&image.model, &image.data, k, &[8u8; TOKEN_BYTES]).is_err());
        for file in 0..2 {
            let len = [image.model.len(), image.data.len()][file];
            for i in 0..len {
                let mut img = image.clone();
                [&mut img.model, &mut img.data][file][i] ^= 0x10;
                let e = open_image(&img.model, &img.data, k, &token).unwrap_err();
                assert_eq!(e.status(), nnhal_hal::ErrorStatus::GeneralFailure);
            }
        }
        let mut short = image.clone();
        short.model.pop();
        assert!(open_image(&short.model, &short.data, k, &token).is_err());
        let mut long = image.clone();
        long.data.push(0);
        assert!(open_image(&long.model, &long.data, k, &token).is_err());
    }

    /// The stand-in for left-out values is zero and as long as asked, small or large, and
    /// the stored values can be written over its start.
    #[test]
    fn zeros_are_zero_at_every_size() {
        for len in [0, 1, 4095, (1 << 20) - 1, 1 << 20, 4 << 20, (64 << 20) + 3] {
            let mut z = zeros(len);
            assert_eq!(z.len(), len);
            assert!(z.iter().all(|&b| b == 0), "{len}");
            if let Some(first) = z.first_mut() {
                *first = 9;
            }
        }
    }

    /// A file of `len` checksummed bytes (a byte pattern with no period a split could hide
    /// in) and its CRC-32.
    fn checksummed(len: usize) -> Vec<u8> {
        let mut bytes: Vec<u8> = (0..len as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect();
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Reads `file` (memory or a descriptor) as a restore does, in pieces of `pieces` bytes:
    /// the bytes read, or why the checked read failed.
    fn read_checked(file: Either<'_>, len: u64, pieces: &[usize]) -> Result<Vec<u8>, String> {
        let mut checked = Checked {
            file,
            at: 0,
            end: len - 4,
            small: Vec::new(),
            pos: 0,
            hasher: crc32fast::Hasher::new(),
            region: None,
        };
        let mut out = Vec::new();
        for &n in pieces {
            let mut piece = vec![0u8; n];
            checked.pull(&mut piece)?;
            out.extend_from_slice(&piece);
        }
        checked.finish().map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// Values read in chunks and small reads hash as one file: the bytes land in order, the
    /// checksum matches, and a byte flipped anywhere (at a chunk's seam too) fails it, as
    /// does a file that ends before its checksum. The same on one thread and on a team of
    /// two, where the large pieces are read in two shares whose checksums are combined.
    #[test]
    fn checked_reads_hash_in_file_order() {
        checked_reads();
        let pool = nnhal_kernels::parallel::Pool::new(2, "cache-test").expect("a pool");
        pool.run(|| {
            assert_eq!(parallel::threads(), 2, "the reads run on a team of two");
            checked_reads();
        });
    }

    fn checked_reads() {
        const MIB: usize = 1 << 20;
        let len = 3 * MIB + 12_345;
        let pieces = [100, MIB + 7, 17, 2 * MIB + 12_345 - 124];
        assert_eq!(pieces.iter().sum::<usize>(), len);
        let file = checksummed(len);
        let read = read_checked(Either::Bytes(&file), file.len() as u64, &pieces).unwrap();
        assert_eq!(read, file[..len]);
        let fd = nnhal_hal::memory::create_memfd("cache", &file, file.len() as u64, false)
            .expect("a memfd");
        let on_disk = read_checked(Either::File(File::from(fd)), file.len() as u64, &pieces);
        assert_eq!(on_disk.unwrap(), file[..len]);
        let seam = 100 + READ_CHUNK;
        // `share`: where the second share of the first large piece starts on a team of two.
        let share = 100 + 3 * READ_CHUNK;
        for at in [
            0,
            150,
            seam - 1,
            seam,
            share - 1,
            share,
            100 + MIB,
            len - 2,
            len - 1,
        ] {
            let mut damaged = file.clone();
            damaged[at] ^= 0x04;
            let e = read_checked(Either::Bytes(&damaged), file.len() as u64, &pieces);
            assert!(e.unwrap_err().contains("checksum"), "byte {at}");
        }
        let short = read_checked(Either::Bytes(&file[..len]), file.len() as u64, &pieces);
        assert!(short.unwrap_err().contains("ends early"));
        // From a file as from memory: a flip inside a large piece, on either side of a chunk
        // seam or in the last byte is caught, and a file that ends inside a piece is short.
        let memfd = |bytes: &[u8]| {
            let fd = nnhal_hal::memory::create_memfd("cache", bytes, bytes.len() as u64, false)
                .expect("a memfd");
            Either::File(File::from(fd))
        };
        let start = 100 + pieces[1] + 17;
        let split = start + READ_CHUNK;
        let share = start + 5 * READ_CHUNK;
        for at in [
            100 + (MIB + 7) / 2,
            split - 1,
            split,
            split + 1,
            share - 1,
            share,
            len - 1,
        ] {
            let mut damaged = file.clone();
            damaged[at] ^= 0x40;
            let e = read_checked(memfd(&damaged), file.len() as u64, &pieces);
            assert!(e.unwrap_err().contains("checksum"), "byte {at} of a file");
        }
        let short = read_checked(memfd(&file[..split + 10]), file.len() as u64, &pieces);
        assert!(short.unwrap_err().contains("ends early"));
    }

    /// A data file that grows, shrinks or is rewritten after its restore has taken its size
    /// is a miss; unchanged, the same reading restores its entry (read into a region).
    #[test]
    fn a_data_file_changed_during_a_restore_is_a_miss() {
        use nnhal_kernels::conv::dw_f32::PackedDwF32;
        let k = ukernels::best();
        let token = [3u8; TOKEN_BYTES];
        let channels = 1 << 16;
        let weights: Vec<f32> = (0..9 * channels).map(|i| (i % 7) as f32).collect();
        let dw = PackedDwF32::pack(k, 3, 3, channels, &weights, &vec![0.5; channels]);
        let mut section = Vec::new();
        put_u32(&mut section, 1);
        put_stored(&mut section, KIND_DW_F32, &|o| dw.persist(o));
        let image = seal_image(k, &token, b"model", &section);
        let data = &image.data;
        let n = data.len();
        let mut rewritten = data.clone();
        rewritten[n / 2] ^= 1;
        let read = |now: &[u8]| {
            let fd = nnhal_hal::memory::create_memfd("cache", now, now.len() as u64, false)
                .expect("a memfd");
            let file = Either::File(File::from(fd));
            read_packed(file, n as u64, &image.model, 1, k, &token)
        };
        let grown = [data.as_slice(), &[0u8; 64]].concat();
        for (what, now, why) in [
            ("grown", &grown[..], "grew while read"),
            ("shrunk", &data[..n - 64], "not read to its end"),
            ("rewritten", &rewritten[..], "checksum"),
        ] {
            let e = read(now).expect_err(what);
            assert_eq!(e.status(), nnhal_hal::ErrorStatus::GeneralFailure, "{what}");
            assert!(e.to_string().contains(why), "{what}: {e}");
        }
        let entries = read(data).unwrap();
        let [StoredPack::Packed(p)] = &entries[..] else {
            panic!("one stored entry expected");
        };
        let Packed::DwF32(back) = &**p else {
            panic!("a float32 depthwise entry expected");
        };
        let mut again = Vec::new();
        back.persist(&mut again);
        let mut first = Vec::new();
        dw.persist(&mut first);
        assert_eq!(again, first);
    }

    #[test]
    fn another_kernel_level_is_a_miss() {
        let levels = ukernels::Isa::levels();
        let tables: Vec<_> = levels
            .iter()
            .filter_map(|&l| ukernels::table(l).ok())
            .collect();
        let token = [1u8; TOKEN_BYTES];
        for a in &tables {
            let image = seal_image(a, &token, b"m", b"p");
            for b in &tables {
                let opened = open_image(&image.model, &image.data, b, &token);
                assert_eq!(
                    opened.is_ok(),
                    a.isa == b.isa,
                    "{} read at {}",
                    a.isa,
                    b.isa
                );
            }
        }
    }

    #[test]
    fn forged_counts_never_allocate_past_the_input() {
        let mut bytes = Vec::new();
        put_u32(&mut bytes, 0);
        put_u32(&mut bytes, u32::MAX);
        assert!(decode_model(&bytes).is_err());
        assert!(decode_model(&[]).is_err());
    }
}
