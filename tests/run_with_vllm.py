"""rl_trainer.py as a user runs it, against the real vLLM, with what a test needs on a CPU machine. Used in place of
rl_trainer.py (also under `accelerate launch`):

    python tests/run_with_vllm.py ARGS...

Two changes, each asked for by an environment variable:

- RUN_WITH_VLLM_SYNC_RECORD=FILE (colocate): after each of TRL's weight syncs every rank compares its vLLM
  engine's weights with the policy's (gathered under ZeRO-3, q/k/v and gate/up stacked as vLLM stores them, cast
  to the dtype vLLM chose) and appends one JSON line to FILE: rank, step, how many tensors, which differ, and a
  digest of the engine's weights (it must change from one step's sync to the next).
- RUN_WITH_VLLM_NO_WEIGHT_TRANSFER=1 (server mode): TRL 1.16 sends the policy's weights to a vLLM server only over
  NCCL (`VLLMClient.init_communicator` sets up the group, `update_named_params` streams through it), and vLLM 0.30
  runs that transfer only on CUDA. Both are left out, and so is rl_trainer.py's up-front refusal of server mode on a
  machine without CUDA, which exists because of them. Every other request after start-up (generation, the
  prefix-cache reset) goes to the real server through TRL's real client; the server samples from the weights it
  loaded.
"""

import json
import os
import runpy
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
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


def compare(engine_model, policy: dict[str, torch.Tensor]) -> tuple[int, list[str], float]:
    """(tensors compared, names that differ, digest) of the engine's weights against the policy's."""
    differ, digest, compared = [], 0.0, 0
    for name, weight in engine_model.named_parameters():
        parts = name.split(".")
        stacked = next((s for s in STACKED if s in parts), None)
        if stacked:
            expected = torch.cat([policy[name.replace(stacked, part)] for part in STACKED[stacked]])
        else:
            expected = policy[name]
        compared += 1
        if not torch.equal(expected.to(weight.dtype), weight.data):
            differ.append(name)
        digest += weight.data.float().abs().sum().item()
    return compared, differ, digest


def record_syncs(path: str) -> None:
    from trl.generation.vllm_generation import VLLMGeneration

    sync = VLLMGeneration.sync_weights

    def sync_weights(self):
        sync(self)
        policy = policy_weights(self.model)
        engine_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        compared, differ, digest = compare(engine_model, policy)
        line = {"rank": self.accelerator.process_index, "compared": compared, "differ": differ, "digest": digest,
                "dtype": str(next(engine_model.parameters()).dtype).removeprefix("torch.")}
        with open(path, "a") as record:
            record.write(json.dumps(line) + "\n")

    VLLMGeneration.sync_weights = sync_weights


def leave_out_weight_transfer() -> None:
    from trl.generation import vllm_client

    import training.preflight

    def no_weight_transfer_group(self, device=0):
        self.communicator = None

    def no_weight_update(self, metadata, params):
        for _ in params:  # every rank takes part in the ZeRO-3 gathers, as TRL's own loop would
            pass

    vllm_client.VLLMClient.init_communicator = no_weight_transfer_group
    vllm_client.VLLMClient.update_named_params = no_weight_update
    training.preflight.check_vllm_server_device = lambda: None


if __name__ == "__main__":
    if os.environ.get("RUN_WITH_VLLM_SYNC_RECORD"):
        record_syncs(os.environ["RUN_WITH_VLLM_SYNC_RECORD"])
    if os.environ.get("RUN_WITH_VLLM_NO_WEIGHT_TRANSFER") == "1":
        leave_out_weight_transfer()
    sys.argv = [str(ROOT / "rl_trainer.py"), *sys.argv[1:]]
    runpy.run_path(str(ROOT / "rl_trainer.py"), run_name="__main__")
