#!/usr/bin/env bash
# The GPU check in one command: on one H100 or H200 with no network, within 8 minutes, what this trainer does there
# (scripts/gpu_check.py says what each step records). Without a GPU it runs the same steps on the tiny model on CPU.
#
#   bash scripts/gpu_wheels.sh                  # beforehand, where pip reaches PyPI: the wheels into .whl/
#   bash scripts/gpu_check.sh [--out DIR]       # on the GPU machine, from the checkout (with .whl/ beside it)
#
# First, where TRL is not installed: the carried wheels (.whl/*.whl) go into a folder of their own, put first on
# PYTHONPATH; with a pyarrow older than datasets' pin asks for, the older datasets in .whl/older-pyarrow/ instead.
# Where bwrap is missing: the carried Debian package (.whl/bubblewrap_*.deb) is unpacked with dpkg -x and put on
# PATH. Then scripts/gpu_check.py writes DIR/gpu_check.json (default final_outputs/gpu_check/), prints a table and,
# last, the JSON's path.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
wheels=.whl
python=python3

if ! "$python" -c "import trl" >/dev/null 2>&1; then
  if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
    echo "gpu_check.sh: TRL is not installed and there are no wheels in $wheels/; run scripts/gpu_wheels.sh where" \
         "pip reaches PyPI and carry $wheels/ with the checkout" >&2
    exit 2
  fi
  site=$(mktemp -d /tmp/gpu-check-site-XXXX)
  chosen=("$wheels"/*.whl)
  arrow=$("$python" -c 'import pyarrow; print(pyarrow.__version__.split(".")[0])' 2>/dev/null || echo 0)
  needed=$(unzip -p "$wheels"/datasets-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: pyarrow>=\([0-9]*\).*/\1/p')
  if [ "$arrow" -lt "${needed:-0}" ] && ls "$wheels"/older-pyarrow/datasets-*.whl >/dev/null 2>&1; then
    chosen=("$wheels"/older-pyarrow/datasets-*.whl)
    for wheel in "$wheels"/*.whl; do
      case "$(basename "$wheel")" in datasets-*) ;; *) chosen+=("$wheel") ;; esac
    done
  fi
  echo "gpu_check.sh: installing ${#chosen[@]} carried wheels into $site (pyarrow $arrow here)"
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "${chosen[@]}"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  GPU_CHECK_WHEELS="${#chosen[@]} wheels in $(( $(date +%s) - started )) s: $(printf '%s ' "${chosen[@]##*/}")"
  export GPU_CHECK_WHEELS
fi

if ! command -v bwrap >/dev/null 2>&1 && ls "$wheels"/bubblewrap_*.deb >/dev/null 2>&1; then
  root=$(mktemp -d /tmp/gpu-check-root-XXXX)
  dpkg -x "$wheels"/bubblewrap_*.deb "$root"
  export PATH="$root/usr/bin:$PATH"
  if ! bwrap --version >/dev/null 2>&1; then  # a library it links is missing here: the carried ones, for bwrap only
    for deb in "$wheels"/lib*.deb; do dpkg -x "$deb" "$root/libs"; done
    mv "$root/usr/bin/bwrap" "$root/usr/bin/bwrap.real"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$root/libs/lib/x86_64-linux-gnu:$root/libs/usr/lib/x86_64-linux-gnu" \
        "$root/usr/bin/bwrap.real" > "$root/usr/bin/bwrap"
    chmod +x "$root/usr/bin/bwrap"
  fi
  echo "gpu_check.sh: bubblewrap unpacked into $root ($(bwrap --version 2>&1 | head -1))"
fi

exec "$python" scripts/gpu_check.py --started "$started" "$@"
