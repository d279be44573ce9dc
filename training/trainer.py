"""`QGRPOTrainer`: TRL's GRPOTrainer with pass@k evaluation, per-problem records, a bound on vLLM requests and
generation overlapped with training (`--async_generation`, training/async_generation.py).

This is the one file that touches TRL's private internals at run time (training/memory_plan.py reads where TRL
declares its settings, `trl/trainer/base_config.py` and `trl/scripts/vllm_serve.py`, as source files by path, and
tests/training/test_memory_plan.py checks they are there). Written against trl==1.16.0 (requirements.txt). Every
name of TRL's (and of transformers' `Trainer`, reached past TRL's overrides) that this project relies on and TRL
does not promise to keep is listed once, in `TRL_INTERNALS` below, with what relies on it: this file, and the two
that patch TRL outside it (benchmarks/step_overhead.py times TRL's profiling spans; tests/run_with_vllm.py reads a
colocated engine's weights back, leaves out the NCCL weight transfer to a server, which needs CUDA, and delays and
traces the requests to a server).
`missing_trl_internals()` checks every name listed, the trainer checks them when it is built, and
tests/training/test_trainer_seam.py fails naming any an upgrade removed.

With vLLM's CPU engine in colocate mode, the weight sync also reaches into vLLM (not TRL): the engine's model runner
at `.llm.llm_engine.model_executor.driver_worker.model_runner` (TRL's own path to it) and its `reload_weights`
(`sync_weights_into_cpu_engine`); tests/training/test_vllm.py runs it against the real engine.
"""

import functools
import inspect
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback
from trl import GRPOTrainer
from trl.extras.profiling import ProfilingContext, profiling_context
from trl.generation.vllm_client import VLLMClient
from trl.generation.vllm_generation import VLLMGeneration

from rewards import JudgedRewards
from training.async_generation import Batch, OverlappedGeneration, RequestThread, RowSchedule
from training.canary import CanaryAlarm, CanaryTripped
from training.evaluation import PassAtKEvaluator
from training.feedback import REPLIES_COLUMN, FeedbackRounds
from training.hidden_tests import HiddenTestsAlarm, HiddenTestWatch
from training.judged_batch import JudgedBatch
from training.problem_records import ProblemTracker
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
        """Whether the installed TRL still defines it (a method, on the class itself: an override that TRL dropped
        would leave transformers' method in its place) or sets it (an attribute)."""
        if not self.set_by:
            return self.name in vars(self.owner)
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
    TrlInternal(
        GRPOTrainer,
        "_generate_and_score_completions",
        "overridden: the generation batch passes through the difficulty filter before generating",
    ),
    TrlInternal(
        GRPOTrainer,
        "_calculate_rewards",
        "overridden: the gathered rewards go to the per-problem tracker; "
        "its profiling span is the reward time of benchmarks/step_overhead.py",
    ),
    TrlInternal(
        GRPOTrainer,
        "_metrics",
        "where the tracker's and the hidden-test watch's metrics are appended for TRL to log with the step",
        set_by="__init__",
    ),
    TrlInternal(GRPOTrainer, "reward_func_names", "read to form the total reward as TRL does", set_by="__init__"),
    TrlInternal(GRPOTrainer, "reward_weights", "read to form the total reward as TRL does", set_by="__init__"),
    TrlInternal(
        GRPOTrainer, "num_generations", "the group size the tracker and the filter count in", set_by="__init__"
    ),
    TrlInternal(GRPOTrainer, "use_vllm", "whether generation (evaluation's too) goes through vLLM", set_by="__init__"),
    TrlInternal(
        GRPOTrainer,
        "vllm_generation",
        "TRL's vLLM backend, which evaluation generates with",
        set_by="__init__",
        held="vllm",
    ),
    TrlInternal(VLLMGeneration, "mode", "server or colocate", set_by="__init__", held="vllm"),
    TrlInternal(
        VLLMGeneration,
        "sync_weights",
        "called before evaluation generates, so it samples current weights, "
        "and by --async_generation; replaced on vLLM's CPU engine (sync_weights_into_cpu_engine); traced by "
        "tests/run_with_vllm.py",
    ),
    TrlInternal(
        VLLMGeneration,
        "_iter_named_params",
        "the weights as TRL sends them (gathered under ZeRO-3, LoRA merged), which sync_weights_into_cpu_engine loads",
    ),
    TrlInternal(
        VLLMGeneration,
        "llm",
        "the colocated vLLM engine evaluation generates with",
        set_by="_init_vllm",
        held="colocate",
    ),
    TrlInternal(VLLMGeneration, "vllm_client", "the client of the vLLM server", set_by="_init_vllm", held="server"),
    TrlInternal(
        VLLMClient,
        "session",
        "a requests.Session: every request it sends is bounded (--vllm_request_timeout, training/vllm_timeout.py)",
        set_by="__init__",
        held="server",
    ),
    TrlInternal(
        VLLMClient, "base_url", "names the server in the bound's one-line error", set_by="__init__", held="server"
    ),
    TrlInternal(
        VLLMClient,
        "generate",
        "evaluation's generation in server mode, and --async_generation's; delayed "
        "and traced by tests/run_with_vllm.py",
    ),
    TrlInternal(
        VLLMClient,
        "init_communicator",
        "replaced by tests/run_with_vllm.py (the NCCL weight-transfer group needs CUDA)",
    ),
    TrlInternal(
        VLLMClient, "update_named_params", "replaced by tests/run_with_vllm.py (it streams through that group)"
    ),
    TrlInternal(
        VLLMClient,
        "communicator",
        "set to None by that replacement, as TRL leaves it without a group",
        set_by="__init__",
        held="server",
    ),
    TrlInternal(ProfilingContext, "__enter__", "wrapped by benchmarks/step_overhead.py to time a span's CPU"),
    TrlInternal(ProfilingContext, "_log_metrics", "wrapped by benchmarks/step_overhead.py to record each span"),
    TrlInternal(ProfilingContext, "name", "the span's name, read by benchmarks/step_overhead.py", set_by="__init__"),
    TrlInternal(
        GRPOTrainer,
        "_generate_single_turn",
        "overridden with --async_generation: returns the completions "
        "requested a step ahead (training/async_generation.py); --feedback_turns generates each turn with "
        "it",
    ),
    TrlInternal(
        GRPOTrainer,
        "_tokenize_prompts",
        "tokenizes the next batch's prompts as TRL tokenizes this one's, "
        "and the prompts of --feedback_turns (training/feedback.py)",
    ),
    TrlInternal(
        GRPOTrainer, "eos_token_ids", "the tokens that end a turn, read by --feedback_turns", set_by="__init__"
    ),
    TrlInternal(
        GRPOTrainer, "max_completion_length", "the length every turn of --feedback_turns fits in", set_by="__init__"
    ),
    TrlInternal(
        GRPOTrainer,
        "num_generations_eval",
        "the group size of --feedback_turns's first turn outside training",
        set_by="__init__",
    ),
    TrlInternal(
        GRPOTrainer,
        "_get_train_sampler",
        "the sampler whose order --async_generation replays a generation ahead of the dataloader (RowSchedule)",
    ),
    TrlInternal(
        GRPOTrainer,
        "_step",
        "TRL's count of micro-steps, by which it decides when to generate; places a generation in the run",
        set_by="__init__",
    ),
    TrlInternal(
        GRPOTrainer,
        "_last_loaded_step",
        "the step whose weights vLLM holds: --async_generation syncs as TRL does, when it differs from the global step",
        set_by="__init__",
        held="vllm",
    ),
    *(
        TrlInternal(
            VLLMGeneration,
            name,
            "a sampling setting TRL sends with each server request, sent alike with the requests of --async_generation",
            set_by="__init__",
            held="vllm",
        )
        for name in (
            "repetition_penalty",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "max_completion_length",
            "logprobs",
            "structured_outputs_regex",
            "generation_kwargs",
        )
    ),
    TrlInternal(Trainer, "log", "called past GRPOTrainer.log, which would flush the step's training metrics"),
    TrlInternal(Trainer, "evaluate", "overridden with pass@k; transformers calls it on the trainer's schedule"),
    TrlInternal(
        Trainer,
        "_save_checkpoint",
        "transformers saves each checkpoint through it; overridden so that a "
        "checkpoint first drains the request in flight (--async_generation)",
    ),
    TrlInternal(Trainer, "callback_handler", "its on_evaluate is called as Trainer.evaluate would", set_by="__init__"),
)


class TrlInternalsChanged(RuntimeError):
    """An internal of TRL this trainer relies on is gone: the installed TRL is not the one it was written for."""

    def __init__(self, missing: list[str]):
        import trl

        super().__init__(
            f"TRL {trl.__version__} lacks {', '.join(missing)}, which training/trainer.py relies on "
            f"(written for trl=={TRL_VERSION}); install the pinned version "
            f"(pip install -r requirements.txt) or port training/trainer.py"
        )


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


def server_sampling_params(generation, n: int) -> dict:
    """The sampling settings TRL's `VLLMGeneration.generate` sends with a server request for ``n`` completions per
    prompt (tests/training/test_async_generation.py checks them against TRL's own request)."""
    return {
        "n": n,
        "repetition_penalty": generation.repetition_penalty,
        "temperature": generation.temperature,
        "top_p": generation.top_p,
        "top_k": generation.top_k,
        "min_p": 0.0 if generation.min_p is None else generation.min_p,
        "max_tokens": generation.max_completion_length,
        "logprobs": generation.logprobs,
        "structured_outputs_regex": generation.structured_outputs_regex,
        "generation_kwargs": generation.generation_kwargs,
    }


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


class CloseOverlap(TrainerCallback):
    """When training ends (on every rank), waits for a request still in flight and drops its batch: training
    stopped before the step it was generated for."""

    def __init__(self, overlap: OverlappedGeneration):
        self.overlap = overlap

    def on_train_end(self, args, state, control, **kwargs):
        self.overlap.close()


class QGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose evaluation is pass@k (``evaluator``; none: evaluation is off), whose judged
    generation batches go to the step's observers as one `JudgedBatch`: ``tracker`` (training/problem_records.py,
    which also has the difficulty filter rewrite each batch before it is generated) and ``hidden_watch``
    (training/hidden_tests.py). The batch carries which completions passed every test (and their hidden tests) from
    the `rewards.JudgedRewards` a reward function returns, synchronous or not. Its requests to a vLLM server are
    each bounded by ``vllm_request_timeout`` seconds (server mode; the main process sends them), and with
    ``async_generation`` (server mode only) the server generates the next batch while it trains on this one
    (training/async_generation.py).

    A watch can end training early: a canary passed at an evaluation (training/canary.py) stops it at once at step 0
    (nothing trained), else after saving that step's checkpoint, the weights that passed; the hidden-test watch
    stops it after saving the checkpoint of the step whose completions sounded it. `train` then returns with the
    alarm in ``alarm`` (None when training ran to its end), for the run to stop with (training/stops.py)."""

    def __init__(
        self,
        model,
        reward_funcs,
        *args,
        evaluator: PassAtKEvaluator | None = None,
        tracker: ProblemTracker | None = None,
        hidden_watch: HiddenTestWatch | None = None,
        vllm_request_timeout: float | None = None,
        async_generation: bool = False,
        feedback: FeedbackRounds | None = None,
        **kwargs,
    ):
        missing = missing_trl_internals()
        if missing:
            raise TrlInternalsChanged(missing)
        self._judged: JudgedRewards | None = None
        self.alarm: CanaryAlarm | HiddenTestsAlarm | None = None
        funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        if feedback is not None and async_generation:
            raise ValueError("feedback rounds generate each batch turn by turn: they cannot be requested a step ahead")
        self.feedback = feedback
        with warnings.catch_warnings():  # TRL calls rollout_func experimental; training/feedback.py is its one user
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
            super().__init__(model, [self._keeping_judged(f) for f in funcs], *args, rollout_func=feedback, **kwargs)
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
        self.hidden_watch = hidden_watch
        if tracker is not None:
            self.add_callback(tracker.callback())
            self._row_of_problem = {pid: i for i, pid in enumerate(self.train_dataset["id"])}
        self.overlap, self._async_step = None, None
        if async_generation:
            if not (self.use_vllm and self.vllm_generation.mode == "server"):
                raise ValueError(
                    "async_generation overlaps a vLLM server's generation with training: it needs "
                    "use_vllm with vllm_mode='server'"
                )
            self.overlap = OverlappedGeneration(
                submit=self._submit_generation,
                collect=self._collect_generation,
                sync=self._sync_server_weights,
                step=lambda: self.state.global_step,
            )
            self._rows_ahead = RowSchedule(
                self._get_train_sampler,
                self.args.generation_batch_size,
                self.args.steps_per_generation * self.args.num_iterations,
            )
            self._problem_ids = list(self.train_dataset["id"]) if tracker is not None else None
            self.add_callback(CloseOverlap(self.overlap))

    def _keeping_judged(self, func):
        """``func`` as TRL calls it (a coroutine function stays one, so TRL still runs it concurrently), keeping the
        `JudgedRewards` it returns for `_calculate_rewards` to read once TRL has called every reward function."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def keeping(*args, **kwargs):
                return self._keep(await func(*args, **kwargs))
        else:

            @functools.wraps(func)
            def keeping(*args, **kwargs):
                return self._keep(func(*args, **kwargs))

        return keeping

    def _keep(self, rewards):
        if isinstance(rewards, JudgedRewards):
            if self._judged is not None:
                raise RuntimeError(
                    "two reward functions returned the judge's verdicts for one batch; the step's observers read one"
                )
            self._judged = rewards
        return rewards

    def train(self, *args, **kwargs):
        self.alarm = None
        try:
            return super().train(*args, **kwargs)
        except CanaryTripped as tripped:  # at the evaluation on start: nothing trained, no step, no checkpoint
            self.alarm = tripped.alarm
            return None

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
            run=run.name,
            base=self.model.config.name_or_path,
            trl=trl.__version__,
            config=run / "config.yaml",
            steps=a.max_steps,
            lr=a.learning_rate,
            scheduler=getattr(a.lr_scheduler_type, "value", a.lr_scheduler_type),
            generations=a.num_generations,
            length=a.max_completion_length,
            temperature=a.temperature,
            seed=a.seed,
            rewards=", ".join(f"{name} x {weight:g}" for name, weight in zip(self.reward_func_names, a.reward_weights)),
        )
        Path(a.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(a.output_dir) / "README.md").write_text(card)

    def _save_checkpoint(self, model, trial):
        if self.overlap is not None:
            self.overlap.drain()
        super()._save_checkpoint(model, trial)

    def _generate_and_score_completions(self, inputs):
        """The generation batch, rewritten by the difficulty filter (the same way on every rank) before generating.
        With --async_generation, the batch generated a step ahead instead (or chosen now, if none is)."""
        if self.overlap is not None and self.model.training:
            generation, more = self._generation_position()
            batch = self.overlap.ahead or self._choose_generation(generation)
            next_batch = self._choose_generation(generation + 1) if more else None
            if batch.extra is not None:  # the difficulty filter's choice, which the batch scored now must match
                self.tracker.expect(batch.extra)
            self._async_step = (batch, next_batch)
            try:
                return super()._generate_and_score_completions(
                    [self.train_dataset[row] for row in self._my_rows(batch)]
                )
            finally:
                self._async_step = None
        if self.tracker is not None and self.tracker.filtering and self.model.training:
            ids = gather_object([row["id"] for row in inputs])
            rewrite = self.tracker.rewrite(ids, self.num_generations)
            self.tracker.expect(rewrite)
            chosen = rewrite.ids
            if chosen != ids:
                mine = chosen[self.accelerator.process_index * len(inputs) :][: len(inputs)]
                inputs = [self.train_dataset[self._row_of_problem[pid]] for pid in mine]
        if self.feedback is not None:
            self.feedback.problem_ids = [row["id"] for row in inputs]
        return super()._generate_and_score_completions(inputs)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """TRL's generation; with --async_generation in training, the completions of this step's batch, requested
        a step ahead, once the next batch is requested (`OverlappedGeneration.exchange`)."""
        if self._async_step is None:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        received = self.overlap.exchange(*self._async_step)
        all_prompt_ids, all_completion_ids, all_logprobs = received.output
        mine = slice(
            self.accelerator.process_index * len(prompt_ids), (self.accelerator.process_index + 1) * len(prompt_ids)
        )
        sent = [ids for ids in all_prompt_ids for _ in range(num_generations)][mine]
        if [list(ids) for ids in sent] != [list(ids) for ids in prompt_ids]:
            raise RuntimeError("the completions received are for other prompts than this step's batch")
        completion_ids = all_completion_ids[mine]
        logprobs = None if all_logprobs is None else [[lp[0] for lp in seq] for seq in all_logprobs[mine]]
        metrics = self._metrics["train"]
        metrics["async/staleness"].append(float(self.state.global_step - received.weights_step))
        metrics["async/generation_wait_s"].append(received.wait_s)
        metrics["async/generation_s"].append(received.generation_s)
        return completion_ids, logprobs

    def _generation_position(self) -> tuple[int, bool]:
        """The index in the run of the generation made now (in training), and whether another one follows before
        the last step. TRL generates every `steps_per_generation * num_iterations` micro-steps, and once more at
        the first micro-step of a resumed run."""
        accumulation = self.args.gradient_accumulation_steps
        every = self.args.steps_per_generation * self.args.num_iterations
        micro = self.state.global_step * accumulation + self._step % accumulation
        return math.ceil(micro / every), micro + every < self.state.max_steps * accumulation

    def _choose_generation(self, generation: int) -> Batch:
        """A generation's rows: the train sampler's (replayed ahead of the dataloader), then the difficulty
        filter's rewrite, which also says what the tracker must see when the batch is scored."""
        rows = self._rows_ahead.rows(generation)
        if self.tracker is None or not self.tracker.filtering:
            return Batch(generation, rows)
        rewrite = self.tracker.rewrite([self._problem_ids[row] for row in rows], self.num_generations)
        return Batch(generation, [self._row_of_problem[pid] for pid in rewrite.ids], rewrite)

    def _my_rows(self, batch: Batch) -> list[int]:
        size = self.args.per_device_train_batch_size * self.args.steps_per_generation
        return batch.rows[self.accelerator.process_index * size :][:size]

    def _submit_generation(self, batch: Batch) -> RequestThread | None:
        """Every rank tokenizes its share of the batch's prompts, as TRL does; the main process gathers them and
        sends the request from a thread (returned); the others return None."""
        prompt_ids, _, _ = self._tokenize_prompts([self.train_dataset[row]["prompt"] for row in self._my_rows(batch)])
        all_prompt_ids = gather_object(prompt_ids)
        if not self.accelerator.is_main_process:
            return None
        client = self.vllm_generation.vllm_client
        params = server_sampling_params(self.vllm_generation, self.num_generations)
        return RequestThread(lambda: client.generate(prompts=all_prompt_ids[:: self.num_generations], **params))

    def _collect_generation(self, request: RequestThread | None) -> tuple[tuple, float]:
        """Every rank: the main process waits for the request, then sends every rank its output (prompt ids,
        completion ids and log-probabilities of every completion) and how long the server took."""
        payload = [None]
        if self.accelerator.is_main_process:
            output, seconds = request.result()
            payload = [((output["prompt_ids"], output["completion_ids"], output["logprobs"]), seconds)]
        broadcast_object_list(payload, from_process=0)
        return payload[0]

    def _sync_server_weights(self) -> None:
        """TRL's weight sync to the server (every rank takes part), when the server lacks this step's weights."""
        if self.state.global_step != self._last_loaded_step:
            with profiling_context(self, "sync_weights"):
                self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards of the whole generation batch (gathered), handed with the judge's verdicts and the problem
        ids, as one `JudgedBatch`, to the step's observers (the tracker, the hidden-test watch); their metrics are
        logged with the step."""
        self._judged = None
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if (self.tracker is not None or self.hidden_watch is not None) and self.model.training:
            batch = self._judged_batch(inputs, rewards_per_func)
            metrics = self.tracker.observe(batch) if self.tracker is not None else {}
            if self.hidden_watch is not None:
                watched, alarm = self.hidden_watch.observe(batch)
                metrics.update(watched)
                if alarm is not None and self.hidden_watch.sound(alarm, log=self.accelerator.is_main_process):
                    # Every rank decided alike on the gathered verdicts: each finishes this step, saves, stops.
                    self.alarm = alarm
                    self.control.should_save = self.control.should_training_stop = True
            for name, value in metrics.items():
                self._metrics["train"][name].append(value)
        return rewards_per_func

    def _judged_batch(self, inputs, rewards_per_func) -> JudgedBatch:
        """The batch gathered from every rank: its problem ids, the total reward as TRL forms it for the advantage
        (a row no function could score stays NaN) and the verdicts the judge-backed reward function returned."""
        weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
        total = (rewards_per_func * weights).nansum(dim=1)
        total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        judged = self._judged
        return JudgedBatch(
            step=self.state.global_step + 1,
            ids=gather_object([row["id"] for row in inputs]),
            rewards=total.tolist(),
            group_size=self.num_generations,
            passed_all=None if judged is None else gather_object(list(judged.passed_all)),
            passed_hidden=None
            if judged is None or judged.passed_hidden is None
            else gather_object(list(judged.passed_hidden)),
            replies=None if self.feedback is None else gather_object([row[REPLIES_COLUMN] for row in inputs]),
        )

    def evaluate(self, *args, **kwargs) -> dict:
        if self.evaluator is None:
            return {}
        if self.overlap is not None:
            self.overlap.drain()
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
            raise tripped  # nothing trained yet: no step, no checkpoint (`train` keeps its alarm)
        if tripped is not None:  # this step's checkpoint keeps the weights that passed; nothing trains after it
            self.alarm = tripped.alarm
            self.control.should_save = self.control.should_training_stop = True
        return metrics

    def _generate_with_vllm(self, prompts: list[str], n: int, temperature: float, max_tokens: int) -> list[list[str]]:
        """``n`` sampled completions per prompt from TRL's vLLM backend, with the current weights (server: the main
        process asks for every rank's prompts; colocate: each rank asks its own engine)."""
        generation, tokenizer, accelerator = self.vllm_generation, self.processing_class, self.accelerator
        generation.sync_weights()
        self._last_loaded_step = self.state.global_step  # training's next generation need not send them again
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if generation.mode == "server":
            all_ids = gather_object([prompt_ids])
            result = [None]
            if accelerator.is_main_process:
                flat = [ids for shard in all_ids for ids in shard]
                output = generation.vllm_client.generate(
                    prompts=flat, n=n, temperature=temperature, max_tokens=max_tokens
                )
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
