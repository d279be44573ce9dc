"""STAND-IN (not vLLM)."""
