#!/usr/bin/env bash
# Install, then run the whole test suite (CPU only; about 10 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --slurm
python -m pytest -q "$@"
