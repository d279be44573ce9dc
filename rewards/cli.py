"""``python -m rewards score|passk``: judge completion files and compute pass@k (design.md section 4)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from data import DataError, load_problems
from rewards.extract import extract_code
from rewards.judge import STATUSES, Judge, JudgeUnavailable
from rewards.passk import mean_pass_at_k
from rewards.reward_funcs import test_reward
from rewards.sandbox import SandboxUnavailable


class BadInput(ValueError):
    """One line naming the file (and line) and what is wrong."""


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one ``prog: error: ...`` line, exit 2 (design.md section 4)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def read_jsonl(path: str, required: dict[str, type]) -> list[dict]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise BadInput(f"{path}: cannot read: {error.strerror}") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadInput(f"{path}:{number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise BadInput(f"{path}:{number}: expected a JSON object")
        for key, kind in required.items():
            if not isinstance(record.get(key), kind):
                raise BadInput(f"{path}:{number}: '{key}' must be a {kind.__name__}")
        record["_line"] = number
        records.append(record)
    if not records:
        raise BadInput(f"{path}: no records")
    return records


def score(args: argparse.Namespace) -> int:
    try:
        loaded = load_problems(args.problems, args.language)
    except DataError as error:
        raise BadInput(str(error)) from None
    problems = {p["id"]: p for p in loaded}
    if len(problems) < len(loaded):
        repeated = sorted(id_ for id_, n in Counter(p["id"] for p in loaded).items() if n > 1)
        raise BadInput(f"{args.problems}: problem ids must be unique; repeated: {', '.join(map(repr, repeated))}")
    completions = read_jsonl(args.completions, {"id": str, "completion": str})
    for record in completions:
        if record["id"] not in problems:
            raise BadInput(f"{args.completions}:{record['_line']}: unknown problem id {record['id']!r}")
    samples: dict[str, int] = defaultdict(int)
    items, rows = [], []
    for record in completions:
        problem = problems[record["id"]]
        language = problem.get("language") or args.language
        tests = problem["tests"][: args.max_tests_per_problem]
        items.append((extract_code(record["completion"], language), tests, language))
        rows.append({"id": record["id"], "sample": samples[record["id"]]})
        samples[record["id"]] += 1
    with Judge(timeout=args.timeout, workers=args.workers) as judge:
        for language in sorted({item[2] for item in items}):
            judge.preflight(language)
        judgements = judge.run_many(items, progress=True)
    counts = dict.fromkeys(STATUSES, 0)
    with open(args.out, "w", encoding="utf-8") as out:
        for row, judgement in zip(rows, judgements):
            counts[judgement.status] += 1
            row.update(reward=test_reward(judgement), passed=judgement.passed, total=judgement.total,
                       status=judgement.status,
                       tests=[{"status": t.status, "seconds": t.seconds} for t in judgement.tests])
            out.write(json.dumps(row) + "\n")
    summary = ", ".join(f"{status} {n}" for status, n in counts.items() if n)
    print(f"scored {len(rows)} completions of {len(samples)} problems ({summary}) -> {args.out}")
    return 0


def passk(args: argparse.Namespace) -> int:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in read_jsonl(args.scores, {"id": str, "status": str}):
        if record["status"] not in STATUSES:
            raise BadInput(f"{args.scores}:{record['_line']}: unknown status {record['status']!r}")
        counts[record["id"]][0] += 1
        counts[record["id"]][1] += record["status"] == "passed"
    for problem, (n, _) in counts.items():
        if n < max(args.k):
            raise BadInput(f"{args.scores}: problem {problem!r} has {n} samples, fewer than k={max(args.k)}; "
                           f"sample more or lower --k")
    result = mean_pass_at_k([tuple(c) for c in counts.values()], args.k)
    print(json.dumps({**result, "problems": len(counts)}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m rewards", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("score", help="judge every completion against its problem's tests")
    s.add_argument("--problems", required=True, help="problem file (JSONL, or any source data.load_problems reads)")
    s.add_argument("--completions", required=True, help='JSONL of {"id", "completion"}; repeated ids are samples')
    s.add_argument("--out", required=True, help="scores JSONL, one line per completion in input order")
    s.add_argument("--language", choices=("q", "python"), default="q", help="for problems without a language")
    s.add_argument("--workers", type=positive(int), default=None, help="parallel executions (default: CPU cores)")
    s.add_argument("--timeout", type=positive(float), default=2.0, help="seconds per test (default 2.0)")
    s.add_argument("--max_tests_per_problem", type=positive(int), default=None, help="judge only the first N tests")
    s.set_defaults(handler=score)
    p = commands.add_parser("passk", help="unbiased pass@k from a scores file")
    p.add_argument("--scores", required=True)
    p.add_argument("--k", type=positive(int), nargs="+", required=True)
    p.set_defaults(handler=passk)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (BadInput, JudgeUnavailable, SandboxUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
