import pytest

from rewards import extract_code


@pytest.mark.parametrize(
    "completion, language, expected",
    [
        ("```q\nsolve:{sum x}\n```", "q", "solve:{sum x}"),
        ("```python\ndef solve(x):\n    return x\n```", "python", "def solve(x):\n    return x"),
        ("```py\nx = 1\n```", "python", "x = 1"),
        ("Here:\n```\nsolve:{x+1}\n```\nDone.", "q", "solve:{x+1}"),
        ("```text\nexample\n```\n```q\nsolve:{x}\n```", "q", "solve:{x}"),
        ("```q\nfirst:1\n```\nand\n```q\nsecond:2\n```", "q", "first:1"),
        ("```python\nprint(1)\n```", "q", "print(1)"),
        ("solve:{sum x}", "q", "solve:{sum x}"),
        ("  x = 1\n  y = 2\n", "python", "x = 1\ny = 2"),
        ("", "q", None),
        ("   \n\n", "python", None),
        ("```q\n\n```", "q", None),
        (None, "q", None),
    ],
)
def test_extraction(completion, language, expected):
    assert extract_code(completion, language) == expected


def test_answer_block_is_used_and_reasoning_never_runs():
    completion = "<reasoning>\n```q\nhack:1\n```\n</reasoning>\n<answer>\n```q\nsolve:{sum x}\n```\n</answer>"
    assert extract_code(completion, "q") == "solve:{sum x}"


def test_plain_answer_without_fences():
    assert extract_code("<reasoning>think</reasoning><answer>solve:{x*2}</answer>", "q") == "solve:{x*2}"


def test_unclosed_answer_takes_the_rest():
    assert extract_code("<reasoning>r</reasoning><answer>\nx = 3\n", "python") == "x = 3"


def test_reasoning_only_yields_nothing():
    assert extract_code("<reasoning>\n```python\nimport os\n```\n</reasoning>", "python") is None
    assert extract_code("<reasoning>still thinking ```python\nimport os\n```", "python") is None


def test_reasoning_removed_before_plain_text():
    assert extract_code("<reasoning>plan</reasoning>\nx = 1", "python") == "x = 1"


def test_unknown_language_is_an_error():
    with pytest.raises(ValueError, match="unknown language"):
        extract_code("x", "rust")


RIGHT_CODE = "```python\ndef solve(n):\n    return 2 * n\n```"


@pytest.mark.parametrize(
    "completion",
    [
        # real code in a differently-cased answer tag inside the reasoning, junk in the visible answer
        f"<reasoning>plan <Answer>{RIGHT_CODE}</Answer></reasoning>\n<answer>\n```python\njunk\n```\n</answer>",
        # the lower-case tag inside the reasoning: text in <reasoning> never runs
        f"<reasoning>plan <answer>{RIGHT_CODE}</answer></reasoning>\n<answer>\n```python\njunk\n```\n</answer>",
    ],
)
def test_code_inside_reasoning_is_never_the_answer(completion):
    assert extract_code(completion, "python") == "junk"


def test_tags_are_matched_with_their_case():
    """`<Answer>` is text, as the format reward reads it: the code judged is the visible answer's."""
    completion = f"<reasoning>r</reasoning><Answer>{RIGHT_CODE}</Answer><answer>```python\njunk\n```</answer>"
    assert extract_code(completion, "python") == "junk"
    assert extract_code("<ANSWER>x = 1</ANSWER>", "python") == "<ANSWER>x = 1</ANSWER>"


def test_adversarial_tag_repetition_still_parses():
    """The input that made the format reward quadratic (benchmarks/format_reward_time.py times it)."""
    completion = "<reasoning>" + "</reasoning><answer></answer>x" * 2000
    assert extract_code(completion, "python") is None
