"""ttrcheck.triton_interpreter: Triton kernels judged on the CPU. Each check runs in a fresh
interpreter process (enable() changes the process: TRITON_INTERPRET and Triton's classes).
Expectations are independent of the patches: closed-form sums, bf16 rounding ties derived
by hand, float64 products with the fp32 summation bound, and ttrcheck's oracle for FLA's op.
Skipped without Triton and torch (CI installs neither: README.md, "Python"); run with an
environment that has them, e.g. the one docs/validating-fla.md describes."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

PYTHON_DIR = pathlib.Path(__import__("ttrcheck").__file__).resolve().parents[1]


def run(body: str, tmp_path: pathlib.Path, configs: str = "first") -> str:
    """Runs `body` after enable() in a new process; returns its stdout (asserts exit 0). A
    file, not `python -c`: the interpreter rewrites a kernel from its source file."""
    script = tmp_path / "script.py"
    script.write_text(f"import ttrcheck.triton_interpreter as ti\nti.enable(configs={configs!r})\n"
                      + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


KERNELS = """
import torch, triton, triton.language as tl

@triton.jit
def index_sum(out, n):
    acc = tl.zeros([1], dtype=tl.int64)
    for i in range(n):
        acc += i.to(tl.int64) * 3          # FLA's i_t.to(tl.int64): needs a tensor index
    tl.store(out + tl.arange(0, 1), acc)

@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def scaled_copy(x, y, block, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, 2 * tl.load(x + o, mask=o < n), mask=o < n)
    tl.store(block + tl.arange(0, 1), tl.full([1], BLOCK, tl.int32))  # which configuration ran

# The second configuration forgets the mask: with BLOCK = 32 it strays past a 20-element x.
@triton.autotune(configs=[triton.Config({"BLOCK": 16, "MASKED": True}), triton.Config({"BLOCK": 32, "MASKED": False})],
                 key=["n"])
@triton.jit
def copy_second_config_strays(x, y, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)
    else:
        tl.store(y + o, tl.load(x + o))

@triton.jit
def to_bf16(x, y, z, N: tl.constexpr):
    i = tl.arange(0, N)
    v = tl.load(x + i)
    tl.store(y + i, v.to(tl.bfloat16))  # an explicit cast
    tl.store(z + i, v)                  # the store's own cast to z's bf16

@triton.jit
def bf16_ops(a, b, c, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(a + i[:, None] * N + i[None, :])
    y = tl.load(b + i[:, None] * N + i[None, :])
    tl.store(c + i[:, None] * N + i[None, :], tl.dot(x, y))
    tl.store(c + N * N + i[:, None] * N + i[None, :], (x * y + x).to(tl.float32))
    tl.store(c + 2 * N * N + i[:, None] * N + i[None, :], (x + y).to(tl.float32))
    tl.store(c + 3 * N * N + i, tl.sum(x, axis=1).to(tl.float32))
    tl.store(c + 3 * N * N + N + tl.arange(0, 1), tl.sum(x * x).to(tl.float32))  # over both axes: a scalar
"""


def test_loop_index_is_a_tensor(tmp_path):
    out = run(KERNELS + """
out = torch.zeros(1, dtype=torch.int64)
index_sum[(1,)](out, 1000)
print(out.item())
""", tmp_path)
    assert int(out) == 3 * 999 * 1000 // 2


def test_autotuned_kernel_runs_one_config_and_is_right(tmp_path):
    out = run(KERNELS + """
for n in (70, 5):  # two tuning keys: each picks the first configuration
    x = torch.arange(n, dtype=torch.float32); y = torch.zeros(n); block = torch.zeros(1, dtype=torch.int32)
    scaled_copy[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, block, n)
    print(block.item(), (y - 2 * x).abs().max().item())
""", tmp_path)
    assert [float(v) for v in out.split()] == [16, 0.0, 16, 0.0]


def test_bf16_arithmetic_is_arithmetic_on_the_values(tmp_path):
    # Ties, to nearest even by hand: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (bf16 has
    # 7 fraction bits) and goes to 1; 1 + 2^-7 + 2^-8 goes up to 1 + 2^-6. Products of bf16
    # values are exact in fp32, so x*y + x rounds twice, as torch's bf16 ops do.
    out = run(KERNELS + """
N = 16
torch.manual_seed(0)
a = torch.randn(N, N).to(torch.bfloat16); b = torch.randn(N, N).to(torch.bfloat16)
a[0, 0], b[0, 0], a[0, 1], b[0, 1] = 1.0, 2.0 ** -8, 1.0 + 2.0 ** -7, 2.0 ** -8
a[2] = 0.0
a[2, 0], a[2, 1], a[2, 2] = 1.0, 2.0 ** -8, 2.0 ** -8
c = torch.zeros(4, N, N)
bf16_ops[(1,)](a, b, c, N)
halves = torch.zeros(4, N, N)
bf16_ops[(1,)](torch.full((N, N), 0.5, dtype=torch.bfloat16), b, halves, N)
exact = a.double() @ b.double()
bound = 16 * 2.0 ** -24 * (a.double().abs() @ b.double().abs())  # gamma_16 of the fp32 sum, first order
print((c[0].double() - exact).abs().le(bound).all().item(),
      torch.equal(c[1], (a * b + a).float()), c[2, 0, 0].item() == 1.0, c[2, 0, 1].item() == 1.0 + 2.0 ** -6,
      c[3, 0, 2].item() == 1.0, halves[3, 1, 0].item() == 64.0)
""", tmp_path)
    assert out.split() == ["True"] * 6


def test_a_stray_access_is_named_and_every_config_can_be_run(tmp_path):
    body = KERNELS + """
import os
x = torch.arange(20, dtype=torch.float32); y = torch.zeros(20)
try:
    copy_second_config_strays[lambda m: (triton.cdiv(20, m["BLOCK"]),)](x, y, 20)
    print("ran", torch.equal(x, y))
except Exception as e:
    print("raised", e)
"""
    # First configuration only (the default): masked, in bounds, right.
    assert run(body, tmp_path).split() == ["ran", "True"]
    # Every configuration, as the autotuner's benchmark runs them: the second one's load of
    # x at 20..31 is caught before anything is read.
    (tmp_path / "all").mkdir()
    out = run(body, tmp_path / "all", configs="all")
    assert out.startswith("raised") and "OutOfBounds" in out
    assert "copy_second_config_strays: load out of bounds" in out
    assert "12 lanes; the first at element 20 of 'x', whose elements are 0..19" in out
    assert "script.py:" in out and "program (0, 0, 0)" in out


def test_fp32_to_bf16_rounds_to_nearest_even(tmp_path):
    # By hand: 1 + 2^-8 + 2^-12 is past the midpoint of 1 and 1 + 2^-7, so it rounds up
    # (the interpreter's own conversion truncates it to 1); 1 + 2^-8 and 1 + 2^-7 + 2^-8 are
    # ties, to the even neighbours 1 and 1 + 2^-6; the sign is kept.
    out = run(KERNELS + """
u = 2.0 ** -8
x = torch.tensor([1 + u + u / 16, 1 + u, 1 + 2 * u + u, -(1 + u + u / 16)], dtype=torch.float32)
y = torch.zeros(4, dtype=torch.bfloat16); z = torch.zeros(4, dtype=torch.bfloat16)
to_bf16[(1,)](x, y, z, 4)
print(y.float().tolist() == [1 + 2 * u, 1.0, 1 + 4 * u, -(1 + 2 * u)], torch.equal(y, z))
""", tmp_path)
    assert out.split() == ["True", "True"]


def test_enable_twice_with_another_setting_is_refused(tmp_path):
    out = run("""
try:
    ti.enable(configs="all")
except RuntimeError as e:
    print("refused:", e)
ti.enable()
print(ti.enabled())
""", tmp_path)
    assert "refused:" in out and "already enabled" in out and out.strip().endswith("True")


def test_enable_refuses_after_a_compiled_triton_import():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-c", "import triton\nimport ttrcheck.triton_interpreter as ti\nti.enable()"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode != 0
    assert "Triton was imported before the interpreter was enabled" in p.stderr


def test_fla_gated_delta_rule_fp32_passes_and_a_wrong_scale_fails(tmp_path):
    """FLA's chunk kernels end to end: the tiny suite in fp32 passes as fp32 (the interpreter
    multiplies in fp32; on the GPU the same op is a TF32 kernel); the same op called with a
    scale 1 % off fails, so the run can tell."""
    pytest.importorskip("fla")
    out = run("""
import ttrcheck.torch
from fla.ops.gated_delta_rule import chunk_gated_delta_rule
ok = ttrcheck.torch.validate(chunk_gated_delta_rule, suites=["tiny"], dtypes=["fp32"], device="cpu")
def off(q, k, v, g, beta, scale=None, **kw):
    return chunk_gated_delta_rule(q, k, v, g, beta, scale=1.01 * (q.shape[-1] ** -0.5 if scale is None else scale), **kw)
off.__name__ = "chunk_gated_delta_rule"
bad = ttrcheck.torch.validate(off, suites=["tiny"], dtypes=["fp32"], device="cpu", backward=False)
print(ok.passed, len(ok.rows), bad.passed, max(r.max_ratio for r in bad.rows if r.tensor == "o"))
""", tmp_path)
    passed, rows, bad_passed, worst = out.split()
    assert passed == "True" and int(rows) == 15
    assert bad_passed == "False" and float(worst) > 8
