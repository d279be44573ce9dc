#!/usr/bin/env bash
# Install, then run the whole test suite (CPU only). On 2 cores, with the packages installed and the warm test
# model cached, 557 tests took 17 minutes at a load average of 1 to 8 (2026-11-25); a fresh machine adds the
# install (2 to 4 minutes) and the warm model's build (about 1 to 2 minutes); a busy machine takes longer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --slurm
echo "run_tests.sh: running the suite: about 17 minutes on 2 cores, more on a busy machine"
python -m pytest -q "$@"
