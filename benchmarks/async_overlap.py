"""Generation overlapped with training: `rl_trainer.py --async_generation` against the synchronous trainer, in one run.

Both sides train the same tiny model (scripts/make_tiny_model.py) on the bundled Python problems, in server mode,
against one real `vllm serve` (vLLM's CPU build here, started by scripts/serve_vllm.sh), through
tests/helpers/run_with_vllm.py: the NCCL weight transfer is left out (GPU-only in TRL and vLLM; every other request goes
to the server), and each generation request returns `--delay` seconds later, as from a server that takes that
long to generate. At size generation takes about as long as training (a 7B step: ~25 s against 5-10 s; 32B: ~52 s
against 30-50 s), so by default the delay is a training step's time, measured first by a synchronous run without
delay. The trainer runs on one core and the server on another (where this process may use two): on a cluster
they are separate devices, and the CPU server's own generation would otherwise take the trainer's core. The
sides alternate, each a fresh process; the first `--warmup` steps of each run are left out.

For each pair of runs (one a side, launched back to back), the median wall time of a step (from one logged step to
the next) and of a generation request (the trainer's view: sent until answered, the delay included). Training is
the rest of a synchronous step: the synchronous step less its generation. The async step is compared with
max(generation, training), the most a perfect overlap can reach, and with their sum, the synchronous step; the
figures are the medians of the pairs' ratios, with their spread (the machine's load moves them).

    python benchmarks/async_overlap.py [--steps 8] [--runs 3] [--delay SECONDS] [--completions 16] [--tokens 16]
    python benchmarks/async_overlap.py --server_url http://127.0.0.1:8000 --model MODEL   # a server already up

Targets: the async step at most 1.2x max(generation, training) and at most 0.8x the synchronous step.
`--smoke` runs each side for 3 steps with a short delay and checks nothing but that it runs
(tests/training/test_vllm.py).
"""

import argparse
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "helpers" / "run_with_vllm.py"
SIDES = ("sync", "async")
# vLLM's CPU engine: a 1 GiB KV cache is plenty for the tiny model; its OpenMP threads unbound (shared cores).
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
MAX_MODEL_LEN = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cores() -> tuple[set[int], set[int]] | None:
    """A core for the trainer and another for the server, where this process may run on two or more: on a cluster
    they are separate devices, and here the CPU server's own generation would otherwise take the trainer's core
    while it trains. None: one core for both."""
    allowed = sorted(os.sched_getaffinity(0))
    return ({allowed[0]}, {allowed[1]}) if len(allowed) >= 2 else None


def on_cores(which: set[int] | None):
    """A preexec_fn that keeps a child (and what it starts) on ``which``."""
    return None if which is None else (lambda: os.sched_setaffinity(0, which))


def start_server(model: str, log: Path, cpus: set[int] | None) -> tuple[subprocess.Popen, str]:
    """`vllm serve` of ``model`` as scripts/serve_vllm.sh starts it, on a free port; waits until it is healthy."""
    port = free_port()
    env = {
        **os.environ,
        **VLLM_ENV,
        "VLLM_PORT": str(port),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                "bash",
                str(ROOT / "scripts" / "serve_vllm.sh"),
                model,
                "--max_model_len",
                str(MAX_MODEL_LEN),
                "--host",
                "127.0.0.1",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=on_cores(cpus),
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            stop_server(server)
            sys.exit("vllm serve did not start:\n" + "\n".join(log.read_text().splitlines()[-15:]))
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return server, url
        except requests.RequestException:
            pass
        time.sleep(2)


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def trainer_argv(model: str, url: str, out: Path, args, steps: int, asynchronous: bool) -> list[str]:
    """The same settings on both sides but --async_generation: groups of 4 completions, one optimizer step a
    generation."""
    return [
        "--model",
        model,
        "--output_dir",
        str(out),
        "--language",
        "python",
        "--use_vllm",
        "--vllm_mode",
        "server",
        "--vllm_server_base_url",
        url,
        "--max_model_len",
        str(MAX_MODEL_LEN),
        "--max_steps",
        str(steps),
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        str(args.completions),
        "--gradient_accumulation_steps",
        "1",
        "--max_completion_length",
        str(args.tokens),
        "--eval_pass_at_k",
        "false",
        "--save_steps",
        "100000",
        "--seed",
        "42",
        *(["--async_generation"] if asynchronous else []),
    ]


def run_side(
    side: str, model: str, url: str, work: Path, run: int, args, cpus: set[int] | None, delay: float, steps: int
) -> dict:
    """One run of one side; its steps' wall times and its training requests' durations (seconds)."""
    out, trace, log = work / f"{side}-{run}", work / f"{side}-{run}.trace", work / f"{side}-{run}.log"
    env = {
        **os.environ,
        **VLLM_ENV,
        "OMP_NUM_THREADS": str(args.threads),
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "RUN_WITH_VLLM_NO_WEIGHT_TRANSFER": "1",
        "RUN_WITH_VLLM_GENERATION_DELAY": str(delay),
        "RUN_WITH_VLLM_TRACE": str(trace),
    }
    argv = [sys.executable, str(HARNESS), *trainer_argv(model, url, out, args, steps, side == "async")]
    with log.open("w") as output:
        done = subprocess.run(
            argv, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, preexec_fn=on_cores(cpus)
        )
    if done.returncode != 0:
        sys.exit(f"{side} run {run} failed (exit {done.returncode}):\n" + "\n".join(log.read_text().splitlines()[-15:]))
    logged = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines()]
    times = [m["time"] for m in logged if "reward" in m]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    starts = {}
    requests_s = []
    for e in events:
        if e["event"] == "request" and e["rank"] == 0:
            if e["phase"] == "start":
                starts[e["thread"]] = e["time"]
            else:
                requests_s.append(e["time"] - starts.pop(e["thread"]))
    return {
        "steps": [b - a for a, b in zip(times, times[1:])],
        "requests": requests_s,
        "waits": [m["async/generation_wait_s"] for m in logged if "async/generation_wait_s" in m],
    }


def pair_figures(sync: dict, asynchronous: dict, warmup: int) -> dict:
    """One pair of runs (launched back to back): the synchronous step split into generation and training, the
    async step and the request beside it, and the ratios (medians over each run's steps after the warm-up)."""

    def median(record, key):
        return statistics.median(record[key][warmup:])

    step, generation = median(sync, "steps"), median(sync, "requests")
    training = step - generation
    overlapped = median(asynchronous, "steps")
    return {
        "sync": step,
        "generation": generation,
        "training": training,
        "async": overlapped,
        "async request": median(asynchronous, "requests"),
        "wait": median(asynchronous, "waits"),
        "to max": overlapped / max(generation, training),
        "to sum": overlapped / step,
    }


def report(records: dict, args, delay: float, load_before: float, load_after: float) -> None:
    pairs = [pair_figures(s, a, args.warmup) for s, a in zip(records["sync"], records["async"])]

    def median(key):
        return statistics.median(p[key] for p in pairs)

    def spread(key):
        return f"pairs {min(p[key] for p in pairs):.2f}..{max(p[key] for p in pairs):.2f}"

    calibrated = " (a training step, calibrated)" if args.delay is None else ""
    print(
        f"async overlap: tiny model, {args.completions // 4} prompts x 4 completions of at most {args.tokens} "
        f"tokens a step; real vllm serve (CPU build, weight transfer left out), each request delayed {delay:g} s"
        f"{calibrated}; {args.runs} run(s) x {args.steps} steps a side, alternating, the first {args.warmup} of "
        f"each left out; OMP_NUM_THREADS={args.threads}; load average {load_before:.1f} before, {load_after:.1f} "
        f"after"
    )
    print(
        f"  synchronous step   {median('sync'):7.3f} s = generation {median('generation'):.3f} s + training "
        f"{median('training'):.3f} s"
    )
    print(
        f"  --async_generation {median('async'):7.3f} s  (its request took {median('async request'):.3f} s beside "
        f"training; a step waited {median('wait'):.3f} s for it)"
    )
    print(
        f"  async / max(generation, training)                        = {median('to max'):.2f}  "
        f"({spread('to max')}; target <= 1.2: {'met' if median('to max') <= 1.2 else 'MISSED'})"
    )
    print(
        f"  async / (generation + training) = async / synchronous step = {median('to sum'):.2f}  "
        f"({spread('to sum')}; target <= 0.8: {'met' if median('to sum') <= 0.8 else 'MISSED'})"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="training steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="steps left out at the start of each run")
    parser.add_argument(
        "--delay",
        type=float,
        help="seconds added to each generation request (default: a training step's time, measured "
        "first by a synchronous run without delay)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per side, alternating")
    parser.add_argument("--completions", type=int, default=16, help="completions a step (groups of 4)")
    parser.add_argument("--tokens", type=int, default=16, help="most tokens a completion")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the trainers")
    parser.add_argument("--model", help="the model to train (default: a tiny random one built here)")
    parser.add_argument("--server_url", help="a vLLM server already serving --model (default: start one)")
    parser.add_argument("--smoke", action="store_true", help="3 steps a side, delay 0.3 s, 1 run: that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.warmup, args.delay, args.runs = 3, 1, 0.3, 1
    if args.server_url and not args.model:
        parser.error("--server_url needs --model, the model that server serves")
    if args.steps < args.warmup + 2:
        parser.error("--steps must leave at least 2 steps after --warmup")

    print(f"$ python benchmarks/async_overlap.py {shlex.join(sys.argv[1:] if argv is None else argv)}")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="async-overlap-") as tmp:
        work = Path(tmp)
        model = args.model
        if model is None:
            model = str(work / "model")
            subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), model],
                check=True,
                capture_output=True,
                text=True,
            )
        trainer_cpus, server_cpus = cores() or (None, None)
        server, url = (
            (None, args.server_url) if args.server_url else start_server(model, work / "server.log", server_cpus)
        )
        try:
            delay = args.delay
            if delay is None:  # a training step's time: a synchronous run with no delay, less its generation
                calibration = run_side("calibration", model, url, work, 0, args, trainer_cpus, 0.0, args.warmup + 3)
                delay = round(
                    max(
                        0.1,
                        statistics.median(calibration["steps"][args.warmup :])
                        - statistics.median(calibration["requests"][args.warmup :]),
                    ),
                    1,
                )
            records = {side: [] for side in SIDES}
            for run in range(args.runs):
                for side in SIDES if run % 2 == 0 else reversed(SIDES):
                    records[side].append(run_side(side, model, url, work, run, args, trainer_cpus, delay, args.steps))
        finally:
            if server is not None:
                stop_server(server)
    load_after = os.getloadavg()

    report(records, args, delay, load_before[0], load_after[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
