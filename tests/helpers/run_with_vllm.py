"""rl_trainer.py as a user runs it, against the real vLLM, with what a test needs on a CPU machine. Used in place of
rl_trainer.py (also under `accelerate launch`):

    python tests/helpers/run_with_vllm.py ARGS...

Two changes, each asked for by an environment variable:

- RUN_WITH_VLLM_SYNC_RECORD=FILE (colocate): each time a rank's vLLM engine is asked to generate, the rank first
  compares the engine's weights with the policy's (gathered under ZeRO-3, q/k/v and gate/up stacked as vLLM
  stores them, cast to the dtype vLLM chose) and appends one JSON line to FILE: rank, how many tensors, which
  differ, the dtype and a digest of the engine's weights (it must change as the policy trains). Every rank must
  generate equally often (the ZeRO-3 gather is collective): training does; evaluation under several processes
  need not.
- RUN_WITH_VLLM_NO_WEIGHT_TRANSFER=1 (server mode): TRL 1.16 sends the policy's weights to a vLLM server only over
  NCCL (`VLLMClient.init_communicator` sets up the group, `update_named_params` streams through it), and vLLM 0.30
  runs that transfer only on CUDA. Both are left out, and so is rl_trainer.py's up-front refusal of server mode on a
  machine without CUDA, which exists because of them. Every other request after start-up (generation, the
  prefix-cache reset) goes to the real server through TRL's real client; the server samples from the weights it
  loaded.
- RUN_WITH_VLLM_GENERATION_DELAY=SECONDS (server mode): each generation request returns that much later, as from
  a server that takes longer to generate (benchmarks/async_overlap.py: a generation as long as a training step).
- RUN_WITH_VLLM_TRACE=FILE (server mode): one JSON line per event, with the rank, its process id and the time
  (monotonic, one clock per process): each generation request to the server (`request`, its start and end, from whichever thread
  sent it), each weight sync (`weights`), each pass@k evaluation and each checkpoint as transformers writes it
  (`evaluate`, `checkpoint`, with the step) and, with --async_generation, each batch submitted and collected
  (`submit`, `collect`, with the generation's index) and each time the schedule brings the server's weights up to
  date (`sync`: a `weights` sync where the server lacks the step's); each event has a start and an end.
"""

import functools
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
STACKED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def policy_weights(model) -> dict[str, torch.Tensor]:
    """The policy's parameters under their transformers names, whole (gathered from every rank under ZeRO-3)."""
    params = dict(model.named_parameters())
    sharded = [p for p in params.values() if hasattr(p, "ds_id")]
    if not sharded:
        return {name.removeprefix("module."): p.detach().clone() for name, p in params.items()}
    import deepspeed

    with deepspeed.zero.GatheredParameters(sharded):
        return {name.removeprefix("module."): p.detach().clone() for name, p in params.items()}


def engine_weights(engine_model, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The weights the engine computes with, by vLLM's names. vLLM's CPU build repacks each linear layer's weight
    for its GEMM kernel and leaves an empty parameter in its place; that weight is read back through the layer's
    own matmul on the identity (x = I gives x W^T = W^T exactly: one product by 1 per output)."""
    weights = {}
    for module_name, module in engine_model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            full = f"{module_name}.{name}" if module_name else name
            if param.numel() == 0 and name == "weight" and hasattr(module, "quant_method"):
                identity = torch.eye(module.input_size_per_partition, dtype=dtype)
                weights[full] = module.quant_method.apply(module, identity).t().contiguous()
            else:
                weights[full] = param.data
    return weights


def compare(engine_model, dtype: torch.dtype, policy: dict[str, torch.Tensor]) -> tuple[int, list[str], float]:
    """(tensors compared, names that differ, digest) of the engine's weights against the policy's (all of them:
    a name vLLM has and the policy lacks fails with KeyError), each policy tensor cast to vLLM's dtype (then to the dtype the engine stores it in: the CPU kernels keep biases in
    float32)."""
    differ, digest, compared = [], 0.0, 0
    for name, weight in engine_weights(engine_model, dtype).items():
        parts = name.split(".")
        stacked = next((s for s in STACKED if s in parts), None)
        if stacked:
            expected = torch.cat([policy[name.replace(stacked, part)] for part in STACKED[stacked]])
        else:
            expected = policy[name]
        compared += 1
        weight = weight[: expected.shape[0]]  # vLLM pads the vocabulary rows of the embeddings and the head
        if not torch.equal(expected.to(dtype).to(weight.dtype), weight):
            differ.append(name)
        digest += weight.float().abs().sum().item()
    return compared, differ, digest


def record_weights_at_generation(path: str) -> None:
    from trl.generation.vllm_generation import VLLMGeneration
    from vllm import LLM

    generations = []
    init, generate = VLLMGeneration.__init__, LLM.generate

    @functools.wraps(init)  # training/trainer.py reads the wrapped __init__'s source to check what TRL sets
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        generations.append(self)

    def checked_generate(llm, *args, **kwargs):
        (generation,) = [g for g in generations if getattr(g, "llm", None) is llm]
        engine_model = llm.llm_engine.model_executor.driver_worker.model_runner.get_model()
        dtype = llm.llm_engine.model_config.dtype
        with torch.no_grad():
            compared, differ, digest = compare(engine_model, dtype, policy_weights(generation.model))
        line = {
            "rank": generation.accelerator.process_index,
            "compared": compared,
            "differ": differ,
            "digest": digest,
            "dtype": str(dtype).removeprefix("torch."),
        }
        with open(path, "a") as record:
            record.write(json.dumps(line) + "\n")
        return generate(llm, *args, **kwargs)

    VLLMGeneration.__init__, LLM.generate = __init__, checked_generate


def leave_out_weight_transfer() -> None:
    from trl.generation import vllm_client

    import training.prerequisites

    def no_weight_transfer_group(self, device=0):
        self.communicator = None

    def no_weight_update(self, metadata, params):
        for _ in params:  # every rank takes part in the ZeRO-3 gathers, as TRL's own loop would
            pass

    vllm_client.VLLMClient.init_communicator = no_weight_transfer_group
    vllm_client.VLLMClient.update_named_params = no_weight_update
    training.prerequisites.check_vllm_server_device = lambda: None


def delay_generation(seconds: float) -> None:
    from trl.generation.vllm_client import VLLMClient

    generate = VLLMClient.generate

    @functools.wraps(generate)
    def delayed(self, *args, **kwargs):
        output = generate(self, *args, **kwargs)
        time.sleep(seconds)
        return output

    VLLMClient.generate = delayed


def trace_events(path: str) -> None:
    """RUN_WITH_VLLM_TRACE: wraps what the events name, each recording itself into ``path``."""
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    from transformers import Trainer

    from training.async_generation import OverlappedGeneration
    from training.evaluation import PassAtKEvaluator
    from training.trainer import QGRPOTrainer

    lock = threading.Lock()

    def record(event: str, **fields) -> None:
        line = {
            "rank": int(os.environ.get("RANK", "0")),
            "pid": os.getpid(),
            "event": event,
            "time": time.monotonic(),
            **fields,
        }
        with lock, open(path, "a") as out:
            out.write(json.dumps(line) + "\n")

    def spanned(owner, name: str, event: str, **describe):
        method = getattr(owner, name)

        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            fields = {key: value(self, *args) for key, value in describe.items()}
            record(event, phase="start", **fields)
            try:
                return method(self, *args, **kwargs)
            finally:
                record(event, phase="end", **fields)

        setattr(owner, name, wrapper)

    spanned(VLLMClient, "generate", "request", thread=lambda self, *a: threading.current_thread().name)
    spanned(VLLMGeneration, "sync_weights", "weights")
    spanned(QGRPOTrainer, "_sync_server_weights", "sync")
    spanned(PassAtKEvaluator, "evaluate", "evaluate", step=lambda self, model, accelerator, step, *a: step)
    spanned(Trainer, "_save_checkpoint", "checkpoint", step=lambda self, *a: self.state.global_step)
    spanned(OverlappedGeneration, "_submit", "submit", generation=lambda self, batch: batch.generation)
    spanned(OverlappedGeneration, "_collect", "collect", generation=lambda self: self.in_flight.batch.generation)


if __name__ == "__main__":
    if os.environ.get("RUN_WITH_VLLM_SYNC_RECORD"):
        record_weights_at_generation(os.environ["RUN_WITH_VLLM_SYNC_RECORD"])
    if os.environ.get("RUN_WITH_VLLM_NO_WEIGHT_TRANSFER") == "1":
        leave_out_weight_transfer()
    if os.environ.get("RUN_WITH_VLLM_GENERATION_DELAY"):
        delay_generation(float(os.environ["RUN_WITH_VLLM_GENERATION_DELAY"]))
    if os.environ.get("RUN_WITH_VLLM_TRACE"):
        trace_events(os.environ["RUN_WITH_VLLM_TRACE"])
    sys.argv = [str(ROOT / "rl_trainer.py"), *sys.argv[1:]]
    runpy.run_path(str(ROOT / "rl_trainer.py"), run_name="__main__")
