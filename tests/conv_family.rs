//! GROUPED_CONV_2D, TRANSPOSE_CONV_2D and INSTANCE_NORMALIZATION through the driver:
//! `getSupportedOperations` answers `true` for the forms that run (per-tensor and per-channel
//! filters) and preparation succeeds on them.

use nnhal::hal::builder::ModelBuilder;
use nnhal::hal::*;
use nnhal::Driver;

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// GROUPED_CONV_2D, explicit padding 0, stride 1, on a [1, 3, 3, 4] input with `groups`
/// groups and 6 output channels.
fn grouped(groups: i32, ty: OperandType, per_channel_dim: Option<u32>) -> Model {
    let mut b = ModelBuilder::new();
    let x = b.input(ty, &[1, 3, 3, 4]);
    let depth = (4 / groups.max(1)) as u32;
    let (filter, bias) = if ty == OperandType::TensorFloat32 {
        let f = b.f32_tensor(&[6, 1, 1, depth], &vec![0.5; 6 * depth as usize]);
        (f, b.f32_tensor(&[6], &[0.0; 6]))
    } else {
        b.operand_mut(x).scale = 0.5;
        let f = match per_channel_dim {
            Some(dim) => {
                let mut o = Operand::new(
                    OperandType::TensorQuant8SymmPerChannel,
                    &[6, 1, 1, depth],
                    OperandLifeTime::ConstantCopy,
                );
                o.channel_quant = Some(ChannelQuant {
                    scales: vec![0.25; [6, 1, 1, depth as usize][dim as usize]],
                    channel_dim: dim,
                });
                b.constant_operand(o, &vec![3u8; 6 * depth as usize])
            }
            None => b.u8_tensor(&[6, 1, 1, depth], &vec![130; 6 * depth as usize], 0.25, 128),
        };
        (f, b.i32_tensor(&[6], &[10; 6], 0.125))
    };
    let scalars: Vec<u32> = [0, 0, 0, 0, 1, 1, groups, 0].map(|v| b.int(v)).to_vec();
    let layout = b.constant(OperandType::Bool, &[], &[0]);
    let y = b.output(ty, &[1, 3, 3, 6]);
    if ty != OperandType::TensorFloat32 {
        b.operand_mut(y).scale = 1.0;
    }
    let mut ins = vec![x, filter, bias];
    ins.extend(scalars);
    ins.push(layout);
    b.operation(OperationType::GroupedConv2d, &ins, &[y]);
    b.finish()
}

/// TRANSPOSE_CONV_2D with the output-shape tensor `shape`, SAME padding, stride 2.
fn transpose(shape: &[i32]) -> Model {
    let mut b = ModelBuilder::new();
    let x = b.input(OperandType::TensorFloat32, &[1, 2, 2, 1]);
    let f = b.f32_tensor(&[1, 3, 3, 1], &[1.0; 9]);
    let bias = b.f32_tensor(&[1], &[0.0]);
    let s = b.constant(
        OperandType::TensorInt32,
        &[shape.len() as u32],
        &i32_bytes(shape),
    );
    let scalars: Vec<u32> = [1, 2, 2, 0].map(|v| b.int(v)).to_vec();
    let layout = b.constant(OperandType::Bool, &[], &[0]);
    let y = b.output(OperandType::TensorFloat32, &[0, 0, 0, 0]);
    let mut ins = vec![x, f, bias, s];
    ins.extend(scalars);
    ins.push(layout);
    b.operation(OperationType::TransposeConv2d, &ins, &[y]);
    b.finish()
}

#[test]
fn the_forms_that_run_are_supported_and_prepare() {
    let driver = Driver::new(1).unwrap();
    for model in [
        grouped(2, OperandType::TensorFloat32, None),
        grouped(2, OperandType::TensorQuant8Asymm, None),
        grouped(4, OperandType::TensorQuant8Asymm, Some(0)),
        grouped(1, OperandType::TensorQuant8AsymmSigned, Some(0)),
        transpose(&[1, 4, 4, 1]),
    ] {
        assert_eq!(driver.supported_operations(&model).unwrap(), vec![true]);
        driver.prepare_model(model).expect("prepares");
    }
}
