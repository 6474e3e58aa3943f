//! TENSOR_FLOAT16 / FLOAT16 through the service over binder RPC, with request data in real
//! shared memory (memfd): per operation family, a model and its float16 twin (every float
//! operand retyped, constants narrowed) run on the same binary16-representable inputs, and the
//! twin's outputs must be exactly the float32 run's outputs rounded to binary16 (the driver
//! computes float16 in float32 and rounds each float16 result once, docs/hal-contract.md,
//! "Float16"). Inputs include values whose results leave the float16 range (to infinity) and
//! subnormals.

use half::f16;
use nnhal::hal::builder::ModelBuilder;
use nnhal::hal::memory::{create_memfd, MappedPool, Memory};
use nnhal::hal::OperandType::*;
use nnhal::hal::*;
use nnhal_vts::transport::{Device, InProcessDevice, RpcDevice, TransportOptions};
use std::path::PathBuf;

/// A float32 single-operation model, its float inputs and its output sizes in elements.
struct Case {
    name: &'static str,
    model: Model,
    inputs: Vec<Vec<f32>>,
    outputs: Vec<usize>,
}

/// Deterministic values on the binary16 grid in about ±`range`, with a subnormal and (when
/// `range` allows) values near the top of the range mixed in.
fn values(n: usize, seed: u32, range: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let v = match i % 11 {
                3 => 2f32.powi(-20), // subnormal in binary16
                7 if range >= 60000.0 => 61440.0,
                _ => (s % 20001) as f32 / 10000.0 - 1.0,
            };
            let v = if i % 11 == 7 { v } else { v * range.min(8.0) };
            f16::from_f32(v).to_f32()
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // elementwise: ADD, where 61440 + 61440 leaves the float16 range.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[2, 11]);
        let y = b.input(TensorFloat32, &[2, 11]);
        let act = b.int(0);
        let z = b.output(TensorFloat32, &[2, 11]);
        b.operation(OperationType::Add, &[x, y, act], &[z]);
        out.push(Case {
            name: "ADD",
            model: b.finish(),
            inputs: vec![values(22, 1, 65504.0), values(22, 1, 65504.0)],
            outputs: vec![22],
        });
    }
    // conv: CONV_2D with constant filter and bias, SAME padding, RELU.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[1, 4, 4, 2]);
        let w = b.f32_tensor(&[3, 2, 2, 2], &values(24, 2, 1.0));
        let bias = b.f32_tensor(&[3], &values(3, 3, 1.0));
        let [pad, sw, sh, act] = [1, 1, 1, 1].map(|v| b.int(v));
        let z = b.output(TensorFloat32, &[1, 4, 4, 3]);
        b.operation(OperationType::Conv2d, &[x, w, bias, pad, sw, sh, act], &[z]);
        out.push(Case {
            name: "CONV_2D",
            model: b.finish(),
            inputs: vec![values(32, 4, 4.0)],
            outputs: vec![48],
        });
    }
    // pool: AVERAGE_POOL_2D 2×2, stride 2.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[1, 4, 4, 2]);
        let [pad, sw, sh, fw, fh, act] = [2, 2, 2, 2, 2, 0].map(|v| b.int(v));
        let z = b.output(TensorFloat32, &[1, 2, 2, 2]);
        b.operation(
            OperationType::AveragePool2d,
            &[x, pad, sw, sh, fw, fh, act],
            &[z],
        );
        out.push(Case {
            name: "AVERAGE_POOL_2D",
            model: b.finish(),
            inputs: vec![values(32, 5, 8.0)],
            outputs: vec![8],
        });
    }
    // normalization: SOFTMAX with a FLOAT16 beta in the twin.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[2, 5]);
        let beta = b.float(0.5);
        let z = b.output(TensorFloat32, &[2, 5]);
        b.operation(OperationType::Softmax, &[x, beta], &[z]);
        out.push(Case {
            name: "SOFTMAX",
            model: b.finish(),
            inputs: vec![values(10, 6, 8.0)],
            outputs: vec![10],
        });
    }
    // transform: RESIZE_BILINEAR to 3×3.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[1, 2, 2, 1]);
        let [w, h] = [3, 3].map(|v| b.int(v));
        let z = b.output(TensorFloat32, &[1, 3, 3, 1]);
        b.operation(OperationType::ResizeBilinear, &[x, w, h], &[z]);
        out.push(Case {
            name: "RESIZE_BILINEAR",
            model: b.finish(),
            inputs: vec![values(4, 7, 8.0)],
            outputs: vec![9],
        });
    }
    // math: EXP, which overflows the float16 range from about 11.1 on.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[12]);
        let z = b.output(TensorFloat32, &[12]);
        b.operation(OperationType::Exp, &[x], &[z]);
        let mut inputs = values(12, 8, 8.0);
        inputs[0] = 11.5;
        out.push(Case {
            name: "EXP",
            model: b.finish(),
            inputs: vec![inputs],
            outputs: vec![12],
        });
    }
    // logic: LESS to TENSOR_BOOL8.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[9]);
        let y = b.input(TensorFloat32, &[9]);
        let z = b.output(TensorBool8, &[9]);
        b.operation(OperationType::Less, &[x, y], &[z]);
        out.push(Case {
            name: "LESS",
            model: b.finish(),
            inputs: vec![values(9, 9, 2.0), values(9, 10, 2.0)],
            outputs: vec![9],
        });
    }
    // reduce: MEAN over axis 1.
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[2, 3, 4]);
        let axes = b.i32_tensor(&[1], &[1], 0.0);
        let keep = b.int(0);
        let z = b.output(TensorFloat32, &[2, 4]);
        b.operation(OperationType::Mean, &[x, axes, keep], &[z]);
        out.push(Case {
            name: "MEAN",
            model: b.finish(),
            inputs: vec![values(24, 11, 8.0)],
            outputs: vec![8],
        });
    }
    // quantize: QUANTIZE from float16 (a mixed signature).
    {
        let mut b = ModelBuilder::new();
        let x = b.input(TensorFloat32, &[10]);
        let z = b.output(TensorQuant8Asymm, &[10]);
        b.operation(OperationType::Quantize, &[x], &[z]);
        let mut m = b.finish();
        m.operands[z as usize].scale = 0.05;
        m.operands[z as usize].zero_point = 100;
        out.push(Case {
            name: "QUANTIZE",
            model: m,
            inputs: vec![values(10, 12, 4.0)],
            outputs: vec![10],
        });
    }
    out
}

/// The float16 twin of a float32 model: every float operand retyped, constants narrowed.
fn twin(m: &Model) -> Model {
    let mut t = m.clone();
    for o in &mut t.operands {
        let ty = OperandType::from_raw(o.operand_type);
        let wide = match ty {
            Some(TensorFloat32) => TensorFloat16,
            Some(Float32) => Float16,
            _ => continue,
        };
        o.operand_type = wide.raw();
        if o.lifetime == OperandLifeTime::ConstantCopy.raw() {
            let loc = o.location;
            let bytes = &m.operand_values[loc.offset as usize..loc.end() as usize];
            let narrow: Vec<u8> = bytes
                .chunks_exact(4)
                .flat_map(|c| {
                    f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes()
                })
                .collect();
            o.location = nnhal::hal::builder::append_constant(&mut t.operand_values, &narrow);
        }
    }
    t
}

/// Encodes `values` as `ty` request bytes.
fn encode(ty: OperandType, values: &[f32]) -> Vec<u8> {
    match ty {
        TensorFloat16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// Runs `m` on `inputs` (encoded for its input types); each output's bytes.
fn run(device: &dyn Device, m: &Model, inputs: &[Vec<f32>], outputs: &[usize]) -> Vec<Vec<u8>> {
    let ty = |i: u32| OperandType::from_raw(m.operands[i as usize].operand_type).unwrap();
    assert!(
        device.supported_operations(m).unwrap().iter().all(|&s| s),
        "every operation runs"
    );
    let prepared = device.prepare_model(m.clone()).unwrap();
    let mut pools = Vec::new();
    let mut arg = |bytes: &[u8], len: u64, writable: bool| {
        pools.push(Memory::shared(
            create_memfd("arg", bytes, len, !writable).unwrap(),
            len,
        ));
        RequestArgument {
            has_no_value: false,
            location: DataLocation {
                pool_index: pools.len() as u32 - 1,
                offset: 0,
                length: len as u32,
            },
            dimensions: vec![],
        }
    };
    let ins: Vec<RequestArgument> = m
        .input_indexes
        .iter()
        .zip(inputs)
        .map(|(&i, v)| {
            let bytes = encode(ty(i), v);
            arg(&bytes, bytes.len() as u64, false)
        })
        .collect();
    let sizes: Vec<u64> = m
        .output_indexes
        .iter()
        .zip(outputs)
        .map(|(&i, &n)| (n * ty(i).element_size().unwrap()) as u64)
        .collect();
    let outs: Vec<RequestArgument> = sizes.iter().map(|&n| arg(&[], n, true)).collect();
    let request = Request {
        inputs: ins,
        outputs: outs,
        pools: pools.clone(),
    };
    prepared.execute(&request).unwrap();
    let first = pools.len() - sizes.len();
    sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            MappedPool::map(&pools[first + k], "out")
                .unwrap()
                .read_vec(0, n as usize)
                .unwrap()
        })
        .collect()
}

/// The float32 run's output narrowed to what the twin must return.
fn expected_twin_output(ty: OperandType, float32: &[u8]) -> Vec<u8> {
    match ty {
        TensorFloat32 => float32
            .chunks_exact(4)
            .flat_map(|c| f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
            .collect(),
        _ => float32.to_vec(),
    }
}

fn check_every_family(device: &dyn Device) {
    for case in cases() {
        let half_model = twin(&case.model);
        // The inputs are on the binary16 grid, so both runs see the same values.
        let wide = run(device, &case.model, &case.inputs, &case.outputs);
        let narrow = run(device, &half_model, &case.inputs, &case.outputs);
        for (k, (w, n)) in wide.iter().zip(&narrow).enumerate() {
            let o = case.model.output_indexes[k] as usize;
            let ty = OperandType::from_raw(case.model.operands[o].operand_type).unwrap();
            assert_eq!(
                *n,
                expected_twin_output(ty, w),
                "{}: output {k} of the float16 twin",
                case.name
            );
        }
        if case.name == "ADD" {
            // 61440 + 61440 is beyond 65504: infinity in float16, finite in float32.
            let inf = f16::INFINITY.to_le_bytes();
            assert!(narrow[0].chunks_exact(2).any(|c| c == inf));
        }
    }
}

#[test]
fn float16_twins_match_float32_rounded_over_binder() {
    let device = RpcDevice::open(&TransportOptions {
        threads: 2,
        service: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
        ..TransportOptions::default()
    })
    .expect("start nnhal-service and connect");
    check_every_family(&device);
}

#[test]
fn float16_twins_match_float32_rounded_in_process() {
    check_every_family(&InProcessDevice::new(2).unwrap());
}

#[test]
fn lsh_projection_of_a_float16_input_is_not_claimed() {
    // LSH_PROJECTION hashes its input's bytes, 2 an element for float16: its float32 image
    // would hash other bytes, so the driver says it does not run it.
    let mut b = ModelBuilder::new();
    let hash = b.f32_tensor(&[4, 2], &values(8, 13, 1.0));
    let x = b.input(TensorFloat32, &[3, 2]);
    let w = b.f32_tensor(&[3], &[1.0, 1.0, 1.0]);
    let kind = b.int(2);
    let z = b.output(TensorInt32, &[4]);
    b.operation(OperationType::LshProjection, &[hash, x, w, kind], &[z]);
    let m = twin(&b.finish());
    let device = InProcessDevice::new(1).unwrap();
    assert_eq!(device.supported_operations(&m).unwrap(), vec![false]);
    // Valid, so not INVALID_ARGUMENT; not run, so preparation fails as the interface says a
    // driver refuses what it does not support.
    let driver = nnhal::driver::Driver::new(1).unwrap();
    let err = driver.prepare_model(m).err().expect("prepared");
    assert_eq!(
        err.status(),
        nnhal::hal::ErrorStatus::GeneralFailure,
        "{err}"
    );
}
