"""`QGRPOTrainer`: TRL's GRPOTrainer with pass@k evaluation, per-problem records and a bound on vLLM requests.

This is the one file that touches TRL's private internals. Written against trl==1.16.0 (requirements.txt). Every
name of TRL's (and of transformers' `Trainer`, reached past TRL's overrides) that this project relies on and TRL
does not promise to keep is listed once, in `TRL_INTERNALS` below, with what relies on it: this file, and the two
that patch TRL outside it (benchmarks/step_overhead.py times TRL's profiling spans; tests/run_with_vllm.py reads a
colocated engine's weights back, and leaves out the NCCL weight transfer to a server, which needs CUDA).
`missing_trl_internals()` checks every name listed, the trainer checks them when it is built, and
tests/test_trainer_seam.py fails naming any an upgrade removed.

With vLLM's CPU engine in colocate mode, the weight sync also reaches into vLLM (not TRL): the engine's model runner
at `.llm.llm_engine.model_executor.driver_worker.model_runner` (TRL's own path to it) and its `reload_weights`
(`sync_weights_into_cpu_engine`); tests/test_vllm.py runs it against the real engine.
"""

import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback
from trl import GRPOTrainer
from trl.extras.profiling import ProfilingContext
from trl.generation.vllm_client import VLLMClient
from trl.generation.vllm_generation import VLLMGeneration

from rewards import Rewards
from training.canary import CanaryTripped
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


@dataclass(frozen=True)
class TrlInternal:
    """One name TRL does not promise to keep. A method (or other class attribute) is checked on its class. An
    attribute that TRL's code sets on an object is checked in that code (`set_by`, a method of `owner`, still
    assigns `self.<name>`) and, once the trainer is built, on the object; `held` says when a built trainer has it:
    always, with vLLM (`vllm`), in colocate mode (`colocate`) or in server mode on the main process (`server`)."""

    owner: type
    name: str
    used_for: str
    set_by: str = ""
    held: str = ""

    def __str__(self) -> str:
        return f"{self.owner.__name__}.{self.name}"

    def in_trl(self) -> bool:
        """Whether the installed TRL still defines it (a method) or sets it (an attribute)."""
        if not self.set_by:
            return hasattr(self.owner, self.name)
        source = source_of(getattr(self.owner, self.set_by, None))
        return re.search(rf"\bself\.{re.escape(self.name)}\s*(:[^=\n]*)?=(?!=)", source) is not None


@functools.lru_cache(maxsize=None)
def source_of(function) -> str:
    """A function's source ('' for none); read once, since several listed names are set by one long __init__."""
    try:
        return inspect.getsource(inspect.unwrap(function))
    except (TypeError, OSError):
        return ""


TRL_INTERNALS = (
    TrlInternal(GRPOTrainer, "_generate_and_score_completions",
                "overridden: the generation batch passes through the difficulty filter before generating"),
    TrlInternal(GRPOTrainer, "_calculate_rewards", "overridden: the gathered rewards go to the per-problem tracker; "
                "its profiling span is the reward time of benchmarks/step_overhead.py"),
    TrlInternal(GRPOTrainer, "_metrics", "where the tracker's metrics are appended for TRL to log with the step",
                set_by="__init__"),
    TrlInternal(GRPOTrainer, "reward_func_names", "read to form the total reward as TRL does", set_by="__init__"),
    TrlInternal(GRPOTrainer, "reward_weights", "read to form the total reward as TRL does", set_by="__init__"),
    TrlInternal(GRPOTrainer, "num_generations", "the group size the tracker and the filter count in",
                set_by="__init__"),
    TrlInternal(GRPOTrainer, "use_vllm", "whether generation (evaluation's too) goes through vLLM",
                set_by="__init__"),
    TrlInternal(GRPOTrainer, "vllm_generation", "TRL's vLLM backend, which evaluation generates with",
                set_by="__init__", held="vllm"),
    TrlInternal(VLLMGeneration, "mode", "server or colocate", set_by="__init__", held="vllm"),
    TrlInternal(VLLMGeneration, "sync_weights", "called before evaluation generates, so it samples current weights; "
                "replaced on vLLM's CPU engine (sync_weights_into_cpu_engine)"),
    TrlInternal(VLLMGeneration, "_iter_named_params", "the weights as TRL sends them (gathered under ZeRO-3, LoRA "
                "merged), which sync_weights_into_cpu_engine loads"),
    TrlInternal(VLLMGeneration, "llm", "the colocated vLLM engine evaluation generates with", set_by="_init_vllm",
                held="colocate"),
    TrlInternal(VLLMGeneration, "vllm_client", "the client of the vLLM server", set_by="_init_vllm", held="server"),
    TrlInternal(VLLMClient, "session", "a requests.Session: every request it sends is bounded "
                "(--vllm_request_timeout, training/vllm_timeout.py)", set_by="__init__", held="server"),
    TrlInternal(VLLMClient, "base_url", "names the server in the bound's one-line error", set_by="__init__",
                held="server"),
    TrlInternal(VLLMClient, "generate", "evaluation's generation in server mode"),
    TrlInternal(VLLMClient, "init_communicator", "replaced by tests/run_with_vllm.py (the NCCL weight-transfer "
                "group needs CUDA)"),
    TrlInternal(VLLMClient, "update_named_params", "replaced by tests/run_with_vllm.py (it streams through that "
                "group)"),
    TrlInternal(VLLMClient, "communicator", "set to None by that replacement, as TRL leaves it without a group",
                set_by="__init__", held="server"),
    TrlInternal(ProfilingContext, "__enter__", "wrapped by benchmarks/step_overhead.py to time a span's CPU"),
    TrlInternal(ProfilingContext, "_log_metrics", "wrapped by benchmarks/step_overhead.py to record each span"),
    TrlInternal(ProfilingContext, "name", "the span's name, read by benchmarks/step_overhead.py", set_by="__init__"),
    TrlInternal(Trainer, "log", "called past GRPOTrainer.log, which would flush the step's training metrics"),
    TrlInternal(Trainer, "evaluate", "overridden with pass@k; transformers calls it on the trainer's schedule"),
    TrlInternal(Trainer, "callback_handler", "its on_evaluate is called as Trainer.evaluate would",
                set_by="__init__"),
)


class TrlInternalsChanged(RuntimeError):
    """An internal of TRL this trainer relies on is gone: the installed TRL is not the one it was written for."""

    def __init__(self, missing: list[str]):
        import trl

        super().__init__(f"TRL {trl.__version__} lacks {', '.join(missing)}, which training/trainer.py relies on "
                         f"(written for trl=={TRL_VERSION}); install the pinned version "
                         f"(pip install -r requirements.txt) or port training/trainer.py")


def held_objects(trainer) -> tuple[dict[type, object], set[str]]:
    """The objects of a built trainer that hold the listed attributes, by class, and when they are held (see
    `TrlInternal.held`)."""
    objects, held = {GRPOTrainer: trainer, Trainer: trainer}, {""}
    generation = getattr(trainer, "vllm_generation", None)
    if getattr(trainer, "use_vllm", False):
        held.add("vllm")
        if generation is not None:
            objects[VLLMGeneration] = generation
            mode = getattr(generation, "mode", None)
            if mode == "colocate":
                held.add("colocate")
            elif mode == "server" and trainer.accelerator.is_main_process:
                held.add("server")
                if getattr(generation, "vllm_client", None) is not None:
                    objects[VLLMClient] = generation.vllm_client
    return objects, held


def missing_trl_internals(trainer=None) -> list[str]:
    """The listed TRL names that are missing: from the installed TRL, and from ``trainer`` (built) if given."""
    missing = [str(internal) for internal in TRL_INTERNALS if not internal.in_trl()]
    if trainer is not None:
        objects, held = held_objects(trainer)
        for internal in TRL_INTERNALS:
            holder = objects.get(internal.owner)
            if internal.set_by and internal.held in held and holder is not None and not hasattr(holder, internal.name):
                missing.append(str(internal))
    return list(dict.fromkeys(missing))


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
    batches pass through ``tracker`` (training/difficulty.py), which learns which completions passed every test
    from what the reward functions return (`rewards.Rewards`), and whose requests to a vLLM server are each bounded
    by ``vllm_request_timeout`` seconds (server mode; the main process sends them).

    When an evaluation raises `CanaryTripped` (training/canary.py), the run stops: at once at step 0 (nothing
    trained), else after saving that step's checkpoint, the weights that passed; `train` then raises it."""

    def __init__(self, model, reward_funcs, *args, evaluator: PassAtKEvaluator | None = None,
                 tracker: ProblemTracker | None = None, vllm_request_timeout: float | None = None, **kwargs):
        missing = missing_trl_internals()
        if missing:
            raise TrlInternalsChanged(missing)
        self._passed_all: list[bool] | None = None
        self._canary_tripped: CanaryTripped | None = None
        funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        super().__init__(model, [self._keeping_verdicts(f) for f in funcs], *args, **kwargs)
        missing = missing_trl_internals(self)
        if missing:
            raise TrlInternalsChanged(missing)
        server = self.use_vllm and self.vllm_generation.mode == "server" and self.accelerator.is_main_process
        if server and vllm_request_timeout:
            bound_vllm_client(self.vllm_generation.vllm_client, vllm_request_timeout)
        if self.use_vllm and self.vllm_generation.mode == "colocate" and vllm_runs_on_cpu():
            generation = self.vllm_generation
            generation.sync_weights = lambda: sync_weights_into_cpu_engine(generation)
        self.evaluator = evaluator
        if evaluator is not None:
            self.add_callback(PassAtKSchedule(int(self.args.eval_steps or 0)))
        self.tracker = tracker
        if tracker is not None:
            self.add_callback(tracker.callback())
            self._row_of_problem = {pid: i for i, pid in enumerate(self.train_dataset["id"])}

    def _keeping_verdicts(self, func):
        """``func`` as TRL calls it, keeping which completions passed every test when it returns `Rewards` that say
        so, for `_calculate_rewards` to read once TRL has called every reward function."""
        if not inspect.iscoroutinefunction(func):
            return func

        @functools.wraps(func)
        async def keeping(*args, **kwargs):
            rewards = await func(*args, **kwargs)
            if isinstance(rewards, Rewards) and rewards.passed_all is not None:
                self._passed_all = rewards.passed_all
            return rewards

        return keeping

    def train(self, *args, **kwargs):
        self._canary_tripped = None
        output = super().train(*args, **kwargs)
        if self._canary_tripped is not None:
            raise self._canary_tripped
        return output

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
        self._passed_all = None
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.tracker is not None and self.model.training:
            ids = gather_object([row["id"] for row in inputs])
            # The total reward as TRL forms it for the advantage; a row no function could score stays NaN.
            total = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
            total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            passed_all = None if self._passed_all is None else gather_object(list(self._passed_all))
            metrics = self.tracker.observe(self.state.global_step + 1, ids, total.tolist(), passed_all,
                                           self.num_generations)
            for name, value in metrics.items():
                self._metrics["train"][name].append(value)
        return rewards_per_func

    def evaluate(self, *args, **kwargs) -> dict:
        if self.evaluator is None:
            return {}
        generate = self._generate_with_vllm if self.use_vllm else None
        tripped = None
        try:
            metrics = self.evaluator.evaluate(self.model_wrapped, self.accelerator, self.state.global_step, generate)
        except CanaryTripped as canary:
            tripped, metrics = canary, canary.metrics
        metrics = {f"eval_{k}": v for k, v in metrics.items()}
        # Trainer.log, not GRPOTrainer.log (which would flush the step's training metrics): the keys become
        # eval/pass@1 ... in wandb and land in logs/metrics.jsonl through RunLogCallback. on_evaluate, as
        # Trainer.evaluate calls it, also clears the request to evaluate.
        Trainer.log(self, dict(metrics))
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        if tripped is not None and self.state.global_step == 0:
            raise tripped  # nothing trained yet: no step, no checkpoint
        if tripped is not None:  # this step's checkpoint keeps the weights that passed; nothing trains after it
            self._canary_tripped = tripped
            self.control.should_save = self.control.should_training_stop = True
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
