"""GRPO training of code models on problems with test cases (Q or Python), judged in a sandbox.

    accelerate launch --config_file config/zero3.yaml rl_trainer.py --model CKPT --use_vllm ...
    python rl_trainer.py --model tiny_model --language python --max_steps 3

Every GRPOConfig field is a flag; `--preset 7b` and `--config FILE.yaml` give defaults that flags override.
Outputs go to final_outputs/<size>/<format>/ (or --output_dir); see README.md. The checks before training and the
exits after it are training/session.py's.
"""

import logging
import sys
import time
import traceback
from contextlib import closing

from accelerate import PartialState
from datasets import Dataset

from cli import UsageError
from rewards import make_reward_funcs
from training.arguments import Arguments, parse_args
from training.canary import CanaryTripped
from training.console import print_last, use_step_lines
from training.evaluation import PassAtKEvaluator
from training.hidden_tests import HiddenTestsStopped
from training.prompts import prompt_rows
from training.run_folder import RunLogCallback
from training.session import (ENTRY, Session, canary_stopped, check_reward_function, evaluate_only,
                              hidden_tests_stopped, interrupted, main_rank, make_evaluator, make_hidden_watch,
                              make_tracker, open_session, prepare, stopped_weights, summary, watches_hidden_tests)
from training.vllm_timeout import VLLMServerUnresponsive

logger = logging.getLogger("rl_trainer")
RANK_EXIT_DELAY_S = 5


def fail(message: str) -> None:
    """One line and exit 2, printed by the main process only. The other ranks hit the same error; they wait a moment
    so that the line is out before the launcher, seeing a rank fail, stops the rest."""
    if main_rank():
        print_last(f"{ENTRY}: error: {message}")
    else:
        time.sleep(RANK_EXIT_DELAY_S)
    sys.exit(2)


def main(argv=None) -> int:
    state = PartialState()
    logging.basicConfig(level=logging.INFO if main_rank() else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args = parse_args(argv)
    except UsageError as e:
        fail(str(e))
    try:
        return run(args, state)
    except KeyboardInterrupt as interrupt:
        # The interrupted frames' locals go now, even where something outlives the except block that still holds
        # the frames (an import the interrupt landed in keeps them, and with them the trainer and its bars).
        traceback.clear_frames(interrupt.__traceback__)
    if main_rank():
        print_last(f"{ENTRY}: {interrupted(args)}")
    return 130


def run(args: Arguments, state: PartialState) -> int:
    """Check everything a user's input can break before any model weights load, then train (or evaluate)."""
    try:
        session = open_session(args, state)
    except UsageError as e:
        fail(str(e))
    with closing(session.judge):
        try:
            if args.rewards.test_reward_function:
                return check_reward_function(session)
            prepare(session)
        except UsageError as e:
            fail(str(e))
        state.wait_for_everyone()  # every rank has checked the run folder before the main one writes into it
        logger.info("judging: %s", session.judge.isolation)
        logger.info("data: %s (%d train, %d %s problems to evaluate)", session.source, len(session.train),
                    len(session.evaluated), args.eval.eval_split)
        evaluator = make_evaluator(session)
        if args.eval.eval_only:
            return evaluate_only(session, evaluator)
        return train(session, evaluator)


def make_feedback(session: Session):
    """The feedback rounds of --feedback_turns (training/feedback.py), or None."""
    args = session.args
    if not args.grpo.feedback_turns:
        return None
    from training.feedback import FeedbackRounds

    return FeedbackRounds(args.grpo.feedback_turns, session.judge, {p.id: p for p in session.train},
                          session.tokenizer, chat=args.data.prompt_style == "chat")


def train(session: Session, evaluator: PassAtKEvaluator | None) -> int:
    """Build the trainer, train, save the final model and say where the outputs are."""
    args, state, run, resume = session.args, session.state, session.run, session.resume
    if state.is_main_process:
        run.start(args.settings(), resume)
    state.wait_for_everyone()
    dataset = Dataset.from_list(prompt_rows(session.train, args.data.use_reasoning_format, args.data.prompt_style))
    tracker = make_tracker(session)
    feedback = make_feedback(session)
    if evaluator is not None:
        evaluator.feedback = feedback  # pass@k after the rounds too
    from training.trainer import QGRPOTrainer  # here, not above: TRL's trainer costs --help half a second
    if resume:
        resume.continue_training(args.grpo, tracker)
    trainer = QGRPOTrainer(
        model=args.model.model,
        reward_funcs=make_reward_funcs(args.rewards.reward_funcs, session.judge, args.scoring, session.train,
                                       args.data.use_reasoning_format, session.trivial_shares,
                                       watch_hidden_tests=watches_hidden_tests(args), pool_seed=args.grpo.seed),
        args=args.grpo,
        train_dataset=dataset,
        processing_class=session.tokenizer,
        peft_config=args.model.peft_config(),
        callbacks=[RunLogCallback(run)],
        evaluator=evaluator if args.eval.eval_pass_at_k else None,
        tracker=tracker,
        hidden_watch=make_hidden_watch(session),
        vllm_request_timeout=args.grpo.vllm_request_timeout,
        async_generation=args.grpo.async_generation,
        feedback=feedback,
    )
    use_step_lines(trainer)
    try:
        trainer.train(resume_from_checkpoint=resume.checkpoint if resume else None)
    except VLLMServerUnresponsive as e:
        # Checkpoints are saved between steps, so the newest one is whole. Ranks waiting in a collective are
        # stopped by the launcher when this one exits.
        print_last(f"{ENTRY}: {e}")
        return 1
    except (CanaryTripped, HiddenTestsStopped) as stop:
        stopped = stop
    else:
        trainer.save_model(str(run.final_model))
        if state.is_main_process:
            session.tokenizer.save_pretrained(run.final_model)
            print(summary(run, trainer.state.global_step))
        return 0
    if isinstance(stopped, HiddenTestsStopped):
        return hidden_tests_stopped(stopped.alarm, run)
    return canary_stopped(stopped.alarm, stopped_weights(run, stopped.alarm, args.model.model))


if __name__ == "__main__":
    sys.exit(main())
