"""STAND-IN (not vLLM). The NCCL weight-transfer group needs CUDA; tests/vllm_stand_in/run_trainer.py leaves it
out, so this is never called."""


def trainer_init(init_info):
    raise RuntimeError("tests/vllm_stand_in: no NCCL weight-transfer group on CPU")
