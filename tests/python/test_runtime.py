"""tunefarm.load: a model built by tunerd, run with NumPy beside ONNX Runtime, and inputs it must
refuse before the library sees them."""
import threading
import warnings

import numpy as np
import pytest

import tunefarm


@pytest.fixture(scope="module")
def built(client, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("built")
    with warnings.catch_warnings():
        # Its kernels are the history's (after test_client tuned it) or the templates' defaults.
        warnings.simplefilter("ignore", tunefarm.BuildWarning)
        client.build_model(tiny_model, out, name="tiny_defaults")
    return out


def test_matches_onnxruntime(built, tiny_model):
    ort = pytest.importorskip("onnxruntime")
    model = tunefarm.load(built, num_threads=1)
    assert model.name == "tiny_defaults"
    assert [(o.name, o.shape) for o in model.outputs] == [("y", (1, 10))]
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    expected = ort.InferenceSession(tiny_model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y = model(x)
    assert y.dtype == np.float32 and y.shape == (1, 10)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(model(x=x), y)
    np.testing.assert_array_equal(model.run({"x": x})[0], y)
    model.set_num_threads(2)
    np.testing.assert_allclose(model(x), expected, rtol=1e-4, atol=1e-4)
    steps = np.zeros(len(model.step_names))
    model.run({"x": x}, step_seconds=steps)
    assert len(model.step_names) >= 2 and steps.sum() > 0


def test_threads_take_turns(built):
    model = tunefarm.load(built)
    xs = [np.full((1, 3, 8, 8), v, np.float32) for v in (0.1, 0.2, 0.3, 0.4)]
    alone = [model(x) for x in xs]
    together = [None] * len(xs)

    def run(i):
        for _ in range(20):
            together[i] = model(xs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


def test_bad_inputs_raise_clear_errors(built):
    model = tunefarm.load(built)
    good = np.zeros((1, 3, 8, 8), np.float32)
    with pytest.raises(TypeError, match=r"input 'x' is float64; the model takes float32 \(convert with"):
        model(good.astype(np.float64))
    with pytest.raises(TypeError, match="input 'x' is <U1"):
        model(np.array(["a"]))
    with pytest.raises(ValueError, match=r"input 'x' has shape \(1, 3, 8\); the model takes \(1, 3, 8, 8\)"):
        model(good[..., 0])
    with pytest.raises(ValueError, match="tiny_defaults has no input 'image' \\(its inputs: x\\)"):
        model.run({"x": good, "image": good})
    with pytest.raises(ValueError, match="tiny_defaults needs input 'x'"):
        model.run({})
    with pytest.raises(ValueError, match="takes 1 input"):
        model(good, good)
    with pytest.raises(ValueError, match="num_threads must be"):
        model.set_num_threads(-1)
    with pytest.raises(ValueError, match="step_seconds must be"):
        model.run({"x": good}, step_seconds=np.zeros(1, np.float32))
    # A transposed view is converted to the row-major layout the library reads.
    np.testing.assert_array_equal(model(np.asfortranarray(good)), model(good))


def test_load_refuses_what_is_not_a_model(tmp_path, built):
    with pytest.raises(tunefarm.TunefarmError, match="is not a built model: cannot read"):
        tunefarm.load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"name": "k", "kernels": []}')
    with pytest.raises(tunefarm.TunefarmError, match="not a model's manifest"):
        tunefarm.load(tmp_path)
    weights = built / "tiny_defaults.weights"
    saved = weights.read_bytes()
    try:
        weights.write_bytes(saved[:64])
        with pytest.raises(tunefarm.TunefarmError, match="tiny_defaults: "):
            tunefarm.load(built)
    finally:
        weights.write_bytes(saved)


def test_integer_inputs_are_passed_as_their_type(client, tmp_path):
    """Token ids (int64) and a mask (int32) as a transformer exported by PyTorch takes them: the
    manifest's types are what load checks and what the library reads."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(30, dtype=np.float32).reshape(10, 3), "table")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["rows"], name="embedding"),
        helper.make_node("Cast", ["mask"], ["m"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "last"], ["m3"], name="unsqueeze"),
        helper.make_node("Mul", ["rows", "m3"], ["y"], name="masked"),
    ]
    graph = helper.make_graph(nodes, "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4]),
                                                helper.make_tensor_value_info("mask", TensorProto.INT32, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3])],
                              initializer=[table, numpy_helper.from_array(np.array([-1], np.int64), "last")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = str(tmp_path / "tokens.onnx")
    onnx.save(model, path)
    built = tunefarm.load(client.build_model(path, tmp_path / "built", name="tokens").dir)
    assert [(i.name, i.dtype) for i in built.inputs] == [("ids", np.int64), ("mask", np.int32)]
    ids, mask = np.array([[9, 0, -1, 4]], np.int64), np.array([[1, 1, 1, 0]], np.int32)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"ids": ids, "mask": mask})[0]
    np.testing.assert_array_equal(built(ids, mask), expected)
    with pytest.raises(TypeError, match=r"input 'ids' is float32; the model takes int64 \(convert with .astype\(numpy.int64\)\)"):
        built(ids.astype(np.float32), mask)
    with pytest.raises(TypeError, match="input 'mask' is int64; the model takes int32"):
        built(ids, mask.astype(np.int64))
