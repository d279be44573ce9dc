import math

import pytest

from rewards import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 2, 1, 2 / 5),
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 1, 4, 1.0),  # n - c < k
        (8, 0, 3, 0.0),  # c = 0
        (8, 8, 1, 1.0),  # c = n
        (1, 1, 1, 1.0),
    ],
)
def test_hand_computed_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_matches_the_binomial_form_where_it_is_exact():
    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_stable_for_large_n():
    value = pass_at_k(2000, 7, 100)
    exact = 1 - math.comb(1993, 100) / math.comb(2000, 100)
    assert value == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("n, c, k", [(3, 1, 4), (0, 0, 1), (5, 6, 1), (5, -1, 1), (5, 2, 0)])
def test_invalid_arguments_raise(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_over_problems():
    result = mean_pass_at_k([(5, 2), (5, 0), (5, 5)], [1, 2])
    assert result == pytest.approx({"pass@1": (0.4 + 0 + 1) / 3, "pass@2": (0.7 + 0 + 1) / 3})
    with pytest.raises(ValueError):
        mean_pass_at_k([], [1])
    with pytest.raises(ValueError):
        mean_pass_at_k([(2, 1)], [1, 3])
