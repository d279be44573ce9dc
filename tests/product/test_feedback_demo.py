"""The feedback demo's parts (scripts/feedback_demo.sh): the demo problems' shown examples, the warm start's
second-reply examples (a wrong reply, the real judge's message on it, the right code), and the verdict of
benchmarks/feedback_gain.py on evaluations written here."""

import json
import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from conftest import ROOT
from data import load_problems
from judging import Judge
from rewards.feedback import make_turn, verdict
from training.feedback import PLAIN_TURN, FeedbackRounds, example_tests

GENERATOR = ROOT / "scripts" / "make_demo_problems.py"
GAIN = ROOT / "benchmarks" / "feedback_gain.py"
sys.path.insert(0, str(ROOT / "scripts"))

from make_demo_problems import generate  # noqa: E402
from sft_warm_start import example, feedback_examples, select  # noqa: E402


@pytest.fixture(scope="module")
def demo_problems(tmp_path_factory):
    """The demo's problems with --examples, as the generator writes them and the trainer loads them."""
    out = tmp_path_factory.mktemp("demo") / "problems.jsonl"
    done = subprocess.run(
        [sys.executable, str(GENERATOR), str(out), "--seed", "2", "--examples"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return load_problems(str(out), "python")


def test_examples_show_one_call_that_the_feedback_rounds_run_and_change_no_split():
    plain, shown = generate(2, 0.2), generate(2, 0.2, examples=True)
    assert [(p["id"], p["split"], p["tests"]) for p in plain] == [
        (p["id"], p["split"], [t for t in p["tests"] if not t.get("example")]) for p in shown
    ]
    assert all(p["description"] in q["description"] for p, q in zip(plain, shown))


def test_each_demo_problem_has_one_example_its_description_shows(demo_problems):
    for problem in demo_problems:
        (shown,) = example_tests(problem)
        assert shown.extra.get("example") is True and not shown.hidden
        call = shown.test_code.removeprefix("print(").removesuffix(")")
        assert f"For example, {call} returns {shown.expected_output}." in problem.description
        # What the feedback rounds run the code on: this example alone, never the judged or hidden test.
        assert FeedbackRounds(1, None, {}, None, chat=False).tests(problem) == (shown,)


@pytest.fixture(scope="module")
def second_replies(demo_problems, tiny_model):
    """The warm start's feedback examples for the training split of the demo problems, with the tokenizer and the
    real judge the warm start uses."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    chosen = select(demo_problems, "train", None)
    with Judge() as judge:
        made = feedback_examples(chosen, tokenizer, judge, 2, seed=0)
    return chosen, tokenizer, made


def parts(prompt: str, tokenizer) -> tuple[str, str, str]:
    """A second-reply prompt's first prompt, wrong reply and message, as the plain style lays them out."""
    before, message = prompt.split(tokenizer.eos_token)
    head, tail = PLAIN_TURN.split("{message}")
    assert message.startswith(head) and message.endswith(tail)
    first, reply = before.rsplit("Assistant:", 1)
    return first + "Assistant:", reply, message[len(head) : -len(tail)]


def test_a_second_reply_example_follows_a_wrong_reply_the_judge_failed_with_its_message(second_replies):
    problems, tokenizer, made = second_replies
    by_prompt = {example(p)["prompt"]: p for p in problems}
    assert len(made) > len(problems), "most problems get two wrong replies"
    runs = []
    for pair in made:
        first, reply, message = parts(pair["prompt"], tokenizer)
        problem = by_prompt[first]
        assert pair["completion"] == example(problem)["completion"]
        code = make_turn(reply, True, "python").code
        assert code is not None and code.strip() != problem.solution.strip()
        runs.append((problem, code, message))
    with Judge() as judge:
        judgements = judge.run_many([(code, example_tests(p), "python") for p, code, _ in runs])
    for (problem, _, message), judgement in zip(runs, judgements):
        said = verdict(problem, example_tests(problem), judgement)
        assert judgement.status == "failed" and not said.passed
        assert said.message == message
        assert message.startswith("I ran your code on the problem's examples.\nExample 1: print(solve(")


def test_a_second_reply_prompt_is_the_rounds_tokens_for_the_model(second_replies):
    """Token for token what training's rounds give the model: the prompt, the reply, the end of its turn, then
    the message's tokens (`FeedbackRounds.message_ids`); evaluation tokenizes this same text."""
    _, tokenizer, made = second_replies
    rounds = FeedbackRounds(1, None, {}, tokenizer, chat=False)
    for pair in made[:20]:
        first, reply, message = parts(pair["prompt"], tokenizer)
        ids = tokenizer(pair["prompt"], add_special_tokens=False)["input_ids"]
        expected = tokenizer(first + reply, add_special_tokens=False)["input_ids"]
        expected += [tokenizer.eos_token_id, *rounds.message_ids(message)]
        assert ids == expected


def test_held_out_problems_get_no_second_reply_example(demo_problems, second_replies):
    _, _, made = second_replies
    held_out = [p for p in demo_problems if p.split == "test"]
    prompts = "\n".join(pair["prompt"] for pair in made)
    assert held_out and not any(p.description in prompts for p in held_out)


def test_problems_without_examples_get_no_second_reply_example(tiny_model):
    bundled = select(load_problems(str(ROOT / "data" / "python_problems.jsonl"), "python"), "train", 5)
    assert not any(example_tests(p) for p in bundled)
    with Judge() as judge:
        assert feedback_examples(bundled, AutoTokenizer.from_pretrained(tiny_model), judge, 1, seed=0) == []


# --- benchmarks/feedback_gain.py's verdict --------------------------------------------------------------------------

FIRST = [1, 2, 0, 3, 1, 0, 2, 1, 0, 1, 2, 3, 0, 1, 1, 2] * 3  # 48 problems, passes of 4 samples


def evaluation(first: list[int], after: list[int] | None, n: int = 4, step: int = 0) -> dict:
    problems = [{"id": f"p{i:02d}", "n": n, "c": c, "statuses": [], "rewards": []} for i, c in enumerate(first)]
    if after is not None:
        for problem, c in zip(problems, after):
            problem["feedback"] = {"n": n, "c": c, "statuses": [], "turns": [1, 2, 2, 1][:n]}
    return {
        "step": step,
        "eval_only": True,
        "settings": {"split": "test", "n": n, "temperature": 0.7},
        "metrics": {"pass@1": sum(first) / (n * len(first)), "feedback/turns": 1.5},
        "problems": problems,
    }


def gain(folder, *evaluations, args=()) -> subprocess.CompletedProcess:
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    (folder / "logs" / "eval_results.json").write_text(json.dumps(list(evaluations)))
    return subprocess.run([sys.executable, str(GAIN), str(folder), *args], capture_output=True, text=True, timeout=60)


def test_a_clear_gain_after_the_round_passes(tmp_path):
    after = [min(4, c + 1) if i % 3 else c for i, c in enumerate(FIRST)]
    result = gain(tmp_path, evaluation(FIRST, after))
    assert result.returncode == 0, result.stdout + result.stderr
    first, later = sum(FIRST) / (4 * 48), sum(after) / (4 * 48)
    assert f"pass@1: first reply {first:.3f}, after the feedback rounds {later:.3f}" in result.stdout
    up = sum(a > b for a, b in zip(after, FIRST))
    assert f"mean {later - first:+.3f} ({up} up, 0 down, {48 - up} equal)" in result.stdout
    assert "paired bootstrap over 48 problems, 10000 resamples: 95% interval [+" in result.stdout
    assert result.stdout.rstrip().endswith("the feedback rounds helped: yes (the interval's lower bound is above 0)")


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(FIRST, id="no-gain"),
        pytest.param([c + 1 if i % 2 else max(0, c - 1) for i, c in enumerate(FIRST)], id="noise"),
    ],
)
def test_no_gain_or_noise_fails(tmp_path, after):
    result = gain(tmp_path, evaluation(FIRST, after))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the feedback rounds helped: NO" in result.stdout


def test_the_chosen_step_is_read(tmp_path):
    better = [min(4, c + 2) for c in FIRST]
    earlier, later = evaluation(FIRST, better, step=0), evaluation(FIRST, FIRST, step=5)
    assert gain(tmp_path, earlier, later).returncode == 1
    assert gain(tmp_path, earlier, later, args=("--step", "0")).returncode == 0


@pytest.mark.parametrize(
    "written, says",
    [
        (None, "logs/eval_results.json: missing"),
        ("not json", "not valid JSON"),
        ([], "expected a non-empty JSON list"),
        ([evaluation(FIRST, None)], "no per-problem results after feedback rounds; evaluate with --feedback_turns"),
    ],
    ids=["missing", "not-json", "empty", "no-rounds"],
)
def test_unreadable_input_is_one_line_and_exit_2(tmp_path, written, says):
    if written is not None:
        (tmp_path / "logs").mkdir()
        text = written if isinstance(written, str) else json.dumps(written)
        (tmp_path / "logs" / "eval_results.json").write_text(text)
    result = subprocess.run([sys.executable, str(GAIN), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert says in result.stderr


def test_a_missing_step_is_exit_2(tmp_path):
    result = gain(tmp_path, evaluation(FIRST, FIRST, step=3), args=("--step", "7"))
    assert result.returncode == 2 and "no evaluation at step 7; it has steps 3" in result.stderr
