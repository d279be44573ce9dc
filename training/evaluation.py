"""pass@k on held-out problems: the trainer's own evaluation (`QGRPOTrainer.evaluate`) and `--eval_only`.

Each evaluation samples n = `--repeat_eval_problems` completions for each of `--simple_eval_problems` held-out
problems, judges them with the training judge on all of a problem's tests, and reports pass@k with the unbiased
estimator (`rewards.mean_pass_at_k`), the mean reward and the share of each judging status. Problems are sharded
across processes (each evaluated exactly once), results gathered, and only the main process writes
`logs/eval_results.json` and `logs/eval_samples/step-N.jsonl`. An `--eval_only` evaluation is marked
`"eval_only": true` and writes its samples beside training's, to `step-N-eval_only.jsonl` (training/run_folder.py).
With canaries (training/canary.py), each evaluation then samples its turn of them the same way and judges them
with the same judge, timeout and tests, within `--canary_share` of its generations; one that passed raises
`CanaryTripped` under `--canary_action stop`, once the evaluation is recorded.
"""

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm
from accelerate.utils import gather_object
from trl.models import unwrap_model_for_generation

from judging import STATUSES, Judge, Problem
from rewards import ScoringArguments, TrivialShares, mean_pass_at_k, score
from training.arguments import EvalArguments
from training.canary import CanaryAlarm, CanaryWatch, canary_budget, canary_metrics, solved_original
from training.run_folder import RunFolder

logger = logging.getLogger(__name__)
GENERATION_BATCH = 8  # prompts sampled together by `generate` (without vLLM), each `repeat_eval_problems` times


def judged_tests(judgement) -> list[dict]:
    """A judged completion's tests as a samples file keeps them: status, seconds and what each printed."""
    return [{"status": t.status, "seconds": round(t.seconds, 4), "stdout": t.stdout} for t in judgement.tests]


def feedback_metrics(per_problem: list[dict], ks: list[int]) -> dict:
    """``feedback/pass@k`` from each problem's record after its rounds, and ``feedback/turns`` (replies per
    sample)."""
    rounds = [p["feedback"] for p in per_problem]
    metrics = {f"feedback/{k}": v for k, v in mean_pass_at_k([(r["n"], r["c"]) for r in rounds], ks).items()}
    turns = [t for r in rounds for t in r["turns"]]
    metrics["feedback/turns"] = sum(turns) / max(len(turns), 1)
    return metrics


class PassAtKEvaluator:
    """pass@k of a model on the first `simple_eval_problems` problems, each sampled from ``prompt(problem)``
    (`training.prompts.problem_prompt`); ``describe`` is recorded with every evaluation beside its settings, and
    ``trivial_shares`` gives the problems' trivial shares under `--partial_credit above_trivial`."""

    def __init__(
        self,
        problems: list[Problem],
        prompt: Callable[[Problem], str | list[dict]],
        tokenizer,
        judge: Judge,
        args: EvalArguments,
        scoring: ScoringArguments,
        run: RunFolder,
        describe: dict,
        generation_batch: int = GENERATION_BATCH,
        canary: CanaryWatch | None = None,
        trivial_shares: TrivialShares | None = None,
    ):
        self.problems = problems[: args.simple_eval_problems]
        self.prompt = prompt
        self.trivial_shares = trivial_shares
        self.tokenizer = tokenizer
        self.judge = judge
        self.args = args
        self.scoring = scoring
        self.run = run
        self.settings = {
            "problems": len(self.problems),
            "split": args.eval_split,
            "n": args.repeat_eval_problems,
            "k": list(args.eval_k),
            "temperature": args.eval_temperature,
            "max_tokens": args.eval_max_tokens,
            "timeout": args.eval_timeout,
            **describe,
        }
        self.generation_batch = generation_batch
        self.feedback = None  # the run's --feedback_turns rounds (training/feedback.py), set by TrainingRun.evaluator
        self.canary = canary
        self.canaries_per_evaluation, self.canary_samples = canary_budget(
            len(self.problems) * args.repeat_eval_problems,
            args.repeat_eval_problems,
            len(canary.canaries) if canary else 0,
            args.canary_share,
        )
        if self.canaries_per_evaluation:
            self.settings["canary"] = {
                "canaries": len(canary.canaries),
                "per_evaluation": self.canaries_per_evaluation,
                "n": self.canary_samples,
                "share": args.canary_share,
                "action": canary.action,
            }

    def prompt_text(self, problem: Problem) -> str:
        prompt = self.prompt(problem)
        if isinstance(prompt, list):
            return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return prompt

    def evaluate(self, model, accelerator, step: int, generate=None) -> dict:
        """Run one evaluation on every process (collective); returns the metrics (same on every rank), or raises
        `CanaryTripped` with them (training/canary.py, `CanaryWatch.sound`).

        ``generate(prompts, n, temperature, max_tokens)`` returns ``n`` completions per prompt (the trainer's vLLM
        backend, ``training/trainer.py``); without it, the model samples with ``generate`` here."""
        started = time.time()
        shard = self.problems[accelerator.process_index :: accelerator.num_processes]
        n = self.args.repeat_eval_problems
        completions, scores = self._sample_and_judge(model, accelerator, shard, n, generate, self.scoring)

        rounds = None  # per sample: its replies, the messages between them, the score after its rounds
        if self.feedback is not None:
            rounds = self._after_feedback(model, accelerator, shard, n, completions, generate)
        per_problem, samples_out = [], []
        for i, problem in enumerate(shard):
            scored = scores[i * n : (i + 1) * n]
            per_problem.append(
                {
                    "id": problem.id,
                    "n": n,
                    "c": sum(s.status == "passed" for s in scored),
                    "statuses": [s.status for s in scored],
                    "rewards": [s.reward for s in scored],
                }
            )
            if rounds is not None:
                later = rounds[i * n : (i + 1) * n]
                per_problem[-1]["feedback"] = {
                    "n": n,
                    "c": sum(s.status == "passed" for _, _, s in later),
                    "statuses": [s.status for _, _, s in later],
                    "turns": [len(replies) for replies, _, _ in later],
                }
            for sample, (text, s) in enumerate(zip(completions[i], scored)):
                j = s.judgement
                samples_out.append(
                    {
                        "id": problem.id,
                        "sample": sample,
                        "completion": text,
                        "status": j.status,
                        "passed": j.passed,
                        "total": j.total,
                        "reward": s.reward,
                        "tests": judged_tests(j),
                    }
                )
                if rounds is not None:
                    replies, messages, after = rounds[i * n + sample]
                    samples_out[-1]["feedback"] = {
                        "messages": messages,
                        "replies": replies[1:],
                        "status": after.status,
                        "passed": after.judgement.passed,
                    }
        per_problem = sorted(gather_object(per_problem), key=lambda p: p["id"])
        samples_out = gather_object(samples_out)

        metrics = self.summarize(per_problem)
        if rounds is not None:
            metrics.update(feedback_metrics(per_problem, list(self.args.eval_k)))
        canary, alarm = (
            self._canaries(model, accelerator, step, generate) if self.canaries_per_evaluation else (None, None)
        )
        if canary:
            metrics.update(canary["metrics"])
        if accelerator.is_main_process:
            self.run.eval_samples.mkdir(parents=True, exist_ok=True)
            samples_file = self.run.eval_samples_file(step, self.args.eval_only)
            with samples_file.open("w") as f:
                f.writelines(json.dumps(s) + "\n" for s in samples_out)
            entry = {
                "step": step,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "seconds": round(time.time() - started, 2),
                "eval_only": self.args.eval_only,
                "samples": str(samples_file.relative_to(self.run.logs)),
                "settings": self.settings,
                "metrics": metrics,
                "problems": per_problem,
            }
            if canary:
                entry["canary"] = {k: v for k, v in canary.items() if k != "metrics"}
            self.run.append_eval(entry)
            logger.info("evaluation at step %d: %s", step, json.dumps(metrics))
        if alarm:
            self.canary.sound(alarm, metrics, log=accelerator.is_main_process)
        return metrics

    def _sample_and_judge(
        self, model, accelerator, problems: list[Problem], n: int, generate, scoring: ScoringArguments
    ) -> tuple[list, list]:
        """``n`` completions of each problem, sampled with the evaluation's settings, and their scores on all of
        each problem's tests (collective: every rank calls it, with its own shard)."""
        prompts = [self.prompt_text(p) for p in problems]
        if generate is not None:
            completions = generate(prompts, n, self.args.eval_temperature, self.args.eval_max_tokens)
        else:
            completions = self._generate(model, accelerator, prompts, n)
        texts = [text for samples in completions for text in samples]
        scores = (
            score(
                self.judge,
                [p for p in problems for _ in range(n)],
                texts,
                scoring,
                trivial_shares=self.trivial_shares,
                all_tests=True,
                timeout=self.args.eval_timeout,
                progress=accelerator.is_main_process,
            )
            if texts
            else []
        )
        return completions, scores

    def _after_feedback(self, model, accelerator, problems: list[Problem], n: int, completions: list, generate):
        """Each sample's feedback rounds (collective: every rank calls it, with its own shard): per sample, in
        ``completions``' order, its replies (the first is the sampled one), the messages between them, and the
        score of the last reply holding code on all the problem's tests, as training's reward judges."""
        from rewards.feedback import judged_turn, make_turn

        if generate is not None:

            def sample(texts):
                return [
                    samples[0] for samples in generate(texts, 1, self.args.eval_temperature, self.args.eval_max_tokens)
                ]
        else:

            def sample(texts):
                return [samples[0] for samples in self._generate(model, accelerator, texts, 1)]

        rows = [p for p in problems for _ in range(n)]
        chat = [self.prompt(p) for p in rows]
        replies = self.feedback.text_rounds(
            rows,
            [self.prompt_text(p) for p in rows],
            [text for samples in completions for text in samples],
            sample,
            accelerator,
            chat if chat and isinstance(chat[0], list) else None,
        )
        texts = [judged_turn([make_turn(r, True, p.language) for r in turns]).text for turns, p in zip(replies, rows)]
        scores = (
            score(
                self.judge,
                rows,
                texts,
                self.scoring,
                trivial_shares=self.trivial_shares,
                all_tests=True,
                timeout=self.args.eval_timeout,
            )
            if texts
            else []
        )
        return list(zip(replies, self.feedback.transcripts, scores))

    def _canaries(self, model, accelerator, step: int, generate) -> tuple[dict, CanaryAlarm | None]:
        """This evaluation's turn of canary problems (training/canary.py), sampled and judged as the evaluation's
        own: what to record, and the alarm when a completion passed one (every such completion is kept whole)."""
        started = time.time()
        batch = self.canary.batch(self.canaries_per_evaluation)
        mine = batch[accelerator.process_index :: accelerator.num_processes]
        n = self.canary_samples
        # A canary's reward is never used, and a conflicting variant's extra test has no trivial share to read.
        scoring = replace(self.scoring, partial_credit="fraction")
        # Sampled on a fork of the random state: training then draws what it would draw without the canary.
        cuda = [accelerator.device.index or 0] if accelerator.device.type == "cuda" else []
        # Sampling is collective under ZeRO-3 (each forward gathers parameters): a rank with no canary of its own
        # this turn samples the turn's first one too, and drops what it got.
        sampled = mine or batch[:1]
        with torch.random.fork_rng(devices=cuda):
            completions, scores = self._sample_and_judge(
                model, accelerator, [c.problem for c in sampled], n, generate, scoring
            )
        records, passing = [], []
        for i, canary in enumerate(mine):
            scored = scores[i * n : (i + 1) * n]
            records.append(
                {
                    **canary.describe(),
                    "n": n,
                    "c": sum(s.status == "passed" for s in scored),
                    "statuses": [s.status for s in scored],
                    "solved_original": sum(solved_original(canary, s.judgement) for s in scored),
                }
            )
            passing += [
                {
                    "step": step,
                    **canary.describe(),
                    "problem": canary.problem.record(),
                    "completion": text,
                    "status": s.status,
                    "passed": s.judgement.passed,
                    "total": s.judgement.total,
                    "tests": judged_tests(s.judgement),
                }
                for text, s in zip(completions[i], scored)
                if s.status == "passed"
            ]
        records = sorted(gather_object(records), key=lambda r: r["id"])
        passing = gather_object(passing)
        metrics = canary_metrics(records)
        samples_file = None
        if passing and accelerator.is_main_process:
            path = self.run.canary_samples_file(step, self.args.eval_only)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w") as f:
                f.writelines(json.dumps(s) + "\n" for s in passing)
            samples_file = str(path)
        alarm = (
            CanaryAlarm(
                step, len(passing), metrics["canary/completions"], sorted({s["id"] for s in passing}), samples_file
            )
            if passing
            else None
        )
        return {
            "seconds": round(time.time() - started, 2),
            "metrics": metrics,
            "samples": str(Path(samples_file).relative_to(self.run.logs)) if samples_file else None,
            "problems": records,
        }, alarm

    def summarize(self, per_problem: list[dict]) -> dict:
        metrics = mean_pass_at_k([(p["n"], p["c"]) for p in per_problem], list(self.args.eval_k))
        rewards = [r for p in per_problem for r in p["rewards"]]
        statuses = [s for p in per_problem for s in p["statuses"]]
        metrics["mean_reward"] = sum(rewards) / len(rewards) if rewards else 0.0
        for status in STATUSES:
            metrics[f"status/{status}"] = statuses.count(status) / len(statuses) if statuses else 0.0
        metrics["problems"] = len(per_problem)
        return metrics

    @torch.no_grad()
    def _generate(self, model, accelerator, prompts: list[str], n: int) -> list[list[str]]:
        """``n`` sampled completions per prompt with `generate`; under ZeRO-3 the parameters are gathered for the
        duration."""
        tok = self.tokenizer
        out = []
        padding_side = tok.padding_side
        tok.padding_side = "left"
        # Generation is most of an evaluation's time on a CPU: the main process shows the problems done.
        progress = tqdm(
            total=len(prompts), desc="evaluation: generating", unit="problem", disable=not accelerator.is_main_process
        )
        with unwrap_model_for_generation(model, accelerator) as unwrapped, progress:
            was_training = unwrapped.training
            unwrapped.eval()
            for start in range(0, len(prompts), self.generation_batch):
                batch = tok(
                    prompts[start : start + self.generation_batch],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                ).to(accelerator.device)
                generated = unwrapped.generate(
                    **batch,
                    do_sample=True,
                    temperature=self.args.eval_temperature,
                    max_new_tokens=self.args.eval_max_tokens,
                    num_return_sequences=n,
                    pad_token_id=tok.pad_token_id,
                )
                texts = tok.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
                out += [texts[i * n : (i + 1) * n] for i in range(len(texts) // n)]
                progress.update(len(texts) // n)
            if was_training:
                unwrapped.train()
        tok.padding_side = padding_side
        return out
