"""`TrainingRun`: one run of rl_trainer.py, from its checked inputs to its end, read top to bottom as rl_trainer.py
calls it: `check`, `prepare`, then `build` and `train`, or `evaluate` (`--eval_only`), or `test_reward_function`.

Everything a user's input can break is checked before any model weights load, in the order that fails cheapest
first (`check`): the data, the run folder, the model's config and the memory plan, the tokenizer, the packages, the
vLLM server, wandb, the judge (training/prerequisites.py holds the checks of what lies outside the flags). Then,
with the judge (`prepare`): each language runs 1+1 (`check_judge`), the problems' trivial shares are measured when
the reward reads them (`measure_trivial_shares`) and the data is verified with `--verify_data` (`verify_data`).
Bad input raises `UsageError`; every other early end raises `RunStopped` (training/stops.py), and rl_trainer.py
prints either as the run's last line.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from accelerate import PartialState

from cli import UsageError
from data import TrivialShare, bundled_path, cached_trivial_shares, load_problems, split_problems, verify_problems
from judging import Judge, Problem
from rewards import TrivialShares, make_reward_funcs, score
from training.arguments import Arguments, bf16_supported
from training.canary import CanaryTripped, CanaryWatch, build_canaries
from training.console import use_step_lines
from training.difficulty import DifficultyFilter
from training.evaluation import PassAtKEvaluator
from training.hidden_tests import HiddenTestWatch
from training.prerequisites import (
    check_memory,
    check_model,
    check_packages,
    check_vllm_server,
    check_vllm_server_device,
    check_wandb,
)
from training.problem_records import ProblemTracker
from training.prompts import problem_prompt, prompt_rows
from training.run_folder import Resume, RunFolder, RunLogCallback, model_step
from training.stops import ENTRY, INTERRUPTED_EXIT_CODE, VLLM_EXIT_CODE, RunStopped, main_rank, stopped_by
from training.tokenizer import load_tokenizer
from training.vllm_timeout import VLLMServerUnresponsive

if TYPE_CHECKING:
    from training.trainer import QGRPOTrainer

logger = logging.getLogger("rl_trainer")


@dataclass
class TrainingRun:
    """What a run works with once its inputs are checked: the problems trained on and evaluated on (read from
    ``source``), the run folder and what it resumes, the tokenizer, the judge, and the problems' trivial shares
    when the reward reads them."""

    args: Arguments
    state: PartialState
    source: str
    problems: list[Problem]
    evaluated: list[Problem]
    folder: RunFolder
    resume: Resume | None
    tokenizer: object
    judge: Judge
    trivial: dict[Problem, TrivialShare] | None = None

    @classmethod
    def check(cls, args: Arguments, state: PartialState) -> TrainingRun:
        """Check the inputs, cheapest first, and start the judge; raises UsageError naming the first bad one."""
        source = args.data.data or str(bundled_path(args.data.language))
        problems, evaluated = load_data(args, source)
        folder = RunFolder(args.run_dir)
        resume = folder.resume(args.grpo)
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
        return cls(args, state, source, problems, evaluated, folder, resume, tokenizer, args.judge.make_judge())

    def close(self) -> None:
        self.judge.close()

    @property
    def trivial_shares(self) -> TrivialShares | None:
        """The trivial shares as the reward reads them (rewards.score), or None when it does not."""
        return None if self.trivial is None else {problem: share.by_tests for problem, share in self.trivial.items()}

    def prepare(self) -> None:
        """Before anything is written: the judge runs every language, the run folder is ready for this run, the
        trivial shares are measured when the reward reads them, and the data is verified with --verify_data."""
        args = self.args
        problems = self.problems + self.evaluated
        check_judge(self.judge, {p.language for p in problems}, bundled=not args.data.data)
        self.folder.prepare(args.grpo.overwrite_output_dir, self.resume, evaluation_only=args.eval.eval_only)
        if args.scoring.needs_trivial_shares:
            self.trivial = measure_trivial_shares(problems, self.judge, self.state, self.folder.trivial_shares)
        if args.data.verify_data:
            verify_data(self)
        self.state.wait_for_everyone()  # every rank has checked the run folder before the main one writes into it
        logger.info("judging: %s", self.judge.isolation)
        logger.info(
            "data: %s (%d train, %d %s problems to evaluate)",
            self.source,
            len(self.problems),
            len(self.evaluated),
            args.eval.eval_split,
        )

    def test_reward_function(self) -> int:
        """--test_reward_function: judge each training problem's canonical solution with the training reward and
        print what it earns; 0 when every one earns the full reward."""
        args, judge = self.args, self.judge
        check_judge(judge, {p.language for p in self.problems}, bundled=not args.data.data)
        problems = [p for p in self.problems if p.solution]
        trivial = None
        if args.scoring.needs_trivial_shares:
            trivial = {p: s.by_tests for p, s in measure_trivial_shares(problems, judge, self.state, None).items()}
        scores = score(
            judge,
            problems,
            [p.solution for p in problems],
            args.scoring,
            trivial_shares=trivial,
            extract=False,
            progress=True,
        )
        best = args.scoring.best
        for problem, scored in zip(problems, scores):
            j = scored.judgement
            print(f"{problem.id}: reward {scored.reward:.3f} ({j.passed}/{j.total} tests, {j.status})")
        full = sum(scored.reward >= best for scored in scores)
        print(f"{full}/{len(problems)} canonical solutions earn the full reward {best:g}")
        return 0 if full == len(problems) else 1

    def evaluator(self) -> PassAtKEvaluator | None:
        """pass@k on the evaluated problems, with their canaries, when the run evaluates."""
        args = self.args
        if not (args.eval.eval_pass_at_k or args.eval.eval_only):
            return None
        data = args.data
        describe = {
            "prompt_style": data.prompt_style,
            "use_reasoning_format": data.use_reasoning_format,
            "language": data.language,
            "model": args.model.model,
        }
        canaries = self.canaries()
        evaluator = PassAtKEvaluator(
            self.evaluated,
            lambda p: problem_prompt(p, data.use_reasoning_format, data.prompt_style),
            self.tokenizer,
            self.judge,
            args.eval,
            args.scoring,
            self.folder,
            describe,
            canary=canaries,
            trivial_shares=self.trivial_shares,
        )
        evaluator.feedback = self.feedback()  # pass@k after the rounds too, in training and under --eval_only
        if canaries and canaries.canaries and not evaluator.canaries_per_evaluation and main_rank():
            logger.warning(
                "canary: off, since --canary_share %g of the evaluation's %d generations is under one",
                args.eval.canary_share,
                len(evaluator.problems) * args.eval.repeat_eval_problems,
            )
        return evaluator

    def canaries(self) -> CanaryWatch | None:
        """--canary_problems impossible copies of the evaluated problems (training/canary.py), checked against their
        solutions on the main process and shared with the others."""
        from accelerate.utils import broadcast_object_list

        args = self.args
        if not args.eval.canary_problems:
            return None
        started, built = time.time(), [None]
        if self.state.is_main_process:
            built = [
                build_canaries(
                    self.evaluated, self.judge, args.eval.canary_problems, args.grpo.seed, args.eval.eval_timeout
                )
            ]
        canaries = broadcast_object_list(built)[0]
        logger.info(
            "canary: %d impossible problems, checked against their solutions in %.1f s: %s",
            len(canaries),
            time.time() - started,
            ", ".join(c.problem.id for c in canaries),
        )
        return CanaryWatch(canaries, args.eval.canary_action)

    def evaluate(self, evaluator: PassAtKEvaluator) -> int:
        """--eval_only: pass@k of a model, a run's checkpoint or final model, or a LoRA adapter folder (loaded onto
        its base model), recorded at the step the model stands for (training/run_folder.py, `model_step`)."""
        import torch
        from accelerate import Accelerator
        from transformers import AutoModelForCausalLM, set_seed

        accelerator = Accelerator()
        path, dtype = self.args.model.model, torch.bfloat16 if bf16_supported() else torch.float32
        if (Path(path) / "adapter_config.json").exists():
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype)
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        step = model_step(path)
        set_seed(self.args.grpo.seed)  # the same --seed samples the same completions, as in training
        alarm = None
        try:
            metrics = evaluator.evaluate(model.to(accelerator.device), accelerator, step)
        except CanaryTripped as tripped:
            alarm, metrics = tripped.alarm, tripped.metrics
        if accelerator.is_main_process:
            print(json.dumps(metrics))
            samples = self.folder.logs / self.folder.read_eval_results()[-1]["samples"]
            print(f"evaluation of {path} appended to {self.folder.eval_results} at step {step} (samples in {samples})")
        if alarm:
            raise RunStopped(alarm.exit_code, alarm.what(), f"model evaluated {path}")
        return 0

    def tracker(self) -> ProblemTracker:
        """Per-problem records always (written by the main process); the difficulty filter with --difficulty_filter."""
        args, d = self.args, self.args.difficulty
        difficulty = None
        if d.difficulty_filter:
            difficulty = DifficultyFilter(
                [p.id for p in self.problems], d.difficulty_window, d.difficulty_recheck, args.grpo.seed
            )
        return ProblemTracker(self.folder.problem_stats if self.state.is_main_process else None, difficulty)

    def hidden_watch(self) -> HiddenTestWatch | None:
        """The hidden-test watch (training/hidden_tests.py), naming the per-problem records in its line."""
        if not watches_hidden_tests(self.args):
            return None
        rewards = self.args.rewards
        return HiddenTestWatch(
            rewards.hidden_tests_threshold, rewards.hidden_tests_action, str(self.folder.problem_stats)
        )

    def build(self, evaluator: PassAtKEvaluator | None) -> QGRPOTrainer:
        """The run folder started (its settings written), the reward functions, and the trainer around them with the
        step's observers; on resume, the tracker restored from the checkpoint."""
        from training.trainer import QGRPOTrainer  # here, not above: TRL's trainer costs --help half a second

        args, state = self.args, self.state
        if state.is_main_process:
            self.folder.start(args.settings(), self.resume)
        state.wait_for_everyone()
        tracker = self.tracker()
        if self.resume:
            self.resume.continue_training(args.grpo, tracker)
        feedback = evaluator.feedback if evaluator is not None else self.feedback()
        trainer = QGRPOTrainer(
            model=args.model.model,
            reward_funcs=make_reward_funcs(
                args.rewards.reward_funcs,
                self.judge,
                args.scoring,
                self.problems,
                args.data.use_reasoning_format,
                self.trivial_shares,
                watch_hidden_tests=watches_hidden_tests(args),
                pool_seed=args.grpo.seed,
            ),
            args=args.grpo,
            train_dataset=self.dataset(),
            processing_class=self.tokenizer,
            peft_config=args.model.peft_config(),
            callbacks=[RunLogCallback(self.folder)],
            evaluator=evaluator if args.eval.eval_pass_at_k else None,
            tracker=tracker,
            hidden_watch=self.hidden_watch(),
            vllm_request_timeout=args.grpo.vllm_request_timeout,
            async_generation=args.grpo.async_generation,
            feedback=feedback,
        )
        use_step_lines(trainer)
        return trainer

    def feedback(self):
        """The feedback rounds of --feedback_turns (training/feedback.py), or None."""
        if not self.args.grpo.feedback_turns:
            return None
        from training.feedback import FeedbackRounds

        return FeedbackRounds(
            self.args.grpo.feedback_turns,
            self.judge,
            {p.id: p for p in self.problems},
            self.tokenizer,
            chat=self.args.data.prompt_style == "chat",
        )

    def dataset(self):
        from datasets import Dataset

        data = self.args.data
        return Dataset.from_list(prompt_rows(self.problems, data.use_reasoning_format, data.prompt_style))

    def train(self, trainer: QGRPOTrainer) -> int:
        """Train, save the final model and say where the outputs are; raises RunStopped when a watch stopped the
        training or the vLLM server stopped answering."""
        try:
            trainer.train(resume_from_checkpoint=self.resume.checkpoint if self.resume else None)
        except VLLMServerUnresponsive as e:
            # Checkpoints are saved between steps, so the newest one is whole. Ranks waiting in a collective are
            # stopped by the launcher when this one exits.
            raise RunStopped(VLLM_EXIT_CODE, str(e)) from None
        if trainer.alarm is not None:
            raise stopped_by(trainer.alarm, self.folder.latest_checkpoint(), self.args.model.model)
        trainer.save_model(str(self.folder.final_model))
        if self.state.is_main_process:
            self.tokenizer.save_pretrained(self.folder.final_model)
            print(summary(self.folder, trainer.state.global_step))
        return 0


def load_data(args: Arguments, source: str) -> tuple[list[Problem], list[Problem]]:
    """The training problems and the problems to evaluate on (the held-out split, or --eval_split train)."""
    problems = load_problems(source, args.data.language, args.data.allow_in_sandbox_comparisons)
    train, test = split_problems(
        problems, args.data.test_fraction, args.grpo.seed, args.data.max_train_problems, args.data.max_test_problems
    )
    evaluated = test if args.eval.eval_split == "test" else train
    if not args.eval.eval_only and not train:
        raise UsageError(f"--data {source}: no training problems after the split; lower --test_fraction")
    if (args.eval.eval_only or args.eval.eval_pass_at_k) and not evaluated:
        raise UsageError(
            f"--data {source}: no {args.eval.eval_split} problems to evaluate; raise --test_fraction "
            "or pass --eval_pass_at_k false"
        )
    return train, evaluated


def check_judge(judge: Judge, languages: set[str], bundled: bool) -> None:
    """Each language runs 1+1 in the sandbox (`Judge.preflight`); without q, the bundled Python problems are the way
    to try the trainer."""
    try:
        judge.preflight(*languages)
    except UsageError as e:
        if "q" in languages and bundled:
            raise UsageError(
                f"{e}; to try the trainer without q, train on the bundled Python problems with --language python"
            ) from None
        raise


def measure_trivial_shares(
    problems: list[Problem], judge: Judge | None, state: PartialState, cache: Path | None
) -> dict[Problem, TrivialShare]:
    """--partial_credit above_trivial: each problem's trivial share (data/quality/trivial.py), keyed by the problem.
    The main process measures them and writes the run folder's ``cache``; the other ranks then read it, and a
    resumed run measures nothing."""
    with state.main_process_first():
        shares = cached_trivial_shares(problems, judge, cache, show_progress=state.is_main_process)
    return dict(zip(problems, shares))


def verify_data(run: TrainingRun) -> None:
    """--verify_data: every problem's solution passes its tests, and no trivial or wrong program passes them; raises
    UsageError with the counts and the command that lists each problem."""
    args, problems = run.args, run.problems + run.evaluated
    tests = args.scoring.max_tests_per_problem
    report = verify_problems(
        problems,
        run.judge,
        show_progress=run.state.is_main_process,
        max_trivial_share=args.data.max_trivial_share,
        trivial=[run.trivial[p] for p in problems] if run.trivial else None,
        max_tests=tests,
    )
    if not report.clean:
        raise UsageError(
            f"--verify_data: {report.summary()}; `python -m data verify {run.source} --language "
            f"{args.data.language} --max_trivial_share {args.data.max_trivial_share:g}"
            + (f" --max_tests_per_problem {tests}" if tests else "")
            + "` lists each problem"
        )


def watches_hidden_tests(args: Arguments) -> bool:
    """Whether completions are judged on their hidden tests: the watch is on and the test-case reward judges."""
    return args.rewards.hidden_tests_action != "off" and "test_cases" in args.rewards.reward_funcs


def interrupted(args: Arguments) -> RunStopped:
    """What Ctrl-C left behind: the newest checkpoint and how to go on from it."""
    if args.eval.eval_only:
        return RunStopped(INTERRUPTED_EXIT_CODE, "interrupted; the evaluation was not recorded")
    folder = RunFolder(args.run_dir)
    latest = folder.latest_checkpoint()
    if latest is None:
        return RunStopped(
            INTERRUPTED_EXIT_CODE, "interrupted before the first checkpoint", f"nothing to resume in {folder.root}"
        )
    return RunStopped(
        INTERRUPTED_EXIT_CODE,
        "interrupted",
        f"newest checkpoint {latest}; resume with the same command plus --resume_from_checkpoint "
        f"latest, e.g. `python {ENTRY} --config {folder.config} --resume_from_checkpoint latest`",
    )


def summary(folder: RunFolder, step: int) -> str:
    """The last line of a finished run: its steps, its last pass@k, where its outputs are."""
    last = folder.read_eval_results()[-1:] or [{}]
    passk = {k: round(v, 3) for k, v in last[0].get("metrics", {}).items() if k.startswith("pass@")}
    return (
        f"finished {step} steps{'; last eval ' + json.dumps(passk) if passk else ''}. Outputs in {folder.root}/ "
        f"(final model: {folder.final_model}, logs: {folder.logs})"
    )
