"""pass@k on held-out problems: the trainer's own evaluation (`QGRPOTrainer.evaluate`) and `--eval_only`.

Each evaluation samples n = `--repeat_eval_problems` completions for each of `--simple_eval_problems` held-out
problems, judges them with the training judge on all of a problem's tests, and reports pass@k with the unbiased
estimator (`rewards.mean_pass_at_k`), the mean reward and the share of each judging status. Problems are sharded
across processes (each evaluated exactly once), results gathered, and only the main process writes
`logs/eval_results.json` and `logs/eval_samples/step-N.jsonl`.
"""

import json
import logging
import time

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback
from trl.models import unwrap_model_for_generation

from trl import GRPOTrainer

from judging import STATUSES, Judge
from rewards import ScoringArguments, mean_pass_at_k, score
from training.arguments import EvalArguments
from training.difficulty import ProblemTracker
from training.run_folder import RunFolder

logger = logging.getLogger(__name__)


class PassAtKEvaluator:
    """pass@k of a model on the first `simple_eval_problems` problems (rows with a `prompt`, see
    `training.prompts.prompt_rows`); ``describe`` is recorded with every evaluation beside its settings."""

    def __init__(self, problems: list[dict], tokenizer, judge: Judge, args: EvalArguments, scoring: ScoringArguments,
                 run: RunFolder, describe: dict, generation_batch: int = 8):
        self.problems = problems[: args.simple_eval_problems]
        self.tokenizer = tokenizer
        self.judge = judge
        self.args = args
        self.scoring = scoring
        self.run = run
        self.settings = {
            "problems": len(self.problems), "split": args.eval_split, "n": args.repeat_eval_problems,
            "k": list(args.eval_k), "temperature": args.eval_temperature, "max_tokens": args.eval_max_tokens,
            "timeout": args.eval_timeout, **describe,
        }
        self.generation_batch = generation_batch

    def prompt_text(self, problem: dict) -> str:
        if isinstance(problem["prompt"], list):
            return self.tokenizer.apply_chat_template(problem["prompt"], add_generation_prompt=True, tokenize=False)
        return problem["prompt"]

    def evaluate(self, model, accelerator, step: int, vllm_generation=None) -> dict:
        """Run one evaluation on every process (collective); returns the metrics (same on every rank)."""
        started = time.time()
        shard = self.problems[accelerator.process_index :: accelerator.num_processes]
        prompts = [self.prompt_text(p) for p in shard]
        if vllm_generation is not None:
            completions = self._generate_vllm(prompts, accelerator, vllm_generation)
        else:
            completions = self._generate(model, accelerator, prompts)

        n = self.args.repeat_eval_problems
        texts = [text for samples in completions for text in samples]
        scores = score(self.judge, [p for p in shard for _ in range(n)], texts, self.scoring, all_tests=True,
                       timeout=self.args.eval_timeout, progress=accelerator.is_main_process) if texts else []

        per_problem, samples_out = [], []
        for i, problem in enumerate(shard):
            scored = scores[i * n : (i + 1) * n]
            per_problem.append({
                "id": problem["id"], "n": n, "c": sum(s.status == "passed" for s in scored),
                "statuses": [s.status for s in scored], "rewards": [s.reward for s in scored],
            })
            for sample, (text, s) in enumerate(zip(completions[i], scored)):
                j = s.judgement
                samples_out.append({
                    "id": problem["id"], "sample": sample, "completion": text, "status": j.status,
                    "passed": j.passed, "total": j.total, "reward": s.reward,
                    "tests": [{"status": t.status, "seconds": round(t.seconds, 4), "stdout": t.stdout}
                              for t in j.tests],
                })
        per_problem = sorted(gather_object(per_problem), key=lambda p: p["id"])
        samples_out = gather_object(samples_out)

        metrics = self.summarize(per_problem)
        if accelerator.is_main_process:
            entry = {
                "step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 2),
                "settings": self.settings, "metrics": metrics, "problems": per_problem,
            }
            self.run.append_eval(entry)
            self.run.eval_samples.mkdir(parents=True, exist_ok=True)
            with (self.run.eval_samples / f"step-{step}.jsonl").open("w") as f:
                f.writelines(json.dumps(s) + "\n" for s in samples_out)
            logger.info("evaluation at step %d: %s", step, json.dumps(metrics))
        return metrics

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
    def _generate(self, model, accelerator, prompts: list[str]) -> list[list[str]]:
        """Sampled completions with `generate`; under ZeRO-3 the parameters are gathered for the duration."""
        n, tok = self.args.repeat_eval_problems, self.tokenizer
        out = []
        padding_side = tok.padding_side
        tok.padding_side = "left"
        with unwrap_model_for_generation(model, accelerator) as unwrapped:
            was_training = unwrapped.training
            unwrapped.eval()
            for start in range(0, len(prompts), self.generation_batch):
                batch = tok(prompts[start : start + self.generation_batch], return_tensors="pt", padding=True,
                            add_special_tokens=False).to(accelerator.device)
                generated = unwrapped.generate(
                    **batch, do_sample=True, temperature=self.args.eval_temperature,
                    max_new_tokens=self.args.eval_max_tokens, num_return_sequences=n, pad_token_id=tok.pad_token_id,
                )
                texts = tok.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
                out += [texts[i * n : (i + 1) * n] for i in range(len(texts) // n)]
            if was_training:
                unwrapped.train()
        tok.padding_side = padding_side
        return out

    def _generate_vllm(self, prompts: list[str], accelerator, vllm_generation) -> list[list[str]]:
        """Sampled completions from TRL's vLLM backend (server: the main process asks; colocate: each rank)."""
        n, args = self.args.repeat_eval_problems, self.args
        vllm_generation.sync_weights()
        prompt_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if vllm_generation.mode == "server":
            all_ids = gather_object([prompt_ids])
            result = [None]
            if accelerator.is_main_process:
                flat = [ids for shard in all_ids for ids in shard]
                output = vllm_generation.vllm_client.generate(
                    prompts=flat, n=n, temperature=args.eval_temperature, max_tokens=args.eval_max_tokens
                )
                texts = self.tokenizer.batch_decode(output["completion_ids"], skip_special_tokens=True)
                grouped = [texts[i * n : (i + 1) * n] for i in range(len(flat))]
                result = [[]]
                for shard in all_ids:
                    result[0].append(grouped[: len(shard)])
                    grouped = grouped[len(shard) :]
            broadcast_object_list(result, from_process=0)
            return result[0][accelerator.process_index]
        from vllm import SamplingParams, TokensPrompt

        params = SamplingParams(n=n, temperature=args.eval_temperature, max_tokens=args.eval_max_tokens)
        outputs = vllm_generation.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params)
        return [[c.text for c in o.outputs] for o in outputs]


class PassAtKSchedule(TrainerCallback):
    """Asks the trainer to evaluate every `eval_steps` steps and after the last step; transformers then calls
    `QGRPOTrainer.evaluate` (and at step 0 itself, with `--eval_on_start`)."""

    def __init__(self, eval_steps: int):
        self.eval_steps = eval_steps

    def on_step_end(self, args, state, control, **kwargs):
        if (self.eval_steps and state.global_step % self.eval_steps == 0) or state.global_step >= state.max_steps:
            control.should_evaluate = True


class QGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose evaluation is pass@k (``evaluator``; none: evaluation is off) and whose generation
    batches pass through ``tracker`` (training/difficulty.py): per-problem records and the difficulty filter."""

    def __init__(self, *args, evaluator: PassAtKEvaluator | None = None, tracker: ProblemTracker | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.evaluator = evaluator
        if evaluator is not None:
            self.add_callback(PassAtKSchedule(int(self.args.eval_steps or 0)))
        self.tracker = tracker
        if tracker is not None:
            self.add_callback(tracker.callback())
            self._row_of_problem = {pid: i for i, pid in enumerate(self.train_dataset["id"])}

    def _generate_and_score_completions(self, inputs):
        """The generation batch, rewritten by the difficulty filter (the same way on every rank) before generating."""
        if self.tracker is not None and self.tracker.filter is not None and self.model.training:
            ids = gather_object([row["id"] for row in inputs])
            chosen = self.tracker.rewrite(ids, self.num_generations)
            if chosen != ids:
                mine = chosen[self.accelerator.process_index * len(inputs) :][: len(inputs)]
                inputs = [self.train_dataset[self._row_of_problem[pid]] for pid in mine]
        return super()._generate_and_score_completions(inputs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards of the whole generation batch (gathered), shown to the tracker with the problem ids."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.tracker is not None and self.model.training:
            ids = gather_object([row["id"] for row in inputs])
            # The total reward as TRL forms it for the advantage; a row no function could score stays NaN.
            total = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
            total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            names = list(self.reward_func_names)
            passed_all = None
            if "test_cases" in names:
                passed_all = gather_object(list(self.reward_funcs[names.index("test_cases")].passed_all))
            metrics = self.tracker.observe(self.state.global_step + 1, ids, total.tolist(), passed_all,
                                           self.num_generations)
            for name, value in metrics.items():
                self._metrics["train"][name].append(value)
        return rewards_per_func

    def evaluate(self, *args, **kwargs) -> dict:
        if self.evaluator is None:
            return {}
        vllm = getattr(self, "vllm_generation", None) if self.use_vllm else None
        metrics = self.evaluator.evaluate(self.model_wrapped, self.accelerator, self.state.global_step, vllm)
        metrics = {f"eval_{k}": v for k, v in metrics.items()}
        # Trainer.log, not GRPOTrainer.log (which would flush the step's training metrics): the keys become
        # eval/pass@1 ... in wandb and land in logs/metrics.jsonl through RunLogCallback. on_evaluate, as
        # Trainer.evaluate calls it, also clears the request to evaluate.
        Trainer.log(self, dict(metrics))
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
