//! Test support: reads the golden conformance vectors (vts_tests/vectors) straight from JSON so
//! each kernel family can be checked against the goldens without the driver.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

pub struct Operand {
    pub ty: String,
    pub dims: Vec<usize>,
    pub scale: f32,
    pub zero_point: i32,
    pub lifetime: String,
    pub value: Option<Vec<f64>>,
}

pub struct Operation {
    pub ty: String,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

/// One example, keyed by operand index (not by position in the model's input/output lists).
pub struct Example {
    pub inputs: HashMap<usize, Vec<f64>>,
    pub outputs: HashMap<usize, Vec<f64>>,
}

pub struct Vector {
    pub name: String,
    pub operands: Vec<Operand>,
    pub operations: Vec<Operation>,
    pub input_indexes: Vec<usize>,
    pub output_indexes: Vec<usize>,
    pub examples: Vec<Example>,
    /// Operand indexes of outputs the harness does not compare.
    pub ignored: Vec<usize>,
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn idx(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

impl Vector {
    pub fn load(name: &str) -> Vector {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../vts_tests/vectors")
            .join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let j: Value = serde_json::from_str(&text).unwrap();
        let m = &j["model"];
        let operands = m["operands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| Operand {
                ty: o["type"].as_str().unwrap().to_string(),
                dims: idx(&o["dimensions"]),
                scale: o["scale"].as_f64().unwrap() as f32,
                zero_point: o["zeroPoint"].as_i64().unwrap() as i32,
                lifetime: o["lifetime"].as_str().unwrap().to_string(),
                value: if o["value"].is_null() {
                    None
                } else {
                    Some(nums(&o["value"]))
                },
            })
            .collect();
        let operations = m["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| Operation {
                ty: o["type"].as_str().unwrap().to_string(),
                inputs: idx(&o["inputs"]),
                outputs: idx(&o["outputs"]),
            })
            .collect();
        let input_indexes = idx(&m["inputIndexes"]);
        let output_indexes = idx(&m["outputIndexes"]);
        let keyed = |obj: &Value, list: &[usize]| -> HashMap<usize, Vec<f64>> {
            obj.as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (list[k.parse::<usize>().unwrap()], nums(v)))
                .collect()
        };
        let examples = j["examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| Example {
                inputs: keyed(&e["inputs"], &input_indexes),
                outputs: keyed(&e["outputs"], &output_indexes),
            })
            .collect();
        let ignored = idx(&j["tolerance"]["ignoredOutputs"])
            .into_iter()
            .map(|p| output_indexes[p])
            .collect();
        Vector {
            name: name.to_string(),
            operands,
            operations,
            input_indexes,
            output_indexes,
            examples,
            ignored,
        }
    }

    /// The values of operand `i` in example `ex`: its constant value, or the example's input.
    /// `None` for an omitted (NO_VALUE) operand.
    pub fn value<'a>(&'a self, ex: &'a Example, i: usize) -> Option<&'a [f64]> {
        self.operands[i]
            .value
            .as_deref()
            .or_else(|| ex.inputs.get(&i).map(|v| v.as_slice()))
    }

    pub fn f32s(&self, ex: &Example, i: usize) -> Vec<f32> {
        self.value(ex, i)
            .unwrap()
            .iter()
            .map(|&x| x as f32)
            .collect()
    }

    pub fn u8s(&self, ex: &Example, i: usize) -> Vec<u8> {
        self.value(ex, i)
            .unwrap()
            .iter()
            .map(|&x| x as u8)
            .collect()
    }

    pub fn i32s(&self, ex: &Example, i: usize) -> Vec<i32> {
        self.value(ex, i)
            .unwrap()
            .iter()
            .map(|&x| x as i32)
            .collect()
    }

    pub fn scalar_i32(&self, ex: &Example, i: usize) -> i32 {
        self.value(ex, i).unwrap()[0] as i32
    }

    pub fn scalar_f32(&self, ex: &Example, i: usize) -> f32 {
        self.value(ex, i).unwrap()[0] as f32
    }
}

/// The harness's float rule: |expected − actual| ≤ 1e-5 + 5·FLT_EPSILON·|expected|, in float32.
pub fn assert_f32_close(what: &str, expected: &[f64], actual: &[f32]) {
    assert_eq!(expected.len(), actual.len(), "{what}: length");
    let mut bad = 0;
    for (i, (&e, &a)) in expected.iter().zip(actual).enumerate() {
        let e = e as f32;
        if (e - a).abs() > 1e-5 + 5.960_464_5e-7 * e.abs() || a.is_nan() {
            if bad < 10 {
                eprintln!("{what}[{i}]: expected {e}, got {a}");
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{what}: {bad} elements out of tolerance");
}

/// The harness's quant8 rule (±1); returns how many elements matched exactly.
pub fn assert_u8_close(what: &str, expected: &[f64], actual: &[u8]) -> usize {
    assert_eq!(expected.len(), actual.len(), "{what}: length");
    let mut bad = 0;
    let mut exact = 0;
    for (i, (&e, &a)) in expected.iter().zip(actual).enumerate() {
        let d = (e as i32 - i32::from(a)).abs();
        if d == 0 {
            exact += 1;
        }
        if d > 1 {
            if bad < 10 {
                eprintln!("{what}[{i}]: expected {e}, got {a}");
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{what}: {bad} elements out of tolerance");
    if exact != expected.len() {
        eprintln!("{what}: {exact}/{} exact", expected.len());
    }
    exact
}

pub fn assert_i32_exact(what: &str, expected: &[f64], actual: &[i32]) {
    let expected: Vec<i32> = expected.iter().map(|&x| x as i32).collect();
    assert_eq!(expected, actual, "{what}");
}
