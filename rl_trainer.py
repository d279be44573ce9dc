"""GRPO training of code models on problems with test cases (Q or Python), judged in a sandbox.

    accelerate launch --config_file config/zero3.yaml rl_trainer.py --model CKPT --use_vllm ...
    python rl_trainer.py --model tiny_model --language python --max_steps 3

Every GRPOConfig field is a flag; `--preset 7b` and `--config FILE.yaml` give defaults that flags override.
Outputs go to final_outputs/<size>/<format>/ (or --output_dir); see README.md.
"""

import gc
import json
import logging
import os
import sys
import time
import traceback
from contextlib import closing
from pathlib import Path

from accelerate import Accelerator, PartialState
from accelerate.utils import broadcast_object_list
from datasets import Dataset

from data import bundled_path, cached_trivial_shares, load_problems, split_problems, verify_problems
from cli import UsageError
from judging import Judge
from rewards import TestVerdicts, make_reward_funcs, score
from training.arguments import Arguments, bf16_supported, parse_args
from training.canary import CANARY_EXIT_CODE, Alarm, CanaryStop, CanaryTripped, CanaryWatch, build_canaries
from training.console import use_step_lines
from training.difficulty import DifficultyFilter, ProblemTracker
from training.evaluation import PassAtKEvaluator
from training.preflight import (check_memory, check_model, check_packages, check_vllm_server, check_vllm_server_device,
                                check_wandb, load_tokenizer)
from training.prompts import prompt_rows
from training.run_folder import RunFolder, RunLogCallback, checkpoint_step, model_step
from training.vllm_timeout import VLLMServerUnresponsive

logger = logging.getLogger("rl_trainer")
RANK_EXIT_DELAY_S = 5


def main_rank() -> bool:
    """Whether this is the launch's rank 0 (or a lone process). Read from the launcher's RANK: accelerate's process
    state says "main" on every rank of a CPU launch until the training settings set it up."""
    return os.environ.get("RANK", "0") == "0"


def fail(message: str) -> None:
    """One line and exit 2, printed by the main process only. The other ranks hit the same error; they wait a moment
    so that the line is out before the launcher, seeing a rank fail, stops the rest."""
    if main_rank():
        print(f"rl_trainer.py: error: {message}", file=sys.stderr)
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
        return run_session(args, state)
    except KeyboardInterrupt as interrupt:
        # The interrupted frames' locals go now, even where something outlives the except block that still holds
        # the frames (an import the interrupt landed in keeps them, and with them the trainer and its bars).
        traceback.clear_frames(interrupt.__traceback__)
    # Collecting what the interrupted frames held closes the progress bars, which print their last state as they
    # close, so that the line below comes last.
    gc.collect()
    if main_rank():
        print(f"rl_trainer.py: {interrupted(args)}", file=sys.stderr)
    return 130


def interrupted(args: Arguments) -> str:
    """What Ctrl-C left behind: the newest checkpoint and how to go on from it."""
    if args.eval.eval_only:
        return "interrupted; the evaluation was not recorded"
    run = RunFolder(args.run_dir)
    latest = run.latest_checkpoint()
    if latest is None:
        return f"interrupted before the first checkpoint; nothing to resume in {run.root}"
    return (f"interrupted; newest checkpoint {latest}; resume with the same command plus --resume_from_checkpoint "
            f"latest, e.g. `python rl_trainer.py --config {run.config} --resume_from_checkpoint latest`")


def run_session(args: Arguments, state: PartialState) -> int:
    """Check everything a user's input can break before any model weights load, then train (or evaluate)."""
    try:
        source = args.data.data or str(bundled_path(args.data.language))
        train_problems, eval_problems = load_data(args, source)
        run = RunFolder(args.run_dir)
        resume = run.resume(args.grpo)
        plan = check_memory(args, check_model(args.model.model))
        if plan and main_rank():
            logger.info("memory plan: %s", plan)
        tokenizer = load_tokenizer(args.model.model, args.data.prompt_style)
        check_packages(args)  # vLLM installed before asking for its server
        if args.grpo.use_vllm and args.grpo.vllm_mode == "server" and not args.rewards.test_reward_function:
            check_vllm_server_device()
            check_vllm_server(args.grpo, args.model.model)
        if args.logging.use_wandb:
            check_wandb()
        judge = args.judge.make_judge()
    except UsageError as e:
        fail(str(e))
    with closing(judge):
        try:
            preflight(judge, {p["language"] for p in train_problems + eval_problems}, bundled=not args.data.data)
            if args.rewards.test_reward_function:
                if args.scoring.needs_trivial_shares:
                    attach_trivial_shares(train_problems, judge, state, cache=None)
                return test_reward_function(args, judge, train_problems)
            run.prepare(args.grpo.overwrite_output_dir, resume, evaluation_only=args.eval.eval_only)
            trivial = None
            if args.scoring.needs_trivial_shares:
                trivial = attach_trivial_shares(train_problems + eval_problems, judge, state, run.trivial_shares)
            if args.data.verify_data:
                report = verify_problems(train_problems + eval_problems, judge, show_progress=state.is_main_process,
                                         max_trivial_share=args.data.max_trivial_share, trivial=trivial,
                                         max_tests=args.scoring.max_tests_per_problem)
                if not report.clean:
                    tests = args.scoring.max_tests_per_problem
                    raise UsageError(f"--verify_data: {report.summary()}; `python -m data verify {source} "
                                     f"--language {args.data.language} --max_trivial_share "
                                     f"{args.data.max_trivial_share:g}"
                                     + (f" --max_tests_per_problem {tests}" if tests else "")
                                     + "` lists each problem")
        except UsageError as e:
            fail(str(e))
        state.wait_for_everyone()  # every rank has checked the run folder before the main one writes into it
        logger.info("judging: %s", judge.isolation)
        logger.info("data: %s (%d train, %d %s problems to evaluate)", source, len(train_problems),
                    len(eval_problems), args.eval.eval_split)

        evaluator = canaries = None
        if args.eval.eval_pass_at_k or args.eval.eval_only:
            rows = prompt_rows(eval_problems, args.data.use_reasoning_format, args.data.prompt_style)
            describe = {"prompt_style": args.data.prompt_style, "use_reasoning_format": args.data.use_reasoning_format,
                        "language": args.data.language, "model": args.model.model}
            canaries = make_canaries(args, eval_problems, judge, state)
            evaluator = PassAtKEvaluator(rows, tokenizer, judge, args.eval, args.scoring, run, describe,
                                         canary=canaries)
            if canaries and canaries.canaries and not evaluator.canaries_per_evaluation and main_rank():
                logger.warning("canary: off, since --canary_share %g of the evaluation's %d generations is under one",
                               args.eval.canary_share, len(evaluator.problems) * args.eval.repeat_eval_problems)
        if args.eval.eval_only:
            return evaluate_only(args, evaluator, run)

        if state.is_main_process:
            run.start(args.settings(), resume)
        state.wait_for_everyone()
        dataset = Dataset.from_list(prompt_rows(train_problems, args.data.use_reasoning_format, args.data.prompt_style))
        tracker = make_tracker(args, run, [p["id"] for p in train_problems], state.is_main_process)
        from training.trainer import QGRPOTrainer  # here, not above: TRL's trainer costs --help half a second
        if resume:
            resume.continue_training(args.grpo, tracker)
        verdicts = TestVerdicts()
        trainer = QGRPOTrainer(
            model=args.model.model,
            reward_funcs=make_reward_funcs(args.rewards.reward_funcs, judge, args.scoring,
                                           args.data.use_reasoning_format, verdicts),
            args=args.grpo,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=args.model.peft_config(),
            callbacks=[RunLogCallback(run)] + ([CanaryStop(canaries)] if canaries and args.eval.eval_pass_at_k else []),
            evaluator=evaluator if args.eval.eval_pass_at_k else None,
            tracker=tracker,
            verdicts=verdicts,
            vllm_request_timeout=args.grpo.vllm_request_timeout,
        )
        use_step_lines(trainer)
        tripped_at_start = False
        try:
            trainer.train(resume_from_checkpoint=resume.checkpoint if resume else None)
        except VLLMServerUnresponsive as e:
            # Checkpoints are saved between steps, so the newest one is whole. Ranks waiting in a collective are
            # stopped by the launcher when this one exits.
            print(f"rl_trainer.py: {e}", file=sys.stderr)
            return 1
        except CanaryTripped:
            tripped_at_start = True
        if tripped_at_start:
            # The stopped trainer's progress bar prints its last state when it is freed: free it before the line.
            del trainer
            gc.collect()
            return canary_stopped(canaries.alarm, f"model evaluated {args.model.model} (the run's start: nothing "
                                  "trained yet)")
        if canaries and canaries.alarm and args.eval.canary_action == "stop":
            latest = run.latest_checkpoint()
            return canary_stopped(canaries.alarm, f"last checkpoint {latest} (the weights that passed it)" if latest
                                  and checkpoint_step(latest) == canaries.alarm.step else f"last checkpoint {latest}")
        trainer.save_model(str(run.final_model))
        if state.is_main_process:
            tokenizer.save_pretrained(run.final_model)
            print(summary(run, trainer.state.global_step))
    return 0


def preflight(judge: Judge, languages: set[str], bundled: bool) -> None:
    """Each language runs 1+1 in the sandbox; without q, the bundled Python problems are the way to try the trainer."""
    try:
        judge.preflight(*languages)
    except UsageError as e:
        if "q" in languages and bundled:
            raise UsageError(f"{e}; to try the trainer without q, train on the bundled Python problems with "
                             "--language python") from None
        raise


def make_canaries(args: Arguments, problems: list[dict], judge: Judge, state: PartialState) -> CanaryWatch | None:
    """--canary_problems impossible copies of the evaluated problems (training/canary.py), checked against their
    solutions on the main process and shared with the others, as evaluation rows."""
    if not args.eval.canary_problems:
        return None
    started, built = time.time(), [None]
    if state.is_main_process:
        built = [build_canaries(problems, judge, args.eval.canary_problems, args.grpo.seed, args.eval.eval_timeout)]
    canaries = broadcast_object_list(built)[0]
    logger.info("canary: %d impossible problems, checked against their solutions in %.1f s: %s", len(canaries),
                time.time() - started, ", ".join(c.problem["id"] for c in canaries))
    rows = prompt_rows([c.problem for c in canaries], args.data.use_reasoning_format, args.data.prompt_style)
    return CanaryWatch(canaries, args.eval.canary_action).with_rows(rows)


def canary_stopped(alarm: Alarm, model: str) -> int:
    """A completion passed a canary under --canary_action stop: one line (main process), exit CANARY_EXIT_CODE."""
    if main_rank():
        print(f"rl_trainer.py: {alarm.line(model)}", file=sys.stderr)
    return CANARY_EXIT_CODE


def load_data(args: Arguments, source: str) -> tuple[list[dict], list[dict]]:
    """The training problems and the problems to evaluate on (the held-out split, or --eval_split train)."""
    problems = load_problems(source, args.data.language, args.data.allow_in_sandbox_comparisons)
    train, test = split_problems(problems, args.data.test_fraction, args.grpo.seed, args.data.max_train_problems,
                                 args.data.max_test_problems)
    evaluated = test if args.eval.eval_split == "test" else train
    if not args.eval.eval_only and not train:
        raise UsageError(f"--data {source}: no training problems after the split; lower --test_fraction")
    if (args.eval.eval_only or args.eval.eval_pass_at_k) and not evaluated:
        raise UsageError(f"--data {source}: no {args.eval.eval_split} problems to evaluate; raise --test_fraction "
                         "or pass --eval_pass_at_k false")
    return train, evaluated


def attach_trivial_shares(problems: list[dict], judge: Judge, state: PartialState, cache) -> list:
    """--partial_credit above_trivial: each problem's trivial shares (data/trivial.py) as its `trivial_shares`, which
    becomes a dataset column the reward reads. The main process measures them and writes the run folder's cache;
    the other ranks then read it, and a resumed run measures nothing."""
    with state.main_process_first():
        shares = cached_trivial_shares(problems, judge, cache, show_progress=state.is_main_process)
    for problem, share in zip(problems, shares):
        problem["trivial_shares"] = share.by_tests
    return shares


def make_tracker(args: Arguments, run: RunFolder, ids: list[str], is_main: bool) -> ProblemTracker:
    """Per-problem records always; the difficulty filter with --difficulty_filter."""
    d = args.difficulty
    difficulty = None
    if d.difficulty_filter:
        difficulty = DifficultyFilter(ids, d.difficulty_window, d.difficulty_recheck, args.grpo.seed)
    return ProblemTracker(run.problem_stats if is_main else None, difficulty)


def test_reward_function(args: Arguments, judge: Judge, problems: list[dict]) -> int:
    """Judge each training problem's canonical solution with the training reward and print what it earns."""
    problems = [p for p in problems if p.get("solution")]
    scores = score(judge, problems, [p["solution"] for p in problems], args.scoring, extract=False, progress=True)
    best = args.scoring.best
    for problem, scored in zip(problems, scores):
        j = scored.judgement
        print(f"{problem['id']}: reward {scored.reward:.3f} ({j.passed}/{j.total} tests, {j.status})")
    full = sum(scored.reward >= best for scored in scores)
    print(f"{full}/{len(problems)} canonical solutions earn the full reward {best:g}")
    return 0 if full == len(problems) else 1


def evaluate_only(args: Arguments, evaluator: PassAtKEvaluator, run: RunFolder) -> int:
    """pass@k of a model, a run's checkpoint or final model, or a LoRA adapter folder (loaded onto its base model),
    recorded at the step the model stands for (training/run_folder.py, `model_step`)."""
    import torch
    from transformers import AutoModelForCausalLM

    accelerator = Accelerator()
    path, dtype = args.model.model, torch.bfloat16 if bf16_supported() else torch.float32
    if (Path(path) / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    step = model_step(path)
    metrics = evaluator.evaluate(model.to(accelerator.device), accelerator, step)
    if accelerator.is_main_process:
        print(json.dumps(metrics))
        samples = run.logs / run.read_eval_results()[-1]["samples"]
        print(f"evaluation of {path} appended to {run.eval_results} at step {step} (samples in {samples})")
    alarm = evaluator.canary.alarm if evaluator.canary else None
    if alarm and args.eval.canary_action == "stop":
        return canary_stopped(alarm, f"model evaluated {path}")
    return 0


def summary(run: RunFolder, step: int) -> str:
    last = run.read_eval_results()[-1:] or [{}]
    passk = {k: round(v, 3) for k, v in last[0].get("metrics", {}).items() if k.startswith("pass@")}
    return (f"finished {step} steps{'; last eval ' + json.dumps(passk) if passk else ''}. Outputs in {run.root}/ "
            f"(final model: {run.final_model}, logs: {run.logs})")


if __name__ == "__main__":
    sys.exit(main())
