//! Optional load-time rewrite of the ONNX graph: every 4-bit `com.microsoft::MatMulNBits`
//! becomes a plain `MatMul` on a float32 weight (plus an `Add` for its bias).
//!
//! tract keeps a `MatMulNBits` weight 4-bit in memory and unpacks it inside the matmul on every
//! run; a float32 constant is packed once at optimisation time and then runs tract's fastest
//! kernels. The weights are identical (`(q − z) · s` is exact in f32 because the scales are
//! f16 values), only the summation order differs, so vectors agree to ~1e-6. Cost: the linear
//! layers take 4 bytes per weight instead of ~0.56 (≈ +75 MB for e5-small). The word-embedding
//! table (`GatherBlockQuantized`) is left 4-bit: a lookup does not benefit.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb;
use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::prelude::f16;

use crate::EmbedError;

fn err(msg: impl Into<String>) -> EmbedError {
    EmbedError::Model(format!("dequantizing MatMulNBits: {}", msg.into()))
}

fn attr_i(node: &pb::NodeProto, name: &str) -> Option<i64> {
    node.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

/// Bytes of a UINT8 tensor.
fn u8_data(t: &pb::TensorProto) -> Result<Vec<u8>, EmbedError> {
    if t.data_type != DataType::Uint8 as i32 {
        return Err(err(format!(
            "{}: expected UINT8, got data_type {}",
            t.name, t.data_type
        )));
    }
    if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        return Err(err(format!("{}: external data is not supported", t.name)));
    }
    if !t.raw_data.is_empty() {
        Ok(t.raw_data.clone())
    } else {
        Ok(t.int32_data.iter().map(|&v| v as u8).collect())
    }
}

/// Values of a FLOAT or FLOAT16 tensor, as f32.
fn f32_data(t: &pb::TensorProto) -> Result<Vec<f32>, EmbedError> {
    if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        return Err(err(format!("{}: external data is not supported", t.name)));
    }
    if t.data_type == DataType::Float as i32 {
        if !t.raw_data.is_empty() {
            Ok(t.raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        } else {
            Ok(t.float_data.clone())
        }
    } else if t.data_type == DataType::Float16 as i32 {
        if !t.raw_data.is_empty() {
            Ok(t.raw_data
                .chunks_exact(2)
                .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect())
        } else {
            Ok(t.int32_data
                .iter()
                .map(|&v| f16::from_bits(v as u16).to_f32())
                .collect())
        }
    } else {
        Err(err(format!(
            "{}: expected FLOAT or FLOAT16 scales, got data_type {}",
            t.name, t.data_type
        )))
    }
}

/// Rewrites the 4-bit `MatMulNBits` nodes of `proto` into float32 `MatMul` (+ `Add`) nodes and
/// drops the then-unused quantized initializers. Returns how many nodes were rewritten. Nodes
/// this does not understand (other bit widths, `g_idx`, non-constant weights) are left as they
/// are for tract to run.
pub(crate) fn dequantize_matmul_nbits(proto: &mut pb::ModelProto) -> Result<usize, EmbedError> {
    let graph = proto
        .graph
        .as_mut()
        .ok_or_else(|| err("model has no graph"))?;
    let index: HashMap<String, usize> = graph
        .initializer
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let mut new_inits: Vec<pb::TensorProto> = Vec::new();
    let mut maybe_unused: HashSet<String> = HashSet::new();
    let mut nodes = Vec::with_capacity(graph.node.len() + 64);
    let mut rewritten = 0;

    for node in std::mem::take(&mut graph.node) {
        let input = |i: usize| node.input.get(i).filter(|s| !s.is_empty());
        let simple = node.op_type == "MatMulNBits"
            && node.domain == "com.microsoft"
            && attr_i(&node, "bits").unwrap_or(4) == 4
            && input(4).is_none() // g_idx
            && input(1).is_some_and(|n| index.contains_key(n))
            && input(2).is_some_and(|n| index.contains_key(n))
            && input(3).is_none_or(|n| index.contains_key(n));
        if !simple {
            nodes.push(node);
            continue;
        }
        // Attributes come from the model file: negative or overflowing sizes are errors,
        // not `as usize` wrap-arounds that would size the allocation below.
        let size = |name: &str| {
            let v = attr_i(&node, name).ok_or_else(|| err(format!("missing {name}")))?;
            usize::try_from(v).map_err(|_| err(format!("{}: {name} = {v}", node.name)))
        };
        let (k, n, bs) = (size("K")?, size("N")?, size("block_size")?);
        if bs == 0 || !bs.is_multiple_of(2) {
            return Err(err(format!("{}: block_size {bs}", node.name)));
        }
        let n_blocks = k.div_ceil(bs);
        let blob = bs / 2;
        let too_big = || {
            err(format!(
                "{}: N={n} K={k} block_size={bs} overflow",
                node.name
            ))
        };
        let n_scales = n.checked_mul(n_blocks).ok_or_else(too_big)?;
        let n_bytes = n_scales.checked_mul(blob).ok_or_else(too_big)?;
        let n_weights = k.checked_mul(n).ok_or_else(too_big)?;
        let b_name = input(1).unwrap().clone();
        let s_name = input(2).unwrap().clone();
        let b = u8_data(&graph.initializer[index[&b_name]])?;
        let scales = f32_data(&graph.initializer[index[&s_name]])?;
        let zp = match input(3) {
            Some(z) => Some(u8_data(&graph.initializer[index[z]])?),
            None => None,
        };
        if b.len() != n_bytes || scales.len() != n_scales {
            return Err(err(format!(
                "{}: weight of {} bytes / {} scales does not fit N={n} K={k} block_size={bs}",
                node.name,
                b.len(),
                scales.len()
            )));
        }
        let zp_row = n_blocks.div_ceil(2);
        if let Some(z) = &zp {
            if Some(z.len()) != n.checked_mul(zp_row) {
                return Err(err(format!(
                    "{}: zero points of {} bytes do not fit N={n} K={k} block_size={bs}",
                    node.name,
                    z.len()
                )));
            }
        }
        // W^T, row-major [K, N]: ONNX MatMul computes A[.., K] x W^T[K, N].
        let mut wt = vec![0f32; n_weights];
        for col in 0..n {
            for blk in 0..n_blocks {
                let scale = scales[col * n_blocks + blk];
                let zero = match &zp {
                    Some(z) => ((z[col * zp_row + blk / 2] >> (4 * (blk % 2))) & 0xF) as f32,
                    None => 8.0,
                };
                let row = &b[(col * n_blocks + blk) * blob..][..blob];
                for i in 0..bs {
                    let kk = blk * bs + i;
                    if kk >= k {
                        break;
                    }
                    let q = (row[i / 2] >> (4 * (i % 2))) & 0xF;
                    wt[kk * n + col] = (q as f32 - zero) * scale;
                }
            }
        }
        let w_name = format!("{b_name}.f32_t");
        new_inits.push(pb::TensorProto {
            name: w_name.clone(),
            dims: vec![k as i64, n as i64],
            data_type: DataType::Float as i32,
            raw_data: wt.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        });
        maybe_unused.insert(b_name);
        maybe_unused.insert(s_name);
        if let Some(z) = input(3) {
            maybe_unused.insert(z.clone());
        }
        let out = node.output[0].clone();
        let a = node.input[0].clone();
        match input(5) {
            Some(bias) => {
                let tmp = format!("{out}.matmul");
                nodes.push(pb::NodeProto {
                    input: vec![a, w_name],
                    output: vec![tmp.clone()],
                    name: format!("{}.matmul", node.name),
                    op_type: "MatMul".into(),
                    ..Default::default()
                });
                nodes.push(pb::NodeProto {
                    input: vec![tmp, bias.clone()],
                    output: vec![out],
                    name: format!("{}.bias", node.name),
                    op_type: "Add".into(),
                    ..Default::default()
                });
            }
            None => nodes.push(pb::NodeProto {
                input: vec![a, w_name],
                output: vec![out],
                name: format!("{}.matmul", node.name),
                op_type: "MatMul".into(),
                ..Default::default()
            }),
        }
        rewritten += 1;
    }
    graph.node = nodes;

    // Drop quantized initializers nothing reads any more (and their graph-input entries, which
    // older exporters list for every initializer).
    let used: HashSet<&String> = graph.node.iter().flat_map(|n| n.input.iter()).collect();
    let dead: HashSet<String> = maybe_unused
        .into_iter()
        .filter(|n| !used.contains(n))
        .collect();
    graph.initializer.retain(|t| !dead.contains(&t.name));
    graph.input.retain(|v| !dead.contains(&v.name));
    graph.initializer.extend(new_inits);
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(name: &str, data_type: DataType, raw: Vec<u8>) -> pb::TensorProto {
        pb::TensorProto {
            name: name.into(),
            data_type: data_type as i32,
            raw_data: raw,
            ..Default::default()
        }
    }

    /// A model of one MatMulNBits node: weight `w` (UINT8), f32 scales `s`, zero points
    /// `z` if given, with attributes K, N, block_size.
    fn model(k: i64, n: i64, bs: i64, w: usize, s: usize, z: Option<usize>) -> pb::ModelProto {
        let attr = |name: &str, i: i64| pb::AttributeProto {
            name: name.into(),
            i,
            ..Default::default()
        };
        let mut inputs = vec!["a".to_string(), "w".into(), "s".into()];
        let mut initializer = vec![
            init("w", DataType::Uint8, vec![0x88; w]),
            init("s", DataType::Float, 1f32.to_le_bytes().repeat(s)),
        ];
        if let Some(z) = z {
            inputs.push("z".into());
            initializer.push(init("z", DataType::Uint8, vec![0x88; z]));
        }
        pb::ModelProto {
            graph: Some(pb::GraphProto {
                node: vec![pb::NodeProto {
                    name: "mm".into(),
                    op_type: "MatMulNBits".into(),
                    domain: "com.microsoft".into(),
                    input: inputs,
                    output: vec!["y".into()],
                    attribute: vec![
                        attr("K", k),
                        attr("N", n),
                        attr("block_size", bs),
                        attr("bits", 4),
                    ],
                    ..Default::default()
                }],
                initializer,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_well_formed_node_is_rewritten() {
        // K=4, N=2, block 4: one block per column, 2 bytes a block, one zero-point byte a column.
        let mut m = model(4, 2, 4, 4, 2, Some(2));
        assert_eq!(dequantize_matmul_nbits(&mut m).unwrap(), 1);
    }

    #[test]
    fn negative_or_overflowing_sizes_are_named_errors() {
        // Before: `K as usize` wrapped and the sizes were multiplied unchecked (wrapping in
        // release builds); the mismatch check caught these two, naming the wrong cause.
        let mut m = model(-1, 2, 4, 4, 2, None);
        let e = dequantize_matmul_nbits(&mut m).unwrap_err().to_string();
        assert!(e.contains("K = -1"), "{e}");
        // Sizes whose product overflows usize are refused before allocating.
        let mut m = model(i64::MAX, i64::MAX, 2, 4, 2, None);
        assert!(dequantize_matmul_nbits(&mut m).is_err());
    }

    #[test]
    fn short_zero_points_indexed_out_of_bounds() {
        // Two columns need two zero-point bytes; one given used to panic on column 1.
        let mut m = model(4, 2, 4, 4, 2, Some(1));
        let e = dequantize_matmul_nbits(&mut m).unwrap_err().to_string();
        assert!(e.contains("zero points of 1 bytes"), "{e}");
    }
}
