#!/usr/bin/env bash
# The reference's experiment sweeps, one run per model size: a vLLM server (scripts/serve_vllm.sh) and GRPO training
# on the node's other GPUs under DeepSpeed ZeRO-3, on this 8-GPU node or as Slurm jobs. Each size's memory plan
# (training/memory_plan.py) picks the server's tensor-parallel size and the accelerate config that fit, is printed
# above its commands, and stops the sweep before anything starts when the layout does not fit, naming the fix.
#
#   ./exps.sh [--dry-run] [--name SWEEP] [--slurm [--nodes N]] SIZE...|all [-- TRAINER FLAGS]
#   ./exps.sh --dry-run                            (no size: every size)
#
#   SIZE            a preset in config/models/ (each <size>.yaml there is a size); several run in turn, all = every one
#   --dry-run       print each size's commands and run nothing; needs no environment
#   --name SWEEP    runs go to final_outputs/SWEEP/<size>/<format>/ with wandb name q-grpo-SWEEP-<size>-<format>
#                   (default: final_outputs/<size>/<format>/ and q-grpo-<size>-<format>, the reference's)
#   --slurm         submit one job per size through scripts/slurm/train.sbatch instead of running here
#   --nodes N       with --slurm, nodes per job (default 1: one node split as here; 2 or more: vLLM on node 0)
#   -- FLAGS        trainer flags added to every run, last so they win (--config my.yaml, --learning_rate 1e-6, ...)
#
# Settings per size come from config/models/<size>.yaml (--preset); 14b and 32b train the reasoning format.
# Environment:
#   CKPT_<SIZE>         the SFT checkpoint of each size (folder or hub name; CKPT_1_5B, CKPT_7B, ...); a run needs
#                       the ones of its sizes, a dry run shows an unset one as a placeholder ($CKPT_7B)
#   GPU_MEMORY_GIB      memory of each GPU in GiB (default: nvidia-smi's memory.total / 1024 where it runs, else
#                       79.6, an H100 80GB's; 140.4 for an H200)
#   GPUS_PER_NODE       GPUs of a node (default 8)
#   VLLM_TENSOR_PARALLEL_SIZE  the server's tensor-parallel size (default: the plan's pick, the smallest whose KV
#                       cache holds a step's sequences at once)
#   VLLM_GPU            GPUs of the vLLM server (default: the first VLLM_TENSOR_PARALLEL_SIZE, 0 or 0,1 ...)
#   TRAIN_GPUS          GPUs that train, comma-separated, one process each (default: every GPU the server leaves;
#                       none of VLLM_GPU's); with --slurm, train.sbatch's GPUS_PER_NODE less VLLM_GPU instead
#   VLLM_PORT           port of the vLLM server (default 8000)
#   MAX_MODEL_LEN       vLLM context length (default 8192 for every size, as the reference's servers)
#   ACCELERATE_CONFIG   accelerate config (default: the plan's pick, the first that fits of config/zero3.yaml,
#                       config/zero3_offload_optimizer.yaml (32b on 80 GB GPUs) and config/zero3_offload.yaml)
#   NCCL_P2P_DISABLE    unset (default) or 1 (where the weight sync hangs, huggingface/trl#2923): given to the server
#                       and the trainers alike, as NCCL needs
#   WANDB_PROJECT       wandb project (default q-language-training)
#   VLLM_WAIT           seconds to wait for the server to answer /health (default 1800)
#   SBATCH_*            sbatch's own settings for --slurm (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...)
# The server's log goes to the run's parent folder (vllm_server.log). A size whose run folder already holds a run
# stops the sweep before anything starts, unless the trainer flags resume or overwrite it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source scripts/memory_plan.sh

mapfile -t known_sizes < <(ls config/models | sed -n 's/\.yaml$//p' | sort -g)
usage="usage: ./exps.sh [--dry-run] [--name SWEEP] [--slurm [--nodes N]] $(IFS='|'; echo "${known_sizes[*]}")|all"
usage+=" [-- TRAINER FLAGS] (--help for more; a dry run with no size shows all)"

fail() {
    echo "exps.sh: $1" >&2
    exit 2
}

dry_run=0 slurm=0 nodes=1 sweep="" sizes=() extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --dry-run) dry_run=1 ;;
        --slurm) slurm=1 ;;
        --name|--nodes)
            [[ $# -ge 2 && -n "$2" && "$2" != -* ]] || fail "$1 needs a value; $usage"
            if [[ "$1" == --name ]]; then
                [[ "$2" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || fail "--name $2: use letters, digits, '.', '_', '-'"
                sweep="$2"
            else
                [[ "$2" =~ ^[1-9][0-9]*$ ]] || fail "--nodes takes a whole number above 0, got '$2'"
                nodes="$2"
            fi
            shift ;;
        --) shift; extra=("$@"); break ;;
        all) sizes+=("${known_sizes[@]}") ;;
        -*) fail "unknown flag '$1' (trainer flags go after --); $usage" ;;
        *)
            [[ " ${known_sizes[*]} " == *" $1 "* ]] || fail "unknown size '$1'; $usage"
            sizes+=("$1") ;;
    esac
    shift
done
if [[ ${#sizes[@]} -eq 0 ]]; then
    [[ $dry_run -eq 1 ]] || fail "name a size or all; $usage"
    sizes=("${known_sizes[@]}")
fi
if [[ $nodes != 1 && $slurm == 0 ]]; then
    fail "--nodes is for --slurm jobs; here one node runs each size"
fi

vllm_port="${VLLM_PORT:-8000}"
max_model_len="${MAX_MODEL_LEN:-8192}"
for variable in VLLM_GPU TRAIN_GPUS; do
    [[ "${!variable:-0}" =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "$variable takes GPU numbers such as 0 or 0,1, got '${!variable}'"
done
nccl=()  # on both sides or neither: NCCL needs the same transports on every rank of the weight sync's group
[[ -z "${NCCL_P2P_DISABLE:-}" ]] || nccl=(NCCL_P2P_DISABLE="$NCCL_P2P_DISABLE")
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
        fail "set $var to the $1 SFT checkpoint (a folder or hub name) to run the $1 sweep"
    fi
}

format_of() {  # the trainer's format folder name for a preset, read from its YAML
    python -c 'import sys, yaml; print("reasoning" if (yaml.safe_load(open(sys.argv[1])) or {}).get("use_reasoning_format") else "non_reasoning")' "config/models/$1.yaml"
}

run_folder_of() {  # run_folder_of SIZE FORMAT
    echo "final_outputs/${sweep:+$sweep/}$1/$2/"
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
layouts="$(mktemp -d)"  # each size's layout, as its memory plan writes it
trap 'stop_server; rm -rf "$layouts"' EXIT
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

# Each size's memory plan: its lines (printed above its commands) and the layout it picked, in
# $layouts/<size>.sh, or exit 2 with the plan's one line naming the fix.
declare -A plans
plan_of() {
    local size="$1"
    local args=(--preset "$size" --model "$(checkpoint_of "$size")" --nodes "$nodes" --max-model-len "$max_model_len")
    [[ -z "${TRAIN_GPUS:-}" || $slurm == 1 ]] || args+=(--train-gpus "$TRAIN_GPUS")
    [[ -z "${ACCELERATE_CONFIG:-}" ]] || args+=(--accelerate-config "$ACCELERATE_CONFIG")
    memory_plan "$layouts/$size.sh" "${args[@]}" -- "${extra[@]}" || fail "$plan_lines"
    plans[$size]="$plan_lines"
}

# Check every requested size before anything starts, so `all` does not stop at the fourth: its checkpoint, its
# memory plan, and that its run folder is free (the trainer would refuse it only after the server had loaded).
continuing=0
for flag in "${extra[@]}"; do
    [[ "$flag" != --resume_from_checkpoint* && "$flag" != --overwrite_output_dir* ]] || continuing=1
done
for size in "${sizes[@]}"; do
    checkpoint_of "$size" > /dev/null
    plan_of "$size"
    folder="$(run_folder_of "$size" "$(format_of "$size")")"
    if [[ $dry_run -eq 0 && $continuing -eq 0 && ( -e "$folder/config.yaml" || -d "$folder/checkpoints" ) ]]; then
        fail "$folder already holds a run; name this sweep with --name SWEEP, or add -- --resume_from_checkpoint latest"
    fi
done

for size in "${sizes[@]}"; do
    ckpt="$(checkpoint_of "$size")"
    format="$(format_of "$size")"
    folder="$(run_folder_of "$size" "$format")"
    run_name="q-grpo-${sweep:+$sweep-}$size-$format"
    wandb=(--use_wandb --wandb_project "$wandb_project")
    var="$(checkpoint_var "$size")"
    if [[ -z "${!var:-}" ]]; then
        echo "# $size ($format); $var is not set: a run needs it"
    else
        echo "# $size ($format)"
    fi
    sed 's/^/#   /' <<< "${plans[$size]}"
    source "$layouts/$size.sh"
    tensor_parallel_size=()
    [[ $plan_tensor_parallel_size == 1 ]] || tensor_parallel_size=(--tensor_parallel_size "$plan_tensor_parallel_size")
    if [[ $slurm -eq 1 ]]; then
        submit=(env GPU_MEMORY_GIB="$plan_gpu_memory_gib" VLLM_GPU="$plan_vllm_gpus"
            VLLM_TENSOR_PARALLEL_SIZE="$plan_tensor_parallel_size"
            VLLM_PORT="$vllm_port" MAX_MODEL_LEN="$max_model_len" VLLM_WAIT="$vllm_wait" "${nccl[@]}"
            sbatch -N "$nodes" --job-name "$run_name" scripts/slurm/train.sbatch --model "$ckpt" --preset "$size"
            --accelerate-config "$plan_accelerate_config" --run-name "$run_name" --output-dir "$folder"
            -- "${wandb[@]}" "${extra[@]}")
        show "${submit[@]}"
        if [[ $dry_run -eq 0 ]]; then
            "${submit[@]}"
        fi
        continue
    fi
    serve=(env VLLM_GPU="$plan_vllm_gpus" VLLM_PORT="$vllm_port" MAX_MODEL_LEN="$max_model_len" "${nccl[@]}"
        scripts/serve_vllm.sh "$ckpt" --preset "$size" "${tensor_parallel_size[@]}")
    train=(env CUDA_VISIBLE_DEVICES="$plan_train_gpus" "${nccl[@]}"
        accelerate launch --num-processes "$plan_processes" --config-file "$plan_accelerate_config"
        rl_trainer.py --preset "$size" --model "$ckpt" --use_vllm --vllm_server_port "$vllm_port"
        --output_dir "$folder" "${wandb[@]}" --wandb_name "$run_name" "${extra[@]}")
    show "${serve[@]}"
    show "${train[@]}"
    if [[ $dry_run -eq 1 ]]; then
        continue
    fi

    mkdir -p "$folder"
    log="$(dirname "$folder")/vllm_server.log"
    setsid "${serve[@]}" > "$log" 2>&1 &
    server_pid=$!
    wait_for_server "$log"
    "${train[@]}"
    stop_server
done
