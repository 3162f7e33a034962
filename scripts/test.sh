#!/usr/bin/env bash
# Same set-up as the demo, then the whole test suite (CPU only; Triton runs in its interpreter).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup_env.sh
.venv/bin/ruff check .
workers="${TEST_WORKERS:-2}"
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)
set +e
# the slowest 20 tests are listed at the end, so a CI log shows where its time goes; loadgroup keeps the tests
# that share a compile of sm_90 variants (xdist_group "sm90_variants", tests/conftest.py) in one process
"${pytest[@]}" -n "$workers" --dist loadgroup --durations=20 -m "not quiet" "$@"
shared=$?
# then the tests that claim a measured speedup under the interpreter, alone on the machine: tests running
# beside them on two cores add enough noise that the promotion gate rightly refuses what they expect it to take.
# Without arguments only the files that mark such tests are collected (collecting the whole suite again to
# deselect it costs about 11 s on two cores).
quiet_args=("$@")
if [ $# -eq 0 ]; then
  mapfile -t quiet_args < <(grep -rlE --include='*.py' 'pytest\.mark\.quiet\b' tests | sort)
fi
"${pytest[@]}" --durations=5 -m quiet "${quiet_args[@]}"
alone=$?
[ "$alone" -eq 5 ] && alone=0    # pytest's "no test selected": the arguments named no quiet test
[ "$shared" -eq 5 ] && shared=0  # and none of the others
exit $(( shared != 0 ? shared : alone ))
