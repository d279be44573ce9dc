"""pass@k on held-out problems: the same code during training (a callback) and with `--eval_only`.

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

from rewards import STATUSES, extract_code, mean_pass_at_k, test_reward
from training.prompts import make_prompt

logger = logging.getLogger(__name__)


class PassAtKEvaluator:
    def __init__(self, problems, tokenizer, judge, q_args, run, generation_batch: int = 8):
        self.problems = problems[: q_args.simple_eval_problems]
        self.tokenizer = tokenizer
        self.judge = judge
        self.q_args = q_args
        self.run = run
        self.generation_batch = generation_batch

    @property
    def settings(self) -> dict:
        q = self.q_args
        return {
            "problems": len(self.problems),
            "split": q.eval_split,
            "n": q.repeat_eval_problems,
            "k": list(q.eval_k),
            "temperature": q.eval_temperature,
            "max_tokens": q.eval_max_tokens,
            "timeout": q.eval_timeout,
            "prompt_style": q.prompt_style,
            "use_reasoning_format": q.use_reasoning_format,
            "language": q.language,
            "model": q.model,
        }

    def prompt_text(self, problem: dict) -> str:
        prompt = make_prompt(
            problem["description"], problem.get("language") or self.q_args.language,
            self.q_args.use_reasoning_format, self.q_args.prompt_style,
        )
        if isinstance(prompt, list):
            return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return prompt

    def evaluate(self, model, accelerator, step: int, vllm_generation=None) -> dict:
        """Run one evaluation on every process (collective); returns the metrics (same on every rank)."""
        started = time.time()
        shard = self.problems[accelerator.process_index :: accelerator.num_processes]
        prompts = [self.prompt_text(p) for p in shard]
        if vllm_generation is not None:
            completions = self._generate_vllm(prompts, accelerator, vllm_generation)
        else:
            completions = self._generate(model, accelerator, prompts)

        n = self.q_args.repeat_eval_problems
        items = []
        for problem, samples in zip(shard, completions):
            language = problem.get("language") or self.q_args.language
            items += [(extract_code(text, language), problem["tests"], language) for text in samples]
        judgements = self.judge.run_many(items, progress=accelerator.is_main_process) if items else []

        per_problem, samples_out = [], []
        for i, problem in enumerate(shard):
            judged = judgements[i * n : (i + 1) * n]
            per_problem.append({
                "id": problem["id"],
                "n": n,
                "c": sum(j.status == "passed" for j in judged),
                "statuses": [j.status for j in judged],
                "rewards": [self._reward(j) for j in judged],
            })
            for sample, (text, j) in enumerate(zip(completions[i], judged)):
                samples_out.append({
                    "id": problem["id"], "sample": sample, "completion": text, "status": j.status,
                    "passed": j.passed, "total": j.total, "reward": self._reward(j),
                    "tests": [{"status": t.status, "seconds": round(t.seconds, 4), "stdout": t.stdout} for t in j.tests],
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
        metrics = mean_pass_at_k([(p["n"], p["c"]) for p in per_problem], list(self.q_args.eval_k))
        rewards = [r for p in per_problem for r in p["rewards"] if r is not None]
        statuses = [s for p in per_problem for s in p["statuses"]]
        metrics["mean_reward"] = sum(rewards) / len(rewards) if rewards else 0.0
        for status in STATUSES:
            metrics[f"status/{status}"] = statuses.count(status) / len(statuses) if statuses else 0.0
        metrics["problems"] = len(per_problem)
        return metrics

    def _reward(self, judgement) -> float:
        q = self.q_args
        return test_reward(judgement, q.base_reward_weight, q.perfect_reward_weight, q.perfect_bonus)

    @torch.no_grad()
    def _generate(self, model, accelerator, prompts: list[str]) -> list[list[str]]:
        """Sampled completions with `generate`; under ZeRO-3 the parameters are gathered for the duration."""
        n, tok = self.q_args.repeat_eval_problems, self.tokenizer
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
                    **batch, do_sample=True, temperature=self.q_args.eval_temperature,
                    max_new_tokens=self.q_args.eval_max_tokens, num_return_sequences=n, pad_token_id=tok.pad_token_id,
                )
                texts = tok.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
                out += [texts[i * n : (i + 1) * n] for i in range(len(texts) // n)]
            if was_training:
                unwrapped.train()
        tok.padding_side = padding_side
        return out

    def _generate_vllm(self, prompts: list[str], accelerator, vllm_generation) -> list[list[str]]:
        """Sampled completions from TRL's vLLM backend (server: the main process asks; colocate: each rank)."""
        n, q = self.q_args.repeat_eval_problems, self.q_args
        vllm_generation.sync_weights()
        prompt_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if vllm_generation.mode == "server":
            all_ids = gather_object([prompt_ids])
            result = [None]
            if accelerator.is_main_process:
                flat = [ids for shard in all_ids for ids in shard]
                output = vllm_generation.vllm_client.generate(
                    prompts=flat, n=n, temperature=q.eval_temperature, max_tokens=q.eval_max_tokens
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

        params = SamplingParams(n=n, temperature=q.eval_temperature, max_tokens=q.eval_max_tokens)
        outputs = vllm_generation.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params)
        return [[c.text for c in o.outputs] for o in outputs]


class PassAtKCallback(TrainerCallback):
    """Evaluates every `eval_steps` steps, at step 0 when asked, and at the end of training."""

    def __init__(self, evaluator: PassAtKEvaluator, trainer: Trainer, eval_steps: int, on_start: bool):
        self.evaluator = evaluator
        self.trainer = trainer
        self.eval_steps = eval_steps
        self.on_start = on_start
        self.last_step = None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.on_start and state.global_step == 0:
            self._evaluate(state)

    def on_step_end(self, args, state, control, **kwargs):
        if self.eval_steps and state.global_step % self.eval_steps == 0:
            self._evaluate(state)

    def on_train_end(self, args, state, control, **kwargs):
        if self.last_step != state.global_step:
            self._evaluate(state)

    def _evaluate(self, state):
        trainer = self.trainer
        vllm = getattr(trainer, "vllm_generation", None) if trainer.use_vllm else None
        metrics = self.evaluator.evaluate(trainer.model_wrapped, trainer.accelerator, state.global_step, vllm)
        self.last_step = state.global_step
        # Trainer.log (not GRPOTrainer.log, which would flush the step's training metrics): the keys become
        # eval/pass@1 ... in wandb and land in logs/metrics.jsonl through RunLogCallback. Logging resets
        # control.should_log, which would drop this step's own training log: keep the flag as it was.
        should_log = trainer.control.should_log
        Trainer.log(trainer, {f"eval_{k}": v for k, v in metrics.items()})
        trainer.control.should_log = should_log
