//! Damaged and forged compilation caches (BI-80…BI-84 in docs/bad-inputs.md): every one is a
//! miss (GENERAL_FAILURE) or, when forged with a correct checksum around a valid model, a
//! model that runs; never a panic, an out-of-bounds access or a large allocation from a count.

mod common;

use common::{f32_bytes, f32_values, output, request, single_op};
use nnhal::cache::{self, encode_model, seal_image, TOKEN_BYTES};
use nnhal::hal::memory::create_memfd;
use nnhal::hal::{
    ErrorStatus, HalResult, Model, Operand, OperandLifeTime, OperandType, OperationType,
};
use nnhal::kernels::ukernels;
use nnhal::{Driver, PreparedModel};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

const TOKEN: [u8; TOKEN_BYTES] = [3; TOKEN_BYTES];

/// ADD of a [2] float32 input and a [2] constant [10, 20], no activation.
fn add_model() -> Model {
    use OperandLifeTime::*;
    let t = |lt| Operand::new(OperandType::TensorFloat32, &[2], lt);
    single_op(
        OperationType::Add,
        vec![
            t(ModelInput),
            t(ModelInput),
            Operand::new(OperandType::Int32, &[], ModelInput),
            t(ModelOutput),
        ],
        &[
            (1, f32_bytes(&[10.0, 20.0])),
            (2, 0i32.to_le_bytes().to_vec()),
        ],
        &[0, 1, 2],
        &[3],
    )
}

fn memfd(bytes: &[u8]) -> File {
    let f = File::from(create_memfd("cache", &[], 0, false).unwrap());
    f.write_all_at(bytes, 0).unwrap();
    f
}

fn save(driver: &Driver, model: Model) -> (Vec<u8>, Vec<u8>) {
    let (m, d) = (memfd(&[]), memfd(&[]));
    driver
        .prepare_model_to_files(model, &[m.as_fd()], &[d.as_fd()], &TOKEN)
        .unwrap();
    (read(&m), read(&d))
}

fn read(f: &File) -> Vec<u8> {
    let mut v = vec![0; f.metadata().unwrap().len() as usize];
    f.read_exact_at(&mut v, 0).unwrap();
    v
}

fn restore(driver: &Driver, model: &[u8], data: &[u8]) -> HalResult<Arc<PreparedModel>> {
    let (m, d) = (memfd(model), memfd(data));
    driver.prepare_model_from_files(&[m.as_fd()], &[d.as_fd()], &TOKEN)
}

fn assert_miss(r: HalResult<Arc<PreparedModel>>, what: &str) {
    match r {
        Ok(_) => panic!("{what}: restored"),
        Err(e) => assert_eq!(e.status(), ErrorStatus::GeneralFailure, "{what}: {e}"),
    }
}

/// Runs the ADD model on [1, 2] and returns the outputs.
fn run(prepared: &PreparedModel) -> Vec<f32> {
    let req = request(&[(f32_bytes(&[1.0, 2.0]), vec![2])], &[8]);
    prepared.execute(&req).unwrap();
    f32_values(&output(&req, 0))
}

fn model_payload(model: &Model) -> Vec<u8> {
    encode_model(model, &[])
}

/// The packed section of a model of `n` operations that stores nothing.
fn packed(n: u32, tags: &[u8]) -> Vec<u8> {
    let mut v = n.to_le_bytes().to_vec();
    v.extend_from_slice(tags);
    v
}

#[test]
fn bi80_wrong_handle_counts_and_modes_cache_nothing_and_restore_nothing() {
    let driver = Driver::new(1).unwrap();
    let (m, d) = (memfd(&[]), memfd(&[]));
    // Too few or too many handles: prepared, nothing written.
    for (nm, nd) in [(0usize, 1usize), (1, 0), (2, 1), (1, 2)] {
        let ms = vec![m.as_fd(); nm];
        let ds = vec![d.as_fd(); nd];
        driver
            .prepare_model_to_files(add_model(), &ms, &ds, &TOKEN)
            .unwrap();
        assert!(read(&m).is_empty() && read(&d).is_empty(), "({nm}, {nd})");
        assert_miss(
            driver.prepare_model_from_files(&ms, &ds, &TOKEN),
            "wrong handle counts",
        );
    }
    // A token of the wrong length is INVALID_ARGUMENT, for saving and restoring alike.
    let e = driver
        .prepare_model_to_files(add_model(), &[m.as_fd()], &[d.as_fd()], &[0; 31])
        .err()
        .unwrap();
    assert_eq!(e.status(), ErrorStatus::InvalidArgument);
    // Read-only handles: prepared, not written.
    let dir = std::env::temp_dir().join(format!("nnhal-bi80-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mp, dp) = (dir.join("m"), dir.join("d"));
    std::fs::write(&mp, b"").unwrap();
    std::fs::write(&dp, b"").unwrap();
    let (rm, rd) = (File::open(&mp).unwrap(), File::open(&dp).unwrap());
    driver
        .prepare_model_to_files(add_model(), &[rm.as_fd()], &[rd.as_fd()], &TOKEN)
        .unwrap();
    assert_eq!(std::fs::metadata(&mp).unwrap().len(), 0);
    // Write-only handles of a good cache: not readable, a miss.
    let (good_m, good_d) = save(&driver, add_model());
    std::fs::write(&mp, &good_m).unwrap();
    std::fs::write(&dp, &good_d).unwrap();
    let wo = |p| std::fs::OpenOptions::new().write(true).open(p).unwrap();
    let (wm, wd) = (wo(&mp), wo(&dp));
    assert_miss(
        driver.prepare_model_from_files(&[wm.as_fd()], &[wd.as_fd()], &TOKEN),
        "write-only handles",
    );
    // Swapped handles.
    assert_miss(restore(&driver, &good_d, &good_m), "swapped handles");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bi81_every_damaged_byte_shrunk_or_grown_file_is_a_miss() {
    let driver = Driver::new(1).unwrap();
    let (m, d) = save(&driver, add_model());
    assert_eq!(run(&restore(&driver, &m, &d).unwrap()), [11.0, 22.0]);
    for file in 0..2 {
        let original = if file == 0 { &m } else { &d };
        for i in 0..original.len() {
            for bit in [0x01u8, 0x80] {
                let mut bytes = original.clone();
                bytes[i] ^= bit;
                let (mm, dd) = if file == 0 {
                    (&bytes, &d)
                } else {
                    (&m, &bytes)
                };
                assert_miss(restore(&driver, mm, dd), &format!("file {file} byte {i}"));
            }
        }
        for len in [0, 1, original.len() / 2, original.len() - 1] {
            let bytes = &original[..len];
            let (mm, dd) = if file == 0 {
                (bytes, &d[..])
            } else {
                (&m[..], bytes)
            };
            assert_miss(
                restore(&driver, mm, dd),
                &format!("file {file} cut to {len}"),
            );
        }
        let mut grown = original.clone();
        grown.extend_from_slice(&[0; 7]);
        let (mm, dd) = if file == 0 {
            (&grown, &d)
        } else {
            (&m, &grown)
        };
        assert_miss(restore(&driver, mm, dd), &format!("file {file} grown"));
    }
}

#[test]
fn bi82_another_build_level_geometry_or_token_is_a_miss() {
    let levels: Vec<_> = ukernels::Isa::levels()
        .iter()
        .filter_map(|&l| ukernels::table(l).ok())
        .collect();
    assert!(levels.len() >= 2);
    let (low, high) = (levels[0], levels[levels.len() - 1]);
    let writer = Driver::with_kernels(1, low).unwrap();
    let reader = Driver::with_kernels(1, high).unwrap();
    let (m, d) = save(&writer, add_model());
    assert_miss(restore(&reader, &m, &d), "another kernel level");
    assert_eq!(run(&restore(&writer, &m, &d).unwrap()), [11.0, 22.0]);
    // Another token.
    let (mf, df) = (memfd(&m), memfd(&d));
    assert_miss(
        writer.prepare_model_from_files(&[mf.as_fd()], &[df.as_fd()], &[4; 32]),
        "another token",
    );
    // Another format version or build, re-sealed so that only that field differs: the
    // header is checked field by field after the checksum.
    let payload = model_payload(&add_model());
    let image = seal_image(low, &TOKEN, &payload, &packed(1, &[1]));
    assert_eq!(
        run(&restore(&writer, &image.model, &image.data).unwrap()),
        [11.0, 22.0]
    );
    for (at, what) in [(8, "format version"), (12, "kind"), (18, "build")] {
        let mut model = image.model.clone();
        model[at] ^= 1;
        let n = model.len() - 4;
        let crc = crc32(&model[..n]);
        model[n..].copy_from_slice(&crc.to_le_bytes());
        assert_miss(restore(&writer, &model, &image.data), what);
    }
}

/// The checksum the cache uses (CRC-32, IEEE), computed here bit by bit so that the test does
/// not share the driver's code.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn bi83_forged_model_encodings_behind_a_correct_checksum_are_misses() {
    let driver = Driver::new(1).unwrap();
    let k = ukernels::best();
    let good = model_payload(&add_model());
    let reseal = |payload: &[u8]| {
        let image = seal_image(k, &TOKEN, payload, &packed(1, &[1]));
        restore(&driver, &image.model, &image.data)
    };
    assert_eq!(run(&reseal(&good).unwrap()), [11.0, 22.0]);
    // Every prefix, and every byte of the encoding replaced by 0xff: a miss or a model that
    // validates and runs (e.g. a scale changed) — never a panic.
    for len in 0..good.len() {
        assert_miss(reseal(&good[..len]), &format!("encoding cut to {len}"));
    }
    for i in 0..good.len() {
        for v in [0x00u8, 0xff, 0x7f] {
            let mut bytes = good.clone();
            bytes[i] = v;
            if let Ok(p) = reseal(&bytes) {
                let req = request(&[(f32_bytes(&[1.0, 2.0]), vec![2])], &[8]);
                let _ = p.execute(&req);
            }
        }
    }
    // A count of 2^32 − 1 operands in a few bytes allocates nothing.
    let mut huge = 0u32.to_le_bytes().to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_miss(reseal(&huge), "huge operand count");
    // A model the validator refuses (an operation naming operand 99) is a miss, not
    // INVALID_ARGUMENT: the client did not send it.
    let mut bad = add_model();
    bad.operations[0].inputs[0] = 99;
    assert_miss(reseal(&model_payload(&bad)), "an invalid model");
}

#[test]
fn bi84_forged_packed_sections_and_oversized_files_are_misses() {
    let driver = Driver::new(1).unwrap();
    let k = ukernels::best();
    let payload = model_payload(&add_model());
    for (what, section) in [
        ("no entries", packed(0, &[])),
        ("two entries for one operation", packed(2, &[0, 0])),
        ("an unknown kind", packed(1, &[9])),
        ("bytes after the entries", packed(1, &[0, 0])),
        ("a huge count", packed(u32::MAX, &[0])),
        ("empty", Vec::new()),
    ] {
        let image = seal_image(k, &TOKEN, &payload, &section);
        assert_miss(restore(&driver, &image.model, &image.data), what);
    }
    // Stored images (tag 2, a variant kind, a length, the image): a well-formed float32
    // CONV_2D image for the ADD operation is a variant that operation does not pack; cut,
    // lengthened, with a length prefix that disagrees with its geometry or names more bytes
    // than there are, or of an unknown variant, each is a miss.
    let nr = k.f32_gemm.nr;
    let mut conv = Vec::new();
    for v in [1u64, 1, 1, 1] {
        conv.extend_from_slice(&v.to_le_bytes());
    }
    conv.extend_from_slice(&(2 * nr as u64).to_le_bytes());
    conv.extend_from_slice(&vec![0u8; 2 * nr * 4]);
    let stored = |kind: u8, image: &[u8], len: u64| {
        let mut v = packed(1, &[2, kind]);
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(image);
        v
    };
    let mut wrong_len = conv.clone();
    wrong_len[32] += 1;
    let mut zero_extent = conv.clone();
    zero_extent[8] = 0;
    for (what, section) in [
        (
            "a conv image for an ADD",
            stored(1, &conv, conv.len() as u64),
        ),
        (
            "an image cut short",
            stored(1, &conv[..conv.len() - 1], conv.len() as u64 - 1),
        ),
        (
            "an image with bytes after it",
            stored(1, &[&conv[..], &[0]].concat(), conv.len() as u64 + 1),
        ),
        ("a length past the section", stored(1, &conv, u64::MAX)),
        (
            "a buffer length off its geometry",
            stored(1, &wrong_len, conv.len() as u64),
        ),
        (
            "a zero filter extent",
            stored(1, &zero_extent, conv.len() as u64),
        ),
        ("an unknown variant", stored(77, &conv, conv.len() as u64)),
        ("a uint8 table of the wrong size", stored(5, &[0; 16], 16)),
    ] {
        let image = seal_image(k, &TOKEN, &payload, &section);
        assert_miss(restore(&driver, &image.model, &image.data), what);
    }
    // A model file past the size bound is refused from its size, before it is read.
    let big = File::from(create_memfd("big", &[], 0, false).unwrap());
    big.set_len(cache::MAX_CACHE_FILE_BYTES + 1).unwrap();
    let (_, d) = save(&driver, add_model());
    let df = memfd(&d);
    assert_miss(
        driver.prepare_model_from_files(&[big.as_fd()], &[df.as_fd()], &TOKEN),
        "a file past the bound",
    );
}
