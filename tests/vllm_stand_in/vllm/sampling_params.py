"""STAND-IN (not vLLM): the name TRL imports from vllm.sampling_params."""

from vllm import _NotVLLM


class StructuredOutputsParams(_NotVLLM):
    pass
