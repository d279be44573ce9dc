"""GRPO training of code models on problems with test cases (Q or Python), judged in a sandbox.

    accelerate launch --config_file config/zero3.yaml rl_trainer.py --model CKPT --use_vllm ...
    python rl_trainer.py --model tiny_model --language python --max_steps 3

Every GRPOConfig field is a flag; `--preset 7b` and `--config FILE.yaml` give defaults that flags override.
Outputs go to final_outputs/<size>/<format>/ (or --output_dir); see README.md. A run is a `TrainingRun`
(training/run.py): checked, prepared, then trained or evaluated; every early end is a `RunStopped`
(training/stops.py), whose line is the last one printed.
"""

import logging
import sys
import traceback
from contextlib import closing

from accelerate import PartialState

from cli import UsageError
from training.arguments import Arguments, parse_args
from training.run import TrainingRun, interrupted
from training.stops import RunStopped, finish, main_rank


def main(argv=None) -> int:
    state = PartialState()
    logging.basicConfig(
        level=logging.INFO if main_rank() else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        args = parse_args(argv)
        try:
            return run(args, state)
        except KeyboardInterrupt as interrupt:
            # The interrupted frames' locals go now, even where something outlives the except block that still
            # holds the frames (an import the interrupt landed in keeps them, and with them the trainer and its bars).
            traceback.clear_frames(interrupt.__traceback__)
        raise interrupted(args)
    except UsageError as error:
        return finish(RunStopped.usage(error))
    except RunStopped as stop:
        return finish(stop)


def run(args: Arguments, state: PartialState) -> int:
    """One run, top to bottom: check every input before any weights load, then train or evaluate."""
    training_run = TrainingRun.check(args, state)
    with closing(training_run):
        if args.rewards.test_reward_function:
            return training_run.test_reward_function()
        training_run.prepare()
        evaluator = training_run.evaluator()
        if args.eval.eval_only:
            return training_run.evaluate(evaluator)
        trainer = training_run.build(evaluator)
        return training_run.train(trainer)


if __name__ == "__main__":
    sys.exit(main())
