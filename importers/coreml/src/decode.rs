//! From bytes to checked CoreML values: the `Model` decode with a size bound on the file, and
//! `WeightParams` → float32 values (float32, float16, and 1- to 8-bit linear or lookup-table
//! quantized, bit-packed `rawValue` dequantized at import), with every count checked against the bytes really there before allocating.

use crate::proto;
use crate::CoremlError;
use prost::Message;

/// Largest file read (1 GiB): far above the weights of any model a phone runs.
pub const MAX_FILE_BYTES: usize = 1 << 30;
/// Largest element count of any tensor built from a layer's parameters.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// Decodes a CoreML `Model`.
pub fn model(bytes: &[u8]) -> Result<proto::Model, CoremlError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(CoremlError::Malformed(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let model = proto::Model::decode(bytes)
        .map_err(|e| CoremlError::Malformed(format!("not a CoreML Model message: {e}")))?;
    if model.description.is_none() {
        return Err(CoremlError::Malformed(
            "the Model has no description (is this a .mlmodel file?)".into(),
        ));
    }
    Ok(model)
}

/// The element count of `dims`, refused beyond [`MAX_ELEMENTS`].
pub fn element_count(dims: &[usize]) -> Result<usize, String> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("dimensions {dims:?} claim more than {MAX_ELEMENTS} elements"))
}

/// The `count` float values of a weight; `rows` is the number of output channels a per-channel
/// linear quantization scale/bias may have (1 for a per-tensor one).
pub fn weights(
    w: Option<&proto::WeightParams>,
    count: usize,
    rows: usize,
) -> Result<Vec<f32>, String> {
    let w = w.ok_or("weights missing")?;
    if count > MAX_ELEMENTS {
        return Err(format!("{count} weights: more than {MAX_ELEMENTS}"));
    }
    let sources = [
        !w.float_value.is_empty(),
        !w.float16_value.is_empty(),
        !w.raw_value.is_empty(),
        !w.int8_raw_value.is_empty(),
    ];
    if sources.iter().filter(|&&s| s).count() > 1 {
        return Err("weights stored in more than one form".into());
    }
    if !w.float_value.is_empty() {
        if w.float_value.len() != count {
            return Err(format!(
                "{} float weights, the layer needs {count}",
                w.float_value.len()
            ));
        }
        return Ok(w.float_value.clone());
    }
    if !w.float16_value.is_empty() {
        if w.float16_value.len() != 2 * count {
            return Err(format!(
                "{} bytes of float16 weights, the layer needs {count} values",
                w.float16_value.len()
            ));
        }
        return Ok(w
            .float16_value
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect());
    }
    if !w.int8_raw_value.is_empty() {
        return Err(
            "int8 weights (int8RawValue, for dynamic quantization) are not supported".into(),
        );
    }
    if w.raw_value.is_empty() {
        if count == 0 {
            return Ok(Vec::new());
        }
        return Err(format!("no weight values, the layer needs {count}"));
    }
    let q = w
        .quantization
        .as_ref()
        .ok_or("rawValue weights without quantization parameters")?;
    let bits = q.number_of_bits;
    if !(1..=8).contains(&bits) {
        return Err(format!(
            "{bits}-bit quantized weights (numberOfBits is 1 to 8)"
        ));
    }
    let bits = bits as usize;
    // `count · bits` bits, the last byte zero-filled: checked before anything is unpacked.
    let need = count
        .checked_mul(bits)
        .map(|b| b.div_ceil(8))
        .ok_or("the packed weight size overflows")?;
    if w.raw_value.len() != need {
        return Err(format!(
            "{} bytes of {bits}-bit weights, the layer's {count} values need {need}",
            w.raw_value.len()
        ));
    }
    let codes = unpack(&w.raw_value, bits, count);
    use proto::quantization_params::QuantizationType;
    match &q.quantization_type {
        Some(QuantizationType::LinearQuantization(l)) => {
            let per = |v: &[f32], what: &str| -> Result<(), String> {
                if v.len() == 1 || (v.len() == rows && rows > 0) {
                    Ok(())
                } else {
                    Err(format!(
                        "{} linear quantization {what} values for {rows} output channels",
                        v.len()
                    ))
                }
            };
            per(&l.scale, "scale")?;
            per(&l.bias, "bias")?;
            let stride = count / rows.max(1);
            Ok(codes
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    let r = i.checked_div(stride).unwrap_or(0);
                    let s = l.scale[if l.scale.len() == 1 { 0 } else { r }];
                    let o = l.bias[if l.bias.len() == 1 { 0 } else { r }];
                    s * f32::from(b) + o
                })
                .collect())
        }
        Some(QuantizationType::LookupTableQuantization(t)) => {
            if t.float_value.len() != 1 << bits {
                return Err(format!(
                    "a {bits}-bit lookup table of {} values ({} needed)",
                    t.float_value.len(),
                    1 << bits
                ));
            }
            Ok(codes
                .iter()
                .map(|&b| t.float_value[usize::from(b)])
                .collect())
        }
        None => Err("quantized weights without a quantization type".into()),
    }
}

/// The first `count` unsigned `bits`-wide codes of `raw`, packed most significant bit first
/// (CoreML's `rawValue` of an N-bit quantization: code 0 starts at bit 7 of byte 0 and a code
/// may straddle two bytes). The caller checked `raw` holds `count · bits` bits.
fn unpack(raw: &[u8], bits: usize, count: usize) -> Vec<u8> {
    if bits == 8 {
        return raw[..count].to_vec();
    }
    (0..count)
        .map(|i| {
            let start = i * bits;
            (start..start + bits).fold(0u8, |code, bit| {
                let set = raw[bit / 8] >> (7 - bit % 8) & 1;
                (code << 1) | set
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::unpack;

    #[test]
    fn codes_are_unpacked_most_significant_bit_first_across_bytes() {
        // 3-bit codes 5, 3, 7, 0, 6 = 101 011 111 000 110 (+ one zero bit).
        let raw = [0b1010_1111, 0b1000_1100];
        assert_eq!(unpack(&raw, 3, 5), vec![5, 3, 7, 0, 6]);
        assert_eq!(unpack(&[0b1001_0110], 1, 8), vec![1, 0, 0, 1, 0, 1, 1, 0]);
        assert_eq!(unpack(&[0xB4], 2, 4), vec![2, 3, 1, 0]);
        assert_eq!(unpack(&[0x7F, 0x0A], 4, 3), vec![7, 15, 0]);
    }
}
