"""Command line for problem data.

    python -m data check  [SOURCE] [--language q|python]
    python -m data verify [SOURCE] [--language q|python] [--timeout S] [--q_binary PATH] [every judge setting]

SOURCE is anything ``load_problems`` accepts; without it, the bundled set for ``--language``.
``check`` validates and counts. ``verify`` also runs each problem's solution and a no-op through
the judge and exits 1 when a problem is broken. Bad input (data or a missing interpreter) exits 2.
"""

import logging
import sys
from collections import Counter

from data.loaders import bundled_path, load_problems
from data.validate import DataError
from data.verify import verify_problems
from cli import CommandParser, UsageError
from judging import JudgeArguments
from judging.languages import LANGUAGES

SHOWN_CHARS = 200
SHOWN_IDS = 10


def _parser():
    parser = CommandParser(prog="python -m data", description="Validate and verify problem sets.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    check = commands.add_parser("check", help="load and validate a problem source, print its counts")
    verify = commands.add_parser("verify", help="run each problem's solution and a no-op through the judge",
                                 dataclass_types=[JudgeArguments])
    verify.set_defaults(judge_timeout=2.0)  # verification is not training: the evaluation timeout
    for command in (check, verify):
        command.add_argument("source", nargs="?", help="problem file, folder or dataset name "
                                                       "(default: the bundled set for --language)")
        command.add_argument("--language", choices=list(LANGUAGES), default="q",
                             help="language of records that do not name one, and of the fields to pick")
        command.set_defaults(parser=command)
    return parser


def _shown(text):
    """Stripped like the judge compares, quoted so whitespace and empty output stay visible."""
    text = text.strip()
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def _print_broken(broken):
    print(f"BROKEN {broken['id']}: {broken['reason']}")
    print(f"  test {broken['test']} expected: {_shown(broken['expected'])}")
    print(f"  test {broken['test']} got:      {_shown(broken['got'])}")
    if broken["stderr"].strip():
        print(f"  stderr: {_shown(broken['stderr'].strip().splitlines()[-1])}")


def main(argv=None):
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    source = args.source or str(bundled_path(args.language))
    try:
        judge_args = args.parser.dataclasses_from(args)
        problems = load_problems(source, args.language)
        if args.command == "check":
            splits = Counter(problem["split"] or "unsplit" for problem in problems)
            print(f"{source}: {len(problems)} problems valid ("
                  + ", ".join(f"{count} {split}" for split, count in sorted(splits.items())) + ")")
            return 0
        with judge_args[0].make_judge() as judge:
            report = verify_problems(problems, judge)
    except UsageError as error:
        print(error if isinstance(error, DataError) else f"{source}: {error}", file=sys.stderr)
        return 2
    for broken in report.broken:
        _print_broken(broken)
    if report.unverifiable:
        print(f"unverifiable (no solution): {', '.join(report.unverifiable[:SHOWN_IDS])}"
              + (" ..." if len(report.unverifiable) > SHOWN_IDS else ""))
    print(report.summary())
    return 1 if report.broken else 0


if __name__ == "__main__":
    sys.exit(main())
