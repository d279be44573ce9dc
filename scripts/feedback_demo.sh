#!/usr/bin/env bash
# Does a feedback round raise held-out pass@1? The CPU demo's problems and tiny model, a warm start that has seen
# feedback messages, then an evaluation with --feedback_turns 1, judged by the real sandbox.
#
#   DEMO_SEED=N bash scripts/feedback_demo.sh [RUN_DIR]      (defaults: DEMO_SEED=0, RUN_DIR=final_outputs/feedback_demo)
#
# 1. the CPU demo's problems (scripts/make_demo_problems.py) with --examples: each description shows one call and
#    its result, the test the feedback rounds run a reply's code on; a fifth of each family is held out;
# 2. the tiny random Qwen2, its tokenizer trained on the training split only (scripts/make_tiny_model.py);
# 3. the supervised warm start on the training split (scripts/sft_warm_start.py), stopped once greedy decoding
#    reproduces half of 64 training solutions, with --feedback_examples 1 (FEEDBACK_EXAMPLES=N): per training
#    problem, a wrong reply, the judge's message on it, then the right code, laid out as the rounds lay them out;
# 4. --eval_only of the warm start on every held-out problem with --feedback_turns 1: each sample's first reply is
#    judged, then a reply that fails the shown example gets the judge's message and writes once more;
# 5. the paired bootstrap over the held-out problems of pass@1 after the round minus the first reply's
#    (benchmarks/feedback_gain.py; the script's exit code is that check's).
#
# No GRPO: what is measured is the loop itself, on a model taught its format. Requirements as scripts/cpu_demo.sh
# (run scripts/install.sh once).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${1:-final_outputs/feedback_demo}"
SEED="${DEMO_SEED:-0}"
ALL=1000  # above the number of held-out problems: evaluate every one
SAMPLES="${FEEDBACK_SAMPLES:-4}"  # samples per held-out problem
EXAMPLES="${FEEDBACK_EXAMPLES:-1}"  # second-reply examples per training problem in the warm start (0: none, a control)

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # one torch thread: the judge's sandboxed runs share the cores
export TOKENIZERS_PARALLELISM=false

cd "$ROOT"
started=$SECONDS
phase() { echo; echo "== $1 ($((SECONDS - started)) s elapsed)"; }

phase "1/5 problems with a shown example each (DEMO_SEED=$SEED)"
python scripts/make_demo_problems.py "$RUN_DIR/problems.jsonl" --seed "$SEED" --examples \
    --tokenizer_corpus "$RUN_DIR/tokenizer_corpus"

phase "2/5 tiny model"
python scripts/make_tiny_model.py "$RUN_DIR/tiny_model" --data_dir "$RUN_DIR/tokenizer_corpus" \
    --hidden_size 128 --layers 4 --seed "$SEED"

phase "3/5 supervised warm start on the training split, with feedback examples"
python scripts/sft_warm_start.py "$RUN_DIR/tiny_model" "$RUN_DIR/warm_start" --data "$RUN_DIR/problems.jsonl" \
    --problems train --epochs 40 --learning_rate 1e-3 --batch_size 8 --stop_at_exact 0.5 --check_every 16 \
    --feedback_examples "$EXAMPLES" --seed "$SEED" 2>&1 | grep -v "^{'loss'"

phase "4/5 evaluation of the warm start on the held-out problems, one feedback round"
python rl_trainer.py --eval_only --model "$RUN_DIR/warm_start" --data "$RUN_DIR/problems.jsonl" \
    --language python --output_dir "$RUN_DIR/evaluation" --seed "$SEED" --feedback_turns 1 \
    --eval_split test --simple_eval_problems "$ALL" --max_test_problems "$ALL" --repeat_eval_problems "$SAMPLES" \
    --eval_k 1 --eval_temperature 0.7 --eval_max_tokens 40 | tail -2

phase "5/5 the paired bootstrap: pass@1 after the round minus the first reply's"
status=0
python benchmarks/feedback_gain.py "$RUN_DIR/evaluation" || status=$?
echo
echo "feedback demo finished in $((SECONDS - started)) s (DEMO_SEED=$SEED). Evaluation: $RUN_DIR/evaluation/logs/"
echo "(eval_results.json: per problem, the first reply's passes and those after the round, under \"feedback\";"
echo "eval_samples/: each sample's replies and the messages between them)."
exit $status
