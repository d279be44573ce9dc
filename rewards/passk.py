"""The unbiased pass@k estimator (Chen et al., 2021): 1 - C(n-c, k) / C(n, k), per problem."""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k samples drawn from n (c of them correct) is correct.

    Computed as a product, 1 - prod_{i=n-c+1}^{n} (1 - k/i), which stays exact where the binomials
    would overflow floats.
    """
    if n < 1 or k < 1 or not 0 <= c <= n:
        raise ValueError(f"pass@k needs n >= 1, k >= 1 and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(counts: list[tuple[int, int]], ks: list[int]) -> dict[str, float]:
    """Average pass@k over problems given as (samples, correct) pairs: {"pass@1": ..., ...}."""
    if not counts:
        raise ValueError("pass@k needs at least one problem")
    return {f"pass@{k}": sum(pass_at_k(n, c, k) for n, c in counts) / len(counts) for k in ks}
