# The memory plan as the launchers read it: exps.sh and scripts/slurm/train.sbatch source this file and call
# memory_plan, the one place that runs training/memory_plan.py with the layout settings of the environment and reads
# back the layout it picks, which the plan writes as shell assignments.
#
#   memory_plan LAYOUT_FILE [PLAN FLAGS] [-- TRAINER FLAGS]       (from the repository root)
#
# PLAN FLAGS are `python -m training.memory_plan --help`'s. The environment adds, each when set:
#   GPUS_PER_NODE               GPUs of a node (default 8)
#   GPU_MEMORY_GIB              each GPU's memory in GiB (default: nvidia-smi's memory.total / 1024 where it runs,
#                               else the plan's 79.6, an H100 80GB's; an H200's is 140.4)
#   VLLM_GPU                    the server's GPUs
#   VLLM_TENSOR_PARALLEL_SIZE   the server's tensor-parallel size, vLLM's --tensor-parallel-size
# It sets plan_lines (the plan, to print) and, where the layout fits, writes LAYOUT_FILE and sources it:
# plan_accelerate_config, plan_tensor_parallel_size, plan_vllm_gpus, plan_train_gpus, plan_processes,
# plan_max_model_len, plan_gpu_memory_gib. Where it does not fit it returns 2, plan_lines holding the one line that
# names the fix.
memory_plan() {
    local layout="$1" status=0 gpu_memory="${GPU_MEMORY_GIB:-}"
    shift
    local args=(--gpus-per-node "${GPUS_PER_NODE:-8}")
    if [[ -n "${GPU_MEMORY_GB:-}" ]]; then
        plan_lines="GPU_MEMORY_GB is not read; set GPU_MEMORY_GIB, each GPU's memory in GiB (nvidia-smi's memory.total / 1024: 79.6 for an H100 80GB, 140.4 for an H200)"
        return 2
    fi
    if [[ -n "${VLLM_TENSOR_PARALLEL:-}" ]]; then
        plan_lines="VLLM_TENSOR_PARALLEL is not read; set VLLM_TENSOR_PARALLEL_SIZE (vLLM's --tensor-parallel-size)"
        return 2
    fi
    if [[ -z "$gpu_memory" ]] && command -v nvidia-smi > /dev/null 2>&1; then
        gpu_memory="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 |
            awk '{printf "%.1f", $1 / 1024}')" || gpu_memory=""
    fi
    [[ -z "$gpu_memory" ]] || args+=(--gpu-memory "$gpu_memory")
    [[ -z "${VLLM_GPU:-}" ]] || args+=(--vllm-gpus "$VLLM_GPU")
    [[ -z "${VLLM_TENSOR_PARALLEL_SIZE:-}" ]] || args+=(--tensor-parallel-size "$VLLM_TENSOR_PARALLEL_SIZE")
    plan_lines="$(python -m training.memory_plan "${args[@]}" --layout-file "$layout" "$@" 2>&1)" || status=$?
    if [[ $status != 0 ]]; then
        return "$status"
    fi
    # shellcheck source=/dev/null
    source "$layout"
}
