"""ttrcheck: high-precision oracles and an error-model judge for linear-attention kernels.

    import ttrcheck
    case = ttrcheck.vectors("gated_delta_rule", "tiny", seed=0)[0]
    report = ttrcheck.check("gated_delta_rule", case.inputs, my_outputs, dtype="bf16", config=case.config)
    print(report)             # the table `ttrcheck check` prints
    report.to_json()          # the report `ttrcheck check --report` writes

Functions mirror the CLI (README.md): :func:`layers`, :func:`oracle`, :func:`check`,
:func:`vectors`; ``ttrcheck.testing.assert_matches_oracle`` for pytest;
``ttrcheck.torch.validate`` runs a PyTorch function (an FLA op, a port) forward and
backward on generated inputs. Bad input raises :class:`InputError` (a ValueError)
with the CLI's one-line message.
"""
from . import _core
from ._arrays import BF16, InputError
from .api import Case, ConfigKey, LayerSpec, TensorSpec, Tensors, check, layer, layers, oracle, round_to, vectors
from .report import Report, TensorResult

__version__: str = _core.__version__
InputError.__module__ = "ttrcheck"

__all__ = ["BF16", "Case", "ConfigKey", "InputError", "LayerSpec", "Report", "TensorResult", "TensorSpec",
           "Tensors", "check", "layer", "layers", "oracle", "round_to", "vectors", "__version__"]


def suites():
    """The vector suites (tiny, demo, standard, stress)."""
    return list(_core.suites())
