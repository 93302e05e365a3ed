"""Triton kernels judged on the CPU: Triton's interpreter, made able to run production kernels.

    import ttrcheck.triton_interpreter
    ttrcheck.triton_interpreter.enable()      # before the kernels' modules are imported
    import ttrcheck.torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    print(ttrcheck.torch.validate(chunk_gated_delta_rule, suites=["varlen"], dtypes=["fp32"], device="cpu"))

With ``TRITON_INTERPRET=1``, Triton runs a kernel's Python source on NumPy arrays, one program
of the grid after another. That judges what a kernel computes (its indexing, its masks, its
sequence boundaries, its algorithm) without a GPU, at tiny and small shapes (a 70-token
chunk_gated_delta_rule forward and backward takes about a second). It does not judge what
only the GPU does: the compiled code, the tensor cores' arithmetic (TF32 included: the
interpreter multiplies fp32 in fp32), memory races, out-of-bounds accesses that happen to
land in allocated memory. docs/validating-fla.md keeps its rows apart from the GPU's.

Triton's interpreter cannot run flash-linear-attention's kernels as they are (Triton 3.4.0,
with NumPy < 2: its interpreter turns one-element arrays into ints, which NumPy 2 refuses).
:func:`enable` fixes three things, each where the interpreter differs from compiled Triton:

* **Loop indices are tensors.** Compiled Triton makes ``i`` of ``for i in range(n)`` an int32
  scalar tensor; the interpreter leaves a Python int, and FLA's ``i_t.to(tl.int64)`` (its
  int64 offsets, FLA #1080) raises. Each loop body starts by making its index a tensor, as
  assignments already are (the interpreter's own rewrite of ``x = ...``).
* **Autotuning without timing.** Timing configurations in an interpreter means nothing,
  and Triton's disk cache of tunings fails there (it unwraps ``fn.fn`` until a JIT
  function, and an interpreted kernel is a plain function). With ``configs="first"`` (the
  default) each autotuned kernel runs with the first configuration its pruning keeps; with
  ``configs="all"`` it first runs every pruned configuration once on the real arguments,
  as the autotuner's benchmark does on the GPU (its hooks restore the arguments between
  runs), then the first: slower, and the way to find a configuration that strays out of
  bounds. A correct kernel is correct under every configuration; which one the GPU would
  pick is not reproduced.
* **bfloat16 arithmetic.** The interpreter stores bf16 as its 16 bits in a ``uint16`` array
  and then multiplies and adds the integers (measured, Triton 3.4: a 16 x 16 ``tl.dot`` of
  bf16 off by 2.4e10). Here a dot product of bf16 operands is computed in fp32 from their
  exact values, as the tensor cores do (exact products, fp32 sums; the interpreter's order
  of summation is NumPy's), every conversion of fp32 to bf16 rounds to nearest even (the
  interpreter truncates), and every other operation on bf16 values is done in fp32, rounded to
  bf16 to nearest even: exact for products, possibly rounded twice for sums (a rounding
  of ``2^-17`` relative at most, within the error model's bf16 unit). ``tl.sum`` of bf16
  or fp16 values (which Triton does not widen) adds in a pairwise tree, each add rounded
  to the format, as a GPU's reduction tree does (NumPy would sum bf16's integers, and
  fp16 in fp32). Atomic operations on bf16 raise NotImplementedError.

And one check the GPU does not make: **every load and store stays inside the tensors the
kernel was given** (``check_bounds``, on by default). Compiled, an access past a tensor
reads or writes whatever lies there, and only one past the allocation ends in CUDA's
"illegal memory access", which names no kernel and poisons the process. Here every lane the
mask lets through is checked against the extents of the kernel's tensor arguments, and the
first stray access raises :class:`OutOfBounds` naming the kernel, the source line, the
program, the tensor it strayed from and the element it reached.

All of this patches Triton's interpreter in this process; nothing of Triton's is
changed on disk. ``version_checked`` holds the Triton releases they were run with.
"""
from __future__ import annotations

import ast
import os
import sys

__all__ = ["OutOfBounds", "enable", "enabled", "version_checked"]

# Run with both (torch 2.8.0, NumPy 1.26): python/tests/test_triton_interpreter.py passes,
# and FLA 0.6.0's chunk_precond_kda (stress.decay_beta_edges, fp32) gives the same bits.
version_checked = ("3.4.0", "3.6.0")
_enabled = ()  # (check_bounds, configs) once enabled


def enabled() -> bool:
    """True once :func:`enable` has run in this process."""
    return bool(_enabled)


class OutOfBounds(IndexError):
    """A kernel's load or store outside every tensor it was given (see the module's doc)."""


def enable(check_bounds: bool = True, configs: str = "first") -> None:
    """Sets ``TRITON_INTERPRET=1`` and patches Triton's interpreter (see the module's doc).

    Must run before the kernels' modules are imported: ``triton.jit`` decides at decoration
    time whether a kernel is compiled or interpreted. Raises RuntimeError when Triton was
    imported before without the interpreter on, or when Triton is not installed; ValueError
    for a `configs` other than "first" or "all"."""
    global _enabled
    if configs not in ("first", "all"):
        raise ValueError(f"ttrcheck.triton_interpreter.enable(): configs must be 'first' or 'all', not {configs!r}")
    if _enabled:
        if _enabled != (check_bounds, configs):
            raise RuntimeError(f"ttrcheck.triton_interpreter.enable(): already enabled with check_bounds, configs = "
                               f"{_enabled}; a process has one setting")
        return
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("ttrcheck.triton_interpreter.enable(): Triton was imported before the interpreter was "
                           "enabled; call enable() before importing Triton or the kernels' modules")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401
        import triton.runtime.autotuner as autotuner
        import triton.runtime.interpreter as interpreter
    except ImportError as e:
        raise RuntimeError(f"ttrcheck.triton_interpreter.enable(): Triton is not installed ({e})") from None
    _patch_loop_indices(interpreter)
    _patch_autotuner(autotuner, configs)
    _patch_bf16(interpreter)
    if check_bounds:
        _patch_bounds(interpreter)
    _enabled = (check_bounds, configs)


def _patch_loop_indices(interpreter):
    class Rewrite(interpreter.ASTTransformer):
        def visit_For(self, node):
            self.generic_visit(node)
            if isinstance(node.target, ast.Name):
                # `i = i` as the body's first statement; visit_Assign makes it
                # `i = interpreter_semantic.to_tensor(i, False)`.
                node.body.insert(0, self.visit_Assign(ast.Assign(
                    targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
                    value=ast.Name(id=node.target.id, ctx=ast.Load()))))
            return node

    interpreter.FunctionRewriter.ast_transformer = Rewrite()


def _patch_autotuner(autotuner, configs):
    run = autotuner.Autotuner.run

    def untimed_run(self, *args, **kwargs):
        # The autotuner's own loop, every configuration "timed" at 0 s, so min() keeps the
        # first its pruning leaves, per tuning key; with configs="all" each one first runs
        # once on the real arguments (its hooks restore them), as the benchmark does on a GPU.
        if configs == "all":
            self._do_bench = lambda kernel_call, quantiles: (kernel_call(), [0.0, 0.0, 0.0])[1]
        else:
            self._do_bench = lambda kernel_call, quantiles: [0.0, 0.0, 0.0]
        self.cache_results = False  # Triton's disk cache fails on an interpreted kernel
        return run(self, *args, **kwargs)

    autotuner.Autotuner.run = untimed_run


def _patch_bf16(interpreter):
    import numpy as np
    import triton.language as tl

    Builder, Handle = interpreter.InterpreterBuilder, interpreter.TensorHandle

    def is_bf16(h):
        return getattr(h.dtype, "scalar", h.dtype) == tl.bfloat16

    def bits_to_f32(bits):
        return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)

    def to_f32(h):
        return bits_to_f32(h.data) if is_bf16(h) else h.data

    def to_bf16_bits(x):
        """fp32 -> bf16 bits, to nearest even; NaN stays a (quiet) NaN."""
        x = np.asarray(x, dtype=np.float32)
        u = x.view(np.uint32).astype(np.uint64)
        one, half, shift = np.uint64(1), np.uint64(0x7FFF), np.uint64(16)  # no mixed-sign integer casts
        r = ((u + half + ((u >> shift) & one)) >> shift).astype(np.uint16)
        return np.where(np.isnan(x), np.uint16(0x7FC0), r)

    def bf16_result(data, like):
        # Comparisons return booleans under the operands' dtype (the interpreter's way): as they are.
        if data.dtype == np.bool_:
            return Handle(data, like.dtype.scalar)
        return Handle(to_bf16_bits(data), tl.bfloat16)

    binary_op, ternary_op, unary_op = Builder.binary_op, Builder.ternary_op, Builder.unary_op
    create_fma, create_dot, create_rsqrt = Builder.create_fma, Builder.create_dot, Builder.create_rsqrt

    def bf16_binary_op(self, lhs, rhs, op):
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return binary_op(self, lhs, rhs, op)
        return bf16_result(op(to_f32(lhs), to_f32(rhs)), lhs)

    def bf16_ternary_op(self, lhs, rhs, other, op):
        # np.where on the bits is exact; clamping the bits of negative values is not.
        if op is np.where or not any(is_bf16(h) for h in (lhs, rhs, other)):
            return ternary_op(self, lhs, rhs, other, op)
        return bf16_result(op(to_f32(lhs), to_f32(rhs), to_f32(other)), other)

    def bf16_unary_op(self, arg, op):
        if not is_bf16(arg):
            return unary_op(self, arg, op)
        return bf16_result(op(to_f32(arg)), arg)

    def bf16_fma(self, x, y, z):
        if not any(is_bf16(h) for h in (x, y, z)):
            return create_fma(self, x, y, z)
        return bf16_result(to_f32(x) * to_f32(y) + to_f32(z), z)

    def bf16_rsqrt(self, arg):
        if not is_bf16(arg):
            return create_rsqrt(self, arg)
        return bf16_result(1 / np.sqrt(to_f32(arg)), arg)

    def bf16_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if not (is_bf16(a) or is_bf16(b)):
            return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = np.matmul(to_f32(a), to_f32(b), dtype=np.float32) + to_f32(d)
        return bf16_result(acc, d) if is_bf16(d) else Handle(acc.astype(d.data.dtype), d.dtype.scalar)

    cast_impl, fp_to_fp = Builder.cast_impl, Builder.create_fp_to_fp

    def bf16_cast(self, src, dst_type):
        # fp32 -> bf16 (`x.to(tl.bfloat16)`, a store's cast): compiled Triton rounds to
        # nearest even; the interpreter truncates (its rounding mode None is round toward
        # zero), which biased every bf16 store of FLA's kernels (relative RMS of `o` 2.6x
        # the rounded run's on the varlen suite).
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar == tl.float32:
            return Handle(to_bf16_bits(src.data), tl.bfloat16)
        return cast_impl(self, src, dst_type)

    def bf16_fp_to_fp(self, src, dst_type, rounding_mode):
        # An explicit rounding (`.to(tl.bfloat16, fp_downcast_rounding="rtz")`) is kept.
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar == tl.float32 and \
                rounding_mode in (None, interpreter._ir.ROUNDING_MODE.RTNE):
            return Handle(to_bf16_bits(src.data), tl.bfloat16)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    Builder.cast_impl, Builder.create_fp_to_fp = bf16_cast, bf16_fp_to_fp
    # create_fp_ext/create_fp_trunc are lambdas calling self.cast_impl: patched with it.

    def get_bf16(self, value):
        # A Python float meeting a bf16 tensor becomes a bf16 constant, as compiled Triton's
        # builder makes it (rounded: `b_q * scale` multiplies by the bf16 nearest to scale).
        return Handle(to_bf16_bits(np.array([value], dtype=np.float32)), tl.bfloat16)

    reduce_sum, atomic_rmw = interpreter.ReduceOps.sum, Builder.create_atomic_rmw

    def half_sum(self, input):
        """tl.sum keeps bf16 and fp16 (it widens only small integers), and compiled Triton adds
        in that format. NumPy's sum reads bf16's bits as integers and sums fp16 in fp32: here
        a pairwise tree of adds, each rounded to the format, as a GPU's reduction tree does."""
        dtype = input.dtype.scalar
        if dtype not in (tl.bfloat16, tl.float16):
            return reduce_sum(self, input)
        x = to_f32(input.handle).astype(np.float32)
        x = x.reshape(-1) if self.axis is None else np.moveaxis(x, self.axis, 0)
        fmt = (lambda y: bits_to_f32(to_bf16_bits(y))) if dtype == tl.bfloat16 \
            else (lambda y: y.astype(np.float16).astype(np.float32))
        while x.shape[0] > 1:
            if x.shape[0] % 2:
                x = np.concatenate([x, np.zeros_like(x[:1])])  # + 0 is exact
            x = fmt(x[0::2] + x[1::2])
        r = x[0]
        if self.keep_dims:
            r = np.expand_dims(r, self.axis) if self.axis is not None else r.reshape((1, ) * input.handle.data.ndim)
        bits = to_bf16_bits(r) if dtype == tl.bfloat16 else np.asarray(r, dtype=np.float16)
        return self.to_tensor(bits if np.ndim(bits) else bits.item(), dtype)

    def checked_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        # Triton's interpreter would add bf16 bit patterns as integers: refuse instead.
        if is_bf16(val):
            raise NotImplementedError("ttrcheck.triton_interpreter: atomic operations on bf16 are not emulated")
        return atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope)

    interpreter.ReduceOps.sum = half_sum
    Builder.create_atomic_rmw = checked_atomic_rmw
    Builder.get_bf16 = get_bf16
    Builder.binary_op, Builder.ternary_op, Builder.unary_op = bf16_binary_op, bf16_ternary_op, bf16_unary_op
    Builder.create_fma, Builder.create_dot, Builder.create_rsqrt = bf16_fma, bf16_dot, bf16_rsqrt


def _patch_bounds(interpreter):
    import inspect

    import numpy as np

    Builder, Grid = interpreter.InterpreterBuilder, interpreter.GridExecutor
    # The running kernel and its tensor arguments: (first byte, one past the last, element size, name).
    state = {"kernel": "", "regions": []}

    def extent(t):
        """[first byte, one past the last) of the elements a tensor view can address."""
        lo = sum(min(0, (n - 1) * st) for n, st in zip(t.shape, t.stride()))
        hi = sum(max(0, (n - 1) * st) for n, st in zip(t.shape, t.stride()))
        es = t.element_size()
        return t.data_ptr() + lo * es, t.data_ptr() + (hi + 1) * es, es

    init_args = Grid._init_args_hst

    def recording_init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        named = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
        regions = []
        for name, t in named.items():
            t = interpreter._unwrap_tensor(t)
            if hasattr(t, "data_ptr") and hasattr(t, "stride") and t.numel() > 0:
                regions.append((*extent(t), name))
        state["kernel"], state["regions"] = getattr(self.fn, "__name__", "kernel"), regions
        return args_hst, kwargs_hst

    def where():
        """The kernel's source line: the innermost frame outside Triton and this module."""
        for f in inspect.stack()[2:]:
            if "/triton/" not in f.filename and f.filename != __file__:
                return f"{f.filename}:{f.lineno}"
        return "?"

    def check(self, ptrs, mask, what):
        regions = state["regions"]
        if not regions:
            return
        addr = np.broadcast_to(ptrs.data, np.shape(mask.data))[np.asarray(mask.data, dtype=bool)]
        if addr.size == 0:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        inside = np.zeros(addr.shape, dtype=bool)
        for lo, hi, _, _ in regions:
            inside |= (addr >= lo) & (addr + size <= hi)
        if inside.all():
            return
        a = int(addr[~inside][0])
        lo, hi, es, name = min(regions, key=lambda r: min(abs(a - r[0]), abs(a - r[1])))
        raise OutOfBounds(f"{state['kernel']}: {what} out of bounds at {where()} (program {tuple(self.grid_idx)}): "
                          f"{int((~inside).sum())} lanes; the first at element {(a - lo) // es} of '{name}', "
                          f"whose elements are 0..{(hi - lo) // es - 1}")

    masked_load, masked_store = Builder.create_masked_load, Builder.create_masked_store

    def checked_load(self, ptrs, mask, other, *rest):
        check(self, ptrs, mask, "load")
        return masked_load(self, ptrs, mask, other, *rest)

    def checked_store(self, ptrs, value, mask, *rest):
        check(self, ptrs, mask, "store")
        return masked_store(self, ptrs, value, mask, *rest)

    Grid._init_args_hst = recording_init_args
    Builder.create_masked_load, Builder.create_masked_store = checked_load, checked_store
