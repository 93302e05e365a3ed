"""Bad input from Python raises ttrcheck.InputError (a ValueError) with the CLI's one-line
message for the same input — the CLI names the file where Python says "inputs",
"candidate" or "oracle" — and never takes the interpreter down."""
from __future__ import annotations

import numpy as np
import pytest

import ttrcheck
from conftest import write_st


def _gdn(B=1, T=3, H=1, K=2, V=2, seed=0):
    r = np.random.default_rng(seed)
    return {"q": r.standard_normal((B, T, H, K)), "k": r.standard_normal((B, T, H, K)) * 0.3,
            "v": r.standard_normal((B, T, H, V)), "g": -r.random((B, T, H)), "beta": r.random((B, T, H))}


def _cli_error(cli, tmp_path, layer, inputs, sets=(), dtypes=None):
    path = tmp_path / "in.safetensors"
    write_st(path, inputs, dtypes=dtypes)
    p = cli("oracle", "--layer", layer, "--in", path, "--out", tmp_path / "out.safetensors",
            *[a for s in sets for a in ("--set", s)], check=False)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("ttrcheck: error: ")
    return line[len("ttrcheck: error: "):].replace(str(path), "inputs")


def _py_error(layer, inputs, config=None):
    with pytest.raises(ttrcheck.InputError) as e:
        ttrcheck.oracle(layer, inputs, config)
    assert isinstance(e.value, ValueError)
    return str(e.value)


def _bad_inputs():
    wrong_shape = _gdn()
    wrong_shape["v"] = wrong_shape["v"][:, :2]
    missing = _gdn()
    del missing["beta"]
    nan = _gdn()
    nan["q"][0, 1, 0, 1] = np.nan
    out_of_range = _gdn()
    out_of_range["g"][0, 2, 0] = 0.5  # a log decay must be <= 0
    unknown = dict(_gdn(), extra=np.zeros(3))
    integer = _gdn()
    integer["beta"] = np.ones((1, 3, 1), dtype=np.int64)
    return {"wrong shape": wrong_shape, "missing tensor": missing, "NaN": nan, "out of range": out_of_range,
            "unknown tensor": unknown, "integer dtype": integer}


@pytest.mark.parametrize("what", list(_bad_inputs()))
def test_bad_tensor_same_message_as_cli(cli, tmp_path, what):
    inputs = _bad_inputs()[what]
    assert _py_error("gated_delta_rule", inputs) == _cli_error(cli, tmp_path, "gated_delta_rule", inputs)


@pytest.mark.parametrize("config", [{"no_such_key": 1}, {"scale": "abc"}, {"use_qk_l2norm_in_kernel": "maybe"}])
def test_bad_config_same_message_as_cli(cli, tmp_path, config):
    sets = ttrcheck._arrays.config_sets(config)
    assert _py_error("gated_delta_rule", _gdn(), config) == _cli_error(cli, tmp_path, "gated_delta_rule", _gdn(),
                                                                        sets)


def test_unknown_layer_same_message_as_cli(cli, tmp_path):
    msg = _py_error("gated_deltanet", _gdn())
    assert msg == _cli_error(cli, tmp_path, "gated_deltanet", _gdn())
    with pytest.raises(ttrcheck.InputError, match="gated_deltanet"):
        ttrcheck.layer("gated_deltanet")
    with pytest.raises(ttrcheck.InputError, match="gated_deltanet"):
        ttrcheck.vectors("gated_deltanet", "tiny")


def test_bad_candidate_same_message_as_cli(cli, tmp_path):
    inputs = _gdn()
    write_st(tmp_path / "in.safetensors", inputs)
    bad = {"o": np.zeros((1, 3, 1, 3))}
    write_st(tmp_path / "cand.safetensors", bad)
    p = cli("check", "--layer", "gated_delta_rule", "--in", tmp_path / "in.safetensors", "--candidate",
            tmp_path / "cand.safetensors", check=False)
    assert p.returncode == 2
    expected = p.stderr.strip()[len("ttrcheck: error: "):].replace(str(tmp_path / "cand.safetensors"), "candidate")
    with pytest.raises(ttrcheck.InputError) as e:
        ttrcheck.check("gated_delta_rule", inputs, bad)
    assert str(e.value) == expected
    assert "'o'" in expected and "shape" in expected


def test_other_bad_arguments_raise_input_error():
    inputs = _gdn()
    for call in (lambda: ttrcheck.oracle("gated_delta_rule", inputs, bits=8),
                 lambda: ttrcheck.oracle("gated_delta_rule", inputs, form="zigzag"),
                 lambda: ttrcheck.oracle("gated_delta_rule", [1, 2, 3]),
                 lambda: ttrcheck.oracle("gated_delta_rule", dict(inputs, q=np.zeros((1, 3, 1, 2), np.int32))),
                 lambda: ttrcheck.oracle("gated_delta_rule", dict(inputs, q=np.array("text"))),
                 lambda: ttrcheck.check("gated_delta_rule", inputs, {"o": np.zeros((1, 3, 1, 2))}, dtype="fp8"),
                 lambda: ttrcheck.check("gated_delta_rule", inputs, {}),
                 lambda: ttrcheck.vectors("gated_delta_rule", "huge"),
                 lambda: ttrcheck.vectors("gated_delta_rule", "tiny", -1),
                 lambda: ttrcheck.round_to([1.0], "fp8")):
        with pytest.raises(ttrcheck.InputError) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value)
    # The interpreter is still here, and a good call still works.
    assert ttrcheck.oracle("gated_delta_rule", inputs)["o"].shape == (1, 3, 1, 2)
