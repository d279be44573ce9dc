"""Loaders, validation and splitting of problem data, on small fixtures of every supported layout."""

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from data import DataError, Problem, Test, bundled_path, load_problems, split_problems

FIXTURES = Path(__file__).parents[1] / "fixtures" / "data"
REPO = Path(__file__).resolve().parents[2]


def published_rows():
    rows = [json.loads(line) for line in (FIXTURES / "published_schema.jsonl").read_text().splitlines()]
    for row in rows:  # an Arrow column holds one type; the JSONL mixes an int and a str id on purpose
        row["problem_id"] = str(row["problem_id"])
    return rows


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "data", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


# JSON and JSONL files


def test_jsonl_records_are_normalized_and_keep_extras():
    problems = load_problems(FIXTURES / "problems.jsonl", language="python")
    assert [problem.id for problem in problems] == ["add", "double", "greet"]
    add, double, greet = problems
    assert add.tests[1] == Test("print(add(-1, 1))", "0")
    assert add.extra["difficulty"] == "easy" and add.extra["tags"] == ["math"]
    assert double.language == "python"
    assert greet.solution is None and greet.split == "test"


def test_language_defaults_to_the_callers_but_a_record_keeps_its_own():
    # "double" names no language: as q, its tests (print(double(4))) are not q's printed calls
    with pytest.raises(
        DataError,
        match=r"problems.jsonl:3: tests\[0\] is not a printing test \(line 1: "
        r"`print\(double\(4\)\)` is not show double",
    ):
        load_problems(FIXTURES / "problems.jsonl", language="q")
    problems = load_problems(FIXTURES / "problems.jsonl", language="q", allow_in_sandbox_comparisons=True)
    assert {problem.id: problem.language for problem in problems} == {"add": "python", "double": "q", "greet": "python"}


def test_json_array_reads_like_jsonl():
    problems = load_problems(FIXTURES / "problems.json", language="python")
    assert [problem.id for problem in problems] == ["add", "double"]
    assert problems[0].solution == "def add(a, b):\n    return a + b"


def test_json_array_errors_name_the_line_where_the_bad_problem_starts(tmp_path):
    path = tmp_path / "problems.json"
    good = {"id": "a", "description": "d", "tests": [{"test_code": "t", "expected_output": ""}]}
    path.write_text("[\n" + json.dumps(good, indent=2) + ',\n  {"id": "b",\n   "description": ""}\n]\n')
    with pytest.raises(DataError) as error:
        load_problems(path)
    assert str(error.value) == f"{path}:{json.dumps(good, indent=2).count(chr(10)) + 3}: 'description' is empty"


def test_published_schema_in_jsonl_picks_the_languages_fields_in_test_number_order():
    q_problems = load_problems(FIXTURES / "published_schema.jsonl", language="q")
    python_problems = load_problems(FIXTURES / "published_schema.jsonl", language="python")
    assert [problem.id for problem in q_problems] == ["7", "last-item"]
    assert [test.test_code for test in q_problems[0].tests] == ["show solve[enlist 1;2]", "show solve[1 2;3]"]
    assert q_problems[1].solution == "solve:{last x}"
    assert python_problems[1].solution == "def solve(xs):\n    return xs[-1]"
    assert python_problems[0].tests[0] == Test("print(solve([1], 2))", "1")
    assert python_problems[0].language == "python"
    assert python_problems[0].extra["difficulty"] == "Easy" and python_problems[0].extra["leetcode_id"] == 1
    assert "q_solution" not in python_problems[0].extra and "test_cases" not in python_problems[0].extra


# SFT_Data folders


def test_sft_data_root_takes_split_from_its_subfolders_and_orders_tests_numerically():
    problems = load_problems(FIXTURES / "SFT_Data", language="q")
    assert [(problem.id, problem.split) for problem in problems] == [
        ("max_list", "train"),
        ("sum_list", "train"),
        ("reverse_list", "test"),
    ]
    sum_list = problems[1]
    assert sum_list.description.startswith("Write a function solve that returns the sum")
    assert [test.test_code for test in sum_list.tests] == [
        "show solve 1 2 3",
        "show solve enlist 5",
        "show solve til 5",
    ]
    assert [test.expected_output for test in sum_list.tests] == ["6", "5\n", "10"]
    assert sum_list.solution is None and sum_list.language == "q"


def test_sft_split_folder_loads_alone_and_other_folder_names_leave_split_unset(tmp_path):
    assert [problem.split for problem in load_problems(FIXTURES / "SFT_Data" / "test")] == ["test"]
    shutil.copytree(FIXTURES / "SFT_Data" / "train", tmp_path / "problems")
    problems = load_problems(tmp_path / "problems")
    assert [(problem.id, problem.split) for problem in problems] == [("max_list", None), ("sum_list", None)]


@pytest.fixture
def sft_copy(tmp_path):
    root = tmp_path / "SFT_Data"
    shutil.copytree(FIXTURES / "SFT_Data", root)
    return root


def test_sft_test_without_answer_file_names_the_file(sft_copy):
    (sft_copy / "train" / "sum_list" / "q_exact_ans_test_case_2.txt").unlink()
    with pytest.raises(DataError) as error:
        load_problems(sft_copy)
    assert str(error.value) == f"{sft_copy}/train/sum_list/q_test_case_2.q: no matching q_exact_ans_test_case_2.txt"


def test_sft_answer_without_test_file_names_the_file(sft_copy):
    (sft_copy / "test" / "reverse_list" / "q_exact_ans_test_case_4.txt").write_text("1")
    with pytest.raises(DataError) as error:
        load_problems(sft_copy)
    assert str(error.value) == f"{sft_copy}/test/reverse_list/q_exact_ans_test_case_4.txt: no matching q_test_case_4.q"


def test_sft_problem_without_description_or_tests_is_an_error(sft_copy):
    (sft_copy / "train" / "max_list" / "problem_description.txt").unlink()
    with pytest.raises(DataError, match=f"^{sft_copy}/train/max_list: no problem_description.txt$"):
        load_problems(sft_copy)
    (sft_copy / "train" / "empty_tests").mkdir()
    (sft_copy / "train" / "empty_tests" / "problem_description.txt").write_text("Do something.")
    with pytest.raises(DataError, match=f"^{sft_copy}/train/empty_tests: no q_test_case_N.q files$"):
        load_problems(sft_copy)


def test_sft_empty_description_file_is_an_error(sft_copy):
    (sft_copy / "test" / "reverse_list" / "problem_description.txt").write_text("  \n")
    with pytest.raises(DataError, match=f"^{sft_copy}/test/reverse_list: 'description' is empty$"):
        load_problems(sft_copy)


def test_sft_data_holds_q_only(sft_copy):
    with pytest.raises(DataError, match="q tests only"):
        load_problems(sft_copy, language="python")


def test_folder_that_is_no_problem_source_says_what_is_expected(tmp_path):
    (tmp_path / "notes").mkdir()
    with pytest.raises(
        DataError,
        match=f"^{tmp_path}: not a problem folder; expected .jsonl, .json, .jsonl.gz or .parquet files, SFT_Data",
    ):
        load_problems(tmp_path)


# datasets: save_to_disk folders, parquet exports, hub names


def test_save_to_disk_dataset_and_parquet_export_load_like_the_jsonl(tmp_path):
    dataset = datasets.Dataset.from_list(published_rows())
    dataset.save_to_disk(str(tmp_path / "saved"))
    dataset.to_parquet(str(tmp_path / "problems.parquet"))
    expected = load_problems(FIXTURES / "published_schema.jsonl", language="python")
    for source in (tmp_path / "saved", tmp_path / "problems.parquet"):
        loaded = load_problems(source, language="python")
        assert [(p.id, p.tests, p.solution, p.extra["difficulty"]) for p in loaded] == [
            (p.id, p.tests, p.solution, p.extra.get("difficulty")) for p in expected
        ]


def test_dataset_dict_splits_become_the_record_split(tmp_path, caplog):
    dataset = datasets.Dataset.from_list(published_rows())
    splits = {"train": dataset.select([0]), "test": dataset.select([1]), "validation": dataset}
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "saved"))
    with caplog.at_level(logging.WARNING):
        problems = load_problems(tmp_path / "saved", language="q")
    assert [(problem.id, problem.split) for problem in problems] == [("7", "train"), ("last-item", "test")]
    assert "ignoring splits validation" in caplog.text


def test_dataset_rows_name_their_row_in_errors(tmp_path):
    rows = published_rows()
    rows[1]["problem_description"] = ""
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(DataError, match=f"^{tmp_path}/bad.parquet:row 2: 'description' is empty$"):
        load_problems(tmp_path / "bad.parquet")


def test_missing_file_is_not_looked_up_on_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="no such file or folder"):
        load_problems(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="^problems.jsonl: no such file or folder$"):
        load_problems("problems.jsonl")
    (tmp_path / "sets").mkdir()
    with pytest.raises(DataError, match="^sets/missing: no such file or folder$"):
        load_problems("sets/missing")


def test_hub_name_offline_fails_with_the_offline_options():
    result = run_cli("check", "someone/no-such-q-dataset", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("someone/no-such-q-dataset: cannot load from the Hugging Face hub (")
    assert message.endswith("offline, pass a save_to_disk folder, a .parquet file or a .json/.jsonl export instead")


def test_bundled_path_names_the_language_file():
    assert bundled_path("python") == REPO / "data" / "python_problems.jsonl"
    assert bundled_path("q") == REPO / "data" / "q_problems.jsonl"
    with pytest.raises(ValueError, match="not one of q, python"):
        bundled_path("java")


# validation: one line, file:line: reason

GOOD_TEST = {"test_code": "show solve[1]", "expected_output": "1"}  # a q test: load_problems defaults to q
GOOD = {"id": "ok", "description": "Print 1.", "tests": [GOOD_TEST]}


@pytest.mark.parametrize(
    "line, reason",
    [
        (
            '{"id": "x",',
            "invalid JSON (Expecting property name enclosed in double quotes at column 12); "
            "write one problem object per line",
        ),
        (json.dumps([GOOD]), "expected a problem object, got list"),
        (json.dumps({**GOOD, "id": None}), "missing 'id'"),
        (json.dumps({**GOOD, "id": " "}), "'id' is empty"),
        (json.dumps({**GOOD, "id": ["a"]}), "'id' must be a string, got list"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "description"}), "missing 'description'"),
        (json.dumps({**GOOD, "description": ""}), "'description' is empty"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "tests"}), "missing 'tests'"),
        (json.dumps({**GOOD, "tests": []}), "'tests' is empty; a problem needs at least one test"),
        (json.dumps({**GOOD, "tests": {"test_code": "x"}}), "'tests' must be a list, got dict"),
        (
            json.dumps({**GOOD, "tests": ["print(1)"]}),
            "tests[0] must be an object with test_code (or input) and expected_output",
        ),
        (
            json.dumps({**GOOD, "tests": [GOOD_TEST, {"expected_output": "1"}]}),
            "tests[1] has no 'test_code' (or 'input', for a program reading standard input)",
        ),
        (
            json.dumps({**GOOD, "tests": [{"test_code": 3, "expected_output": "3"}]}),
            "tests[0].test_code must be a string, got int",
        ),
        (json.dumps({**GOOD, "tests": [{"test_code": " ", "expected_output": "3"}]}), "tests[0].test_code is empty"),
        (
            json.dumps({**GOOD, "tests": [{"test_code": "print(1)"}]}),
            "tests[0] has no 'expected_output' (use \"\" for a test that prints nothing)",
        ),
        (
            json.dumps({**GOOD, "tests": [{"test_code": "print(6)", "expected_output": 6}]}),
            'tests[0].expected_output is the number 6; quote it ("6") since output is compared as text',
        ),
        (
            json.dumps({**GOOD, "tests": [{"test_code": "print(6)", "expected_output": ["6"]}]}),
            "tests[0].expected_output must be a string, got list",
        ),
        (
            json.dumps({**GOOD, "tests": [{**GOOD_TEST, "input": "1"}]}),
            "tests[0] has both 'test_code' and 'input'; a test either calls the function (test_code) or gives the program "
            "its standard input (input)",
        ),
        (
            json.dumps({**GOOD, "tests": [{"input": 1, "expected_output": "1"}]}),
            "tests[0].input must be a string, got int",
        ),
        (
            json.dumps({**GOOD, "language": "python", "tests": [{"input": "1", "expected_output": "1"}, GOOD_TEST]}),
            "tests[1] does not give standard input and tests[0] does; a problem's tests either all call its function or "
            "all give its program standard input",
        ),
        (
            json.dumps({**GOOD, "tests": [{"input": "1", "expected_output": "1"}]}),
            "tests give standard input, which is judged for Python programs only, not q",
        ),
        (
            json.dumps({**GOOD, "tests": [{**GOOD_TEST, "tolerance": -1}]}),
            "tests[0].tolerance must be a number 0 or above (the largest absolute difference accepted between printed and "
            "expected numbers), got -1",
        ),
        (
            json.dumps({**GOOD, "tests": [{**GOOD_TEST, "tolerance": "1e-6"}]}),
            "tests[0].tolerance must be a number 0 or above (the largest absolute difference accepted between printed and "
            "expected numbers), got '1e-6'",
        ),
        (
            json.dumps({**GOOD, "entry_point": "my-func"}),
            "'entry_point' must name a function (an identifier), got 'my-func'",
        ),
        (json.dumps({**GOOD, "solution": 1}), "'solution' must be a string, got int"),
        (json.dumps({**GOOD, "split": "validation"}), "split 'validation' is not one of train, test (or leave it out)"),
        (json.dumps({**GOOD, "language": "java"}), "language 'java' is not one of q, python"),
        (json.dumps(GOOD), "duplicate id 'ok' (first at {path}:1)"),
    ],
)
def test_each_bad_record_fails_with_file_line_and_reason(tmp_path, line, reason):
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(DataError) as error:
        load_problems(path)
    assert str(error.value) == f"{path}:3: " + reason.format(path=path)
    assert "\n" not in str(error.value)


def test_published_schema_without_the_languages_fields_names_them(tmp_path):
    row = published_rows()[1]
    del row["test_cases"][0]["python_expected_output"]
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError) as error:
        load_problems(path, language="python")
    assert str(error.value) == f"{path}:1: test_cases[0] has no 'python_expected_output' (loading for language python)"


def test_json_file_holding_one_multiline_object_names_both_layouts(tmp_path):
    path = tmp_path / "problems.json"
    path.write_text(json.dumps(GOOD, indent=2))
    with pytest.raises(DataError) as error:
        load_problems(path)
    assert str(error.value).startswith(f"{path}:1: invalid JSON (")
    assert str(error.value).endswith("; write one problem object per line or a JSON array of them")


def test_unreadable_parquet_is_an_error(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="broken.parquet: not a readable parquet file"):
        load_problems(tmp_path / "broken.parquet")


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8-sig")
    assert [problem.id for problem in load_problems(path)] == ["ok"]


def test_empty_source_and_unknown_suffix_are_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="empty.jsonl: no problems found$"):
        load_problems(tmp_path / "empty.jsonl")
    (tmp_path / "problems.csv").write_text("id\n")
    with pytest.raises(
        DataError,
        match=r"unsupported file type .csv; use .jsonl, .json \(either gzipped: "
        r"\.jsonl\.gz\) or .parquet$",
    ):
        load_problems(tmp_path / "problems.csv")


def test_check_cli_reports_counts_and_exits_2_on_bad_data(tmp_path):
    result = run_cli("check", str(FIXTURES / "SFT_Data"))
    assert result.returncode == 0
    assert result.stdout.strip() == f"{FIXTURES / 'SFT_Data'}: 3 problems valid (1 test, 2 train)"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**GOOD, "tests": []}) + "\n")
    result = run_cli("check", str(bad), "--language", "python")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip() == f"{bad}:1: 'tests' is empty; a problem needs at least one test"


# splitting


def numbered(count, split=None):
    return [
        Problem(f"p{index}", "python", f"Problem {index}.", (Test(**GOOD_TEST),), split=split) for index in range(count)
    ]


def test_split_uses_record_splits_when_every_record_has_one():
    problems = load_problems(FIXTURES / "SFT_Data")
    train, test = split_problems(problems, test_fraction=0.5)
    assert [problem.id for problem in train] == ["max_list", "sum_list"]
    assert [problem.id for problem in test] == ["reverse_list"]


def test_seeded_split_is_reproducible_disjoint_and_sized_by_fraction():
    problems = numbered(20)
    train, test = split_problems(problems, test_fraction=0.25, seed=3)
    again_train, again_test = split_problems(problems, test_fraction=0.25, seed=3)
    _, other_test = split_problems(problems, test_fraction=0.25, seed=4)
    assert (len(train), len(test)) == (15, 5)
    assert train == again_train and test == again_test
    assert {p.id for p in train} | {p.id for p in test} == {p.id for p in problems}
    assert not {p.id for p in train} & {p.id for p in test}
    assert {p.id for p in other_test} != {p.id for p in test}


def test_partial_or_one_sided_record_splits_fall_back_to_a_seeded_split():
    problems = numbered(4, split="train") + numbered(6)[4:]
    train, test = split_problems(problems, test_fraction=0.5, seed=0)
    assert (len(train), len(test)) == (3, 3)
    train, test = split_problems(numbered(10, split="train"), test_fraction=0.2, seed=0)
    assert (len(train), len(test)) == (8, 2)


def test_small_sets_keep_one_problem_on_each_side_and_caps_apply_after_the_split():
    train, test = split_problems(numbered(3), test_fraction=0.1)
    assert (len(train), len(test)) == (2, 1)
    train, test = split_problems(numbered(10), test_fraction=0.0)
    assert (len(train), len(test)) == (10, 0)
    train, test = split_problems(numbered(10), test_fraction=0.5, max_train=2, max_test=1)
    assert (len(train), len(test)) == (2, 1)
    with pytest.raises(ValueError, match="test_fraction must be in"):
        split_problems(numbered(3), test_fraction=1.0)


def test_overlap_between_train_and_test_is_warned_with_count_and_ids(caplog):
    problems = numbered(3, split="train") + [
        Problem("p1", "python", "Another.", (Test(**GOOD_TEST),), split="test"),
        Problem("fresh", "python", "  Problem   2. ", (Test(**GOOD_TEST),), split="test"),
        Problem("clean", "python", "New.", (Test(**GOOD_TEST),), split="test"),
    ]
    with caplog.at_level(logging.WARNING, logger="data.loading.loaders"):
        split_problems(problems)
    assert [record.getMessage() for record in caplog.records] == [
        "1 test problems share their id with a train problem: p1",
        "1 test problems share their description with a train problem: fresh",
    ]


def test_a_problem_is_a_frozen_record_that_writes_back_as_it_was_read(tmp_path):
    record = {
        "id": "sum",
        "language": "python",
        "description": "Sum a list.",
        "solution": "solve = sum",
        "split": "train",
        "difficulty": "easy",
        "tags": ["lists"],
        "tests": [{"test_code": "print(solve([1, 2]))", "expected_output": "3", "note": "kept"}],
    }
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (problem,) = load_problems(path, "python")
    assert problem.record() == record and problem.location == f"{path}:1"
    assert problem.extra == {"difficulty": "easy", "tags": ["lists"]} and problem.tests[0].extra == {"note": "kept"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.tests = ()
    # Equal records are equal problems wherever they were read, and key the same entry of a mapping.
    elsewhere = tmp_path / "q.jsonl"
    elsewhere.write_text("\n" + json.dumps(record) + "\n")
    (again,) = load_problems(elsewhere, "python")
    assert again.location == f"{elsewhere}:2" and again == problem and {problem: 1}[again] == 1
