"""Every key of the label store's ``meta`` table, in one place.

The ``meta`` table holds one JSON value per key (:meth:`LabelStore.set_meta` and
:meth:`LabelStore.get_meta`). The trainer, the render workers and the web server share nothing
but the store, so these keys are how they tell each other about the run. Use the constants, never
the strings: ``tests/store/test_meta.py`` fails when a module calls ``get_meta``/``set_meta`` with
a literal key.

:data:`STATUS_META` is defined in :mod:`rlhf.core.status` (as ``STATUS_KEY``), beside the status it
stores: ``core/`` imports no other room, so the key is only named again here.
"""

from __future__ import annotations

from rlhf.core.status import STATUS_KEY

RUN_NAME_META = "run_name"
"""The run directory's name (a string), shown in the page's header. Written by
``run/preferences.py`` when the run opens its store and by ``rlhf import``
(``data/datasets.py``); read by the status payload (``server/payloads.py``) and ``rlhf export``."""

ENV_ID_META = "env_id"
"""The run's Gymnasium env id (a string). Written by ``run/preferences.py`` and ``rlhf import``;
read by the status payload, ``rlhf export`` and ``--labels-from`` (``data/seed_labels.py``), which
refuses labels of another env."""

TASK_META = "task"
"""What the person is asked to teach (a string, ``""`` for none; a goal env says what its marker
is). Written by ``run/preferences.py`` and ``rlhf import``; read by the status payload (the page
shows it) and ``rlhf export``."""

TARGET_META = "target"
"""The run's target behaviour, whose return the page's curve shows (a string: ``--teacher.target``
NAME or ``--teacher.reward`` MODULE:FUNCTION; ``""`` for none, the env's own reward). Written by
``run/preferences.py`` and ``rlhf import``; read by the status payload (``server/payloads.py``) and
``rlhf export`` (a dataset says whose reward its segments' true rewards are)."""

ENV_KWARGS_META = "env_kwargs"
"""The env's keyword arguments (a JSON object), so the render workers make the same env as the
trainer. Written by ``run/preferences.py`` and ``rlhf import``; read by ``render/worker.py`` and
``rlhf export``."""

SCALE_META = "rating_scale"
"""The grade scale, ``{"levels": K, "names": [...]}``. Written by ``run/preferences.py`` and
``rlhf import``; read by ``server/payloads.py`` (the page draws the grade buttons from it, and the
API checks a grade against its levels) and ``rlhf export``."""

STATUS_META = STATUS_KEY
"""The trainer's latest :class:`~rlhf.core.status.TrainerStatus` as JSON (``"trainer_status"``).
Written by the loop (``run/trainer.py``) at every phase, and by ``feedback/session.py`` when
``rlhf serve`` runs without a trainer; read by the status payload (``server/payloads.py``)."""

TOKENS_META = "labeller_tokens"
"""``{name: token}`` of the run's named labellers (``--labeller``), so their links stay the same
across ``rlhf serve`` and ``train --resume``. Written and read by ``server/serve.py``."""

ACCESS_TOKEN_META = "access_token"
"""The token generated for a page served beyond loopback without ``--web.token``, so a tab left
open keeps its access across ``train --resume`` and ``rlhf serve`` (the store sits in the run's
own directory, beside the labels the token guards). Written and read by ``server/serve.py``."""

WEB_PORT_META = "web_port"
"""The port the run's labelling page was last served on (an integer), so ``train --resume`` and
``rlhf serve`` serve it there again when the port is free (with ``--web.port`` 0, the default): a
tab left open from before reconnects by itself. Written and read by ``feedback/session.py``."""

RENDER_WORKER_META = "render_worker"
"""``{"pid", "gl", "started_at"}`` of the latest render worker to start, with the GL backend it
chose (for status displays and tests). Written by ``render/worker.py``."""

LABELS_FROM_META = "labels_from"
"""What ``--labels-from`` copied in: ``{"path", "pairs", "ratings", "at"}``. Written once by
``data/seed_labels.py`` (in the transaction that copies the labels, so a resumed run does not copy
twice); read there by ``imported_pairs``, which the loop, the trainer, the feedback source and the
status payload use so that the label schedule counts only the labels asked in this run."""

RETIRE_META = "retire_before_iteration"
"""An iteration (an integer): unlabelled pairs asked for before it are retired (never handed out).
Written by :meth:`LabelStore.retire_before` (called by ``run/pacing.py``); read by the SQL
condition ``LIVE`` in ``store/videos.py``."""

CLIP_WARNED_META = "policy_clip_warned"
"""``true`` once the run has said its policy clips cannot be drawn, so it says so once. Written and
read by ``run/agent_view.py``."""
