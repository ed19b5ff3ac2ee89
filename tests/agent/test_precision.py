"""--sac.hidden-dtype auto: bfloat16 where the hardware multiplies it natively, float32 elsewhere,
said once when a run starts and kept by a resumed run; SAC on CUDA where there is one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.agent import precision
from rlhf.agent.precision import choose, with_hidden_dtype
from rlhf.agent.replay import ReplayBuffer
from rlhf.agent.sac_learner import SACLearner
from rlhf.cli import parse
from rlhf.config import Config, SACConfig
from rlhf.run.runner import run
from rlhf.sweep.grid import Cell
from rlhf.sweep.worker import Action, plan
from tests.support.toy_env import ENV_ID

X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw {extra}\nbogomips\t: 5192\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd sve {extra}\nCPU part\t: 0xd4f\n"
SAID = "SAC: bfloat16 hidden layers (the CPU multiplies bfloat16 natively: avx512_bf16;"


def _cpuinfo(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "dtype"),
    [
        (X86.format(extra="avx512_bf16 avx512_vnni"), "bfloat16"),
        (X86.format(extra="amx_bf16 amx_tile avx512_bf16"), "bfloat16"),
        (ARM.format(extra="bf16 i8mm"), "bfloat16"),
        # AVX512 alone: oneDNN converts bfloat16 to float32 and multiplies that, slower
        (X86.format(extra="avx512_vnni"), "float32"),
        (ARM.format(extra="i8mm"), "float32"),
    ],
)
def test_auto_is_bfloat16_only_where_the_cpu_multiplies_it_natively(
    tmp_path: Path, text: str, dtype: str
) -> None:
    assert choose("cpu", _cpuinfo(tmp_path, text)).dtype == dtype


def test_auto_is_float32_where_the_cpu_features_cannot_be_read(tmp_path: Path) -> None:
    chosen = choose("cpu", tmp_path / "absent")
    assert chosen.dtype == "float32" and "cannot be read" in chosen.why


def test_auto_on_cuda_asks_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for native, dtype in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda native=native: native)
        assert choose("cuda").dtype == dtype
        assert choose("auto").dtype == dtype  # --device auto: CUDA when present


def test_the_line_says_which_and_why_and_only_auto_is_resolved(tmp_path: Path) -> None:
    flags = _cpuinfo(tmp_path, X86.format(extra="avx512_bf16"))
    cfg, line = with_hidden_dtype(Config(algo="sac", device="cpu"), flags)
    assert cfg.sac.hidden_dtype == "bfloat16"
    assert line == f"{SAID} --sac.hidden-dtype to change)"
    none = _cpuinfo(tmp_path, X86.format(extra=""))
    cfg, line = with_hidden_dtype(Config(algo="sac", device="cpu"), none)
    assert cfg.sac.hidden_dtype == "float32" and line is not None
    assert line.startswith("SAC: float32 hidden layers (the CPU does not multiply bfloat16")
    given = Config(algo="sac", device="cpu", sac=SACConfig(hidden_dtype="float32"))
    assert with_hidden_dtype(given, flags) == (given, None)  # a flag given wins, silently
    assert with_hidden_dtype(Config(algo="ppo"), flags) == (Config(algo="ppo"), None)


def _sac_run(tmp_path: Path) -> Config:
    sac = SACConfig(hidden_size=16, batch_size=16, learning_starts=100, iteration_steps=100)
    return Config(
        env_id=ENV_ID, algo="sac", reward="env", total_timesteps=200, seed=1, device="cpu",
        runs_dir=str(tmp_path), run_name="r", progress=False, sac=sac,
    )  # fmt: skip


def test_a_run_says_its_precision_once_stores_it_and_a_resume_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(precision, "CPUINFO", _cpuinfo(tmp_path, X86.format(extra="avx512_bf16")))
    cfg = _sac_run(tmp_path / "runs")
    assert cfg.sac.hidden_dtype == "auto"  # the default
    run(cfg)
    said = capsys.readouterr()
    assert (said.out + said.err).count(SAID) == 1
    root = tmp_path / "runs" / "r"
    assert json.loads((root / "config.json").read_text())["sac"]["hidden_dtype"] == "bfloat16"
    # resumed on a machine without native bfloat16, with and without the flag's auto
    monkeypatch.setattr(precision, "CPUINFO", _cpuinfo(tmp_path, X86.format(extra="")))
    for extra in ([], ["--sac.hidden-dtype", "auto"]):
        resumed = parse(["train", "--resume", str(root), "--total-timesteps", "300", *extra])
        assert isinstance(resumed, Config) and resumed.sac.hidden_dtype == "bfloat16"
    run(resumed)
    said = capsys.readouterr()
    assert "hidden layers" not in said.out + said.err  # said when the run started, not again
    assert json.loads((root / "config.json").read_text())["sac"]["hidden_dtype"] == "bfloat16"


def test_a_sweep_cell_resumed_on_another_machine_keeps_its_precision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep's spec says auto; the cell ran in bfloat16 and a worker without it resumes it."""
    monkeypatch.setattr(precision, "CPUINFO", _cpuinfo(tmp_path, X86.format(extra="avx512_bf16")))
    cfg = _sac_run(tmp_path / "sweep")
    run(cfg)
    monkeypatch.setattr(precision, "CPUINFO", _cpuinfo(tmp_path, X86.format(extra="")))
    longer = Cell("r", (), dataclasses.replace(cfg, total_timesteps=300))
    action, config = plan(longer)  # not "ran with bfloat16 and the spec now says auto"
    assert action is Action.RESUME and config.sac.hidden_dtype == "bfloat16"


def test_a_run_stored_before_the_setting_resumes_in_float32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It multiplied in float32, whatever auto would choose now (a file from before the
    config's schema and checksum, which may lack settings added since)."""
    cfg = _sac_run(tmp_path / "runs")
    run(cfg)
    root = tmp_path / "runs" / "r"
    stored = json.loads((root / "config.json").read_text())
    for key in ("config_schema", "sha256"):
        del stored[key]
    del stored["sac"]["hidden_dtype"]
    (root / "config.json").write_text(json.dumps(stored))
    monkeypatch.setattr(precision, "CPUINFO", _cpuinfo(tmp_path, X86.format(extra="avx512_bf16")))
    resumed = parse(["train", "--resume", str(root), "--total-timesteps", "300"])
    assert isinstance(resumed, Config) and resumed.sac.hidden_dtype == "float32"


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here (torch.cuda.is_available() is False): --device cuda untested",
)
@pytest.mark.parametrize("hidden_dtype", ["auto", "float32", "bfloat16"])
def test_a_sac_update_runs_on_cuda(hidden_dtype: str) -> None:
    cfg = SACConfig(hidden_size=32, batch_size=8, hidden_dtype=hidden_dtype)  # type: ignore[arg-type]
    cuda = torch.device("cuda")
    learner = SACLearner(3, 2, -np.ones(2), np.ones(2), cfg, cuda)
    buf = ReplayBuffer(16, 3, 2)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(16, 3)).astype(np.float32)
    act = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
    buf.add(obs, act, obs[::-1].copy(), np.zeros(16, np.float32), np.ones(16, np.float32))
    before = [p.detach().clone() for p in learner.qf.parameters()]
    for _ in range(5):  # the last one with an actor step (policy_frequency 2)
        stats = learner.update(buf.sample(8, rng))
    assert all(p.device.type == "cuda" for p in learner.actor.parameters())
    assert np.isfinite(stats.qf_loss) and np.isfinite(stats.actor_loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.qf.parameters(), strict=True))
    actions = learner.actor_numpy().sample(obs[:2], rng)  # acting reads the weights off the GPU
    assert actions.shape == (2, 2) and np.all(np.abs(actions) <= 1)
