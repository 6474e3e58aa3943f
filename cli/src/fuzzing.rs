//! What the fuzz targets under `fuzz/` run, kept in the library so that the normal test suite
//! replays the very same inputs (`cli/tests/fuzz_regressions.rs`; `docs/fuzzing.md`).
//!
//! Each `run_*` function takes arbitrary bytes and drives one entry point of the service with
//! them; it must return whatever the bytes are. A panic, an abort or a signal is a finding.
//!
//! - [`run_model`]: bytes → canonical model → validation, `getSupportedOperations` and
//!   preparation (the in-process driver; model pools are real memfds).
//! - [`run_request`]: a fixed prepared model and bytes → request (dimensions, locations,
//!   pool sizes, `hasNoValue`) with real memfd pools → execution.
//! - [`ParcelTarget::run`]: bytes → raw transactions (every code, fds where the bytes ask)
//!   into the `IDevice` and `IPreparedModel` stubs of a live service over binder RPC.
//! - [`run_vector`]: bytes → the golden-vector JSON loader → model and request.
//! - [`run_cache`]: bytes → the two payloads of a compilation cache, sealed with a correct
//!   header and checksum ([`nnhal::cache::seal_image`]) so that the decoder and the checks
//!   behind the checksum are what gets fuzzed → `prepareModelFromCache` in process; when it
//!   restores, one execution with zero-filled inputs.
//!
//! The byte formats are plain: little-endian fields read in order, zeros once the bytes run
//! out, every count capped so that one input stays small. [`model_to_bytes`] and
//! [`request_to_bytes`] write the same formats, to seed the corpora from the vectors.

use nnhal::driver::{Driver, PreparedModel};
use nnhal_hal::memory::{create_memfd, Memory};
use nnhal_hal::{DataLocation, Model, Operand, Operation, Request, RequestArgument, Subgraph};
use std::sync::{Arc, OnceLock};

/// Reads fields from fuzz bytes; past the end every field reads as zero.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.pos = end;
        &self.data[start..end]
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let got = self.take(N);
        out[..got.len()].copy_from_slice(got);
        out
    }

    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.array())
    }

    pub fn f32(&mut self) -> f32 {
        f32::from_le_bytes(self.array())
    }

    /// A count in `0..=max`.
    pub fn count(&mut self, max: usize) -> usize {
        usize::from(self.u16()) % (max + 1)
    }
}

const MAX_OPERANDS: usize = 256;
const MAX_OPERATIONS: usize = 128;
const MAX_RANK: usize = 8;
const MAX_LIST: usize = 32;
const MAX_VALUES: usize = 1 << 20;
const MAX_POOLS: usize = 4;
const MAX_POOL_SIZE: u32 = 1 << 20;
const MAX_SUBGRAPHS: usize = 8;

/// How long a fuzzed WHILE may loop: an endless loop is a valid model, and a short timeout
/// keeps it from costing the default two seconds an input.
const FUZZ_LOOP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);

fn location(b: &mut Bytes<'_>) -> DataLocation {
    DataLocation {
        pool_index: b.u32(),
        offset: b.u32(),
        length: b.u32(),
    }
}

fn put_location(out: &mut Vec<u8>, l: &DataLocation) {
    for v in [l.pool_index, l.offset, l.length] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn index_list(b: &mut Bytes<'_>) -> Vec<u32> {
    let n = b.count(MAX_LIST);
    (0..n).map(|_| b.u32()).collect()
}

fn put_list(out: &mut Vec<u8>, list: &[u32]) {
    out.extend_from_slice(&(list.len() as u16).to_le_bytes());
    for v in list {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A pool: its declared size, whether the memfd is sealed against shrinking, the memfd's real
/// size (which may differ from the declared one) and its first bytes.
fn pool(b: &mut Bytes<'_>) -> Option<Memory> {
    let declared = u64::from(b.u32() % (MAX_POOL_SIZE + 1));
    let flags = b.u8();
    let real = if flags & 2 != 0 {
        u64::from(b.u32() % (MAX_POOL_SIZE + 1))
    } else {
        declared
    };
    let len = b.count(4096);
    let data = b.take(len);
    let data = &data[..data.len().min(real as usize)];
    let fd = create_memfd("nnhal-fuzz", data, real, flags & 1 != 0).ok()?;
    Some(Memory::shared(fd, declared))
}

fn put_pool(out: &mut Vec<u8>, size: u32, sealed: bool, data: &[u8]) {
    out.extend_from_slice(&size.to_le_bytes());
    out.push(u8::from(sealed));
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
}

/// Decodes a model (format: see [`model_to_bytes`]).
pub fn model_from_bytes(data: &[u8]) -> Model {
    let b = &mut Bytes::new(data);
    let (operands, operations) = graph_from_bytes(b);
    let input_indexes = index_list(b);
    let output_indexes = index_list(b);
    let values = (b.u32() as usize) % (MAX_VALUES + 1);
    let operand_values = b.take(values).to_vec();
    let pools = (0..b.count(MAX_POOLS)).filter_map(|_| pool(b)).collect();
    // The IF / WHILE subgraphs last, so inputs written before they existed read as none.
    let referenced = (0..b.count(MAX_SUBGRAPHS))
        .map(|_| {
            let (operands, operations) = graph_from_bytes(b);
            Subgraph {
                operands,
                operations,
                input_indexes: index_list(b),
                output_indexes: index_list(b),
            }
        })
        .collect();
    Model {
        operands,
        operations,
        input_indexes,
        output_indexes,
        operand_values,
        pools,
        referenced,
        ..Model::default()
    }
}

/// The operands and operations of one graph (the main one or a referenced subgraph).
fn graph_from_bytes(b: &mut Bytes<'_>) -> (Vec<Operand>, Vec<Operation>) {
    let operands = (0..b.count(MAX_OPERANDS))
        .map(|_| Operand {
            operand_type: b.i32(),
            dimensions: {
                let rank = usize::from(b.u8()) % (MAX_RANK + 1);
                (0..rank).map(|_| b.u32()).collect()
            },
            number_of_consumers: b.u32(),
            scale: b.f32(),
            zero_point: b.i32(),
            lifetime: b.i32(),
            location: location(b),
            channel_quant: None,
        })
        .collect();
    let operations = (0..b.count(MAX_OPERATIONS))
        .map(|_| Operation {
            operation_type: b.i32(),
            inputs: index_list(b),
            outputs: index_list(b),
        })
        .collect();
    (operands, operations)
}

fn put_graph(out: &mut Vec<u8>, operands: &[Operand], operations: &[Operation]) {
    out.extend_from_slice(&(operands.len() as u16).to_le_bytes());
    for o in operands {
        out.extend_from_slice(&o.operand_type.to_le_bytes());
        out.push(o.dimensions.len() as u8);
        for d in &o.dimensions {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&o.number_of_consumers.to_le_bytes());
        out.extend_from_slice(&o.scale.to_le_bytes());
        out.extend_from_slice(&o.zero_point.to_le_bytes());
        out.extend_from_slice(&o.lifetime.to_le_bytes());
        put_location(out, &o.location);
    }
    out.extend_from_slice(&(operations.len() as u16).to_le_bytes());
    for op in operations {
        out.extend_from_slice(&op.operation_type.to_le_bytes());
        put_list(out, &op.inputs);
        put_list(out, &op.outputs);
    }
}

/// Encodes `model` so that [`model_from_bytes`] gives it back (pools by their contents, read
/// through the pool's fd; none when a pool cannot be read).
pub fn model_to_bytes(model: &Model) -> Vec<u8> {
    let mut out = Vec::new();
    put_graph(&mut out, &model.operands, &model.operations);
    put_list(&mut out, &model.input_indexes);
    put_list(&mut out, &model.output_indexes);
    out.extend_from_slice(&(model.operand_values.len() as u32).to_le_bytes());
    out.extend_from_slice(&model.operand_values);
    let pools: Vec<(u32, Vec<u8>)> = model
        .pools
        .iter()
        .filter_map(|m| {
            let pool = nnhal_hal::MappedPool::map(m, "pool").ok()?;
            let len = pool.size().min(4096) as usize;
            Some((pool.size() as u32, pool.read_vec(0, len).ok()?))
        })
        .collect();
    out.extend_from_slice(&(pools.len() as u16).to_le_bytes());
    for (size, data) in pools {
        put_pool(&mut out, size, true, &data);
    }
    out.extend_from_slice(&(model.referenced.len() as u16).to_le_bytes());
    for g in &model.referenced {
        put_graph(&mut out, &g.operands, &g.operations);
        put_list(&mut out, &g.input_indexes);
        put_list(&mut out, &g.output_indexes);
    }
    out
}

fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| Driver::new(1).expect("a one-thread driver"))
}

/// The largest arena (bytes of temporaries of a statically shaped plan) target (a) executes.
const FUZZ_ARENA_LIMIT: usize = 64 << 20;

/// Target (a): validation, supported operations and preparation of a decoded model; when it
/// prepares, one execution with zero-filled inputs. True when that execution succeeded (the
/// replays use it to show that the seeds are real models).
pub fn run_model(data: &[u8]) -> bool {
    let model = model_from_bytes(data);
    let driver = driver();
    let _ = driver.supported_operations(&model);
    match driver.prepare_model(model) {
        // A tiny model may legitimately ask for gigabytes of temporaries (a PAD by constant
        // pads of 2^30); the plan's budget bounds that, but filling it under the sanitizer
        // takes about a minute, which libFuzzer reports as a slow unit and which tests
        // nothing the smaller cases do not. Such plans are prepared, not run.
        Ok(prepared) if prepared.plan().arena_bytes() > FUZZ_ARENA_LIMIT => false,
        Ok(prepared) => {
            let request = zero_request(&prepared);
            prepared
                .validate_request(&request)
                .and_then(|r| prepared.execute_bound_with_loop_timeout(&r, FUZZ_LOOP_TIMEOUT))
                .is_ok()
        }
        Err(_) => false,
    }
}

/// The token every cache input is sealed with.
const CACHE_TOKEN: [u8; 32] = [0x5c; 32];

/// Target (cache): the input is a little-endian `u32` length `n`, then `n` bytes of model
/// payload, then the packed-section payload. Both are sealed with a correct header for the
/// driver's own kernel level and the checksum, then restored from memfds. True when the
/// restored model executed (the replays use it to show that the seeds are real caches).
pub fn run_cache(data: &[u8]) -> bool {
    let mut b = Bytes::new(data);
    let n = b.u32() as usize;
    let model = b.take(n);
    let packed = b.take(usize::MAX);
    let driver = driver();
    let image = nnhal::cache::seal_image(driver.kernels(), &CACHE_TOKEN, model, packed);
    let file = |bytes: &[u8]| {
        let fd = create_memfd("cache", bytes, bytes.len() as u64, false).expect("a memfd");
        std::fs::File::from(fd)
    };
    let (m, d) = (file(&image.model), file(&image.data));
    use std::os::fd::AsFd;
    match driver.prepare_model_from_files(&[m.as_fd()], &[d.as_fd()], &CACHE_TOKEN) {
        Ok(prepared) if prepared.plan().arena_bytes() > FUZZ_ARENA_LIMIT => false,
        Ok(prepared) => {
            let request = zero_request(&prepared);
            prepared
                .validate_request(&request)
                .and_then(|r| prepared.execute_bound_with_loop_timeout(&r, FUZZ_LOOP_TIMEOUT))
                .is_ok()
        }
        Err(_) => false,
    }
}

/// A [`run_cache`] input holding the cache the driver writes for `model` (`None` when the
/// model does not prepare or is not cached).
pub fn cache_input(model: Model) -> Option<Vec<u8>> {
    let (_, image) = driver().prepare_model_for_cache(model, &CACHE_TOKEN).ok()?;
    let image = image?;
    let (model, packed) =
        nnhal::cache::open_image(&image.model, &image.data, driver().kernels(), &CACHE_TOKEN)
            .ok()?;
    let mut out = (model.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(model);
    out.extend_from_slice(packed);
    Some(out)
}

/// A request for every input and output of `prepared` where the model knows the size: each
/// argument in its own zero-filled, sealed memfd.
fn zero_request(prepared: &PreparedModel) -> Request {
    let model = prepared.model();
    let mut request = Request::default();
    let mut bind = |operand: usize| {
        let o = &model.operands[operand];
        // Saturating: the model's dimensions are the fuzzer's, so their product may overflow.
        let bytes = model.static_dims[operand]
            .as_deref()
            .unwrap_or(&o.dims)
            .iter()
            .fold(o.ty.element_size().unwrap_or(1) as u64, |n, &d| {
                n.saturating_mul(u64::from(d.max(1)))
            });
        let bytes = bytes.clamp(1, 1 << 20);
        let pool = request.pools.len() as u32;
        if let Ok(fd) = create_memfd("nnhal-fuzz-arg", &[], bytes, true) {
            request.pools.push(Memory::shared(fd, bytes));
        }
        RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index: pool,
                offset: 0,
                length: bytes as u32,
            },
            dimensions: Vec::new(),
        }
    };
    request.inputs = model.inputs.clone().into_iter().map(&mut bind).collect();
    request.outputs = model.outputs.clone().into_iter().map(&mut bind).collect();
    request
}

/// The fixed model of target (b): CONV_2D (float, 2×2 filter, SAME padding, ReLU) feeding an
/// ADD with a second input, so requests meet several inputs, an optional-free signature,
/// broadcast-free shapes and one output.
pub fn request_target_model() -> Model {
    use nnhal_hal::{OperandLifeTime as L, OperandType as T, OperationType as Op};
    let tensor = |dims: &[u32], l| Operand::new(T::TensorFloat32, dims, l);
    let scalar = |offset: u32| {
        let mut o = Operand::new(T::Int32, &[], L::ConstantCopy);
        o.location = DataLocation {
            pool_index: 0,
            offset,
            length: 4,
        };
        o
    };
    let mut values = Vec::new();
    // filter [1, 2, 2, 1], bias [1]
    for v in [1.0f32, 2.0, 3.0, 4.0, 0.5] {
        values.extend_from_slice(&v.to_le_bytes());
    }
    // padding SAME (1), strides 1, 1, activation RELU (1), then ADD's activation NONE (0)
    for v in [1i32, 1, 1, 1, 0] {
        values.extend_from_slice(&v.to_le_bytes());
    }
    let mut filter = tensor(&[1, 2, 2, 1], L::ConstantCopy);
    filter.location = DataLocation {
        pool_index: 0,
        offset: 0,
        length: 16,
    };
    let mut bias = tensor(&[1], L::ConstantCopy);
    bias.location = DataLocation {
        pool_index: 0,
        offset: 16,
        length: 4,
    };
    let operands = vec![
        tensor(&[1, 3, 3, 1], L::ModelInput),        // 0 input
        filter,                                      // 1
        bias,                                        // 2
        scalar(20),                                  // 3 padding
        scalar(24),                                  // 4 stride w
        scalar(28),                                  // 5 stride h
        scalar(32),                                  // 6 activation
        tensor(&[1, 3, 3, 1], L::TemporaryVariable), // 7 conv out
        tensor(&[1, 3, 3, 1], L::ModelInput),        // 8 second input
        scalar(36),                                  // 9 add activation
        tensor(&[1, 3, 3, 1], L::ModelOutput),       // 10 output
    ];
    let mut model = Model {
        operands,
        operations: vec![
            Operation {
                operation_type: Op::Conv2d.raw(),
                inputs: vec![0, 1, 2, 3, 4, 5, 6],
                outputs: vec![7],
            },
            Operation {
                operation_type: Op::Add.raw(),
                inputs: vec![7, 8, 9],
                outputs: vec![10],
            },
        ],
        input_indexes: vec![0, 8],
        output_indexes: vec![10],
        operand_values: values,
        pools: Vec::new(),
        ..Model::default()
    };
    nnhal_vts::vector::model::count_consumers(&mut model);
    model
}

fn request_target() -> &'static Arc<PreparedModel> {
    static PREPARED: OnceLock<Arc<PreparedModel>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        driver()
            .prepare_model(request_target_model())
            .expect("the request target's model prepares")
    })
}

fn argument(b: &mut Bytes<'_>) -> RequestArgument {
    RequestArgument {
        has_no_value: b.u8() & 1 != 0,
        location: location(b),
        dimensions: {
            let rank = usize::from(b.u8()) % (MAX_RANK + 1);
            (0..rank).map(|_| b.u32()).collect()
        },
    }
}

fn put_argument(out: &mut Vec<u8>, a: &RequestArgument) {
    out.push(u8::from(a.has_no_value));
    put_location(out, &a.location);
    out.push(a.dimensions.len() as u8);
    for d in &a.dimensions {
        out.extend_from_slice(&d.to_le_bytes());
    }
}

/// Decodes a request (format: see [`request_to_bytes`]).
pub fn request_from_bytes(data: &[u8]) -> Request {
    let b = &mut Bytes::new(data);
    let inputs = (0..b.count(8)).map(|_| argument(b)).collect();
    let outputs = (0..b.count(8)).map(|_| argument(b)).collect();
    let pools = (0..b.count(MAX_POOLS)).filter_map(|_| pool(b)).collect();
    Request {
        inputs,
        outputs,
        pools,
    }
}

/// Encodes a request's arguments and, per pool, `(declared size, sealed, first bytes)`.
pub fn request_to_bytes(request: &Request, pools: &[(u32, bool, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for list in [&request.inputs, &request.outputs] {
        out.extend_from_slice(&(list.len() as u16).to_le_bytes());
        for a in list {
            put_argument(&mut out, a);
        }
    }
    out.extend_from_slice(&(pools.len() as u16).to_le_bytes());
    for (size, sealed, data) in pools {
        put_pool(&mut out, *size, *sealed, data);
    }
    out
}

/// Target (b): the fixed model executed with a decoded request, twice (the second run meets
/// the pool mappings the first one cached).
pub fn run_request(data: &[u8]) {
    let prepared = request_target();
    let request = request_from_bytes(data);
    let _ = prepared.execute(&request);
    let _ = prepared.execute(&request);
}

/// Target (e): the ONNX importer (decoder and lowering); a model it accepts must validate and
/// is prepared and run once in-process on a seeded random input when it is small.
pub fn run_onnx(data: &[u8]) {
    if let Ok(imported) = nnhal_onnx::import(data) {
        run_imported(imported);
    }
}

/// What targets (e) and (f) do with a model an importer accepted: it must validate, and when
/// small it is prepared and run once in-process on a seeded random input.
fn run_imported(imported: nnhal_hal::builder::ImportedModel) {
    assert!(nnhal_hal::validate::validate_model(&imported.model).is_ok());
    let elements: usize = imported
        .model
        .operands
        .iter()
        .map(|o| o.dimensions.iter().map(|&d| d as usize).product::<usize>())
        .sum();
    if elements > 1 << 16 {
        return;
    }
    let inputs: Vec<_> = imported
        .inputs
        .iter()
        .map(|e| crate::modelfile::random_input(e, 1))
        .collect();
    let Ok(request) = crate::modelfile::ModelRequest::new(&imported, &inputs) else {
        return;
    };
    if let Ok(prepared) = nnhal::Driver::new(1).and_then(|d| d.prepare_model(imported.model)) {
        let _ = prepared.execute(&request.request);
    }
}

/// Target (d): the golden-vector JSON loader, then the model and request built from it, in
/// both constant modes, run through the driver when they validate.
pub fn run_vector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(vector) = nnhal_vts::vector::Vector::from_json(text, std::path::Path::new("fuzz.json"))
    else {
        return;
    };
    for mode in [
        nnhal_vts::vector::model::ConstantMode::Copy,
        nnhal_vts::vector::model::ConstantMode::Reference,
    ] {
        let Ok(model) = nnhal_vts::vector::model::to_model(&vector, mode) else {
            continue;
        };
        if model.operand_values.len() > MAX_VALUES {
            continue;
        }
        let _ = driver().supported_operations(&model);
    }
}

/// Target (c): a live service on a Unix socket in this process, a client connected to it
/// over binder RPC, and one prepared model, so that raw transactions reach both stubs.
pub struct ParcelTarget {
    _server: nnhal::binder::RunningServer,
    device: nnhal::binder::RemoteDevice,
    prepared: nnhal::binder::RemotePreparedModel,
    _dir: std::path::PathBuf,
}

impl ParcelTarget {
    /// The process-wide target, started on first use.
    pub fn get() -> &'static ParcelTarget {
        static TARGET: OnceLock<ParcelTarget> = OnceLock::new();
        TARGET.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("nnhal-fuzz-{}", std::process::id()));
            let socket = dir.join("fuzz.sock");
            let server =
                nnhal::binder::serve(Arc::new(Driver::new(1).unwrap()), &socket, "default")
                    .expect("serve the fuzz target");
            let device = nnhal::binder::connect(&socket).expect("connect to the fuzz target");
            let prepared = device
                .prepare_model(nnhal_vts::probe::add_model())
                .expect("prepare the ADD probe");
            ParcelTarget {
                _server: server,
                device,
                prepared,
                _dir: dir,
            }
        })
    }

    /// Decodes transactions and sends each: one byte picks the object (bit 0) and whether a
    /// reply is awaited (bit 1), one byte the transaction code (offset from the first call
    /// code, so every method is reached), then pieces of parcel data: a kind byte, then raw
    /// bytes, an i32, a string, or a memfd of a given size written as a file descriptor.
    pub fn run(&self, data: &[u8]) {
        use nnhal::binder::RawPiece;
        let b = &mut Bytes::new(data);
        while !b.is_empty() {
            let target = b.u8();
            let code = nnhal::binder::FIRST_CALL_TRANSACTION.wrapping_add(u32::from(b.u8()) % 24);
            let mut pieces = Vec::new();
            for _ in 0..b.count(16) {
                pieces.push(match b.u8() % 4 {
                    0 => {
                        let n = b.count(256);
                        RawPiece::Bytes(b.take(n).to_vec())
                    }
                    1 => RawPiece::I32(b.i32()),
                    2 => {
                        let n = b.count(64);
                        RawPiece::String(String::from_utf8_lossy(b.take(n)).into_owned())
                    }
                    _ => match create_memfd(
                        "nnhal-fuzz-fd",
                        &[],
                        u64::from(b.u16()),
                        b.u8() & 1 != 0,
                    ) {
                        Ok(fd) => RawPiece::Fd(fd),
                        Err(_) => RawPiece::I32(-1),
                    },
                });
            }
            let one_way = target & 2 != 0;
            let _ = if target & 1 == 0 {
                self.device.send_raw(code, pieces, one_way)
            } else {
                self.prepared.send_raw(code, pieces, one_way)
            };
        }
        // Whatever came before, the service still answers.
        self.device
            .ping()
            .expect("the service answers after raw transactions");
    }
}

/// Target (f): the CoreML importer (decoder and lowering), as (e) for ONNX: a model it accepts
/// must validate and is run once in-process on a seeded random input when it is small.
pub fn run_coreml(data: &[u8]) {
    if let Ok(imported) = nnhal_coreml::import(data) {
        run_imported(imported);
    }
}

/// Target (g): the TensorFlow Lite importer (flatbuffer verifier, decoding and lowering), as (e)
/// for ONNX: a model it accepts must validate and is run once in-process on a seeded random
/// input when it is small.
pub fn run_tflite(data: &[u8]) {
    if let Ok(imported) = nnhal_tflite::import(data) {
        run_imported(imported);
    }
}

/// Target (h): the XModel importer (protobuf decoding, graph checks, lowering), as (g): a graph
/// it accepts must validate and is run once in-process on a seeded random input when small.
pub fn run_xmodel(data: &[u8]) {
    if let Ok(imported) = nnhal_xmodel::import(data, &nnhal_xmodel::Options::default()) {
        run_imported(imported);
    }
}
