#!/usr/bin/env bash
# The CPU demo: GRPO that visibly learns on a 2-core machine in a few minutes, judged by the real sandbox.
#
#   bash scripts/cpu_demo.sh [RUN_DIR]          (default final_outputs/demo)
#
# 0. installs what it needs (scripts/install.sh);
# 1. builds a tiny random Qwen2 (hidden 128, 4 layers, ~0.85M parameters) with a tokenizer trained on the bundled problems;
# 2. warm-starts it with a short supervised run on the canonical solutions of the 13 warm-up training problems
#    (scripts/sft_warm_start.py), stopped early on purpose so it is right only some of the time;
# 3. runs GRPO on those 13 problems with the sandboxed test-case reward, evaluating pass@k on them before and
#    after (--eval_split train: this measures fitting the training problems, not generalisation);
# 4. plots the run and prints the reward of the first vs last steps and pass@k before vs after
#    (benchmarks/learning_check.py; the script's exit code is that check's).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${1:-final_outputs/demo}"
PROBLEMS=13  # the warm-up problems of the training split come first in data/python_problems.jsonl

# One torch thread: the judge's sandboxed test processes share the two cores with training, and two threads
# competing with them made a training step several times slower on a loaded 2-core machine.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export TOKENIZERS_PARALLELISM=false

cd "$ROOT"
started=$SECONDS
phase() { echo; echo "== $1 ($((SECONDS - started)) s elapsed)"; }

phase "0/4 install (bubblewrap, pinned requirements)"
bash scripts/install.sh

phase "1/4 tiny model"
python scripts/make_tiny_model.py "$RUN_DIR/tiny_model" --hidden_size 128 --layers 4

phase "2/4 supervised warm start on the canonical solutions"
python scripts/sft_warm_start.py "$RUN_DIR/tiny_model" "$RUN_DIR/warm_start" --problems warmup --epochs 40 \
    --learning_rate 1e-3 2>&1 | grep -v "^{'loss'"

phase "3/4 GRPO with the sandboxed test-case reward"
python rl_trainer.py --model "$RUN_DIR/warm_start" --language python --output_dir "$RUN_DIR" \
    --overwrite_output_dir --max_train_problems "$PROBLEMS" --reward_funcs test_cases \
    --max_steps 60 --learning_rate 2e-4 --beta 0 --generation_temp 0.7 --max_completion_length 48 \
    --num_generations 8 --per_device_train_batch_size 32 --gradient_accumulation_steps 1 --save_steps 60 \
    --eval_split train --eval_on_start --eval_steps 0 --simple_eval_problems "$PROBLEMS" \
    --repeat_eval_problems 16 --eval_k 1 4 8

phase "4/4 plots and the learning check"
python scripts/plot_run.py "$RUN_DIR"
echo
status=0
python benchmarks/learning_check.py "$RUN_DIR" || status=$?
echo
echo "demo finished in $((SECONDS - started)) s. Run folder: $RUN_DIR/ (logs/training_log.txt, logs/metrics.jsonl,"
echo "logs/eval_results.json, logs/eval_samples/); plots: $RUN_DIR/logs/plots/*.png; models: $RUN_DIR/tiny_model,"
echo "$RUN_DIR/warm_start (before GRPO), $RUN_DIR/final_model (after)."
exit $status
