"""Metrics to TensorBoard (``runs/<name>/tb``) and a tqdm progress bar on the terminal."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm


class Logger:
    """Writes scalars to TensorBoard and keeps the latest value of each for the progress bar."""

    def __init__(
        self, log_dir: Path, total_steps: int, progress: bool = True, start_step: int = 0
    ) -> None:
        """``start_step`` > 0 continues a resumed run: TensorBoard hides whatever the interrupted
        session logged after that step (the checkpoint did not keep it), so each curve goes on
        from where the checkpoint left it. Everything an iteration logs carries the step count
        at its end, which is the step its checkpoint records."""
        self.writer = SummaryWriter(str(log_dir), purge_step=start_step + 1 if start_step else None)
        self._previous_hook = threading.excepthook
        threading.excepthook = self._quiet_writer_thread
        self.latest: dict[str, float] = {}
        self.bar = tqdm(
            total=total_steps,
            initial=start_step,
            unit="step",
            disable=not progress,
            dynamic_ncols=True,
        )

    def hparams_text(self, config: dict) -> None:
        """The whole config as a markdown table under the TEXT tab, as CleanRL does."""
        rows = "\n".join(f"|{k}|{v}|" for k, v in _flatten(config).items())
        self.writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")

    def scalar(self, key: str, value: float, step: int) -> None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return
        self.writer.add_scalar(key, value, step)
        self.latest[key] = float(value)

    def gif(self, tag: str, gif: bytes, height: int, width: int, step: int) -> None:
        """An animated GIF as TensorBoard's video summary (what ``add_video`` writes, without
        the moviepy it needs to encode one)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
        summary = Summary(value=[Summary.Value(tag=tag, image=image)])
        self.writer._get_file_writer().add_summary(summary, step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.scalar(key, value, step)

    def progress(self, steps: int, **postfix: float | int | str) -> None:
        """Advance the bar by ``steps`` and show ``postfix`` (e.g. return, sps)."""
        self.bar.update(steps)
        if postfix:
            self.bar.set_postfix(
                {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in postfix.items()},
                refresh=False,
            )

    def message(self, text: str) -> None:
        """Print a line without breaking the progress bar."""
        self.bar.write(text)

    def _quiet_writer_thread(self, args: Any) -> None:
        """TensorBoard writes from a thread of its own; when the disk is full that thread dies
        with a traceback, and the main thread gets the same error at its next write (which the
        command line turns into one line). The traceback is noise before that line: drop it."""
        if isinstance(args.exc_value, OSError) and _is_writer_thread(args.thread):
            return
        self._previous_hook(args)

    def close(self) -> None:
        self.bar.close()
        try:
            self.writer.flush()
            self.writer.close()
        finally:
            if threading.excepthook == self._quiet_writer_thread:
                threading.excepthook = self._previous_hook


def _is_writer_thread(thread: threading.Thread | None) -> bool:
    """TensorBoard's event-file writer thread (``_AsyncWriterThread``; matched by name so that a
    TensorBoard that renames it only brings the traceback back)."""
    return type(thread).__name__ == "_AsyncWriterThread"


def _flatten(config: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if not isinstance(value, str) else value
    return flat
