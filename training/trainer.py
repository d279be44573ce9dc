"""`QGRPOTrainer`: TRL's GRPOTrainer with pass@k evaluation, per-problem records and a bound on vLLM requests.

This is the one file that touches TRL's private internals. Written against trl==1.16.0 (requirements.txt). It
relies on these names, which TRL does not promise to keep; `missing_trl_internals()` checks them, the trainer
checks them when it is built, and tests/test_trainer_seam.py fails naming any an upgrade removed:

- `GRPOTrainer._generate_and_score_completions(inputs)`: overridden to rewrite the generation batch through the
  difficulty filter before generating.
- `GRPOTrainer._calculate_rewards(inputs, prompts, completions, completion_ids_list)`: overridden to show the
  gathered rewards to the per-problem tracker.
- `GRPOTrainer._metrics["train"]`: where the tracker's metrics are appended for TRL to log with the step.
- `GRPOTrainer.reward_funcs`, `.reward_func_names`, `.reward_weights`, `.num_generations`: read to form the
  total reward as TRL does and to find the `test_cases` function.
- `GRPOTrainer.vllm_generation` (`VLLMGeneration`): `.mode`, `.sync_weights()`, `.llm` (colocate) and, in
  server mode on the main process, `.vllm_client` (`VLLMClient`) with `.session` (a `requests.Session`),
  `.base_url` and `.generate()`. With vLLM's CPU engine in colocate mode, also `._iter_named_params()` (the
  weights as TRL sends them) and the engine's model runner at `.llm.llm_engine.model_executor.driver_worker
  .model_runner` (TRL's own path to it), whose `reload_weights` the CPU sync uses (`sync_weights_into_cpu_engine`).
- `Trainer.log` called past `GRPOTrainer.log` (which would flush the step's training metrics), and
  `Trainer.callback_handler.on_evaluate`, called as `Trainer.evaluate` would.
"""

from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback
from trl import GRPOTrainer

from training.difficulty import ProblemTracker
from training.evaluation import PassAtKEvaluator
from training.vllm_timeout import bound_session

TRL_VERSION = "1.16.0"
MODEL_CARD = """# {run}: GRPO checkpoints

Checkpoints of a GRPO run of `rl_trainer.py` (TRL {trl} `GRPOTrainer`), rewarded by running each completion against
its problem's tests in a sandbox.

- base model: `{base}`
- steps: {steps} (-1: set by the epochs), learning rate {lr} ({scheduler} schedule), {generations} completions per
  prompt, at most {length} tokens each, temperature {temperature}, seed {seed}
- rewards: {rewards}
- every setting: `{config}`; `python rl_trainer.py --config {config} --resume_from_checkpoint latest` resumes the run
- logs (per-step metrics, pass@k evaluations): the run folder's `logs/`
"""
# (what holds it, attribute): checked on the class before a trainer is built ...
TRL_CLASS_INTERNALS = (
    (GRPOTrainer, "_generate_and_score_completions"),
    (GRPOTrainer, "_calculate_rewards"),
    (Trainer, "log"),
    (Trainer, "evaluate"),
)
# ... and on a built trainer, where TRL sets them in __init__.
TRL_INSTANCE_INTERNALS = ("_metrics", "reward_funcs", "reward_func_names", "reward_weights", "num_generations",
                          "callback_handler")


class TrlInternalsChanged(RuntimeError):
    """An internal of TRL this trainer relies on is gone: the installed TRL is not the one it was written for."""

    def __init__(self, missing: list[str]):
        import trl

        super().__init__(f"TRL {trl.__version__} lacks {', '.join(missing)}, which training/trainer.py relies on "
                         f"(written for trl=={TRL_VERSION}); install the pinned version "
                         f"(pip install -r requirements.txt) or port training/trainer.py")


def missing_trl_internals(trainer=None) -> list[str]:
    """The private TRL names this file relies on that are missing: on the classes, and on ``trainer`` if given."""
    missing = [f"{owner.__name__}.{name}" for owner, name in TRL_CLASS_INTERNALS if not hasattr(owner, name)]
    if trainer is not None:
        missing += [f"GRPOTrainer.{name}" for name in TRL_INSTANCE_INTERNALS if not hasattr(trainer, name)]
        if trainer.use_vllm:
            generation = getattr(trainer, "vllm_generation", None)
            if generation is None:
                missing.append("GRPOTrainer.vllm_generation")
            else:
                missing += [f"VLLMGeneration.{name}" for name in ("mode", "sync_weights")
                            if not hasattr(generation, name)]
    return missing


def sync_weights_into_cpu_engine(generation) -> None:
    """TRL's colocate weight sync, for vLLM's CPU engine.

    TRL loads each tensor through the engine model's `load_weights`, but vLLM's CPU build repacks every linear
    layer's weight for its GEMM kernels once loaded and drops the original parameter
    (vllm/model_executor/layers/utils.py, `dispatch_cpu_unquantized_gemm`), so TRL's first sync fails with
    `'Parameter' object has no attribute 'weight_loader'`. vLLM's in-place reload (the model runner's
    `reload_weights(weights_iterator=...)`) restores each layer, loads it and repacks it; it gets the weights TRL
    would send, named and gathered (ZeRO-3, merged LoRA) by TRL, each copied out of the gather that yields it."""
    runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
    weights = ((name, tensor.clone()) for name, tensor in generation._iter_named_params())
    runner.reload_weights(weights_iterator=weights)
    generation.llm.reset_prefix_cache()


def vllm_runs_on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def bound_vllm_client(client, timeout_s: float):
    """Bound every request of TRL's ``VLLMClient`` to ``timeout_s`` (training/vllm_timeout.py); returns it."""
    bound_session(client.session, client.base_url, timeout_s)
    return client


class PassAtKSchedule(TrainerCallback):
    """Asks the trainer to evaluate every `eval_steps` steps and after the last step; transformers then calls
    `QGRPOTrainer.evaluate` (and at step 0 itself, with `--eval_on_start`)."""

    def __init__(self, eval_steps: int):
        self.eval_steps = eval_steps

    def on_step_end(self, args, state, control, **kwargs):
        if (self.eval_steps and state.global_step % self.eval_steps == 0) or state.global_step >= state.max_steps:
            control.should_evaluate = True


class QGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose evaluation is pass@k (``evaluator``; none: evaluation is off), whose generation
    batches pass through ``tracker`` (training/difficulty.py), and whose requests to a vLLM server are each bounded
    by ``vllm_request_timeout`` seconds (server mode; the main process is the one that sends them)."""

    def __init__(self, *args, evaluator: PassAtKEvaluator | None = None, tracker: ProblemTracker | None = None,
                 vllm_request_timeout: float | None = None, **kwargs):
        missing = missing_trl_internals()
        if missing:
            raise TrlInternalsChanged(missing)
        super().__init__(*args, **kwargs)
        missing = missing_trl_internals(self)
        if missing:
            raise TrlInternalsChanged(missing)
        if self.use_vllm and self.vllm_generation.mode == "server" and self.accelerator.is_main_process:
            client = getattr(self.vllm_generation, "vllm_client", None)
            if client is None:
                raise TrlInternalsChanged(["VLLMGeneration.vllm_client"])
            if vllm_request_timeout:
                bound_vllm_client(client, vllm_request_timeout)
        if self.use_vllm and self.vllm_generation.mode == "colocate" and vllm_runs_on_cpu():
            generation = self.vllm_generation
            if not hasattr(generation, "_iter_named_params"):
                raise TrlInternalsChanged(["VLLMGeneration._iter_named_params"])
            generation.sync_weights = lambda: sync_weights_into_cpu_engine(generation)
        self.evaluator = evaluator
        if evaluator is not None:
            self.add_callback(PassAtKSchedule(int(self.args.eval_steps or 0)))
        self.tracker = tracker
        if tracker is not None:
            self.add_callback(tracker.callback())
            self._row_of_problem = {pid: i for i, pid in enumerate(self.train_dataset["id"])}

    def create_model_card(self, *args, **kwargs) -> None:
        """checkpoints/README.md, written with each checkpoint. TRL's card names the base model only when it is a
        hub name (it reads "fine-tuned version of [None]" for a local folder); this one names it either way and
        points at the run's settings and logs."""
        if not self.is_world_process_zero():
            return
        import trl

        a = self.args
        run = Path(a.output_dir).resolve().parent
        card = MODEL_CARD.format(
            run=run.name, base=self.model.config.name_or_path, trl=trl.__version__, config=run / "config.yaml",
            steps=a.max_steps, lr=a.learning_rate, scheduler=getattr(a.lr_scheduler_type, "value", a.lr_scheduler_type),
            generations=a.num_generations, length=a.max_completion_length, temperature=a.temperature, seed=a.seed,
            rewards=", ".join(f"{name} x {weight:g}" for name, weight in zip(self.reward_func_names, a.reward_weights)))
        Path(a.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(a.output_dir) / "README.md").write_text(card)

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
        generate = self._generate_with_vllm if self.use_vllm else None
        metrics = self.evaluator.evaluate(self.model_wrapped, self.accelerator, self.state.global_step, generate)
        metrics = {f"eval_{k}": v for k, v in metrics.items()}
        # Trainer.log, not GRPOTrainer.log (which would flush the step's training metrics): the keys become
        # eval/pass@1 ... in wandb and land in logs/metrics.jsonl through RunLogCallback. on_evaluate, as
        # Trainer.evaluate calls it, also clears the request to evaluate.
        Trainer.log(self, dict(metrics))
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _generate_with_vllm(self, prompts: list[str], n: int, temperature: float, max_tokens: int) -> list[list[str]]:
        """``n`` sampled completions per prompt from TRL's vLLM backend, with the current weights (server: the main
        process asks for every rank's prompts; colocate: each rank asks its own engine)."""
        generation, tokenizer, accelerator = self.vllm_generation, self.processing_class, self.accelerator
        generation.sync_weights()
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if generation.mode == "server":
            all_ids = gather_object([prompt_ids])
            result = [None]
            if accelerator.is_main_process:
                flat = [ids for shard in all_ids for ids in shard]
                output = generation.vllm_client.generate(prompts=flat, n=n, temperature=temperature,
                                                         max_tokens=max_tokens)
                texts = tokenizer.batch_decode(output["completion_ids"], skip_special_tokens=True)
                grouped = [texts[i * n : (i + 1) * n] for i in range(len(flat))]
                result = [[]]
                for shard in all_ids:
                    result[0].append(grouped[: len(shard)])
                    grouped = grouped[len(shard) :]
            broadcast_object_list(result, from_process=0)
            return result[0][accelerator.process_index]
        from vllm import SamplingParams, TokensPrompt

        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens)
        outputs = generation.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params)
        return [[c.text for c in o.outputs] for o in outputs]
