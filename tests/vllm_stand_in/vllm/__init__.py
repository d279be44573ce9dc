"""STAND-IN for vLLM, used only by tests/test_vllm_timeout.py. It is NOT vLLM: it generates nothing and loads no
model. vLLM cannot be installed on the CPU machines this suite runs on, and TRL imports a few of its names when it
finds a `vllm` package; this package holds just those names, so that TRL's real `VLLMClient` can talk to the
test's loopback server (which stands in for a vLLM server) from a real `GRPOTrainer` in server mode.

The version is one TRL 1.16 supports, so TRL takes its current code path.
"""

__version__ = "0.28.0"


class _NotVLLM:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("tests/vllm_stand_in is a stand-in for vLLM, not vLLM: it cannot run a model")


class LLM(_NotVLLM):
    pass


class SamplingParams(_NotVLLM):
    pass


class RequestOutput(_NotVLLM):
    pass
