"""Which precision SAC's hidden-to-hidden products run in when ``--sac.hidden-dtype auto``.

bfloat16 where the hardware multiplies it natively, float32 elsewhere. On a CPU "natively" means
an instruction that multiplies bfloat16 (x86: AVX512-BF16 or AMX-BF16; Arm: the BF16 extension):
without one, oneDNN converts to float32 and multiplies that, which makes a step slower than plain
float32 (docs/results/off-policy.md). torch's own ``_is_mkldnn_bf16_supported`` is not the test: it
says yes on any AVX512 CPU, emulated or not. On CUDA, ``torch.cuda.is_bf16_supported``.

The choice is made once, when a run starts, and stored in its ``config.json``: a resumed run
keeps the precision it started with, whatever machine it resumes on.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from pathlib import Path

from rlhf.config import Config, flag

CPUINFO = Path("/proc/cpuinfo")

NATIVE_BF16 = ("amx_bf16", "avx512_bf16", "bf16")
"""CPU feature names (as /proc/cpuinfo spells them: x86 ``flags``, Arm ``Features``) of an
instruction that multiplies bfloat16."""


@dataclass(frozen=True)
class Precision:
    """The resolved ``--sac.hidden-dtype`` and the one line a run says about it."""

    dtype: str
    """float32 or bfloat16."""
    why: str


def _cpuinfo_fields(cpuinfo: Path | None, keys: tuple[str, ...]) -> list[str] | None:
    """The values of ``keys`` in ``cpuinfo`` (default :data:`CPUINFO`), one per line that has
    one, or None where it cannot be read (not Linux)."""
    try:
        text = (cpuinfo or CPUINFO).read_text()
    except OSError:
        return None
    lines = (line.partition(":") for line in text.splitlines())
    return [value.strip() for key, _, value in lines if key.strip() in keys]


def cpu_features(cpuinfo: Path | None = None) -> set[str] | None:
    """The CPU's feature flags (from ``cpuinfo``, default :data:`CPUINFO`), or None where they
    cannot be read (not Linux)."""
    values = _cpuinfo_fields(cpuinfo, ("flags", "Features"))
    return None if values is None else {f for value in values for f in value.split()}


def cpu_name(cpuinfo: Path | None = None) -> str:
    """The CPU's model name (from ``cpuinfo``, default :data:`CPUINFO`; else the platform's
    processor name): benchmarks keep it beside results, which repeat bit for bit on one CPU only."""
    names = [name for name in _cpuinfo_fields(cpuinfo, ("model name",)) or [] if name]
    return names[0] if names else platform.processor() or platform.machine() or "unknown"


def native_bf16(features: set[str]) -> list[str]:
    """The features in ``features`` that multiply bfloat16 natively (empty: none)."""
    return [f for f in NATIVE_BF16 if f in features]


def choose(device: str, cpuinfo: Path | None = None) -> Precision:
    """``auto`` resolved for ``device`` (``cpu``, ``cuda`` or ``auto``: CUDA when present)."""
    import torch  # only here: the command line parses without it

    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return Precision("bfloat16", "the GPU multiplies bfloat16 natively")
        return Precision("float32", "the GPU does not multiply bfloat16 natively")
    features = cpu_features(cpuinfo)
    if features is None:
        return Precision("float32", f"the CPU's features cannot be read from {cpuinfo or CPUINFO}")
    found = native_bf16(features)
    if found:
        return Precision("bfloat16", f"the CPU multiplies bfloat16 natively: {', '.join(found)}")
    return Precision(
        "float32", "the CPU does not multiply bfloat16 natively: no avx512_bf16, amx_bf16 or bf16"
    )


def with_hidden_dtype(cfg: Config, cpuinfo: Path | None = None) -> tuple[Config, str | None]:
    """``cfg`` with ``--sac.hidden-dtype auto`` resolved, and the line that says which and why
    (None when nothing was resolved: PPO, or a value given or stored)."""
    if cfg.algo != "sac" or cfg.sac.hidden_dtype != "auto":
        return cfg, None
    import torch

    if cfg.device == "cuda" and not torch.cuda.is_available():
        return cfg, None  # the run refuses --device cuda in one line: nothing to say before it
    chosen = choose(cfg.device, cpuinfo)
    sac = dataclasses.replace(cfg.sac, hidden_dtype=chosen.dtype)
    line = f"SAC: {chosen.dtype} hidden layers ({chosen.why}; {flag('sac.hidden_dtype')} to change)"
    return dataclasses.replace(cfg, sac=sac), line
