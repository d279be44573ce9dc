"""``python -m rewards score|passk``: judge completion files and compute pass@k.

    python -m rewards score --problems P.jsonl --completions C.jsonl --out S.jsonl [--language q|python]
                            [--workers N] [--timeout SECONDS] [every judge and reward setting of rl_trainer.py]
    python -m rewards passk --scores S.jsonl --k 1 5 10

``score`` writes one line per completion, in input order: id, sample, reward, passed, total, status and each
test's status and seconds. The reward is the trainer's test-case reward under the same weights and
``--partial_credit`` (``above_trivial`` first measures each scored problem's trivial share, data/quality/trivial.py). ``passk``
prints the unbiased pass@k per problem, averaged. Bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cli import CommandParser, UsageError, positive, read_json_objects
from data import ALLOW_COMPARISONS_HELP, load_problems, measure_trivial_shares
from judging import STATUSES, Judge, JudgeArguments, Problem
from judging.languages import LANGUAGES
from judging.policy import DEFAULT_EVAL_TIMEOUT, DEFAULT_TIMEOUT
from rewards import ScoringArguments, mean_pass_at_k, score


PASSK_DECIMALS = 6


@dataclass
class ScoreArguments:
    problems: str = field(metadata={"help": "problem file (JSONL, or any source the trainer's --data reads)"})
    completions: str = field(metadata={"help": 'JSONL of {"id", "completion"}; repeated ids are samples'})
    out: str = field(metadata={"help": "scores JSONL, one line per completion in input order"})
    language: str = field(default="q", metadata={"help": "for problems without a language", "choices": list(LANGUAGES)})
    allow_in_sandbox_comparisons: bool = field(default=False, metadata={"help": ALLOW_COMPARISONS_HELP})


@dataclass
class PassKArguments:
    scores: str = field(metadata={"help": "a scores file written by `score`"})
    k: list[int] = field(metadata={"help": "the k values"})

    def __post_init__(self):
        for k in self.k:
            positive("--k", k)


def read_records(path: str, required: dict[str, type]) -> list[dict]:
    records = read_json_objects(path, required)
    if not records:
        raise UsageError(f"{path}: no records")
    return records


def check_writable_file(flag: str, path: str) -> None:
    """The output file can be created: its folder exists and is writable, and the path is not a folder. Checked
    before judging, which can take minutes."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file path")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: no folder {folder}; create it first or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{flag} {path}: cannot write there; choose a writable path")


def read_inputs(args: ScoreArguments) -> tuple[list[Problem], list[dict]]:
    """The completions to score and, for each, its problem; a UsageError names the first bad line."""
    loaded = load_problems(args.problems, args.language, args.allow_in_sandbox_comparisons)
    problems = {p.id: p for p in loaded}
    if len(problems) < len(loaded):
        repeated = sorted(id_ for id_, n in Counter(p.id for p in loaded).items() if n > 1)
        raise UsageError(f"{args.problems}: problem ids must be unique; repeated: {', '.join(map(repr, repeated))}")
    completions = read_records(args.completions, {"id": str, "completion": str})
    for record in completions:
        if record["id"] not in problems:
            raise UsageError(f"{args.completions}:{record['_line']}: unknown problem id {record['id']!r}")
    import tqdm  # noqa: F401 (the progress bar's, ~25 ms: imported here, beside the judge's start, not after it)

    return [problems[record["id"]] for record in completions], completions


def judge_beside_inputs(args: ScoreArguments, judge_args: JudgeArguments) -> tuple[Judge, list[Problem], list[dict]]:
    """The judge, started in this thread (its sandboxes die with the thread that starts them) while another reads
    the inputs: the judge mostly waits for its workers' interpreters to start, reading is Python, so side by side
    they take the time of the longer (~0.1 s of the CLI's ~2 s on HumanEval). Bad input is the error reported
    (exit 2), whether or not the judge started; a judge that started is closed then."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(read_inputs, args)
        try:
            judge = judge_args.make_judge()
        except BaseException:
            reading.result()  # bad input, if it is, is what to fix first
            raise
        try:
            judged, completions = reading.result()
        except BaseException:
            judge.close()
            raise
    return judge, judged, completions


def run_score(args: ScoreArguments, judge_args: JudgeArguments, scoring: ScoringArguments) -> int:
    check_writable_file("--out", args.out)
    # Before the problems load: loading may log what it converted, and a missing file is then the one line to show.
    if not Path(args.completions).is_file():
        raise UsageError(
            f'--completions {args.completions}: no such file; give the JSONL of {{"id", "completion"}} records to score'
        )
    judge, judged, completions = judge_beside_inputs(args, judge_args)
    with judge:
        judge.preflight(*{p.language for p in judged})
        trivial_shares = None
        if scoring.needs_trivial_shares:
            measured = list(dict.fromkeys(judged))
            trivial_shares = {
                problem: share.by_tests
                for problem, share in zip(measured, measure_trivial_shares(measured, judge, show_progress=True))
            }
        scores = score(
            judge,
            judged,
            [record["completion"] for record in completions],
            scoring,
            trivial_shares=trivial_shares,
            progress=True,
        )
    samples: Counter = Counter()
    with open(args.out, "w", encoding="utf-8") as out:
        for record, scored in zip(completions, scores):
            j = scored.judgement
            row = {
                "id": record["id"],
                "sample": samples[record["id"]],
                "reward": scored.reward,
                "passed": j.passed,
                "total": j.total,
                "status": j.status,
                "tests": [{"status": t.status, "seconds": t.seconds} for t in j.tests],
            }
            samples[record["id"]] += 1
            out.write(json.dumps(row) + "\n")
    counts = Counter(s.status for s in scores)
    summary = ", ".join(f"{status} {counts[status]}" for status in STATUSES if counts[status])
    print(f"scored {len(scores)} completions of {len(samples)} problems ({summary}) -> {args.out}")
    return 0


def run_passk(args: PassKArguments) -> int:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in read_records(args.scores, {"id": str, "status": str}):
        if record["status"] not in STATUSES:
            raise UsageError(f"{args.scores}:{record['_line']}: unknown status {record['status']!r}")
        counts[record["id"]][0] += 1
        counts[record["id"]][1] += record["status"] == "passed"
    for problem, (n, _) in counts.items():
        if n < max(args.k):
            raise UsageError(
                f"{args.scores}: problem {problem!r} has {n} samples, fewer than k={max(args.k)}; "
                f"sample more or lower --k"
            )
    result = mean_pass_at_k([tuple(c) for c in counts.values()], args.k)
    # Rounded for reading: the estimator's products leave float noise (0.33333333333333326) in the last digits.
    print(json.dumps({**{k: round(v, PASSK_DECIMALS) for k, v in result.items()}, "problems": len(counts)}))
    return 0


SCORE_HELP = {
    "judge_timeout": f"Seconds per test, as the trainer's evaluation (its --eval_timeout, {DEFAULT_EVAL_TIMEOUT}); the "
    f"trainer's training reward uses its --judge_timeout ({DEFAULT_TIMEOUT}).",
    "max_tests_per_problem": "Score on the first N tests of each problem (default: all, as the trainer's evaluation; "
    "its training reward uses the first 5).",
}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m rewards", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    s = commands.add_parser(
        "score",
        help="judge every completion against its problem's tests",
        dataclass_types=[ScoreArguments, JudgeArguments, ScoringArguments],
    )
    # Scoring is evaluation: the evaluation's time per test and every test of a problem, unless asked otherwise.
    s.set_defaults(handler=run_score, parser=s, judge_timeout=DEFAULT_EVAL_TIMEOUT, max_tests_per_problem=None)
    for action in s._actions:  # the shared fields' help describes the trainer's training reward; say what holds here
        if action.dest in SCORE_HELP:
            action.help = SCORE_HELP[action.dest]
    p = commands.add_parser("passk", help="unbiased pass@k from a scores file", dataclass_types=[PassKArguments])
    p.set_defaults(handler=run_passk, parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    namespace = build_parser().parse_args(argv)
    try:
        return namespace.handler(*namespace.parser.dataclasses_from(namespace))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
