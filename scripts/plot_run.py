"""Plot a run folder's logs as PNGs, so a run can be read at a glance.

    python scripts/plot_run.py final_outputs/1.5B/q [--out DIR] [--use_wandb]

Reads `logs/metrics.jsonl` (one JSON object per logged step), `logs/eval_results.json` (every pass@k evaluation)
and `logs/problem_stats.jsonl` (each training problem's groups per step) and writes, by default to
`<run>/logs/plots/`:

    rewards.png                  total reward per step (raw, with its std band) and its rolling mean, and each
                                 reward function's mean when there are several
    eval_pass_at_k.png           pass@k of every evaluation
    pass_at_k_before_after.png   pass@k of the first and the last evaluation side by side, on their split
    eval_problem_pass_rates.png  each evaluated problem's pass rate (c/n) in the first and the last evaluation,
                                 the problems that moved most named under their columns
    canary.png                   the canary at each evaluation: the share of completions passing an impossible
                                 problem (any is a hack), and its completions per status
    hidden_tests.png             the hidden-test watch per step: the share of completions passing every judged test
                                 that failed a hidden test (with the run's alarm threshold), and the counts behind it
    status_shares.png            share of each judging status per step (stacked)
    completion_length.png        mean completion length, and the share clipped at the length limit
    kl_entropy.png               KL to the reference model and policy entropy
    problem_pass_rates.png       training problems x steps, coloured by the share of completions passing every test

Every axis starts where its data does: a step axis at the first step plotted (not before step 0), a share at 0.
A plot whose data the logs do not hold is skipped with one line saying why. With `--use_wandb` the plots and the
per-problem records also go to a wandb run (job type "plots") in the run's wandb project, named after its run.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import yaml
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

from cli import UsageError, read_json_objects  # noqa: E402

# Fixed colours, so a status looks the same in every plot and every run.
STATUS_COLOURS = {
    "passed": "#2ca02c",
    "failed": "#ff7f0e",
    "no_code": "#7f7f7f",
    "syntax_error": "#9467bd",
    "runtime_error": "#d62728",
    "timeout": "#8c564b",
    "memory": "#e377c2",
    "output_limit": "#bcbd22",
    "sandbox_error": "#17becf",
}
PASS_AT_K = re.compile(r"pass@(\d+)")
SMOOTHING = 10  # steps in the reward's rolling mean: a step's reward is the mean of a few prompts, so it is noisy
MOVERS = 5  # problems named in eval_problem_pass_rates.png: those whose pass rate moved most
REWARD_MEAN = re.compile(r"rewards/(.+)/mean")


class BadRun(Exception):
    """The run folder or one of its logs cannot be read; the message names the problem and the fix."""


def read_metrics(path: Path) -> list[dict]:
    """The rows of a JSONL log, each an object with an integer "step", numbered by their line in the file."""
    try:
        rows = read_json_objects(path, {"step": int}, hint="fix or delete the line")
    except UsageError as e:
        raise BadRun(str(e)) from None
    return rows


def read_problem_stats(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = read_metrics(path)
    for row in rows:
        if not isinstance(row.get("id"), str):
            raise BadRun(f'{path}:{row["_line"]}: expected a problem "id" string; fix or delete the line')
    return rows


def read_evaluations(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        evaluations = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BadRun(f"{path}:{e.lineno}: not valid JSON ({e.msg}); fix the file or move it away") from None
    if not isinstance(evaluations, list) or not all(isinstance(e, dict) and "step" in e for e in evaluations):
        raise BadRun(f'{path}: expected a JSON list of evaluations, each with a "step"; fix the file or move it away')
    return evaluations


def series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows that logged `key` as a number."""
    points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return [s for s, _ in points], [v for _, v in points]


def keys_matching(rows: list[dict], pattern: re.Pattern) -> list[str]:
    """Keys that fully match `pattern`, in the order the log first shows them."""
    seen = {}
    for row in rows:
        seen.update((k, None) for k in row if pattern.fullmatch(k))
    return list(seen)


def new_figure(title: str) -> tuple[Figure, object]:
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    return fig, ax


def fit_steps(ax, steps, pad: float = 0.0) -> None:
    """The step axis from the first step plotted to the last (`pad` either side for bars centred on them), with the
    markers at its ends drawn whole rather than cut by the frame."""
    first, last = min(steps), max(steps)
    pad = pad or (0.5 if first == last else 0.0)
    ax.set_xlim(first - pad, last + pad)
    for line in ax.get_lines():
        line.set_clip_on(False)


def fit_share(ax) -> None:
    """A share's axis: 0 to 1, the points on its ends drawn whole."""
    ax.set_ylim(0, 1)
    for artist in [*ax.get_lines(), *ax.collections]:
        artist.set_clip_on(False)


def rolling_mean(values: list[float], window: int) -> list[float]:
    """Mean of each value and the up to `window - 1` values before it."""
    return [sum(values[max(0, i + 1 - window) : i + 1]) / (i + 1 - max(0, i + 1 - window)) for i in range(len(values))]


def plot_rewards(rows: list[dict], window: int = SMOOTHING) -> Figure | None:
    components = keys_matching(rows, REWARD_MEAN)
    steps, reward = series(rows, "reward")
    if not steps and not components:
        return None
    fig, ax = new_figure("Reward per step")
    if steps:
        std_steps, std = series(rows, "reward_std")
        if std_steps == steps:
            ax.fill_between(
                steps,
                [m - s for m, s in zip(reward, std)],
                [m + s for m, s in zip(reward, std)],
                color="black",
                alpha=0.08,
                label="reward ± std",
            )
        ax.plot(steps, reward, color="grey", linewidth=0.8, marker=".", alpha=0.7, label="reward (total), per step")
        ax.plot(
            steps,
            rolling_mean(reward, window),
            color="black",
            linewidth=2.5,
            label=f"reward (total), rolling mean of {window} steps",
        )
    for key in components if len(components) > 1 or not steps else []:  # one function's mean is the total
        ax.plot(*series(rows, key), marker=".", label=REWARD_MEAN.fullmatch(key).group(1))
    ax.set_ylabel("reward")
    fit_steps(ax, [x for line in ax.get_lines() for x in line.get_xdata()])
    ax.legend(loc="best", fontsize="small")
    return fig


def plot_pass_at_k(evaluations: list[dict]) -> Figure | None:
    ks = sorted(
        {int(m.group(1)) for e in evaluations for key in e.get("metrics", {}) if (m := PASS_AT_K.fullmatch(key))}
    )
    if not ks:
        return None
    fig, ax = new_figure("Evaluation pass@k")
    ordered = sorted(evaluations, key=lambda e: e["step"])
    rows = [{"step": e["step"], **e["metrics"]} for e in training_evaluations(ordered)]
    separate = [{"step": e["step"], **e["metrics"]} for e in ordered if e.get("eval_only")]
    for k in ks:
        (line,) = ax.plot(*series(rows, f"pass@{k}"), marker="o", label=f"pass@{k}")
        if separate:
            ax.plot(
                *series(separate, f"pass@{k}"),
                linestyle="none",
                marker="D",
                markerfacecolor="none",
                color=line.get_color(),
                label=f"pass@{k}, --eval_only",
            )
    ax.set_ylabel("share of problems solved")
    fit_steps(ax, [e["step"] for e in ordered])
    fit_share(ax)
    ax.legend(loc="best", fontsize="small")
    return fig


def training_evaluations(evaluations: list[dict]) -> list[dict]:
    """The evaluations training made, without the `--eval_only` ones appended later (marked `"eval_only": true`)."""
    return [e for e in evaluations if not e.get("eval_only")]


def first_and_last(evaluations: list[dict]) -> tuple[dict, dict] | None:
    """Training's first and last evaluation, when there are two at different steps (an `--eval_only` evaluation
    of the final model, at the last step, is not the "after")."""
    ordered = sorted(training_evaluations(evaluations), key=lambda e: e["step"])
    if len(ordered) < 2 or ordered[0]["step"] == ordered[-1]["step"]:
        return None
    return ordered[0], ordered[-1]


def split_label(evaluation: dict) -> str:
    settings = evaluation.get("settings", {})
    split = {"test": "held-out", "train": "training"}.get(settings.get("split"), "evaluated")
    return f"{settings.get('problems', '?')} {split} problems, n={settings.get('n', '?')}"


def plot_pass_at_k_before_after(evaluations: list[dict]) -> Figure | None:
    pair = first_and_last(evaluations)
    if not pair:
        return None
    before, after = pair
    ks = sorted(
        {int(m.group(1)) for key in after.get("metrics", {}) if (m := PASS_AT_K.fullmatch(key))}
        & {int(m.group(1)) for key in before.get("metrics", {}) if (m := PASS_AT_K.fullmatch(key))}
    )
    if not ks:
        return None
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"pass@k before and after training ({split_label(after)})")
    width = 0.38
    for offset, entry, colour in ((-width / 2, before, "#9e9e9e"), (width / 2, after, "#2ca02c")):
        values = [entry["metrics"][f"pass@{k}"] for k in ks]
        bars = ax.bar([i + offset for i in range(len(ks))], values, width, color=colour, label=f"step {entry['step']}")
        ax.bar_label(bars, fmt="%.2f", fontsize="small")
    ax.set_xticks(range(len(ks)), [f"pass@{k}" for k in ks])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("share of problems solved")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_eval_problem_pass_rates(evaluations: list[dict]) -> Figure | None:
    """One column per evaluated problem, sorted by its pass rate before: a grey dot before, a coloured dot after.
    The problems that moved most are numbered under their columns and named in the legend, below the axes."""
    pair = first_and_last(evaluations)
    if not pair or not pair[0].get("problems") or not pair[1].get("problems"):
        return None
    counts = [{p["id"]: f"{p['c']}/{p['n']}" for p in e["problems"]} for e in pair]
    before, after = ({p["id"]: p["c"] / p["n"] for p in e["problems"]} for e in pair)
    ids = sorted(set(before) & set(after), key=lambda i: (before[i], after[i], i))
    if not ids:
        return None
    fig, ax = new_figure(
        f"Each problem's pass rate, step {pair[0]['step']} -> step {pair[1]['step']} ({split_label(pair[1])})"
    )
    fig.set_figheight(5.5)
    up, down, same = "#2ca02c", "#d62728", "#7f7f7f"
    colour = {i: up if after[i] > before[i] else down if after[i] < before[i] else same for i in ids}
    movers = moved_most(before, after, ids)
    for x, i in enumerate(ids):
        ax.plot([x, x], [before[i], after[i]], color=colour[i], linewidth=3 if i in movers else 1.5, alpha=0.8)
    xs = range(len(ids))
    ax.scatter(xs, [before[i] for i in ids], color="#9e9e9e", s=14, zorder=3)
    ax.scatter(xs, [after[i] for i in ids], color=[colour[i] for i in ids], s=18, zorder=4)
    ax.set_xlim(-0.5, len(ids) - 0.5)
    fit_share(ax)
    ax.set_ylabel("pass rate (passing samples / samples)")
    ax.set_xticks([ids.index(i) for i in movers], [str(n) for n in range(1, len(movers) + 1)], fontweight="bold")
    for label, i in zip(ax.get_xticklabels(), movers):
        label.set_color(colour[i])
    ax.grid(False, axis="x")
    ax.set_xlabel(f"problem, sorted by its pass rate before; numbered: the {len(movers)} that moved most")

    def dot(colour_, marker="o"):
        return Line2D([], [], color=colour_, marker=marker, linestyle="none", markersize=6 if marker == "o" else 8)

    handles = [dot("#9e9e9e"), dot(up), dot(down)] + [dot(colour[i], f"${n}$") for n, i in enumerate(movers, 1)]
    labels = [f"step {pair[0]['step']}", f"step {pair[1]['step']}: up", f"step {pair[1]['step']}: down"] + [
        f"{i}: {counts[0][i]} -> {counts[1][i]}" for i in movers
    ]
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small")
    return fig


def moved_most(before: dict, after: dict, ids: list[str]) -> list[str]:
    """Up to MOVERS problems whose pass rate changed most, largest change first; up to two of them the largest
    falls, where any problem fell (a regression is what to look at first)."""

    def key(i):
        return -abs(after[i] - before[i]), i

    falls = sorted((i for i in ids if after[i] < before[i]), key=key)[:2]
    rises = sorted((i for i in ids if after[i] > before[i]), key=key)[: MOVERS - len(falls)]
    return sorted(rises + falls, key=key)


def plot_canary(evaluations: list[dict]) -> Figure | None:
    """The canary (training/canary.py) at each evaluation: above, the share of its completions that passed a problem
    no program can pass (0 in a sound run; any pass is a hack); below, its completions per judging status, and
    those that solved the problem the canary was made from."""
    ordered = [e for e in sorted(evaluations, key=lambda e: e["step"]) if "canary/completions" in e.get("metrics", {})]
    if not ordered:
        return None
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1, 2))
    steps = [e["step"] for e in ordered]
    rates = [e["metrics"]["canary/pass_rate"] for e in ordered]
    top.set_title("Canary: impossible problems judged at each evaluation")
    top.plot(steps, rates, marker="o", color="#d62728", label="canary/pass_rate (any pass is a hack)")
    fit_share(top)
    top.set_ylabel("share passed")
    top.legend(loc="upper left", fontsize="small")
    bottom.set_xlabel("step")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    base = np.zeros(len(ordered))
    # Narrow enough that the bars at the first and last step reach little past them.
    width = max(
        0.8, min(0.25 * min((b - a for a, b in zip(steps, steps[1:])), default=1), 0.03 * (steps[-1] - steps[0]))
    )
    for status, colour in STATUS_COLOURS.items():
        counts = np.array([e["metrics"].get(f"canary/status/{status}", 0) for e in ordered], dtype=float)
        if counts.any():
            bottom.bar(steps, counts, width, bottom=base, color=colour, label=status)
            base += counts
    solved = [e["metrics"].get("canary/solved_original", 0) for e in ordered]
    bottom.plot(steps, solved, marker="x", linestyle="none", color="black", label="solved the original problem")
    bottom.set_ylabel("canary completions")
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_ylim(0, max(base.max(), max(solved, default=0)) * 1.05 or 1)
    bottom.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    fit_steps(bottom, steps, pad=width / 2)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig


def plot_hidden_tests(rows: list[dict], threshold: float | None = None) -> Figure | None:
    """The hidden-test watch (training/hidden_tests.py) per step: above, the share of the completions that passed
    every judged test and failed a hidden one (near 0 while the policy solves the problems), with the run's
    threshold; below, how many were checked and how many failed."""
    steps, checked = series(rows, "hidden_tests/checked")
    if not steps:
        return None
    failed = [
        row.get("hidden_tests/failed", 0) for row in rows if isinstance(row.get("hidden_tests/checked"), (int, float))
    ]
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1))
    top.set_title("Hidden tests: perfect completions judged on tests the reward never sees")
    top.plot(*series(rows, "hidden_tests/failed_share"), marker=".", color="#d62728", label="hidden_tests/failed_share")
    if threshold is not None:
        top.axhline(threshold, color="black", linestyle="--", linewidth=1, label=f"alarm threshold {threshold:g}")
    fit_share(top)
    top.set_ylabel("share that failed")
    top.legend(loc="upper left", fontsize="small")
    bottom.bar(steps, checked, color="#9e9e9e", label="checked (passed every judged test)")
    bottom.bar(steps, failed, color="#d62728", label="failed a hidden test")
    bottom.set_ylabel("completions")
    bottom.set_xlabel("step")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.legend(loc="upper left", fontsize="small")
    fit_steps(bottom, steps, pad=0.5)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig


def plot_feedback(rows: list[dict], evaluations: list[dict]) -> Figure | None:
    """--feedback_turns (training/feedback.py) per step: above, the share of completions whose examples passed by
    each reply and the share continued after it; below, the replies a completion used and, at each evaluation,
    pass@1 of the first reply against pass@1 after the rounds."""
    steps, turns = series(rows, "feedback/turns")
    if not steps:
        return None
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1))
    top.set_title("Feedback rounds: the model runs its code on the examples and writes again")
    for key in keys_matching(rows, re.compile(r"feedback/examples_passed_by_turn_(\d+)")):
        top.plot(*series(rows, key), marker=".", label=key.removeprefix("feedback/"))
    for key in keys_matching(rows, re.compile(r"feedback/continued_after_turn_(\d+)")):
        top.plot(*series(rows, key), linestyle="--", label=key.removeprefix("feedback/"))
    fit_share(top)
    top.set_ylabel("share of completions")
    top.legend(loc="upper left", fontsize="small")
    bottom.plot(steps, turns, marker=".", color="black", label="replies per completion")
    bottom.set_ylabel("replies")
    evaluated = [e for e in training_evaluations(evaluations) if "feedback/pass@1" in e.get("metrics", {})]
    if evaluated:
        shares = bottom.twinx()
        shares.plot(
            [e["step"] for e in evaluated],
            [e["metrics"]["pass@1"] for e in evaluated],
            marker="o",
            color="#1f77b4",
            label="eval pass@1, first reply",
        )
        shares.plot(
            [e["step"] for e in evaluated],
            [e["metrics"]["feedback/pass@1"] for e in evaluated],
            marker="o",
            color="#2ca02c",
            label="eval pass@1, after the rounds",
        )
        fit_share(shares)
        shares.set_ylabel("pass@1")
        shares.legend(loc="upper right", fontsize="small")
    bottom.set_xlabel("step")
    bottom.legend(loc="upper left", fontsize="small")
    fit_steps(bottom, steps, pad=0.5)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig


def run_setting(run_dir: Path, name: str):
    """A setting from the run's config.yaml, None when the file or the setting is absent or unreadable."""
    try:
        settings = yaml.safe_load((run_dir / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return settings.get(name) if isinstance(settings, dict) else None


def plot_status_shares(rows: list[dict]) -> Figure | None:
    """Stacked shares of the statuses that occur at all; steps that logged no status are left out."""
    keys = keys_matching(rows, re.compile(r"status/(.+)"))
    status_rows = [r for r in rows if any(k in r for k in keys)]
    keys = [k for k in keys if any(r.get(k) for r in status_rows)]
    if not keys:
        return None
    fig, ax = new_figure("Judging status of completions")
    names = [k.removeprefix("status/") for k in keys]
    ax.stackplot(
        [r["step"] for r in status_rows],
        [[r.get(k) or 0.0 for r in status_rows] for k in keys],
        labels=names,
        colors=[STATUS_COLOURS.get(n, "#aec7e8") for n in names],
        alpha=0.85,
    )
    ax.set_ylim(0, 1)
    fit_steps(ax, [r["step"] for r in status_rows])
    ax.set_ylabel("share of completions")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return fig


def plot_completion_length(rows: list[dict]) -> Figure | None:
    steps, length = series(rows, "completions/mean_length")
    clip_steps, clipped = series(rows, "completions/clipped_ratio")
    if not steps and not clip_steps:
        return None
    fig, ax = new_figure("Completion length")
    handles = []
    if steps:
        handles += ax.plot(steps, length, color="tab:blue", marker=".", label="mean length (tokens)")
        ax.set_ylabel("tokens")
    if clip_steps:
        twin = ax.twinx()
        handles += twin.plot(
            clip_steps, clipped, color="tab:red", linestyle="--", marker=".", label="clipped ratio (right)"
        )
        twin.set_ylim(0, max(1e-3, max(clipped)) * 1.1)
        twin.set_ylabel("share clipped at max length")
        twin.get_lines()[0].set_clip_on(False)
    fit_steps(ax, steps + clip_steps)
    if steps:
        ax.set_ylim(bottom=max(0, ax.get_ylim()[0]))
    ax.legend(handles=handles, loc="best", fontsize="small")
    return fig


def plot_kl_entropy(rows: list[dict]) -> Figure | None:
    """KL and entropy differ by orders of magnitude, so each has its own panel."""
    present = [key for key in ("kl", "entropy") if series(rows, key)[0]]
    if not present:
        return None
    fig = Figure(figsize=(8, 2.4 + 2.2 * len(present)), layout="constrained")
    axes = fig.subplots(len(present), 1, sharex=True, squeeze=False)[:, 0]
    for ax, key in zip(axes, present):
        steps, values = series(rows, key)
        ax.plot(steps, values, color={"kl": "tab:purple", "entropy": "tab:green"}[key], marker=".")
        ax.set_ylabel(key)
        ax.set_ylim(bottom=max(0, ax.get_ylim()[0]))  # neither is negative
        fit_steps(ax, steps)
        ax.grid(alpha=0.3)
    title = " and ".join({"kl": "KL to the reference model", "entropy": "policy entropy"}[k] for k in present)
    axes[0].set_title(title[0].upper() + title[1:])
    axes[-1].set_xlabel("step")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def plot_problem_pass_rates(records: list[dict]) -> Figure | None:
    """Problems (rows) x steps (columns); a cell is the share of the problem's completions in that step that passed
    every test, grey where the problem was not sampled. Problems are ordered by the first step that solved one
    (never solved at the bottom), so learned, never-solved and easy-from-the-start problems stand apart."""
    rows = [
        r for r in records if isinstance(r.get("passed"), int) and isinstance(r.get("samples"), int) and r["samples"]
    ]
    if not rows:
        return None
    counts: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        passed_samples = counts.setdefault((r["id"], r["step"]), [0, 0])
        passed_samples[0] += r["passed"]
        passed_samples[1] += r["samples"]
    first, last = min(r["step"] for r in rows), max(r["step"] for r in rows)
    solved_at = {}
    for (pid, step), (passed, _) in sorted(counts.items(), key=lambda item: item[0][1]):
        solved_at.setdefault(pid, None)
        if passed and solved_at[pid] is None:
            solved_at[pid] = step
    problems = sorted(solved_at, key=lambda pid: (solved_at[pid] is None, solved_at[pid] or 0, pid))
    row_of = {pid: i for i, pid in enumerate(problems)}
    grid = np.full((len(problems), last - first + 1), np.nan)
    for (pid, step), (passed, samples) in counts.items():
        grid[row_of[pid], step - first] = passed / samples

    labelled = len(problems) <= 60
    fig = Figure(
        figsize=(10 if labelled else 8, min(4.5 + (0.16 if labelled else 0.01) * len(problems), 20)),
        layout="constrained",
    )
    ax = fig.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="#e0e0e0")
    image = ax.imshow(
        np.ma.masked_invalid(grid),
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=0,
        vmax=1,
        extent=(first - 0.5, last + 0.5, len(problems) - 0.5, -0.5),
    )
    fig.colorbar(image, ax=ax, label="share of completions passing every test")
    ax.set_title(f"Pass rate per training problem and step ({len(problems)} problems; grey: not sampled)")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if labelled:
        ax.set_yticks(range(len(problems)), problems, fontsize="x-small")
    else:
        ax.set_yticks([])
    ax.set_ylabel("problem (by the first step that solved it; never solved last)")
    return fig


def plot_run(run_dir: Path, out_dir: Path | None = None) -> tuple[list[Path], list[str]]:
    """Write every plot the logs allow; returns the paths written and one line per skipped plot."""
    logs = run_dir / "logs"
    metrics_path, eval_path = logs / "metrics.jsonl", logs / "eval_results.json"
    if not metrics_path.is_file():
        raise BadRun(f"{run_dir}: no logs/metrics.jsonl; pass a run folder written by rl_trainer.py (--output_dir)")
    rows = read_metrics(metrics_path)
    evaluations = read_evaluations(eval_path)
    problem_stats_path = logs / "problem_stats.jsonl"
    problem_stats = read_problem_stats(problem_stats_path)
    training = [r for r in rows if not any(k.startswith("eval_") for k in r)]
    plots = [
        ("rewards.png", plot_rewards(training), f"no reward or rewards/<name>/mean in {metrics_path}"),
        ("eval_pass_at_k.png", plot_pass_at_k(evaluations), f"no pass@k evaluation in {eval_path}"),
        (
            "pass_at_k_before_after.png",
            plot_pass_at_k_before_after(evaluations),
            f"no two pass@k evaluations at different steps in {eval_path}",
        ),
        (
            "eval_problem_pass_rates.png",
            plot_eval_problem_pass_rates(evaluations),
            f"no two evaluations with per-problem results in {eval_path}",
        ),
        ("canary.png", plot_canary(evaluations), f"no canary in the evaluations of {eval_path}"),
        (
            "hidden_tests.png",
            plot_hidden_tests(training, run_setting(run_dir, "hidden_tests_threshold")),
            f"no hidden_tests/checked in {metrics_path} (--hidden_tests_action off, or no test_cases reward)",
        ),
        (
            "feedback.png",
            plot_feedback(training, evaluations),
            f"no feedback/turns in {metrics_path} (a run without --feedback_turns)",
        ),
        ("status_shares.png", plot_status_shares(training), f"no status/<name> shares in {metrics_path}"),
        (
            "completion_length.png",
            plot_completion_length(training),
            f"no completions/mean_length or completions/clipped_ratio in {metrics_path}",
        ),
        ("kl_entropy.png", plot_kl_entropy(training), f"no kl or entropy in {metrics_path}"),
        (
            "problem_pass_rates.png",
            plot_problem_pass_rates(problem_stats),
            f"no records with a pass count in {problem_stats_path} (a run without the test_cases reward has none)",
        ),
    ]
    out_dir = out_dir or logs / "plots"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadRun(f"{out_dir}: cannot create the plot folder ({e.strerror}); pass a writable --out") from None
    written, skipped = [], []
    for name, fig, why_absent in plots:
        if fig is None:
            skipped.append(f"skipped {name}: {why_absent}")
            continue
        fig.savefig(out_dir / name, dpi=120)
        written.append(out_dir / name)
    return written, skipped


def send_to_wandb(run_dir: Path, written: list[Path]) -> str:
    """Log the plots and the per-problem records to a new wandb run beside the training run; returns its name.

    Project, entity and name come from the run's config.yaml (as `--use_wandb` training set them); the run is named
    `<wandb_name or folder>-plots`, with job type "plots".
    """
    from training.prerequisites import check_wandb

    try:
        check_wandb()
    except UsageError as e:
        raise BadRun(str(e)) from None
    import wandb

    config = run_dir / "config.yaml"
    settings = yaml.safe_load(config.read_text()) if config.exists() else {}
    name = f"{settings.get('wandb_name') or run_dir.resolve().name}-plots"
    run = wandb.init(
        project=settings.get("wandb_project") or "q-language-training",
        entity=settings.get("wandb_entity"),
        name=name,
        job_type="plots",
        config={"run_dir": str(run_dir.resolve())},
    )
    run.log({path.stem: wandb.Image(str(path)) for path in written})
    records = read_problem_stats(run_dir / "logs" / "problem_stats.jsonl")
    if records:
        columns = ["step", "id", "samples", "mean_reward", "reward_std", "passed", "hidden_checked", "hidden_failed"]
        run.log({"problem_stats": wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in records])})
    run.finish()
    return name


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Plot a run folder's metrics.jsonl, eval_results.json and problem_stats.jsonl as PNGs."
    )
    parser.add_argument("run_dir", type=Path, help="the run folder (--output_dir of rl_trainer.py)")
    parser.add_argument("--out", type=Path, help="where to write the PNGs (default: RUN_DIR/logs/plots)")
    parser.add_argument(
        "--use_wandb",
        action="store_true",
        help="also log the plots and the per-problem records to wandb (a run named <run>-plots)",
    )
    args = parser.parse_args(argv)
    try:
        written, skipped = plot_run(args.run_dir, args.out)
        wandb_run = send_to_wandb(args.run_dir, written) if args.use_wandb else None
    except BadRun as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in skipped:
        print(line)
    for path in written:
        print(path)
    if wandb_run:
        print(f"wandb: {len(written)} plots and the per-problem records logged to run {wandb_run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
