#!/usr/bin/env bash
# Set everything up (first time only) and run the whole test suite: scripts/test.sh [PYTEST ARGS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/system_deps.sh"
bash "$ROOT/scripts/setup.sh" test,bench  # bench: every scripts/bench_*.py --quick runs in the suite
export MUJOCO_GL="${MUJOCO_GL:-egl}"
cd "$ROOT"
"$ROOT/.venv/bin/ruff" check rlhf tests scripts
"$ROOT/.venv/bin/ruff" format --check rlhf tests scripts
exec "$ROOT/.venv/bin/python" -m pytest "$@"
