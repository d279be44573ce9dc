#!/usr/bin/env bash
# Install what the trainer and its tests need on a fresh machine: bubblewrap (the judge's sandbox) and the
# pinned Python packages (torch==2.13.0 takes the CPU build on a CPU-only machine). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "install.sh: bubblewrap (bwrap) is missing; install it with your package manager for full sandboxing" >&2
  fi
fi
python -m pip install -q -r requirements.txt
python -m pip install -q -e .
