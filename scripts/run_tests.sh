#!/usr/bin/env bash
# Install, then run the whole test suite (CPU only). On 2 cores it took 7 minutes at rest and 18 at a load average
# of 3 (issue 20), before the Slurm and warm-model tests were added; expect more on a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --slurm
echo "run_tests.sh: running the suite: at least 7 minutes on 2 idle cores, 18 or more on a busy machine"
python -m pytest -q "$@"
