#!/usr/bin/env bash
# The reference's experiment sweeps, one per model size, on one 8-GPU node: a vLLM server on one GPU
# (scripts/serve_vllm.sh) and GRPO training on the other seven under DeepSpeed ZeRO-3.
#
#   ./exps.sh [--dry-run] 1.5b|3b|7b|14b|32b|all
#   ./exps.sh --dry-run                            (no size: every size)
#
# Settings per size come from config/models/<size>.yaml (--preset); 14b and 32b train the reasoning format.
# Environment:
#   CKPT_1_5B CKPT_3B CKPT_7B CKPT_14B CKPT_32B   the SFT checkpoint of each size (folder or hub name); a run
#                       needs the ones of its sizes, a dry run shows an unset one as a placeholder ($CKPT_7B)
#   TRAIN_GPUS          GPUs that train, comma-separated (default 1,2,3,4,5,6,7; one process each)
#   VLLM_GPU            GPU of the vLLM server (default 0)
#   VLLM_PORT           port of the vLLM server (default 8000)
#   MAX_MODEL_LEN       vLLM context length (default 8192, as the reference's servers)
#   ACCELERATE_CONFIG   accelerate config (default config/zero3.yaml; config/zero3_offload.yaml for 32b on 80 GB GPUs)
#   WANDB_PROJECT       wandb project (default q-language-training)
#   VLLM_WAIT           seconds to wait for the server to answer /health (default 1800)
# Runs write to final_outputs/<size>/<format>/, the server's log to final_outputs/<size>/vllm_server.log.
# --dry-run prints each size's server and training command and runs nothing; it needs no environment.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

usage="usage: ./exps.sh [--dry-run] 1.5b|3b|7b|14b|32b|all (a dry run with no size shows all)"

dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then
    dry_run=1
    shift
fi
if [[ $# -eq 0 && $dry_run -eq 1 ]]; then
    set -- all
fi
if [[ $# -ne 1 ]]; then
    echo "exps.sh: name one size or all; $usage" >&2
    exit 2
fi
case "$1" in
    all) sizes=(1.5b 3b 7b 14b 32b) ;;
    1.5b|3b|7b|14b|32b) sizes=("$1") ;;
    *) echo "exps.sh: unknown size '$1'; $usage" >&2; exit 2 ;;
esac

train_gpus="${TRAIN_GPUS:-1,2,3,4,5,6,7}"
IFS=, read -r -a gpu_list <<< "$train_gpus"
num_processes="${#gpu_list[@]}"
vllm_gpu="${VLLM_GPU:-0}"
vllm_port="${VLLM_PORT:-8000}"
max_model_len="${MAX_MODEL_LEN:-8192}"
accelerate_config="${ACCELERATE_CONFIG:-config/zero3.yaml}"
wandb_project="${WANDB_PROJECT:-q-language-training}"
vllm_wait="${VLLM_WAIT:-1800}"

checkpoint_var() {  # 1.5b -> CKPT_1_5B
    local var="CKPT_${1^^}"
    echo "${var//./_}"
}

# The checkpoint of a size; a dry run shows an unset one as its variable, which a real run refuses.
checkpoint_of() {
    local var
    var="$(checkpoint_var "$1")"
    if [[ -n "${!var:-}" ]]; then
        echo "${!var}"
    elif [[ $dry_run -eq 1 ]]; then
        echo "\$$var"
    else
        echo "exps.sh: set $var to the $1 SFT checkpoint (a folder or hub name) to run the $1 sweep" >&2
        exit 2
    fi
}

format_of() {  # the trainer's format folder name for a preset, read from its YAML
    python -c 'import sys, yaml; print("reasoning" if (yaml.safe_load(open(sys.argv[1])) or {}).get("use_reasoning_format") else "non_reasoning")' "config/models/$1.yaml"
}

# Print a command as a shell would read it back, quoting only the words that need it; a checkpoint placeholder
# stays a variable, so the line runs as it is once that variable is set.
show() {
    local line="+" word quoted
    for word in "$@"; do
        if [[ "$word" =~ ^[][A-Za-z0-9_./,=:@%+-]+$ || ( $dry_run -eq 1 && "$word" =~ ^\$CKPT_[0-9A-Z_]+$ ) ]]; then
            line+=" $word"
        else
            printf -v quoted '%q' "$word"
            line+=" $quoted"
        fi
    done
    echo "$line"
}

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill -- "-$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

wait_for_server() {
    local log="$1" waited=0
    until curl -sf -o /dev/null "http://127.0.0.1:$vllm_port/health"; do
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "exps.sh: the vLLM server exited before answering; see $log" >&2
            exit 1
        fi
        if (( waited >= vllm_wait )); then
            echo "exps.sh: no answer from the vLLM server after ${vllm_wait}s; see $log or raise VLLM_WAIT" >&2
            exit 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
}

# Check every requested checkpoint before anything starts, so `all` does not stop at the fourth size.
for size in "${sizes[@]}"; do
    checkpoint_of "$size" > /dev/null
done

for size in "${sizes[@]}"; do
    ckpt="$(checkpoint_of "$size")"
    format="$(format_of "$size")"
    serve=(env VLLM_GPU="$vllm_gpu" VLLM_PORT="$vllm_port" MAX_MODEL_LEN="$max_model_len" scripts/serve_vllm.sh "$ckpt" --preset "$size")
    train=(env CUDA_VISIBLE_DEVICES="$train_gpus"
        accelerate launch --num-processes "$num_processes" --config-file "$accelerate_config"
        rl_trainer.py --preset "$size" --model "$ckpt" --use_vllm --vllm_server_port "$vllm_port"
        --output_dir "final_outputs/$size/$format/"
        --use_wandb --wandb_project "$wandb_project" --wandb_name "q-grpo-$size-$format")
    var="$(checkpoint_var "$size")"
    if [[ -z "${!var:-}" ]]; then
        echo "# $size ($format); $var is not set: a run needs it"
    else
        echo "# $size ($format)"
    fi
    show "${serve[@]}"
    show "${train[@]}"
    if [[ $dry_run -eq 1 ]]; then
        continue
    fi

    mkdir -p "final_outputs/$size"
    log="final_outputs/$size/vllm_server.log"
    setsid "${serve[@]}" > "$log" 2>&1 &
    server_pid=$!
    wait_for_server "$log"
    "${train[@]}"
    stop_server
done
