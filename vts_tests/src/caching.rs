//! The compilation-caching suite (`nnhal-vts caching`), after the AIDL VTS
//! CompilationCachingTest: a model prepared with cache handles and a token, then restored
//! with `prepareModelFromCache`, must compute what a fresh preparation computes; a wrong
//! token, the wrong number of handles, handles of the wrong access mode and damaged files
//! must make the restore fail (GENERAL_FAILURE) or, where the contract allows, still compute
//! correctly; never crash the service. The cache format and what binds it are in the driver's
//! `src/cache.rs` (docs/hal-contract.md, "Compilation caching").

use crate::model::{to_model, ConstantMode};
use crate::runner::{guarded, run_vector};
use crate::transport::{Device, InProcessDevice, Prepared};
use crate::vector::Vector;
use nnhal::hal::memory::create_memfd;
use nnhal::hal::{ErrorStatus, HalError, HalResult, Model};
use nnhal::kernels::ukernels::{self, Isa};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One model-cache and one data-cache file (the counts the driver asks for), as memfds.
pub struct CacheFiles {
    pub model: File,
    pub data: File,
}

impl CacheFiles {
    pub fn new() -> HalResult<CacheFiles> {
        let memfd = || -> HalResult<File> {
            create_memfd("nnhal-vts-cache", &[], 0, false)
                .map(File::from)
                .map_err(|e| HalError::GeneralFailure(format!("cannot create a cache file: {e}")))
        };
        Ok(CacheFiles {
            model: memfd()?,
            data: memfd()?,
        })
    }

    pub fn model_fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.model.as_fd()]
    }

    pub fn data_fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.data.as_fd()]
    }

    /// The bytes of a file, read back through its descriptor.
    pub fn read(file: &File) -> Vec<u8> {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0) as usize;
        let mut buf = vec![0u8; len];
        let mut at = 0;
        while at < len {
            match file.read_at(&mut buf[at..], at as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => at += n,
            }
        }
        buf.truncate(at);
        buf
    }

    /// Replaces the contents of a file.
    pub fn write(file: &File, bytes: &[u8]) {
        let _ = file.set_len(0);
        let _ = file.write_all_at(bytes, 0);
        let _ = file.set_len(bytes.len() as u64);
    }
}

/// A token per test, so that no test restores what another wrote.
pub fn token(seed: u8) -> [u8; 32] {
    std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
}

/// A device whose every preparation goes through the cache: prepared with fresh cache files,
/// then restored from them, and the restored model is what the runner executes. Models the
/// driver does not cache (referenced subgraphs) fall back to the fresh preparation and are
/// counted in `uncached`.
struct ThroughCache<'a> {
    inner: &'a dyn Device,
    restored: AtomicUsize,
    uncached: AtomicUsize,
}

impl Device for ThroughCache<'_> {
    fn describe(&self) -> String {
        format!("{} through the compilation cache", self.inner.describe())
    }

    fn capabilities(&self) -> HalResult<nnhal::hal::Capabilities> {
        self.inner.capabilities()
    }

    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        self.inner.supported_operations(model)
    }

    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>> {
        let files = CacheFiles::new()?;
        let t = token(7);
        let subgraphs = !model.referenced.is_empty();
        let fresh =
            self.inner
                .prepare_model_cached(model, &files.model_fds(), &files.data_fds(), &t)?;
        match self
            .inner
            .prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &t)
        {
            Ok(restored) => {
                self.restored.fetch_add(1, Ordering::Relaxed);
                Ok(restored)
            }
            Err(e) if subgraphs && e.status() == ErrorStatus::GeneralFailure => {
                self.uncached.fetch_add(1, Ordering::Relaxed);
                Ok(fresh)
            }
            Err(e) => Err(HalError::GeneralFailure(format!(
                "prepared with a cache, but the restore failed: {e}"
            ))),
        }
    }

    fn prepare_model_cached(
        &self,
        model: Model,
        m: &[BorrowedFd<'_>],
        d: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        self.inner.prepare_model_cached(model, m, d, token)
    }

    fn prepare_model_from_cache(
        &self,
        m: &[BorrowedFd<'_>],
        d: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        self.inner.prepare_model_from_cache(m, d, token)
    }

    fn carries_consumer_counts(&self) -> bool {
        self.inner.carries_consumer_counts()
    }
}

/// A device whose preparations of the cached model (the vector's, in either constant mode)
/// restore from fixed cache bytes (damaged on purpose) instead; other models the runner
/// derives (constants fed as inputs) are prepared as usual. It counts the restores that
/// succeeded.
struct FromBytes<'a> {
    inner: &'a dyn Device,
    /// The model the cache was written for.
    cached: Model,
    model: &'a [u8],
    data: &'a [u8],
    token: [u8; 32],
    succeeded: AtomicUsize,
}

impl Device for FromBytes<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn capabilities(&self) -> HalResult<nnhal::hal::Capabilities> {
        self.inner.capabilities()
    }

    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        self.inner.supported_operations(model)
    }

    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>> {
        let same = model.operations == self.cached.operations
            && model.input_indexes == self.cached.input_indexes
            && model.output_indexes == self.cached.output_indexes;
        if !same {
            return self.inner.prepare_model(model);
        }
        let files = CacheFiles::new()?;
        CacheFiles::write(&files.model, self.model);
        CacheFiles::write(&files.data, self.data);
        let restored = self.inner.prepare_model_from_cache(
            &files.model_fds(),
            &files.data_fds(),
            &self.token,
        )?;
        self.succeeded.fetch_add(1, Ordering::Relaxed);
        Ok(restored)
    }

    fn prepare_model_cached(
        &self,
        model: Model,
        m: &[BorrowedFd<'_>],
        d: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        self.inner.prepare_model_cached(model, m, d, token)
    }

    fn prepare_model_from_cache(
        &self,
        m: &[BorrowedFd<'_>],
        d: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        self.inner.prepare_model_from_cache(m, d, token)
    }

    fn carries_consumer_counts(&self) -> bool {
        self.inner.carries_consumer_counts()
    }
}

/// Runs `v` restored from `model`/`data` cache bytes: passes when every restore fails (with
/// GENERAL_FAILURE) or the vector passes on what was restored.
fn restore_fails_or_computes(
    device: &dyn Device,
    v: &Vector,
    model: &[u8],
    data: &[u8],
    token: [u8; 32],
) -> Result<(), String> {
    let from = FromBytes {
        inner: device,
        cached: to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?,
        model,
        data,
        token,
        succeeded: AtomicUsize::new(0),
    };
    let report = run_vector(&from, v);
    if from.succeeded.load(Ordering::Relaxed) > 0 {
        if let Some(why) = report.failure {
            return Err(format!("restored, but computes wrongly: {why}"));
        }
    }
    Ok(())
}

/// The cache bytes `device` writes for `v`'s model under `token`.
fn save(device: &dyn Device, v: &Vector, token: [u8; 32]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let model = to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?;
    let files = CacheFiles::new().map_err(|e| e.to_string())?;
    device
        .prepare_model_cached(model, &files.model_fds(), &files.data_fds(), &token)
        .map_err(|e| format!("prepareModel with cache handles: {e}"))?;
    let image = (
        CacheFiles::read(&files.model),
        CacheFiles::read(&files.data),
    );
    if image.0.is_empty() || image.1.is_empty() {
        return Err("prepareModel wrote no cache".into());
    }
    Ok(image)
}

fn expect_miss(what: &str, result: HalResult<Box<dyn Prepared>>) -> Result<(), String> {
    match result {
        Ok(_) => Err(format!("{what}: the restore succeeded")),
        Err(e) if e.status() == ErrorStatus::GeneralFailure => Ok(()),
        Err(e) => Err(format!("{what}: {e}, expected GENERAL_FAILURE")),
    }
}

/// Every vector saved, restored and executed: outputs as a fresh preparation's (the goldens).
pub fn vectors(device: &dyn Device, vectors: &[Vector]) -> Vec<(String, Result<(), String>)> {
    let through = ThroughCache {
        inner: device,
        restored: AtomicUsize::new(0),
        uncached: AtomicUsize::new(0),
    };
    let mut out: Vec<(String, Result<(), String>)> = vectors
        .iter()
        .map(|v| {
            let report = run_vector(&through, v);
            let outcome = match report.failure {
                Some(why) => Err(why),
                None => Ok(()),
            };
            (format!("restored_{}", v.name), outcome)
        })
        .collect();
    let restored = through.restored.load(Ordering::Relaxed);
    out.push((
        "restores_happened".into(),
        if restored > 0 || vectors.is_empty() {
            Ok(())
        } else {
            Err("no preparation was restored from a cache".into())
        },
    ));
    out
}

/// The checks on one small vector: tokens, handle counts and modes, damage, shared handles.
pub fn checks(
    device: &dyn Device,
    v: &Vector,
    every_byte: bool,
) -> Vec<(String, Result<(), String>)> {
    type Check = fn(&dyn Device, &Vector, bool) -> Result<(), String>;
    let checks: [(&str, Check); 7] = [
        ("wrong_token_is_a_miss", |d, v, _| {
            let (m, dt) = save(d, v, token(1))?;
            let files = CacheFiles::new().map_err(|e| e.to_string())?;
            CacheFiles::write(&files.model, &m);
            CacheFiles::write(&files.data, &dt);
            expect_miss(
                "another token",
                d.prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &token(2)),
            )?;
            // A token of the wrong length is INVALID_ARGUMENT, as for prepareModel.
            match d.prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &[0; 31]) {
                Err(e) if e.status() == ErrorStatus::InvalidArgument => Ok(()),
                Ok(_) => Err("a 31-byte token restored".into()),
                Err(e) => Err(format!("a 31-byte token: {e}, expected INVALID_ARGUMENT")),
            }
        }),
        (
            "wrong_handle_counts_save_nothing_and_restore_nothing",
            |d, v, _| {
                let t = token(3);
                for (nm, nd) in [(0, 1), (2, 1), (1, 0), (1, 2), (0, 0)] {
                    let extra = CacheFiles::new().map_err(|e| e.to_string())?;
                    let files = CacheFiles::new().map_err(|e| e.to_string())?;
                    let mut m = files.model_fds();
                    let mut dt = files.data_fds();
                    m.truncate(nm);
                    dt.truncate(nd);
                    if nm == 2 {
                        m.push(extra.model.as_fd());
                    }
                    if nd == 2 {
                        dt.push(extra.data.as_fd());
                    }
                    let model = to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?;
                    d.prepare_model_cached(model, &m, &dt, &t)
                        .map_err(|e| format!("({nm}, {nd}) handles: prepareModel failed: {e}"))?;
                    expect_miss(
                        &format!("after saving with ({nm}, {nd}) handles"),
                        d.prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &t),
                    )?;
                }
                let (m, dt) = save(d, v, t)?;
                let files = CacheFiles::new().map_err(|e| e.to_string())?;
                CacheFiles::write(&files.model, &m);
                CacheFiles::write(&files.data, &dt);
                let (mf, df) = (files.model_fds(), files.data_fds());
                let two_m = [mf[0], mf[0]];
                let two_d = [df[0], df[0]];
                for (what, m, dt) in [
                    ("no model handle", &mf[..0], &df[..]),
                    ("no data handle", &mf[..], &df[..0]),
                    ("two model handles", &two_m[..], &df[..]),
                    ("two data handles", &mf[..], &two_d[..]),
                    ("swapped handles", &df[..], &mf[..]),
                ] {
                    expect_miss(what, d.prepare_model_from_cache(m, dt, &t))?;
                }
                Ok(())
            },
        ),
        ("handles_of_the_wrong_mode", |d, v, _| {
            let t = token(4);
            let (m, dt) = save(d, v, t)?;
            let dir = std::env::temp_dir().join(format!("nnhal-vts-cache-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let (mp, dp) = (dir.join("model.bin"), dir.join("data.bin"));
            let result = (|| -> Result<(), String> {
                std::fs::write(&mp, &m).map_err(|e| e.to_string())?;
                std::fs::write(&dp, &dt).map_err(|e| e.to_string())?;
                // Write-only handles cannot be read back: a miss.
                let wo = |p: &std::path::Path| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .map_err(|e| e.to_string())
                };
                let (wm, wd) = (wo(&mp)?, wo(&dp)?);
                expect_miss(
                    "write-only handles",
                    d.prepare_model_from_cache(&[wm.as_fd()], &[wd.as_fd()], &t),
                )?;
                // Read-only handles restore.
                let (rm, rd) = (
                    File::open(&mp).map_err(|e| e.to_string())?,
                    File::open(&dp).map_err(|e| e.to_string())?,
                );
                d.prepare_model_from_cache(&[rm.as_fd()], &[rd.as_fd()], &t)
                    .map_err(|e| format!("read-only handles: {e}"))?;
                // Saving through read-only handles prepares, and caches nothing usable.
                let t2 = token(5);
                let model = to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?;
                d.prepare_model_cached(model, &[rm.as_fd()], &[rd.as_fd()], &t2)
                    .map_err(|e| format!("prepareModel with read-only handles: {e}"))?;
                expect_miss(
                    "after saving through read-only handles",
                    d.prepare_model_from_cache(&[rm.as_fd()], &[rd.as_fd()], &t2),
                )
            })();
            let _ = std::fs::remove_dir_all(&dir);
            result
        }),
        ("shrunk_and_grown_files_fail_or_compute", |d, v, _| {
            let t = token(6);
            let (m, dt) = save(d, v, t)?;
            for (k, file) in [&m, &dt].into_iter().enumerate() {
                let mut variants = vec![Vec::new(), file[..file.len() - 1].to_vec()];
                variants.push(file[..file.len() / 2].to_vec());
                let mut grown = file.clone();
                grown.push(0);
                variants.push(grown);
                let mut doubled = file.clone();
                doubled.extend_from_slice(file);
                variants.push(doubled);
                for bytes in variants {
                    let (mm, dd) = if k == 0 { (&bytes, &dt) } else { (&m, &bytes) };
                    restore_fails_or_computes(d, v, mm, dd, t).map_err(|e| {
                        format!(
                            "{} file of {} bytes: {e}",
                            ["model", "data"][k],
                            bytes.len()
                        )
                    })?;
                }
            }
            Ok(())
        }),
        ("every_flipped_byte_fails_or_computes", |d, v, every| {
            let t = token(8);
            let (m, dt) = save(d, v, t)?;
            for (k, file) in [&m, &dt].into_iter().enumerate() {
                // Every position of a small model's files; about 64 spread over a large one's.
                let step = if every { 1 } else { (file.len() / 64).max(1) };
                for i in (0..file.len()).step_by(step) {
                    let mut bytes = file.clone();
                    bytes[i] ^= 0x5a;
                    let (mm, dd) = if k == 0 { (&bytes, &dt) } else { (&m, &bytes) };
                    restore_fails_or_computes(d, v, mm, dd, t)
                        .map_err(|e| format!("{} byte {i} flipped: {e}", ["model", "data"][k]))?;
                }
            }
            Ok(())
        }),
        ("two_models_sharing_handles", |d, v, _| {
            // The same files reused by a second preparation under another token: the first
            // token then misses, the second restores and computes.
            let (ta, tb) = (token(9), token(10));
            let files = CacheFiles::new().map_err(|e| e.to_string())?;
            let model = to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?;
            d.prepare_model_cached(model.clone(), &files.model_fds(), &files.data_fds(), &ta)
                .map_err(|e| e.to_string())?;
            d.prepare_model_cached(model, &files.model_fds(), &files.data_fds(), &tb)
                .map_err(|e| e.to_string())?;
            expect_miss(
                "the first model's token after the second saved over it",
                d.prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &ta),
            )?;
            let (m, dt) = (
                CacheFiles::read(&files.model),
                CacheFiles::read(&files.data),
            );
            let from = FromBytes {
                inner: d,
                cached: to_model(v, ConstantMode::Copy).map_err(|e| e.to_string())?,
                model: &m,
                data: &dt,
                token: tb,
                succeeded: AtomicUsize::new(0),
            };
            match run_vector(&from, v).failure {
                None if from.succeeded.load(Ordering::Relaxed) > 0 => Ok(()),
                None => Err("the second model was never restored".into()),
                Some(why) => Err(format!("the second model restored: {why}")),
            }
        }),
        ("another_kernel_level_is_a_miss", |_, v, _| isa_mismatch(v)),
    ];
    checks
        .iter()
        .map(|(name, check)| {
            let outcome = guarded(name, || check(device, v, every_byte)).and_then(|r| r);
            (format!("{name} ({})", v.name), outcome)
        })
        .collect()
}

/// A cache written by a driver at one kernel level and read by one at another is a miss;
/// read at the same level it restores. In process: the level is the driver's micro-kernel
/// table, the in-process form of `NNHAL_ISA` (the binder form is in tests/cache.rs).
pub fn isa_mismatch(v: &Vector) -> Result<(), String> {
    let levels: Vec<Isa> = Isa::levels()
        .iter()
        .copied()
        .filter(|&l| ukernels::table(l).is_ok())
        .collect();
    if levels.len() < 2 {
        return Err("this processor runs one kernel level only".into());
    }
    let devices = levels
        .iter()
        .map(|&l| {
            let table = ukernels::table(l).map_err(|e| e.to_string())?;
            InProcessDevice::with_kernels(1, table).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let t = token(11);
    for (a, writer) in devices.iter().enumerate() {
        let (m, dt) = save(writer, v, t)?;
        for (b, reader) in devices.iter().enumerate() {
            let files = CacheFiles::new().map_err(|e| e.to_string())?;
            CacheFiles::write(&files.model, &m);
            CacheFiles::write(&files.data, &dt);
            let restored =
                reader.prepare_model_from_cache(&files.model_fds(), &files.data_fds(), &t);
            let what = format!("written at {}, read at {}", levels[a], levels[b]);
            if a == b {
                restored.map_err(|e| format!("{what}: {e}"))?;
            } else {
                expect_miss(&what, restored)?;
            }
        }
    }
    Ok(())
}
