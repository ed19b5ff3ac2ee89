"""What makes a ``config.json`` trustworthy: its schema version and its checksum.

:func:`rlhf.run.run_dir.write_config` stores ``config_schema`` and ``sha256`` (of the canonical
JSON of everything else) in the file; :func:`checked_config` refuses a file that does not match,
that lacks a setting, or that a newer rlhf wrote, so ``--resume`` never fills a damaged file from
the defaults (a ``{}`` used to resume as a human run of 1,000,000 steps).
"""

from __future__ import annotations

import hashlib
import json

from rlhf.config import Config
from rlhf.config.history import ADDED_SINCE_SCHEMA_1
from rlhf.config.paths import leaf_paths

CONFIG_SCHEMA = 1
"""Version of ``config.json``'s layout, stored in it as ``config_schema``; a newer one is refused."""

TARGET_CATALOGUE = "target_catalogue"
"""The key of a run's target catalogue version (:data:`rlhf.envs.targets.CATALOGUE_VERSION`),
stored beside ``config_schema`` when the run has a named target."""

LEGACY_REQUIRED = ("env_id", "total_timesteps", "seed", "reward", "feedback", "ppo", "query")
"""What every ``config.json`` has held since the first rlhf: a file from before the schema
(no ``config_schema``, no ``sha256``) that lacks one of these is refused. Settings added since
are filled as such runs ran (:func:`rlhf.config.history.stored_as_it_ran`)."""


def config_digest(data: dict) -> str:
    """SHA-256 of ``data`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def parse_json(text: str) -> object:
    """The JSON value in ``text``; a ValueError saying so in one line when there is none."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"is not valid JSON ({' '.join(str(exc).split())})") from None


def checked_config(data: object) -> dict:
    """A ``config.json``'s settings, never filled from defaults where the file was damaged.

    A file with ``sha256`` must match it; one with ``config_schema`` (this rlhf writes both)
    must name every setting its schema had (those added since are filled as its run ran:
    :mod:`rlhf.config.history`); an older one (neither) must name :data:`LEGACY_REQUIRED`.

    Raises:
        ValueError: one line saying what is wrong with the file.
    """
    if not isinstance(data, dict):
        raise ValueError(f"is not a JSON object but {type(data).__name__}")
    data = dict(data)
    schema = data.get("config_schema")  # first: a newer rlhf may sign its files otherwise
    if schema is not None and (
        not isinstance(schema, int) or isinstance(schema, bool) or schema > CONFIG_SCHEMA
    ):
        raise ValueError(
            f"has config_schema {schema!r}; this rlhf reads up to {CONFIG_SCHEMA}: upgrade rlhf"
        )
    digest = data.pop("sha256", None)
    if digest is not None and digest != config_digest(data):
        raise ValueError("is damaged or was edited: its content does not match its sha256")
    data.pop("config_schema", None)
    data.pop(TARGET_CATALOGUE, None)
    if schema is None:
        missing = [key for key in LEGACY_REQUIRED if key not in data]
    else:  # what this schema named; a setting added since is filled as its run ran
        missing = [
            p for p in leaf_paths(Config) if not _has(data, p) and p not in ADDED_SINCE_SCHEMA_1
        ]
    if missing:
        more = f" (and {len(missing) - 1} more settings)" if len(missing) > 1 else ""
        raise ValueError(f"is incomplete: it lacks {missing[0]}{more}")
    return data


def _has(data: dict, path: str) -> bool:
    for name in path.split("."):
        if not isinstance(data, dict) or name not in data:
            return False
        data = data[name]
    return True
