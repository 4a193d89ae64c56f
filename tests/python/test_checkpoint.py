"""ms.save_checkpoint / ms.load_checkpoint / ms.load_param_into_net: MindSpore's signatures, its
.ckpt bytes (checked against an encoder written here from the protobuf wire format, independent of
the engine), and its rules for names, types and reports."""

import os
import struct

import numpy as np
import pytest

import modeflow as ms


# ---- MindSpore's writer, by hand: one serialized Checkpoint per tensor part ----

def _varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out += bytes([low | 0x80])
        else:
            return out + bytes([low])


def _field(number, payload):
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def mindspore_entry(tag, dims, tensor_type, content):
    """Checkpoint{value: [Value{tag, tensor: TensorProto{dims, tensor_type, tensor_content}}]}."""
    tensor = b"".join(_varint(1 << 3) + _varint(d) for d in dims)
    tensor += _field(2, tensor_type.encode()) + _field(3, content)
    return _field(1, _field(1, tag.encode()) + _field(2, tensor))


class Net(ms.nn.Cell):
    def __init__(self, seed):
        super().__init__()
        self.fc1 = ms.nn.Dense(4, 8, seed=seed)
        self.relu = ms.nn.ReLU()
        self.fc2 = ms.nn.Dense(8, 3, seed=seed + 100)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def names(net):
    return [name for name, _ in net.parameters_and_names()]


def test_a_cell_round_trips_into_a_fresh_net():
    trained, fresh = Net(1), Net(2)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    assert not np.array_equal(trained(x).asnumpy(), fresh(x).asnumpy())
    ms.save_checkpoint(trained, "net.ckpt")
    params = ms.load_checkpoint("net.ckpt")
    assert list(params) == names(trained) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(isinstance(p, ms.Parameter) and p.name == n for n, p in params.items())
    assert ms.load_param_into_net(fresh, params) == ([], [])
    np.testing.assert_array_equal(trained(x).asnumpy(), fresh(x).asnumpy())


def test_the_file_is_mindspores_bytes():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([True, False])
    ms.save_checkpoint([{"name": "w", "data": ms.Tensor(w)}, {"name": "b", "data": ms.Tensor(b)}],
                       "two.ckpt")
    expected = (mindspore_entry("w", [2, 3], "Float32", w.tobytes())
                + mindspore_entry("b", [2], "Bool", b.tobytes()))
    with open("two.ckpt", "rb") as f:
        assert f.read() == expected


def test_a_mindspore_file_loads_including_parts_and_every_dtype():
    data = {
        "f32": np.array([[1.5, -2]], np.float32), "f64": np.array([1e-300], np.float64),
        "i32": np.array([7, -8], np.int32), "i64": np.array(9, np.int64),
        "flag": np.array([True, False, True]),
    }
    names_to_type = {"f32": "Float32", "f64": "Float64", "i32": "Int32", "i64": "Int64",
                     "flag": "Bool"}
    blob = b"".join(mindspore_entry(k, list(v.shape), names_to_type[k], v.tobytes())
                    for k, v in data.items())
    # A large tensor is written by MindSpore as consecutive entries of one tag.
    big = np.arange(8, dtype=np.float32).reshape(2, 4)
    blob += mindspore_entry("big", [2, 4], "Float32", big.tobytes()[:12])
    blob += mindspore_entry("big", [2, 4], "Float32", big.tobytes()[12:])
    with open("ms.ckpt", "wb") as f:
        f.write(blob)
    loaded = ms.load_checkpoint("ms.ckpt")
    assert list(loaded) == list(data) + ["big"]
    for name, value in data.items():
        got = loaded[name].asnumpy()
        assert got.dtype == value.dtype and got.shape == value.shape, name
        np.testing.assert_array_equal(got, value)
    np.testing.assert_array_equal(loaded["big"].asnumpy(), big)


def test_save_obj_forms_and_the_suffix():
    net = Net(1)
    ms.save_checkpoint(net, "cell")  # MindSpore appends .ckpt
    assert os.path.exists("cell.ckpt")
    params = ms.load_checkpoint("cell.ckpt")
    ms.save_checkpoint(params, "dict.ckpt")
    ms.save_checkpoint(net.trainable_params(), "list.ckpt")
    for other in ("dict.ckpt", "list.ckpt"):
        with open("cell.ckpt", "rb") as a, open(other, "rb") as b:
            assert a.read() == b.read(), other
    with pytest.raises(TypeError, match="must be nn.Cell, list or dict"):
        ms.save_checkpoint(42, "x.ckpt")
    with pytest.raises(TypeError, match="must be string"):
        ms.save_checkpoint(net, 3)
    with pytest.raises(ValueError, match="given twice"):
        ms.save_checkpoint([{"name": "a", "data": ms.Tensor([1.0])},
                            {"name": "a", "data": ms.Tensor([2.0])}], "dup.ckpt")
    assert not os.path.exists("dup.ckpt")


def test_load_param_into_net_reports_and_types():
    net = Net(1)
    params = ms.load_checkpoint(_saved(net))
    del params["fc2.bias"]
    params["extra"] = ms.Parameter(ms.Tensor([1.0]), "extra")
    assert ms.load_param_into_net(net, params) == (["fc2.bias"], ["extra"])
    # float64 into a float32 parameter: cast unless strict_load.
    w64 = ms.Parameter(ms.Tensor(np.full((8, 4), 0.25, np.float64)), "fc1.weight")
    with pytest.raises(ValueError, match="strict_load=True"):
        ms.load_param_into_net(net, {"fc1.weight": w64}, strict_load=True)
    with pytest.warns(UserWarning, match="cast"):
        ms.load_param_into_net(net, {"fc1.weight": w64})
    got = net.parameters_dict()["fc1.weight"].asnumpy()
    assert got.dtype == np.float32 and (got == 0.25).all()
    with pytest.raises(ValueError, match=r"\(8, 4\) in the net but \(4, 8\)"):
        ms.load_param_into_net(net, {"fc1.weight": ms.Tensor(np.zeros((4, 8), np.float32))})
    with pytest.raises(TypeError, match="should be a dict"):
        ms.load_param_into_net(net, [1])


def test_load_checkpoint_with_a_net_loads_it():
    trained, fresh = Net(1), Net(2)
    ms.load_checkpoint(_saved(trained), net=fresh)
    for (name, a), (_, b) in zip(trained.parameters_and_names(), fresh.parameters_and_names()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy(), err_msg=name)


def test_damaged_or_foreign_files_are_value_errors():
    with pytest.raises(ValueError, match="should end with '.ckpt'"):
        ms.load_checkpoint("net.npy")
    with pytest.raises(ValueError, match="missing.ckpt"):
        ms.load_checkpoint("missing.ckpt")
    path = _saved(Net(1))
    with open(path, "rb") as f:
        good = f.read()
    for cut in (1, 10, 20, len(good) - 1):  # inside entries (the first is over 100 bytes)
        with open("cut.ckpt", "wb") as f:
            f.write(good[:cut])
        with pytest.raises(ValueError, match="cut.ckpt"):
            ms.load_checkpoint("cut.ckpt")
    with open("f16.ckpt", "wb") as f:
        f.write(mindspore_entry("h", [1], "Float16", b"\x00\x3c"))
    with pytest.raises(ValueError, match="Float16"):
        ms.load_checkpoint("f16.ckpt")
    with open("bad.ckpt", "wb") as f:
        f.write(mindspore_entry("h", [1], "Float\x1b]2;x", struct.pack("<f", 1)))
    with pytest.raises(ValueError, match=r"unknown tensor_type 'Float\\x1b\]2;x'"):
        ms.load_checkpoint("bad.ckpt")


def _saved(net):
    ms.save_checkpoint(net, "saved.ckpt")
    return "saved.ckpt"
