"""What a q solution can do to the harness around it, against stand-ins of q that say what they are (no licensed q
runs here; tests/judging/test_real_q.py runs the real one where it exists).

- q reads a script line that starts with whitespace as the continuation of the line before. A solution whose first
  line is indented would join the harness's marker line, so the marker never printed and a later ``'k4.lic`` read
  as a licence failure: retries, then ``sandbox_error``, which TRL scores as no signal.
  tests/helpers/fake_q/continuing_q models that rule; tests/helpers/fake_q/q does not.
- A q test on a slot whose warm Python worker lived in the slot's cgroup waited the whole 2 s settle bound for that
  worker to leave.
"""

import os
from pathlib import Path

import pytest

import judging.execution
from judging import Judge, Test
from judging.execution import Counter, _retrying_licence_failures
from judging.executors import RAN, QExecutor
from judging.running import RunResult

FAKE_Q = Path(__file__).resolve().parents[1] / "helpers" / "fake_q"


@pytest.fixture()
def continuing_q(tmp_path):
    """tests/helpers/fake_q/q after q's continuation rule: each line that starts with white space is joined to the line
    before, then the stand-in reads the joined script (so a joined ``-2 "marker"; ...`` line prints nothing), and
    does not echo the script to stderr as tests/helpers/fake_q/q does. It is one self-contained script: the sandbox shows
    judged q only its binary and QHOME."""
    stand_in = (FAKE_Q / "q").read_text()
    joining = """# continuing_q: a line starting with white space continues the line before, as in q. Counts runs in KX_ACCT.
echo run >> "$KX_ACCT"
joined="$(dirname "$1")/joined.q"
previous=""
first=1
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        " "*|"	"*) previous="$previous $line" ;;
        *) [ "$first" = 1 ] || printf '%s\\n' "$previous" >> "$joined"; previous="$line"; first=0 ;;
    esac
done < "$1"
printf '%s\\n' "$previous" >> "$joined"
script="$joined"
"""
    echo = 'trap \'sed "s/^/FAKEQ-SCRIPT /" "$script" >&2\' EXIT\n'  # q never shows its script (nor the marker)
    assert 'script="$1"\n' in stand_in and echo in stand_in
    script = tmp_path / "continuing_q"
    script.write_text(stand_in.replace('script="$1"\n', joining).replace(echo, ""))
    script.chmod(0o755)
    tmp_path.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("solution", ["  solve:{x}\n'k4.lic", '\tsolve:{x}\n\'k4.lic\n-1 "6";', " /\n'k4.lic"])
def test_an_indented_first_line_cannot_swallow_the_marker(qhome, continuing_q, solution, tmp_path, monkeypatch):
    """The marker prints whatever the solution's first line is, so its licence text is judged as its output: one
    run, no licence retry, no check of q itself."""
    runs = tmp_path / "runs"
    runs.touch(mode=0o666)
    runs.chmod(0o666)
    monkeypatch.setenv("KX_ACCT", str(runs))
    with Judge(timeout=2.0, workers=1, q_binary=continuing_q, q_licence_hosts="none") as judge:
        judgement = judge.run(solution, [Test('-1 "6";', "6")], "q")
        assert judgement.status == "runtime_error", judgement.tests[0]
        assert runs.read_text().count("run") == 1, "the solution's text was taken for a licence failure"


@pytest.mark.parametrize(
    "q_starts, outcomes, status, runs, retries",
    [
        (True, ["licence", "licence"], "runtime_error", 2, 0),  # q starts now: the licence text is the program's
        (True, ["licence", "ran"], "ran", 2, 0),  # a licence server's hiccup that ended: judged on its second run
        (False, ["licence"] * 4, "sandbox_error", 4, 3),  # q itself fails: retried, then the judge's fault
    ],
)
def test_a_licence_failure_is_concluded_only_while_the_trusted_program_fails_too(
    q_starts, outcomes, status, runs, retries, monkeypatch
):
    monkeypatch.setattr(judging.execution, "LICENCE_RETRY_DELAYS", (0.0, 0.0, 0.0))
    marker = "m" * 32
    said = {
        "licence": RunResult(1, "", "'k4.lic\n", 0.01, False, False),
        "ran": RunResult(0, f"{marker}\n6\n", f"{marker}\n", 0.01, False, False),
    }
    given = iter(outcomes)
    counter = Counter()
    result, outcome = _retrying_licence_failures(
        lambda: said[next(given)], lambda: q_starts, QExecutor(str(FAKE_Q / "q")), marker, counter
    )
    assert outcome == (RAN if status == "ran" else status)
    assert len(outcomes) - len(list(given)) == runs and counter.value == retries


@pytest.mark.skipif(os.geteuid() != 0, reason="warm workers and slot cgroups need root")
def test_a_q_test_does_not_wait_for_its_slots_warm_python_worker(qhome):
    """One slot, so the q tests run on the slot whose warm Python worker is alive; each must take about what the
    stand-in takes (tens of ms), not the 2 s settle bound."""
    with Judge(timeout=5.0, workers=1, q_binary=str(FAKE_Q / "q"), q_licence_hosts="none") as judge:
        assert judge.warm and judge.setup.slots.cgroups.version, judge.isolation
        assert judge.run("", [Test("print(1)", "1")], "python").status == "passed"
        seconds = [test.seconds for test in judge.run("solve:{x}", [Test('-1 "6";', "6")] * 4, "q").tests]
        assert max(seconds) < 1.5, f"q tests waited for the warm worker's cgroup: {seconds}"
