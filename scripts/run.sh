#!/usr/bin/env bash
# Set everything up (first time only) and run the main job: `rlhf train ARGS`.
# With no arguments that is the interactive run: label pairs in your browser while the agent learns.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/system_deps.sh" runtime
bash "$ROOT/scripts/setup.sh"
export MUJOCO_GL="${MUJOCO_GL:-$([ -n "${DISPLAY:-}" ] && echo glfw || echo egl)}"
cd "$ROOT"
# --feedback-wait: with human feedback, PPO waits for your first labels instead of spending its
# step budget before you have answered (no effect on synthetic or env-reward runs; pass
# --no-feedback-wait to turn it off).
exec "$ROOT/.venv/bin/rlhf" train --feedback-wait "$@"
