"""Loaders that turn every supported problem source into the problem record (docs/data.md, "Record format").

Sources, picked by what ``source`` is on disk:

- ``.jsonl`` / ``.json`` files (gzipped too: ``.jsonl.gz``), one problem per line or a JSON array, in the
  project's record, the published dataset's schema (a ``datasets`` JSON export) or a public set's
  (data/loading/public_sets.py: HumanEval, MBPP, APPS, TACO, CodeContests, LiveCodeBench);
- ``.parquet`` files of any of these;
- ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk`` folders;
- the reference's ``SFT_Data/{train,test}/<problem>/`` folders (SFT_Data itself or one split folder);
- a folder of such files, read in name order (ids unique across them);
- a Hugging Face hub dataset name, tried only when ``source`` is not an existing path.

``datasets`` and ``pyarrow`` are imported only by the loaders that need them: most runs read JSONL,
and importing ``datasets`` takes about a second.
"""

import gzip
import json
import logging
import random
import re
import zlib
from pathlib import Path

from cli import LocatedError, json_lines
from data.loading.public_sets import Conversion, convert, schema_of
from data.loading.validate import LANGUAGES, SPLITS, DataError, compare_on_the_host, validate_records
from judging.records import Problem

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent.parent  # the bundled sets lie in data/ itself
DATASET_SCHEMA_FIELDS = ("problem_id", "problem_description", "q_solution", "python_solution", "test_cases")
FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".jsonl.gz", ".json.gz")
OFFLINE_HINT = "offline, pass a save_to_disk folder, a .parquet file or a .json/.jsonl export instead"
SFT_TEST_FILE = re.compile(r"q_test_case_(\d+)\.q")
SFT_ANSWER_FILE = re.compile(r"q_exact_ans_test_case_(\d+)\.txt")
OVERLAP_EXAMPLES = 5


def bundled_path(language):
    """Path of the problem set shipped with the project for ``language``."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    return DATA_DIR / f"{language}_problems.jsonl"


def load_problems(source, language="q", allow_in_sandbox_comparisons=False) -> list[Problem]:
    """Load, convert and validate every problem in ``source`` (`Problem` records, each with its location); raises
    DataError on the first bad record.

    Tests in the simple assert form become printing tests (logged with their count); any other test that is not
    printed calls is refused unless ``allow_in_sandbox_comparisons`` (data/loading/comparisons.py). Rows of a public set
    are converted (data/loading/public_sets.py), and what they made and dropped is logged, one line.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    path = Path(source)
    conversion = Conversion()
    if path.is_dir():
        problems = _load_folder(path, language, conversion)
    elif path.is_file():
        problems = _load_file(path, language, conversion)
    elif looks_like_path(str(source)):
        raise DataError(str(source), "no such file or folder")
    else:
        problems = _load_hub(str(source), language, conversion)
    summary = conversion.summary(source)
    if summary:
        logger.warning("%s", summary)
    if not problems:
        raise DataError(str(source), "no problems found")
    problems, changed = compare_on_the_host(problems, allow_in_sandbox_comparisons)
    if changed["converted"]:
        logger.warning(
            "%s: converted %d assert tests into printing tests (assert f(args) == literal became "
            "print(f(args)), expecting the literal's printed text, or print(repr(f(args))) compared as "
            "a value on the host where the literal holds a number, a set or a dict), so only output is "
            "compared",
            source,
            changed["converted"],
        )
    if changed["worked out"]:
        logger.warning(
            "%s: worked out literal arithmetic in the arguments of %d tests (3 * 19 became 57)",
            source,
            changed["worked out"],
        )
    return problems


def looks_like_path(source):
    """A local path (existing or not), as opposed to a hub name like ``name`` or ``owner/name``."""
    parent = Path(source).parent
    return (
        source.endswith(FILE_SUFFIXES)
        or source.startswith((".", "/", "~"))
        or source.count("/") > 1
        or Path(source).exists()
        or (parent != Path(".") and parent.is_dir())
    )


def _load_file(path, language, conversion):
    suffix = path.suffix.lower()
    compressed = suffix == ".gz"
    if compressed:
        suffix = Path(path.stem).suffix.lower()
    if suffix == ".parquet" and not compressed:
        import pyarrow
        import pyarrow.parquet

        try:
            rows = pyarrow.parquet.read_table(path).to_pylist()
        except pyarrow.ArrowException as error:
            raise DataError(str(path), f"not a readable parquet file ({error})") from None
        return _from_rows(((f"{path}:row {number}", row) for number, row in enumerate(rows, 1)), language, conversion)
    if suffix not in (".jsonl", ".json"):
        raise DataError(
            str(path),
            f"unsupported file type {''.join(path.suffixes[-2:]) or '(none)'}; use .jsonl, "
            ".json (either gzipped: .jsonl.gz) or .parquet",
        )
    try:
        data = gzip.decompress(path.read_bytes()) if compressed else path.read_bytes()
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(str(path), f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(str(path), f"not a readable gzip file ({error})") from None
    if suffix == ".json" and text.lstrip().startswith("["):
        located = _json_array_items(text, path)
    else:
        located = _json_lines(
            text, path, "write one problem object per line" + (" or a JSON array of them" if suffix == ".json" else "")
        )
    return _from_rows(located, language, conversion)


def _json_lines(text, path, layout_hint):
    try:
        for number, record in json_lines(text, path, layout_hint):
            yield f"{path}:{number}", record
    except LocatedError as error:
        raise DataError(error.location, error.reason) from None


def _json_array_items(text, path):
    """``(file:line, item)`` for each element of a top-level JSON array, the line being where it starts."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{path}:{error.lineno}", f"invalid JSON ({error.msg} at column {error.colno})") from None
    decoder = json.JSONDecoder()
    whitespace = re.compile(r"\s*")
    index = whitespace.match(text, text.index("[") + 1).end()
    line, counted_to = 1, 0
    items = []
    while text[index] != "]":
        line += text.count("\n", counted_to, index)
        counted_to = index
        item, index = decoder.raw_decode(text, index)
        items.append((f"{path}:{line}", item))
        index = whitespace.match(text, index).end()
        if text[index] == ",":
            index = whitespace.match(text, index + 1).end()
    return items


def _from_rows(located_rows, language, conversion):
    """Validate rows of one source unit, converting rows in the published dataset's schema or a public set's first
    (a public set's row that keeps no test is dropped, counted in ``conversion``)."""
    located = []
    for index, (location, row) in enumerate(located_rows):
        schema = schema_of(row)
        if schema:
            row = convert(row, schema, index, conversion)
            if row is None:
                continue
        elif isinstance(row, dict) and "test_cases" in row and "tests" not in row:
            row = _from_dataset_schema(row, location, language)
        located.append((location, row))
    return validate_records(located, language)


def _from_dataset_schema(row, location, language):
    """Convert a published-dataset row (problem_id, test_cases[...], q_/python_ fields) for ``language``."""
    for key in ("problem_id", "problem_description"):
        if row.get(key) is None:
            raise DataError(location, f"missing '{key}'")
    test_cases = row["test_cases"]
    if not isinstance(test_cases, list):
        raise DataError(location, f"'test_cases' must be a list, got {type(test_cases).__name__}")
    code_key, expected_key = f"{language}_test_code", f"{language}_expected_output"
    tests = []
    for index, case in enumerate(test_cases):
        if not isinstance(case, dict):
            raise DataError(location, f"test_cases[{index}] must be an object")
        for key in (code_key, expected_key):
            if case.get(key) is None:
                raise DataError(location, f"test_cases[{index}] has no '{key}' (loading for language {language})")
        tests.append(
            (case.get("test_case_number"), index, {"test_code": case[code_key], "expected_output": case[expected_key]})
        )
    if all(isinstance(number, int) for number, _, _ in tests):
        tests.sort(key=lambda numbered: numbered[0])
    extras = {key: value for key, value in row.items() if key not in DATASET_SCHEMA_FIELDS}
    if language == "q" and row.get("python_solution"):
        # The row's Python twin, for `python -m data verify|strengthen` (data/quality/q_twins.py): its tests in the q order.
        extras["python_solution"] = row["python_solution"]
        extras["python_tests"] = [
            {
                "test_code": test_cases[index].get("python_test_code"),
                "expected_output": test_cases[index].get("python_expected_output"),
            }
            for _, index, _ in tests
        ]
    return {
        **extras,
        "id": row["problem_id"],
        "language": language,
        "description": row["problem_description"],
        "tests": [test for _, _, test in tests],
        "solution": row.get(f"{language}_solution"),
        "split": row.get("split"),
    }


def _load_folder(path, language, conversion):
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        import datasets

        return _from_datasets(datasets.load_from_disk(str(path)), str(path), language, conversion)
    split_folders = [(path / split, split) for split in SPLITS if (path / split).is_dir()]
    if not split_folders:
        split_folders = [(path, path.name if path.name in SPLITS else None)]
    if not any(
        (problem / "problem_description.txt").is_file()
        for folder, _ in split_folders
        for problem in _problem_folders(folder)
    ):
        files = sorted(
            child
            for child in path.iterdir()
            if child.is_file() and not child.name.startswith(".") and child.name.lower().endswith(FILE_SUFFIXES)
        )
        if files:
            return _load_files(files, language, conversion)
        raise DataError(
            str(path),
            "not a problem folder; expected .jsonl, .json, .jsonl.gz or .parquet files, "
            "SFT_Data/{train,test}/<problem>/problem_description.txt, one split folder of "
            "it, or a save_to_disk folder",
        )
    if language != "q":
        raise DataError(
            str(path), "SFT_Data folders hold q tests only; use language q, or a JSONL or dataset source for python"
        )
    problems = []
    for folder, split in split_folders:
        problems += validate_records(
            ((str(problem), _read_problem_folder(problem, split)) for problem in _problem_folders(folder)), language
        )
    return problems


def _load_files(files, language, conversion):
    """Every problem of each file in turn; an id must be unique across the files."""
    problems, first_seen = [], {}
    for path in files:
        for problem in _load_file(path, language, conversion):
            if problem.id in first_seen:
                raise DataError(problem.location, f"duplicate id {problem.id!r} (first at {first_seen[problem.id]})")
            first_seen[problem.id] = problem.location
            problems.append(problem)
    return problems


def _problem_folders(folder):
    return sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.startswith("."))


def _read_problem_folder(folder, split):
    """One ``SFT_Data/<split>/<problem>/`` folder as a record; its name is the id."""
    description_file = folder / "problem_description.txt"
    if not description_file.is_file():
        raise DataError(str(folder), "no problem_description.txt")
    test_files = _numbered_files(folder, SFT_TEST_FILE)
    answer_files = _numbered_files(folder, SFT_ANSWER_FILE)
    if not test_files:
        raise DataError(str(folder), "no q_test_case_N.q files")
    unpaired = sorted(set(test_files) ^ set(answer_files))
    if unpaired and unpaired[0] in test_files:
        raise DataError(str(test_files[unpaired[0]]), f"no matching q_exact_ans_test_case_{unpaired[0]}.txt")
    if unpaired:
        raise DataError(str(answer_files[unpaired[0]]), f"no matching q_test_case_{unpaired[0]}.q")
    return {
        "id": folder.name,
        "language": "q",
        "description": _read_text(description_file),
        "tests": [
            {"test_code": _read_text(test_files[number]), "expected_output": _read_text(answer_files[number])}
            for number in sorted(test_files)
        ],
        "split": split,
    }


def _numbered_files(folder, pattern):
    found = {}
    for child in folder.iterdir():
        match = pattern.fullmatch(child.name)
        if match:
            found[int(match.group(1))] = child
    return found


def _read_text(path):
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DataError(str(path), f"not UTF-8 text ({error.reason} at byte {error.start})") from None


def _from_datasets(loaded, name, language, conversion):
    """Records from a ``datasets`` Dataset or DatasetDict; a DatasetDict's train/test become ``split``."""
    import datasets

    if isinstance(loaded, datasets.Dataset):
        return _from_rows(((f"{name}:row {number}", row) for number, row in enumerate(loaded, 1)), language, conversion)
    ignored = sorted(set(loaded) - set(SPLITS))
    if ignored:
        logger.warning("%s: ignoring splits %s; only train and test are used", name, ", ".join(ignored))
    if not set(loaded) & set(SPLITS):
        raise DataError(name, f"no train or test split (found {', '.join(sorted(loaded))})")
    problems = []
    for split in SPLITS:
        if split in loaded:
            rows = (
                (f"{name}/{split}:row {number}", {**row, "split": row.get("split") or split})
                for number, row in enumerate(loaded[split], 1)
            )
            problems += _from_rows(rows, language, conversion)
    return problems


def _load_hub(name, language, conversion):
    import datasets

    try:
        loaded = datasets.load_dataset(name)
    except Exception as error:  # the hub client raises many types (connection, offline, not found, auth)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DataError(name, f"cannot load from the Hugging Face hub ({reason}); {OFFLINE_HINT}") from None
    return _from_datasets(loaded, name, language, conversion)


def split_problems(
    problems: list[Problem], test_fraction=0.2, seed=42, max_train=None, max_test=None
) -> tuple[list[Problem], list[Problem]]:
    """Split into (train, test): by each record's ``split`` when all have one and both splits occur,
    else by a seeded shuffle.

    Caps apply after the split. Problems shared by train and test (same id or same description) are
    logged as warnings, since testing on training problems overstates pass@k.
    """
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    if all(problem.split in SPLITS for problem in problems) and {problem.split for problem in problems} == set(SPLITS):
        train = [problem for problem in problems if problem.split == "train"]
        test = [problem for problem in problems if problem.split == "test"]
    else:
        shuffled = list(problems)
        random.Random(seed).shuffle(shuffled)
        test_count = round(len(shuffled) * test_fraction)
        if test_fraction > 0 and len(shuffled) > 1:
            test_count = min(max(test_count, 1), len(shuffled) - 1)
        test, train = shuffled[:test_count], shuffled[test_count:]
    train, test = train[:max_train], test[:max_test]
    _warn_overlap(train, test)
    return train, test


def _warn_overlap(train, test):
    train_ids = {problem.id for problem in train}
    shared_ids = [problem.id for problem in test if problem.id in train_ids]
    train_descriptions = {_normalized(problem.description) for problem in train}
    shared_descriptions = [problem.id for problem in test if _normalized(problem.description) in train_descriptions]
    for what, ids in (("id", shared_ids), ("description", shared_descriptions)):
        if ids:
            logger.warning(
                "%d test problems share their %s with a train problem: %s%s",
                len(ids),
                what,
                ", ".join(ids[:OVERLAP_EXAMPLES]),
                " ..." if len(ids) > OVERLAP_EXAMPLES else "",
            )


def _normalized(text):
    return " ".join(text.split())
