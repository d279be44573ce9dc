#!/usr/bin/env bash
# Start the vLLM generation server that `rl_trainer.py --use_vllm` (server mode) talks to.
#
#   scripts/serve_vllm.sh [--dry-run] MODEL [--preset SIZE] [more `trl vllm-serve` arguments]
#
# Runs `trl vllm-serve --model MODEL` with what the trainer needs: the GPU from VLLM_GPU (default 0), NCCL
# peer-to-peer off as the reference does (the trainer-to-server weight sync is known to hang on some nodes with
# it on, huggingface/trl#2923),
# port VLLM_PORT (default 8000, the trainer's --vllm_server_port default) and --max-model-len from MAX_MODEL_LEN,
# else from the preset's max_model_len when --preset is given, else the model's own context length.
# Arguments after MODEL go to `trl vllm-serve` as they are and win over these (e.g. --gpu_memory_utilization 0.8,
# --tensor_parallel_size 2 with VLLM_GPU=0,1). --dry-run prints the command without starting it.
set -euo pipefail

usage="usage: scripts/serve_vllm.sh [--dry-run] MODEL [--preset SIZE] [trl vllm-serve args]"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then
    dry_run=1
    shift
fi
if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "serve_vllm.sh: give the model to serve first; $usage" >&2
    exit 2
fi
model="$1"
shift

preset=""
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --preset)
            [[ $# -ge 2 ]] || { echo "serve_vllm.sh: --preset needs a size, e.g. --preset 7b" >&2; exit 2; }
            preset="$2"
            shift 2
            ;;
        --preset=*)
            preset="${1#--preset=}"
            shift
            ;;
        *)
            extra+=("$1")
            shift
            ;;
    esac
done

max_model_len="${MAX_MODEL_LEN:-}"
if [[ -z "$max_model_len" && -n "$preset" ]]; then
    preset_file="$root/config/models/$preset.yaml"
    if [[ ! -f "$preset_file" ]]; then
        names="$(cd "$root/config/models" && ls ./*.yaml | sed 's|^\./||; s|\.yaml$||' | sort | paste -sd, -)"
        echo "serve_vllm.sh: --preset $preset: no such preset; choose one of $names" >&2
        exit 2
    fi
    max_model_len="$(python -c '
import sys, yaml
values = yaml.safe_load(open(sys.argv[1])) or {}
length = values.get("max_model_len", values.get("vllm_max_model_length"))
print("" if length is None else length)
' "$preset_file")"
fi

command=(trl vllm-serve --model "$model" --port "${VLLM_PORT:-8000}")
if [[ -n "$max_model_len" ]]; then
    command+=(--max_model_len "$max_model_len")
fi
command+=("${extra[@]}")

export CUDA_VISIBLE_DEVICES="${VLLM_GPU:-0}"
export NCCL_P2P_DISABLE=1
printf -v shown ' %q' "${command[@]}"
echo "+ CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES NCCL_P2P_DISABLE=1$shown"
if [[ $dry_run -eq 1 ]]; then
    exit 0
fi
exec "${command[@]}"
