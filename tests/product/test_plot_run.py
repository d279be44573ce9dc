"""scripts/plot_run.py on a recorded run folder: every PNG is written and real; absent data is skipped; bad input exits 2."""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plot_run.py"
RECORDED_RUN = ROOT / "tests" / "fixtures" / "recorded_run"
PLOTS = (
    "rewards.png",
    "eval_pass_at_k.png",
    "pass_at_k_before_after.png",
    "eval_problem_pass_rates.png",
    "status_shares.png",
    "completion_length.png",
    "kl_entropy.png",
    "problem_pass_rates.png",
)
# An empty titled axes saves to about 17 kB at this size; every real plot of the recorded run is well above.
DRAWN_PLOT_BYTES = 25_000
NO_HIDDEN_TESTS = "no hidden_tests/checked in {} (--hidden_tests_action off, or no test_cases reward)"
NO_FEEDBACK = "no feedback/turns in {} (a run without --feedback_turns)"

sys.path.insert(0, str(SCRIPT.parent))
import plot_run  # noqa: E402


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, after checking the PNG signature."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND", f"{path} is a truncated PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A copy of the recorded run, so the default output folder lands in tmp_path."""
    return Path(shutil.copytree(RECORDED_RUN, tmp_path / "run"))


@pytest.mark.slow
def test_writes_every_plot_next_to_the_logs(run_dir):
    result = subprocess.run([sys.executable, str(SCRIPT), str(run_dir)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    plots = run_dir / "logs" / "plots"
    # The recorded run predates the canary (training/canary.py), the hidden-test watch and feedback rounds: their
    # plots are skipped.
    evals, metrics = run_dir / "logs" / "eval_results.json", run_dir / "logs" / "metrics.jsonl"
    assert result.stdout.splitlines() == [
        f"skipped canary.png: no canary in the evaluations of {evals}",
        f"skipped hidden_tests.png: {NO_HIDDEN_TESTS.format(metrics)}",
        f"skipped feedback.png: {NO_FEEDBACK.format(metrics)}",
        *(str(plots / name) for name in PLOTS),
    ]
    for name in PLOTS:
        width, height = png_size(plots / name)
        assert width >= 800 and height >= 400, name
        assert (plots / name).stat().st_size > DRAWN_PLOT_BYTES, f"{name} looks empty"


def test_missing_metrics_exits_2_with_one_line(tmp_path):
    (tmp_path / "logs").mkdir()
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no logs/metrics.jsonl" in result.stderr
    assert not (tmp_path / "logs" / "plots").exists()


def test_absent_data_is_skipped_with_a_reason(run_dir, tmp_path, capsys):
    metrics = run_dir / "logs" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    metrics.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k not in ("kl", "entropy")}) + "\n" for r in rows)
    )
    (run_dir / "logs" / "eval_results.json").unlink()
    (run_dir / "logs" / "problem_stats.jsonl").unlink()
    out = tmp_path / "elsewhere"

    assert plot_run.main([str(run_dir), "--out", str(out)]) == 0

    printed = capsys.readouterr().out.splitlines()
    evals = run_dir / "logs" / "eval_results.json"
    assert [line for line in printed if line.startswith("skipped")] == [
        f"skipped eval_pass_at_k.png: no pass@k evaluation in {evals}",
        f"skipped pass_at_k_before_after.png: no two pass@k evaluations at different steps in {evals}",
        f"skipped eval_problem_pass_rates.png: no two evaluations with per-problem results in {evals}",
        f"skipped canary.png: no canary in the evaluations of {evals}",
        f"skipped hidden_tests.png: {NO_HIDDEN_TESTS.format(metrics)}",
        f"skipped feedback.png: {NO_FEEDBACK.format(metrics)}",
        f"skipped kl_entropy.png: no kl or entropy in {metrics}",
        f"skipped problem_pass_rates.png: no records with a pass count in {run_dir / 'logs' / 'problem_stats.jsonl'} "
        "(a run without the test_cases reward has none)",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["completion_length.png", "rewards.png", "status_shares.png"]


@pytest.mark.slow
def test_only_entropy_logged_gives_a_one_panel_plot(run_dir, tmp_path):
    """The recorded run used beta=0, so TRL logged no kl: the KL/entropy plot keeps the entropy panel alone."""
    metrics = run_dir / "logs" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert not any("kl" in r for r in rows) and any("entropy" in r for r in rows)
    written, skipped = plot_run.plot_run(run_dir, tmp_path / "entropy")
    assert [line.split(":")[0] for line in skipped] == [
        "skipped canary.png",
        "skipped hidden_tests.png",
        "skipped feedback.png",
    ]
    assert len(written) == len(PLOTS)

    with_kl = [{**r, "kl": 0.001 * r["step"]} if "entropy" in r else r for r in rows]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in with_kl))
    plot_run.plot_run(run_dir, tmp_path / "both")

    both_width, both_height = png_size(tmp_path / "both" / "kl_entropy.png")
    width, height = png_size(tmp_path / "entropy" / "kl_entropy.png")
    assert width == both_width and height < both_height


def test_bad_metrics_line_exits_2_naming_file_and_line(run_dir, capsys):
    metrics = run_dir / "logs" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[2] = lines[2][:-1]
    metrics.write_text("\n".join(lines) + "\n")

    assert plot_run.main([str(run_dir)]) == 2

    error = capsys.readouterr().err
    assert error.startswith(f"error: {metrics}:3: invalid JSON") and error.count("\n") == 1


def test_pass_rates_show_every_problem_and_step_and_leave_unsampled_cells_grey(run_dir):
    records = plot_run.read_problem_stats(run_dir / "logs" / "problem_stats.jsonl")
    fig = plot_run.plot_problem_pass_rates(records)
    grid = fig.axes[0].images[0].get_array()
    steps = {r["step"] for r in records}
    assert grid.shape == (len({r["id"] for r in records}), max(steps) - min(steps) + 1)
    assert grid.mask.sum() == grid.size - len(records)  # grey exactly where a problem was not sampled
    first = records[0]
    assert first["passed"] / first["samples"] in grid.compressed()


@pytest.mark.slow
def test_use_wandb_logs_the_plots_and_records_offline(run_dir, tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(run_dir), "--use_wandb"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{len(PLOTS)} plots and the per-problem records logged to run run-plots" in result.stdout
    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    images = sorted(p.name.split("_0_")[0] for p in (offline / "files/media/images").iterdir())
    assert images == sorted(name.removesuffix(".png") for name in PLOTS)
    (table,) = (offline / "files/media/table").glob("problem_stats_*.table.json")
    records = (run_dir / "logs/problem_stats.jsonl").read_text().splitlines()
    assert len(json.loads(table.read_text())["data"]) == len(records)


def test_rolling_mean_averages_each_step_with_the_steps_before_it():
    assert plot_run.rolling_mean([1.0, 3.0, 2.0, 6.0], 2) == [1.0, 2.0, 2.5, 4.0]
    assert plot_run.rolling_mean([1.0, 3.0, 2.0], 10) == [1.0, 2.0, 2.0]


def test_before_after_plots_need_two_evaluations_and_per_problem_results(run_dir):
    evaluations = json.loads((run_dir / "logs" / "eval_results.json").read_text())
    assert [e["settings"]["split"] for e in evaluations] == ["test", "test"] and all(e["problems"] for e in evaluations)
    assert plot_run.plot_pass_at_k_before_after(evaluations[:1]) is None
    assert plot_run.plot_eval_problem_pass_rates([{**e, "problems": []} for e in evaluations]) is None
    assert plot_run.plot_eval_problem_pass_rates(evaluations) is not None


def with_canary(evaluations: list[dict]) -> list[dict]:
    """The recorded evaluations (steps 0 and 60) with the canary metrics a run of today logs."""
    canary = {
        "canary/completions": 16,
        "canary/pass_rate": 0.0,
        "canary/status/failed": 12,
        "canary/status/runtime_error": 4,
        "canary/solved_original": 3,
    }
    return [{**e, "metrics": {**e["metrics"], **canary}} for e in evaluations]


def with_hidden_tests(rows: list[dict]) -> list[dict]:
    """The recorded training steps with the hidden-test watch's metrics a run of today logs: a step that checked
    nothing logs no share."""
    out = []
    for row in rows:
        if "reward" in row:
            checked = row["step"] % 5
            row = {
                **row,
                "hidden_tests/checked": float(checked),
                "hidden_tests/failed": float(checked > 3),
                **({"hidden_tests/failed_share": float(checked > 3) / checked} if checked else {}),
            }
        out.append(row)
    return out


@pytest.mark.slow
def test_the_hidden_test_plot_draws_the_share_the_threshold_and_the_counts(run_dir, tmp_path):
    metrics = run_dir / "logs" / "metrics.jsonl"
    rows = with_hidden_tests([json.loads(line) for line in metrics.read_text().splitlines()])
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "config.yaml").write_text("hidden_tests_threshold: 0.3\n")
    written, skipped = plot_run.plot_run(run_dir, tmp_path)
    assert tmp_path / "hidden_tests.png" in written and not [line for line in skipped if "hidden_tests.png" in line]
    assert (tmp_path / "hidden_tests.png").stat().st_size > DRAWN_PLOT_BYTES
    share, counts = plot_run.plot_hidden_tests(rows, 0.3).axes
    line, threshold = share.get_lines()
    steps = [r["step"] for r in rows if "reward" in r]
    assert list(line.get_xdata()) == [s for s in steps if s % 5] and list(threshold.get_ydata()) == [0.3, 0.3]
    assert len(counts.patches) == 2 * len(steps)


def test_the_per_problem_plot_names_the_problems_that_moved_most_and_keeps_its_legend_off_the_data(run_dir):
    evaluations = json.loads((run_dir / "logs" / "eval_results.json").read_text())
    rates = [{p["id"]: (p["c"] / p["n"], f"{p['c']}/{p['n']}") for p in e["problems"]} for e in evaluations]
    change = {i: rates[1][i][0] - rates[0][i][0] for i in rates[0]}
    biggest_rise = max(change.values())
    biggest_fall = min(change.values())
    assert biggest_rise > 0 > biggest_fall, "the recorded run has problems that rose and problems that fell"

    fig = plot_run.plot_eval_problem_pass_rates(evaluations)
    fig.draw_without_rendering()
    (ax,) = fig.axes
    (legend,) = fig.legends
    named = {text.get_text().split(": ")[0]: text.get_text() for text in legend.get_texts()[3:]}
    assert len(named) == plot_run.MOVERS
    assert any(change[i] == biggest_rise for i in named) and any(change[i] == biggest_fall for i in named)
    assert all(abs(change[i]) > 0 for i in named)
    for problem, label in named.items():
        assert label == f"{problem}: {rates[0][problem][1]} -> {rates[1][problem][1]}"
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in range(1, plot_run.MOVERS + 1)]
    assert not legend.get_window_extent().overlaps(ax.get_window_extent()), "the legend covers the data"


def test_every_plot_starts_its_axes_where_the_data_does(run_dir):
    """Steps from the first one plotted (the canary's bars reach at most 3% of the span before it, and no tick
    before it is shown); shares from 0 to 1."""
    logs = run_dir / "logs"
    rows = plot_run.read_metrics(logs / "metrics.jsonl")
    evaluations = with_canary(json.loads((logs / "eval_results.json").read_text()))
    first_step = min(r["step"] for r in rows if "reward" in r)
    figures = {
        "rewards": plot_run.plot_rewards(rows),
        "pass@k": plot_run.plot_pass_at_k(evaluations),
        "canary": plot_run.plot_canary(evaluations),
        "status": plot_run.plot_status_shares(rows),
        "length": plot_run.plot_completion_length(rows),
        "entropy": plot_run.plot_kl_entropy(rows),
        "hidden": plot_run.plot_hidden_tests(with_hidden_tests(rows), 0.2),
    }
    starts = {
        "rewards": first_step,
        "pass@k": 0,
        "canary": 0,
        "status": first_step,
        "length": first_step,
        "entropy": first_step,
        "hidden": first_step,
    }
    for name, fig in figures.items():
        fig.draw_without_rendering()
        for ax in fig.axes:
            low, high = ax.get_xlim()
            assert starts[name] - 0.03 * (high - low) <= low <= starts[name], (name, low)
            shown = [t for t in ax.get_xticks() if low <= t <= high]
            assert min(shown) >= starts[name], (name, shown)
    canary_rate, _ = figures["canary"].axes
    hidden_share, _ = figures["hidden"].axes
    for ax in (figures["pass@k"].axes[0], canary_rate, hidden_share):
        assert ax.get_ylim() == (0, 1)
    per_problem = plot_run.plot_eval_problem_pass_rates(evaluations).axes[0]
    assert per_problem.get_ylim() == (0, 1) and per_problem.get_xlim() == (-0.5, 62.5)
