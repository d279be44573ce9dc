"""rl_trainer.py as a user runs it, with one change for a CPU machine: TRL's `VLLMClient.init_communicator`, which
sets up the NCCL weight-transfer group and refuses any device but CUDA, is left out. Every HTTP request the
trainer sends to the vLLM server after start-up still goes through TRL's real client. The private names this
reaches are listed in training/trainer.py's TRL_INTERNALS, which tests/test_trainer_seam.py checks.

    PYTHONPATH=tests/vllm_stand_in:. python tests/vllm_stand_in/run_trainer.py ARGS...
"""

import runpy
import sys
from pathlib import Path

from trl.generation import vllm_client

ROOT = Path(__file__).resolve().parents[2]


def no_weight_transfer_group(self, device=0):
    """The NCCL group needs CUDA; weights stream through the stand-in's producer to nowhere instead."""
    self.communicator = None


vllm_client.VLLMClient.init_communicator = no_weight_transfer_group
sys.argv = [str(ROOT / "rl_trainer.py"), *sys.argv[1:]]
runpy.run_path(str(ROOT / "rl_trainer.py"), run_name="__main__")
