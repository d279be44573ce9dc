"""STAND-IN (not vLLM): the address TRL announces for the weight-transfer group; the test stays on loopback."""


def get_ip() -> str:
    return "127.0.0.1"
