"""A run's checks and exits, around the training itself (rl_trainer.py): each a small function a test can call.

Everything a user's input can break is checked before any model weights load, in the order that fails cheapest
first (`open_session`): the data, the run folder, the model's config and the memory plan, the tokenizer, the
packages, the vLLM server, wandb, the judge. Then, with the judge: each language runs 1+1 (`check_judge`), the
problems' trivial shares are measured when the reward reads them (`measure_trivial_shares`) and the data is
verified with `--verify_data` (`verify_data`). Bad input raises `UsageError`, which the entry point prints as one
line and exits 2. The exits after that are here too: `--test_reward_function`, `--eval_only`, a canary or the
hidden-test watch that stopped the run, Ctrl-C, and the summary of a finished run.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from accelerate import PartialState

from cli import UsageError
from data import TrivialShare, bundled_path, cached_trivial_shares, load_problems, split_problems, verify_problems
from judging import Judge, Problem
from rewards import TrivialShares, score
from training.arguments import Arguments, bf16_supported
from training.canary import CANARY_EXIT_CODE, Alarm, CanaryTripped, CanaryWatch, build_canaries
from training.console import print_last
from training.difficulty import DifficultyFilter
from training.evaluation import PassAtKEvaluator
from training.hidden_tests import HIDDEN_TESTS_EXIT_CODE, HiddenTestsAlarm, HiddenTestWatch
from training.prerequisites import (check_memory, check_model, check_packages, check_vllm_server,
                                    check_vllm_server_device, check_wandb)
from training.problem_records import ProblemTracker
from training.prompts import problem_prompt
from training.run_folder import Resume, RunFolder, checkpoint_step, model_step
from training.tokenizer import load_tokenizer

logger = logging.getLogger("rl_trainer")
ENTRY = "rl_trainer.py"


def main_rank() -> bool:
    """Whether this is the launch's rank 0 (or a lone process). Read from the launcher's RANK: accelerate's process
    state says "main" on every rank of a CPU launch until the training settings set it up."""
    return os.environ.get("RANK", "0") == "0"


@dataclass
class Session:
    """What a run works with once its inputs are checked: the problems trained on and evaluated on (read from
    ``source``), the run folder and what it resumes, the tokenizer, the judge, and the problems' trivial shares
    when the reward reads them."""

    args: Arguments
    state: PartialState
    source: str
    train: list[Problem]
    evaluated: list[Problem]
    run: RunFolder
    resume: Resume | None
    tokenizer: object
    judge: Judge
    trivial: dict[Problem, TrivialShare] | None = None

    @property
    def trivial_shares(self) -> TrivialShares | None:
        """The trivial shares as the reward reads them (rewards.score), or None when it does not."""
        return None if self.trivial is None else {problem: share.by_tests for problem, share in self.trivial.items()}


def open_session(args: Arguments, state: PartialState) -> Session:
    """Check the inputs, cheapest first, and start the judge; raises UsageError naming the first bad one."""
    source = args.data.data or str(bundled_path(args.data.language))
    train, evaluated = load_data(args, source)
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
    return Session(args, state, source, train, evaluated, run, resume, tokenizer, args.judge.make_judge())


def load_data(args: Arguments, source: str) -> tuple[list[Problem], list[Problem]]:
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


def check_judge(judge: Judge, languages: set[str], bundled: bool) -> None:
    """Each language runs 1+1 in the sandbox (`Judge.preflight`); without q, the bundled Python problems are the way
    to try the trainer."""
    try:
        judge.preflight(*languages)
    except UsageError as e:
        if "q" in languages and bundled:
            raise UsageError(f"{e}; to try the trainer without q, train on the bundled Python problems with "
                             "--language python") from None
        raise


def prepare(session: Session) -> None:
    """Before anything is written: the judge runs every language, the run folder is ready for this run, the trivial
    shares are measured when the reward reads them, and the data is verified with --verify_data."""
    args = session.args
    problems = session.train + session.evaluated
    check_judge(session.judge, {p.language for p in problems}, bundled=not args.data.data)
    session.run.prepare(args.grpo.overwrite_output_dir, session.resume, evaluation_only=args.eval.eval_only)
    if args.scoring.needs_trivial_shares:
        session.trivial = measure_trivial_shares(problems, session.judge, session.state, session.run.trivial_shares)
    if args.data.verify_data:
        verify_data(session)


def measure_trivial_shares(problems: list[Problem], judge: Judge | None, state: PartialState,
                           cache: Path | None) -> dict[Problem, TrivialShare]:
    """--partial_credit above_trivial: each problem's trivial share (data/quality/trivial.py), keyed by the problem. The main
    process measures them and writes the run folder's ``cache``; the other ranks then read it, and a resumed run
    measures nothing."""
    with state.main_process_first():
        shares = cached_trivial_shares(problems, judge, cache, show_progress=state.is_main_process)
    return dict(zip(problems, shares))


def verify_data(session: Session) -> None:
    """--verify_data: every problem's solution passes its tests, and no trivial or wrong program passes them; raises
    UsageError with the counts and the command that lists each problem."""
    args, problems = session.args, session.train + session.evaluated
    tests = args.scoring.max_tests_per_problem
    report = verify_problems(problems, session.judge, show_progress=session.state.is_main_process,
                             max_trivial_share=args.data.max_trivial_share,
                             trivial=[session.trivial[p] for p in problems] if session.trivial else None,
                             max_tests=tests)
    if not report.clean:
        raise UsageError(f"--verify_data: {report.summary()}; `python -m data verify {session.source} --language "
                         f"{args.data.language} --max_trivial_share {args.data.max_trivial_share:g}"
                         + (f" --max_tests_per_problem {tests}" if tests else "") + "` lists each problem")


def check_reward_function(session: Session) -> int:
    """Judge each training problem's canonical solution with the training reward and print what it earns; 0 when
    every one earns the full reward."""
    args, judge = session.args, session.judge
    check_judge(judge, {p.language for p in session.train}, bundled=not args.data.data)
    problems = [p for p in session.train if p.solution]
    trivial = None
    if args.scoring.needs_trivial_shares:
        trivial = {p: s.by_tests for p, s in measure_trivial_shares(problems, judge, session.state, None).items()}
    scores = score(judge, problems, [p.solution for p in problems], args.scoring, trivial_shares=trivial,
                   extract=False, progress=True)
    best = args.scoring.best
    for problem, scored in zip(problems, scores):
        j = scored.judgement
        print(f"{problem.id}: reward {scored.reward:.3f} ({j.passed}/{j.total} tests, {j.status})")
    full = sum(scored.reward >= best for scored in scores)
    print(f"{full}/{len(problems)} canonical solutions earn the full reward {best:g}")
    return 0 if full == len(problems) else 1


def make_canaries(session: Session) -> CanaryWatch | None:
    """--canary_problems impossible copies of the evaluated problems (training/canary.py), checked against their
    solutions on the main process and shared with the others."""
    from accelerate.utils import broadcast_object_list

    args = session.args
    if not args.eval.canary_problems:
        return None
    started, built = time.time(), [None]
    if session.state.is_main_process:
        built = [build_canaries(session.evaluated, session.judge, args.eval.canary_problems, args.grpo.seed,
                                args.eval.eval_timeout)]
    canaries = broadcast_object_list(built)[0]
    logger.info("canary: %d impossible problems, checked against their solutions in %.1f s: %s", len(canaries),
                time.time() - started, ", ".join(c.problem.id for c in canaries))
    return CanaryWatch(canaries, args.eval.canary_action)


def make_evaluator(session: Session) -> PassAtKEvaluator | None:
    """pass@k on the evaluated problems, with their canaries, when the run evaluates."""
    args = session.args
    if not (args.eval.eval_pass_at_k or args.eval.eval_only):
        return None
    data = args.data
    describe = {"prompt_style": data.prompt_style, "use_reasoning_format": data.use_reasoning_format,
                "language": data.language, "model": args.model.model}
    canaries = make_canaries(session)
    evaluator = PassAtKEvaluator(session.evaluated, lambda p: problem_prompt(p, data.use_reasoning_format,
                                                                            data.prompt_style),
                                 session.tokenizer, session.judge, args.eval, args.scoring, session.run, describe,
                                 canary=canaries, trivial_shares=session.trivial_shares)
    if canaries and canaries.canaries and not evaluator.canaries_per_evaluation and main_rank():
        logger.warning("canary: off, since --canary_share %g of the evaluation's %d generations is under one",
                       args.eval.canary_share, len(evaluator.problems) * args.eval.repeat_eval_problems)
    return evaluator


def make_tracker(session: Session) -> ProblemTracker:
    """Per-problem records always (written by the main process); the difficulty filter with --difficulty_filter."""
    args, d = session.args, session.args.difficulty
    difficulty = None
    if d.difficulty_filter:
        difficulty = DifficultyFilter([p.id for p in session.train], d.difficulty_window, d.difficulty_recheck,
                                      args.grpo.seed)
    return ProblemTracker(session.run.problem_stats if session.state.is_main_process else None, difficulty)


def watches_hidden_tests(args: Arguments) -> bool:
    """Whether completions are judged on their hidden tests: the watch is on and the test-case reward judges."""
    return args.rewards.hidden_tests_action != "off" and "test_cases" in args.rewards.reward_funcs


def make_hidden_watch(session: Session) -> HiddenTestWatch | None:
    """The hidden-test watch (training/hidden_tests.py), naming the per-problem records in its line."""
    args = session.args
    if not watches_hidden_tests(args):
        return None
    return HiddenTestWatch(args.rewards.hidden_tests_threshold, args.rewards.hidden_tests_action,
                           str(session.run.problem_stats))


def evaluate_only(session: Session, evaluator: PassAtKEvaluator) -> int:
    """pass@k of a model, a run's checkpoint or final model, or a LoRA adapter folder (loaded onto its base model),
    recorded at the step the model stands for (training/run_folder.py, `model_step`)."""
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    accelerator = Accelerator()
    path, dtype = session.args.model.model, torch.bfloat16 if bf16_supported() else torch.float32
    if (Path(path) / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    step = model_step(path)
    alarm = None
    try:
        metrics = evaluator.evaluate(model.to(accelerator.device), accelerator, step)
    except CanaryTripped as tripped:
        alarm, metrics = tripped.alarm, tripped.metrics
    if accelerator.is_main_process:
        print(json.dumps(metrics))
        samples = session.run.logs / session.run.read_eval_results()[-1]["samples"]
        print(f"evaluation of {path} appended to {session.run.eval_results} at step {step} (samples in {samples})")
    return canary_stopped(alarm, f"model evaluated {path}") if alarm else 0


def stopped_weights(run: RunFolder, alarm: Alarm, model: str) -> str:
    """Which weights a run stopped by a canary leaves: the model it started from at step 0, else its newest
    checkpoint, said to be the weights that passed when it is that evaluation's."""
    if alarm.step == 0:
        return f"model evaluated {model} (the run's start: nothing trained yet)"
    latest = run.latest_checkpoint()
    if latest and checkpoint_step(latest) == alarm.step:
        return f"last checkpoint {latest} (the weights that passed it)"
    return f"last checkpoint {latest}"


def canary_stopped(alarm: Alarm, weights: str) -> int:
    """A completion passed a canary under --canary_action stop: one line (main process), the last one printed (the
    progress bars closed first), exit CANARY_EXIT_CODE."""
    if main_rank():
        print_last(f"{ENTRY}: {alarm.line(weights)}")
    return CANARY_EXIT_CODE


def hidden_tests_stopped(alarm: HiddenTestsAlarm, run: RunFolder) -> int:
    """The hidden-test watch stopped the run (--hidden_tests_action stop): one line naming the last checkpoint, the
    one saved at the end of the step that sounded it (main process), the last one printed (the progress bars closed
    first), exit HIDDEN_TESTS_EXIT_CODE."""
    if main_rank():
        weights = f"last checkpoint {run.latest_checkpoint()} (trained on that step's completions)"
        print_last(f"{ENTRY}: {alarm.line(weights)}")
    return HIDDEN_TESTS_EXIT_CODE


def interrupted(args: Arguments) -> str:
    """What Ctrl-C left behind: the newest checkpoint and how to go on from it."""
    if args.eval.eval_only:
        return "interrupted; the evaluation was not recorded"
    run = RunFolder(args.run_dir)
    latest = run.latest_checkpoint()
    if latest is None:
        return f"interrupted before the first checkpoint; nothing to resume in {run.root}"
    return (f"interrupted; newest checkpoint {latest}; resume with the same command plus --resume_from_checkpoint "
            f"latest, e.g. `python {ENTRY} --config {run.config} --resume_from_checkpoint latest`")


def summary(run: RunFolder, step: int) -> str:
    """The last line of a finished run: its steps, its last pass@k, where its outputs are."""
    last = run.read_eval_results()[-1:] or [{}]
    passk = {k: round(v, 3) for k, v in last[0].get("metrics", {}).items() if k.startswith("pass@")}
    return (f"finished {step} steps{'; last eval ' + json.dumps(passk) if passk else ''}. Outputs in {run.root}/ "
            f"(final model: {run.final_model}, logs: {run.logs})")
