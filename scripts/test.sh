#!/usr/bin/env bash
# Same set-up as the demo, then the whole test suite (CPU only; Triton runs in its interpreter).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup_env.sh
.venv/bin/ruff check .
workers="${TEST_WORKERS:-2}"
# the slowest 20 tests are listed last, so a CI log shows where its time goes
exec .venv/bin/python -m pytest -n "$workers" -p no:cacheprovider --durations=20 "$@"
