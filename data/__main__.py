"""Command line for problem data.

    python -m data check  [SOURCE] [--language q|python] [--allow_in_sandbox_comparisons]
    python -m data verify [SOURCE] [--language q|python] [--allow_in_sandbox_comparisons] [--max_trivial_share X]
                          [--max_tests_per_problem N] [--python_twins FILE ...] [--wrong_programs COMPLETIONS]
                          [--timeout S] [--q_binary PATH] [every judge setting]
    python -m data strengthen IN OUT [--language q|python] [--allow_in_sandbox_comparisons] [--max_trivial_share X]
                          [--max_tests_per_problem N] [--python_twins FILE ...] [--wrong_programs COMPLETIONS]
                          [every judge setting]
    python -m data pool IN OUT [--language q|python] [--pool_size N] [--domains tests|suggested]
                          [--python_twins FILE ...] [every judge setting]

SOURCE is anything ``load_problems`` accepts; without it, the bundled set for ``--language``.
``check`` validates and counts. ``verify`` also runs each problem's solution, a no-op, the trivial programs
(data/quality/trivial.py) and the wrong programs (data/quality/adequacy.py) through the judge, and exits 1 when a problem is
broken, a trivial program passes more than ``--max_trivial_share`` of its tests, or a wrong program passes its
first ``--max_tests_per_problem``, or a program of ``--wrong_programs`` is wrong and earns more than a constant
(data/quality/given_programs.py). ``strengthen`` writes IN's problems to OUT with tests that reject the wrong
programs (data/generation/strengthen.py) and prints the mutation scores before and after. For q problems with a Python twin
(``--python_twins``, or a published row's own ``python_solution``), ``verify`` also cross-checks every q test against
the twin, and where no q runs checks what it can without q; ``strengthen`` makes their tests from the twin
(data/quality/q_twins.py, data/generation/q_strengthen.py). ``pool`` writes IN's problems to OUT with a pool of tests
generated from each solution (data/generation/pool.py); a problem without a ``domain`` keeps to the classes its tests
show, or, with ``--domains suggested``, gets the domain read off its tests written in and its pool built within it.
Bad input (data or a missing interpreter) exits 2.
"""

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from data.quality.given_programs import check_given_programs, read_given_programs
from data.loading.loaders import bundled_path, load_problems
from data.generation.q_strengthen import describe, strengthen_q
from data.quality.q_twins import TWINS_HELP, cross_check, load_twins, read_without_q
from data.generation.pool import POOL_SIZE, build_pool, build_q_pool, suggested_domain, with_pool
from data.generation.strengthen import strengthen
from data.loading.validate import ALLOW_COMPARISONS_HELP, DataError
from data.quality.trivial import DEFAULT_MAX_TRIVIAL_SHARE, measure_trivial_shares
from data.quality.verify import cheap_counts, verify_problems
from cli import CommandParser, UsageError, positive
from rewards import MAX_TESTS_PER_PROBLEM
from judging import JudgeArguments, JudgeUnavailable
from judging.languages import LANGUAGES
from judging.policy import DEFAULT_EVAL_TIMEOUT

SHOWN_CHARS = 200
SHOWN_IDS = 10
SHOWN_SURVIVORS = 3
WRONG_PROGRAMS_HELP = (
    'JSONL of {"id", "completion"} (as `python -m rewards score` reads): programs a model wrote, '
    "such as its first samples; each that prints something else than the solution on an input of "
    "the problem's domain must earn no more from the judged tests than a constant"
)


def _parser():
    parser = CommandParser(prog="python -m data", description="Validate and verify problem sets.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    check = commands.add_parser("check", help="load and validate a problem source, print its counts")
    verify = commands.add_parser(
        "verify",
        help="run each problem's solution, a no-op and the trivial programs through the judge",
        dataclass_types=[JudgeArguments],
    )
    strengthen = commands.add_parser(
        "strengthen", help="write the problems with tests that reject wrong programs", dataclass_types=[JudgeArguments]
    )
    strengthen.add_argument("source", help="problem file, folder or dataset name")
    strengthen.add_argument("out", help="the JSONL file to write (never the source)")
    strengthen.add_argument(
        "--hidden_tests",
        type=int,
        default=0,
        metavar="N",
        help="also write new tests marked hidden, up to N hidden tests a problem (its own "
        "counted): inputs near its tests, answered by its solution, that the reward never "
        "judges and the trainer's hidden-test watch does (default %(default)s)",
    )
    pool = commands.add_parser(
        "pool",
        help="write the problems with a pool of tests generated from each solution",
        dataclass_types=[JudgeArguments],
    )
    pool.add_argument("source", help="problem file, folder or dataset name")
    pool.add_argument("out", help="the JSONL file to write (never the source)")
    pool.add_argument(
        "--pool_size", type=int, default=POOL_SIZE, metavar="N", help="inputs a pool aims at (default %(default)s)"
    )
    pool.add_argument(
        "--domains",
        choices=("tests", "suggested"),
        default="tests",
        help="for a Python problem without a domain: 'tests' keeps its pool to the types and classes its tests show; "
        "'suggested' writes the domain read off its tests (printed, for you to check) into its record and builds "
        "its pool within it, which reaches the classes its tests leave out (zero, negatives, duplicates, letters "
        "of other cases and scripts) (default %(default)s)",
    )
    pool.add_argument("--python_twins", nargs="+", default=[], metavar="FILE", help=TWINS_HELP)
    pool.set_defaults(judge_timeout=DEFAULT_EVAL_TIMEOUT)
    for command in (verify, strengthen):
        command.set_defaults(judge_timeout=DEFAULT_EVAL_TIMEOUT)  # not training: the evaluation's timeout
        command.add_argument(
            "--max_trivial_share",
            type=_share,
            default=DEFAULT_MAX_TRIVIAL_SHARE,
            help="list a problem when a cheap program (a constant, echoing the input, printing "
            "nothing, the first element, the length, True then False ...) passes more than "
            "this fraction of its tests (default %(default)s)",
        )
        command.add_argument(
            "--max_tests_per_problem",
            type=int,
            default=MAX_TESTS_PER_PROBLEM,
            help="the tests the training reward judges, which must reject every wrong program "
            "(default %(default)s, the trainer's default)",
        )
        command.add_argument("--python_twins", nargs="+", default=[], metavar="FILE", help=TWINS_HELP)
    for command in (check, verify):
        command.add_argument(
            "source", nargs="?", help="problem file, folder or dataset name (default: the bundled set for --language)"
        )
    for command in (verify, strengthen):
        command.add_argument("--wrong_programs", metavar="COMPLETIONS", help=WRONG_PROGRAMS_HELP)
    for command in (check, verify, strengthen, pool):
        command.add_argument(
            "--language",
            choices=list(LANGUAGES),
            default="q",
            help="language of records that do not name one, and of the fields to pick",
        )
        command.add_argument("--allow_in_sandbox_comparisons", action="store_true", help=ALLOW_COMPARISONS_HELP)
        command.set_defaults(parser=command)
    return parser


def _share(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1")
    return value


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
        if args.command in ("verify", "strengthen"):
            positive("--max_tests_per_problem", args.max_tests_per_problem)
        if args.command == "strengthen" and args.hidden_tests < 0:
            raise UsageError(f"--hidden_tests {args.hidden_tests}: must be 0 (none) or more")
        if args.command in ("strengthen", "pool") and _same_file(args.source, args.out):
            made = "strengthened" if args.command == "strengthen" else "pooled"
            raise UsageError(f"OUT is the source itself; write the {made} set to another file")
        if args.command == "pool" and args.pool_size < 1:
            raise UsageError(f"--pool_size {args.pool_size}: must be 1 or more")
        problems = load_problems(source, args.language, args.allow_in_sandbox_comparisons)
        given = _given_programs(args, problems) if args.command != "pool" else {}
        if args.command == "check":
            splits = Counter(problem.split or "unsplit" for problem in problems)
            print(
                f"{source}: {len(problems)} problems valid ("
                + ", ".join(f"{count} {split}" for split, count in sorted(splits.items()))
                + ")"
            )
            return 0
        twins = load_twins(args.python_twins, problems, args.allow_in_sandbox_comparisons)
        with judge_args[0].make_judge() as judge:
            if args.command == "strengthen":
                return _strengthen(problems, judge, args, twins, given)
            if args.command == "pool":
                return _pool(problems, judge, args, twins)
            report, cross = _verify(problems, judge, args, twins, given)
    except UsageError as error:
        print(error if isinstance(error, DataError) else f"{source}: {error}", file=sys.stderr)
        return 2
    _print_report(report, source, args.max_tests_per_problem)
    if cross is not None:
        for line in cross.disagreements:
            print(line)
        print(cross.summary())
    return 0 if report.clean and (cross is None or cross.clean) else 1


def _pool(problems, judge, args, twins):
    """Build each problem's pool (q problems from their twins), write OUT and say what was built and left out."""
    start = time.monotonic()
    pools = []
    from tqdm import tqdm

    suggested = {}
    if args.domains == "suggested":
        for index, problem in enumerate(problems):
            domain = None if problem.domain or problem.language != "python" else suggested_domain(problem)
            if domain:
                suggested[problem.id] = domain
                problems[index] = replace(problem, domain=domain)
    for problem in tqdm(problems, desc="pools", unit="problem"):
        if problem.language == "q":
            pools.append(build_q_pool(problem, twins.get(problem.id), judge, args.pool_size))
        else:
            pools.append(build_pool(problem, judge, args.pool_size))
    seconds = time.monotonic() - start
    out = Path(args.out)
    out.write_text(
        "".join(
            json.dumps(with_pool(problem, pool).record(), ensure_ascii=False) + "\n"
            for problem, pool in zip(problems, pools)
        ),
        encoding="utf-8",
    )
    for pool in pools:
        for line in pool.disagreements:
            print(f"DISAGREES {pool.problem.id}: {line}")
        if pool.skipped:
            print(f"no pool for {pool.problem.id}: {pool.skipped}")
        elif pool.problem.id in suggested:
            print(f"{pool.problem.id}: domain suggested and written, check it: {suggested[pool.problem.id]}")
        elif not pool.problem.domain:
            print(
                f"{pool.problem.id}: no domain: its pool keeps to the types and classes its tests show; "
                f"suggested: {suggested_domain(pool.problem) or 'none'}"
            )
    sizes = sorted(len(pool.tests) for pool in pools if pool.tests)
    if sizes:
        print(
            f"pools for {len(sizes)} of {len(problems)} problems: {sizes[0]} to {sizes[-1]} tests (median "
            f"{sizes[len(sizes) // 2]}), {sum(sizes)} in all, in {seconds:.0f} s ({seconds / len(problems):.2f} s a "
            f"problem); {sum(bool(p.unstable) for p in pools)} solutions not trusted (unstable) and "
            f"{sum(len(p.disagreements) for p in pools)} disagreeing inputs left out"
        )
    else:
        print(f"no pool built for any of {len(problems)} problems")
    print(f"wrote {out}")
    return 0


def _verify(problems, judge, args, twins, given):
    """The verify report, and the cross-check against the Python twins where there are any. Where q cannot run
    and twins check the q problems, what needs no q is checked and the rest is said to be skipped."""
    q_problems = [problem for problem in problems if problem.language == "q"]
    without_q = None
    if twins and q_problems:
        try:
            judge.preflight("q")
        except JudgeUnavailable as error:
            without_q = str(error)
    if without_q is None:
        report = verify_problems(
            problems,
            judge,
            max_trivial_share=args.max_trivial_share,
            max_tests=args.max_tests_per_problem,
            given=given,
            exempt_twins=True,
        )
    else:
        print(
            f"no q here ({without_q}): the q solutions, the no-op and the wrong programs are not run; the trivial "
            "shares are read off the tests (the most frequent expected output, the identity, the description's "
            "examples), and the tests are cross-checked against their Python twins"
        )
        others = [problem for problem in problems if problem.language != "q"]
        report = read_without_q(q_problems, args.max_trivial_share, without_q)
        if others:
            extra = verify_problems(
                others,
                judge,
                max_trivial_share=args.max_trivial_share,
                max_tests=args.max_tests_per_problem,
                given=given,
                exempt_twins=True,
            )
            report = _merged(report, extra)
    if not twins and not args.python_twins:
        return report, None
    judge.preflight("python")
    return report, cross_check(problems, twins, judge)


def _merged(read, judged):
    for name in ("broken", "unverifiable", "guessable", "weak"):
        getattr(read, name).extend(getattr(judged, name))
    read.twins.extend(judged.twins)
    read.twins_above.extend(judged.twins_above)
    for name in ("trivial", "adequacy", "given", "locations"):
        getattr(read, name).update(getattr(judged, name))
    read.checked += judged.checked
    return read


def _given_programs(args, problems):
    """The programs of ``--wrong_programs`` by problem id, read before anything is judged; None without it."""
    path = getattr(args, "wrong_programs", None)
    if path is None:
        return None
    given = read_given_programs(path, args.language)
    unknown = sorted(set(given) - {problem.id for problem in problems})
    if unknown:
        source = args.source or "the bundled set"
        raise DataError(
            path,
            f"no problem with id {', '.join(map(repr, unknown[:SHOWN_IDS]))} in {source}; give "
            "--wrong_programs programs of the problems verified",
        )
    return given


def _same_file(source, out):
    source, out = Path(source), Path(out)
    return source.resolve() == out.resolve() or (out.exists() and source.exists() and source.samefile(out))


def _print_report(report, source, max_tests):
    for broken in report.broken:
        _print_broken(broken)
    for guessable in report.guessable:
        print(
            f"{guessable['location'] or source}: {guessable['id']}: {guessable['probe']} passes "
            f"{guessable['passed']}/{guessable['total']} tests"
        )
    for weak in report.weak:
        for survivor in weak["adequacy"].survivors[:SHOWN_SURVIVORS]:
            print(f"{weak['location'] or source}: {weak['id']}: weak tests: {survivor}")
        more = len(weak["adequacy"].survivors) - SHOWN_SURVIVORS
        if more > 0:
            print(f"{weak['location'] or source}: {weak['id']}: weak tests: {more} more wrong programs pass")
    _print_given(report, source)
    _print_outside_domain(report.adequacy)
    if report.trivial:
        shares = [share.share for share in report.trivial.values()]
        print(
            f"trivial share (the most of a problem's tests a constant, an echo, printing nothing or a cheap "
            f"program passes): mean {sum(shares) / len(shares):.2f}, max {max(shares):.2f}"
        )
    if report.twins:
        above = ", ".join(f"{t['id']} {t['passed']}/{t['total']}" for t in report.twins_above[:SHOWN_IDS])
        print(
            f'{source}: {len(report.twins)} of {report.checked} problems are twins ("twin_of"), which check the '
            "tests of a problem in another language and are not trained on: their trivial shares are not held to "
            f"--max_trivial_share ({len(report.twins_above)} above {report.max_trivial_share:g}"
            + (f": {above}" if above else "")
            + (" ..." if len(report.twins_above) > SHOWN_IDS else "")
            + ")"
        )
    print(_mutation_scores(report.adequacy, max_tests))
    pooled = {i: a for i, a in report.adequacy.items() if a.pool}
    if pooled:
        sizes = sorted(a.pool for a in pooled.values())
        print(
            f"pools on {len(pooled)} problems ({sizes[0]} to {sizes[-1]} tests, median {sizes[len(sizes) // 2]}): "
            f"{sum(a.killed_by_pool for a in pooled.values())} wrong programs that pass the first {max_tests} "
            f"tests fail a pool test; by problem: "
            + ", ".join(
                f"{i} {a.pool} tests of {a.pool_classes} input classes, {a.killed_by_pool} caught"
                for i, a in list(pooled.items())[:8]
            )
            + (" ..." if len(pooled) > 8 else "")
        )
    skipped = Counter(a.skipped for a in report.adequacy.values() if a.skipped and a.skipped != "no solution")
    for reason, count in skipped.items():
        print(f"wrong programs not tried on {count} problems: {reason}")
    if report.unverifiable:
        print(
            f"unverifiable (no solution): {', '.join(report.unverifiable[:SHOWN_IDS])}"
            + (" ..." if len(report.unverifiable) > SHOWN_IDS else "")
        )
    print(report.summary())


def _print_given(report, source):
    """Each given program that is wrong and paid, then one line of counts."""
    if not report.given:
        return
    for problem_id, programs in report.paid.items():
        for program in programs:
            print(
                f"{report.locations.get(problem_id) or source}: {problem_id}: a wrong program earns more than a "
                f"constant: {program}"
            )
    programs = [p for found in report.given.values() for p in found]
    wrong = [p for p in programs if p.differs_on is not None]
    print(
        f"given programs: {len(programs)} on {len(report.given)} problems: {len(wrong)} wrong, of which "
        f"{sum(p.paid for p in wrong)} earn more than a constant on the judged tests; "
        f"{len(programs) - len(wrong)} agree with the solution on every input tried"
    )


def _print_outside_domain(adequacy: dict):
    """Where nearby inputs were left out because the solution does not answer them (data/quality/domain.py)."""
    outside = {i: a.outside_domain for i, a in adequacy.items() if a.outside_domain}
    if outside:
        shown = ", ".join(f"{i} ({n})" for i, n in list(outside.items())[:SHOWN_IDS])
        print(
            f"nearby inputs left out as outside the domain (the solution raises, fails an assert or the problem's "
            f"domain, or takes over a quarter of the time limit there): {sum(outside.values())} on {len(outside)} "
            f"problems: {shown}" + (" ..." if len(outside) > SHOWN_IDS else "")
        )


def _mutation_scores(adequacy: dict, max_tests) -> str:
    """One line: the mean and lowest mutation score, and every problem's below 1."""
    checked = {i: a for i, a in adequacy.items() if a.skipped is None}
    if not checked:
        return "mutation score: no problem checked"
    worst = min(checked, key=lambda i: checked[i].score)
    below = [f"{i} {a.killed}/{a.wrong}" for i, a in checked.items() if a.survivors]
    return (
        f"mutation score (the share of wrong programs the first {max_tests} tests reject) of {len(checked)} "
        f"problems: mean {sum(a.score for a in checked.values()) / len(checked):.3f}, min "
        f"{checked[worst].score:.2f}" + (f"; below 1: {', '.join(below)}" if below else "")
    )


def _hidden_added(record) -> str:
    return f", {record.hidden} hidden tests added" if record.hidden else ""


def _strengthen(problems, judge, args, twins, given):
    # q problems are strengthened from their Python twins, with no q run.
    judge.preflight(*({problem.language for problem in problems} - {"q"}) | ({"python"} if twins else set()))
    started = time.monotonic()
    strengthened, records, before, after = strengthen(
        problems,
        judge,
        args.max_tests_per_problem,
        args.max_trivial_share,
        show_progress=True,
        given=given,
        hidden=args.hidden_tests,
    )
    if twins:
        strengthened, q_records = strengthen_q(
            strengthened, twins, judge, args.max_tests_per_problem, args.max_trivial_share, show_progress=True
        )
        records = [q if q.skipped != "not q" else record for record, q in zip(records, q_records)]
    out = Path(args.out)
    out.write_text(
        "".join(json.dumps(problem.record(), ensure_ascii=False) + "\n" for problem in strengthened), encoding="utf-8"
    )
    for problem, record, old, new in zip(problems, records, before, after):
        where = problem.location or args.source
        if record.skipped is None and problem.language == "q":
            print(f"{where}: {describe(problem, record, args.max_tests_per_problem)}")
        elif record.skipped is None:
            still = [f"{survivor.program} (differs on {survivor.differs_on})" for survivor in new.survivors]
            print(
                f"{where}: {problem.id}: {record.added} tests added{_hidden_added(record)}, "
                f"mutation score {old.killed}/{old.wrong} -> {new.killed}/{new.wrong}"
                + (f"; passing the first {args.max_tests_per_problem} tests still: {', '.join(still)}" if still else "")
                + "".join(f"; {left}" for left in record.left)
            )
        elif _hidden_added(record):
            print(f"{where}: {problem.id}: {record.skipped}{_hidden_added(record)}")
    if given:
        _print_given_after(strengthened, given, judge, args)
    skipped = Counter(record.skipped for record in records if record.skipped)
    if skipped:
        print("left as they are: " + ", ".join(f"{count} ({reason})" for reason, count in skipped.items()))
    if any(problem.language != "q" for problem in problems):
        print("before: " + _mutation_scores({p.id: a for p, a in zip(problems, before)}, args.max_tests_per_problem))
        print("after:  " + _mutation_scores({p.id: a for p, a in zip(problems, after)}, args.max_tests_per_problem))
    made = [record for problem, record in zip(problems, records) if problem.language == "q" and not record.skipped]
    if made:
        print(
            f"q problems with tests from their Python twins: {len(made)}; the twins' wrong programs the first "
            f"{args.max_tests_per_problem} tests reject: {sum(r.killed_before for r in made)}/"
            f"{sum(r.wrong for r in made)} before, {sum(r.killed_after for r in made)}/{sum(r.wrong for r in made)} "
            "after"
        )
    seconds = time.monotonic() - started
    print(
        f"strengthened {len(problems)} problems in {seconds:.0f} s ({seconds / max(len(problems), 1):.1f} s a "
        f"problem, {judge.workers} judge workers, load average {os.getloadavg()[1]:.1f})"
    )
    twins = " --python_twins " + " ".join(args.python_twins) if args.python_twins else ""
    print(
        f"wrote {out}: {len(strengthened)} problems, {sum(len(p.tests) for p in strengthened)} tests (was "
        f"{sum(len(p.tests) for p in problems)}); check it with `python -m data verify {out} --language "
        f"{args.language}{twins}`"
    )
    return 0


def _print_given_after(problems, given, judge, args):
    """How each program of ``--wrong_programs`` fares on the strengthened tests, judged."""
    checked = [problem for problem in problems if problem.id in given]
    cheap = cheap_counts(
        {p.id: s for p, s in zip(checked, measure_trivial_shares(checked, judge))}, args.max_tests_per_problem
    )
    for problem_id, programs in check_given_programs(checked, given, judge, args.max_tests_per_problem, cheap).items():
        for program in programs:
            verdict = (
                "agrees with the solution on every input tried"
                if program.differs_on is None
                else "earns more than a constant"
                if program.paid
                else "earns no more than a constant"
            )
            print(f"{problem_id}: {program}: {verdict}")


if __name__ == "__main__":
    sys.exit(main())
