"""scripts/slurm/train.sbatch on a real Slurm cluster: two slurmd daemons on this host (local_cluster.sh).

The CPU mode of the script goes through the same node roles, rendezvous and run folder as a GPU job; the GPU
layout itself is checked by its dry run against the commands docs/clusters.md documents.
"""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from accelerate.commands.launch import launch_command_parser

from conftest import ROOT
import launch_stand_ins
from trained_run_checks import assert_trained
from training import memory_plan
from training.arguments import parse_args
from training.run_folder import RunFolder
from warm_model import PYTHON_PROBLEMS as WARM_PYTHON_DATA

SBATCH = ROOT / "scripts" / "slurm" / "train.sbatch"
CLUSTER = ROOT / "scripts" / "slurm" / "local_cluster.sh"
SLURM_COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scancel", "scontrol")
SMALL = [
    "--max_completion_length",
    "16",
    "--num_generations",
    "4",
    "--per_device_train_batch_size",
    "2",
    "--gradient_accumulation_steps",
    "1",
    "--simple_eval_problems",
    "3",
    "--repeat_eval_problems",
    "2",
    "--eval_k",
    "1",
    "2",
    "--eval_max_tokens",
    "16",
]
JOB_TIMEOUT = 900


def slurm_missing() -> str | None:
    missing = [command for command in SLURM_COMMANDS if shutil.which(command) is None]
    if missing:
        return f"Slurm packages absent ({', '.join(missing)}); install them with scripts/install.sh --slurm"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd starts jobs as their user)"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A two-node cluster (n1, n2) on this host for the module; the environment that points Slurm's commands at
    it. Its daemons are stopped by their pid files afterwards."""
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    up = subprocess.run([str(CLUSTER), "up", str(folder)], capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"), "PYTHONPATH": str(ROOT)}
    finally:
        subprocess.run([str(CLUSTER), "down", str(folder)], capture_output=True, timeout=120)
    assert processes_mentioning(str(folder)) == [], "local_cluster.sh down left a daemon running"


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def submit(env, *args, nodes=2, output=os.devnull) -> str:
    result = subprocess.run(
        ["sbatch", "--parsable", f"-N{nodes}", "--output", str(output), str(SBATCH), *args],
        cwd=ROOT,
        env={**env, "MAIN_PORT": free_port()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def job_field(env, job, name) -> str:
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True, timeout=30
    ).stdout
    found = re.search(rf"\b{name}=(\S+)", shown)
    return found.group(1) if found else ""


def wait_for_job(env, job, timeout=JOB_TIMEOUT) -> tuple[str, str]:
    """The job's final state and exit code once it has left the queue's running states."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job_field(env, job, "JobState")
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", ""):
            return state, job_field(env, job, "ExitCode")
        time.sleep(1)
    subprocess.run(["scancel", job], env=env, timeout=30)
    raise AssertionError(f"job {job} did not end within {timeout}s")


def node_logs(run: Path) -> str:
    return "\n".join(f"== {log.name}\n{log.read_text()[-3000:]}" for log in sorted((run / "slurm").glob("*.log")))


def processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(word.decode(errors="replace") for word in words)
        if text in line and cmdline.parent.name != str(os.getpid()):
            found.append(f"{cmdline.parent.name}: {line[:200]}")
    return found


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def held_out_ids(data, n):
    from data import load_problems, split_problems

    _, test = split_problems(load_problems(str(data), "python"), 0.2, 42, 540, 40)
    return sorted(p.id for p in test[:n])


@pytest.mark.slow
def test_two_node_cpu_job_trains_one_run_under_zero3(slurm, warm_model, tmp_path):
    """Two trainer nodes, one process each, ZeRO-3 over the rendezvous, 2 steps and one evaluation. The warm model
    (tests/helpers/warm_model.py) passes about half its samples, so the group of 4 that spans both nodes carries signal."""
    run = tmp_path / "run"
    job = submit(
        slurm,
        "--cpu",
        "--model",
        str(warm_model),
        "--data",
        str(WARM_PYTHON_DATA),
        "--output-dir",
        str(run),
        "--",
        *SMALL,
        "--max_steps",
        "2",
        "--eval_steps",
        "2",
        "--save_steps",
        "2",
    )
    state, exit_code = wait_for_job(slurm, job)
    assert (state, exit_code) == ("COMPLETED", "0:0"), node_logs(run)

    assert sorted(log.name for log in (run / "slurm").glob("*.log")) == [f"{job}-n1.log", f"{job}-n2.log"]
    checkpoint = run / "checkpoints" / "checkpoint-2"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2
    shards = sorted(path.name for path in (checkpoint / "global_step2").glob("*optim_states.pt"))
    assert len(shards) == 2, f"one ZeRO-3 optimizer shard per node's process: {shards}"
    assert sorted(path.name for path in checkpoint.glob("rng_state_*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]
    assert_trained(run, warm_model)
    metrics = read_jsonl(run / "logs" / "metrics.jsonl")
    assert [m["step"] for m in metrics if "reward" in m] == [1, 2]
    assert [m["step"] for m in metrics if "eval_pass@1" in m] == [2]
    evaluations = json.loads((run / "logs" / "eval_results.json").read_text())
    assert [entry["step"] for entry in evaluations] == [2]
    evaluated = sorted(p["id"] for p in evaluations[0]["problems"])
    assert evaluated == held_out_ids(WARM_PYTHON_DATA, 3)  # each held-out problem once over both nodes


@pytest.mark.slow
def test_cancelled_job_leaves_no_process_and_resumes_from_its_newest_checkpoint(slurm, tmp_path):
    """From the tiny model the CPU mode builds into the run folder when given none; the resumed job reuses it."""
    run = tmp_path / "run"
    flags = [*SMALL, "--max_steps", "4", "--eval_steps", "4", "--save_steps", "1"]
    job = submit(slurm, "--cpu", "--output-dir", str(run), "--", *flags)
    deadline = time.monotonic() + JOB_TIMEOUT
    folder = RunFolder(run)
    while time.monotonic() < deadline and folder.latest_checkpoint() is None:
        assert job_field(slurm, job, "JobState") in ("PENDING", "CONFIGURING", "RUNNING"), node_logs(run)
        time.sleep(0.2)
    subprocess.run(["scancel", job], env=slurm, check=True, timeout=30)
    state, _ = wait_for_job(slurm, job)
    assert state == "CANCELLED"
    assert not (run / "final_model").exists(), "the job must be cancelled mid-run"
    assert (run / "slurm" / f"{job}-tiny_model.log").exists()

    deadline = time.monotonic() + 60  # Slurm's KillWait (10 s here) bounds how long a step may take to stop
    while processes_mentioning(str(run)) and time.monotonic() < deadline:
        time.sleep(1)
    assert processes_mentioning(str(run)) == []
    assert processes_mentioning(f"slurmstepd: [{job}") == []

    newest = folder.latest_checkpoint()
    step = json.loads((Path(newest) / "trainer_state.json").read_text())["global_step"]
    assert 1 <= step < 4
    job = submit(slurm, "--cpu", "--output-dir", str(run), "--", *flags, "--resume_from_checkpoint", "latest")
    state, exit_code = wait_for_job(slurm, job)
    assert (state, exit_code) == ("COMPLETED", "0:0"), node_logs(run)
    assert not (run / "slurm" / f"{job}-tiny_model.log").exists(), "the resumed job trains the same tiny model"
    assert f"resumed from checkpoint-{step}" in (run / "logs" / "training_log.txt").read_text()
    assert [m["step"] for m in read_jsonl(run / "logs" / "metrics.jsonl") if "reward" in m] == [1, 2, 3, 4]
    assert [entry["step"] for entry in json.loads((run / "logs" / "eval_results.json").read_text())] == [4]
    assert (run / "final_model" / "config.json").exists()


# On each node: a judge, held open until both nodes hold theirs, judging programs that print the uid they run as.
JUDGE_ON_A_NODE = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from judging import Judge, Test

    meeting, node = Path(sys.argv[1]), os.environ["SLURMD_NODENAME"]

    def meet(name):
        (meeting / f"{name}-{node}").touch()
        deadline = time.monotonic() + 120
        while len(list(meeting.glob(f"{name}-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)

    with Judge(timeout=5.0, workers=2, sandbox="bwrap") as judge:
        meet("open")
        test = Test("time.sleep(0.2)\\nprint(os.getuid())", "?")
        judgements = judge.run_many([("import os, time\\n", [test], "python")] * 6)
        seen = sorted({int(j.tests[0].stdout) for j in judgements})
        print(json.dumps({"node": node, "claimed": judge.setup.slots.uids.uids, "seen": seen, "folder": judge.setup.slots.base,
                          "folder_existed": os.path.isdir(judge.setup.slots.base)}))
        meet("done")
""")


@pytest.mark.slow
def test_two_judges_on_two_nodes_of_one_host_never_share_slot_uids_or_folders(slurm, tmp_path):
    """The judge runs on every training node; two nodes on one host hold their judges at the same time."""
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    result = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", sys.executable, "-c", JUDGE_ON_A_NODE, str(meeting)],
        cwd=ROOT,
        env=slurm,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = sorted((json.loads(line) for line in result.stdout.splitlines()), key=lambda r: r["node"])
    assert [r["node"] for r in reports] == ["n1", "n2"]
    for report in reports:
        assert len(report["claimed"]) == 2 and report["folder_existed"]
        assert report["seen"] and set(report["seen"]) <= set(report["claimed"]), "programs ran as the slot uids"
    assert not set(reports[0]["claimed"]) & set(reports[1]["claimed"])
    assert reports[0]["folder"] != reports[1]["folder"]


def docs_block(heading: str) -> list[str]:
    """The lines of the first ```text block after a heading of docs/clusters.md."""
    text = (ROOT / "docs" / "clusters.md").read_text()
    section = text[text.index(heading) :]
    block = section[section.index("```text\n") + len("```text\n") :]
    return block[: block.index("```")].splitlines()


GPU_LAYOUT = [
    "--dry-run",
    "--nodes",
    "gpu0,gpu1,gpu2",
    "--model",
    "/ckpts/q-32b-sft",
    "--preset",
    "32b",
    "--run-name",
    "q-grpo-32b",
    "--",
    "--use_wandb",
]


def test_gpu_layout_dry_run_is_what_the_docs_show():
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    result = subprocess.run([str(SBATCH), *GPU_LAYOUT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == docs_block("## Several nodes: Slurm")

    commands = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    server, *trainers = commands
    # Node 0 serves 32b in four tensor-parallel shards: two hold 119 of a step's 128 sequences at once.
    assert server == [
        "env",
        "VLLM_GPU=0,1,2,3",
        "VLLM_PORT=8000",
        "scripts/serve_vllm.sh",
        "/ckpts/q-32b-sft",
        "--preset",
        "32b",
        "--tensor_parallel_size",
        "4",
    ]
    assert len(trainers) == 2
    for rank, trainer in enumerate(trainers):
        # the address TRL's vLLM client gives the server for the weight-sync rendezvous: this node's
        assert trainer[:2] == ["env", f"VLLM_HOST_IP=gpu{rank + 1}"]
        launch = launch_command_parser().parse_args(trainer[4:])
        assert (launch.num_machines, launch.machine_rank, launch.num_processes) == (2, rank, 16)
        assert (launch.main_process_ip, launch.main_process_port) == ("gpu1", 29500)
        assert launch.config_file == "config/zero3.yaml" and launch.training_script == "rl_trainer.py"
        args = parse_args(launch.training_script_args)
        assert args.grpo.use_vllm and args.grpo.vllm_mode == "server"
        assert (args.grpo.vllm_server_host, args.grpo.vllm_server_port) == ("gpu0", 8000)
        assert args.model.model == "/ckpts/q-32b-sft" and args.data.use_reasoning_format
        assert args.run_dir == "final_outputs/slurm/q-grpo-32b" and args.grpo.run_name == "q-grpo-32b"
        assert args.logging.use_wandb


def test_one_node_splits_its_gpus_as_the_single_node_recipe():
    result = subprocess.run(
        [str(SBATCH), "--dry-run", "--nodes", "1", "--model", "/ckpts/q-7b-sft", "--preset", "7b"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    server, trainer = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    assert "VLLM_GPU=0" in server
    assert trainer[:9] == [
        "env",
        "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7",
        "VLLM_HOST_IP=node0",
        "accelerate",
        "launch",
        "--config-file",
        "config/zero3.yaml",
        "--num-processes",
        "7",
    ]
    assert "--num-machines" not in trainer
    args = parse_args(trainer[trainer.index("rl_trainer.py") + 1 :])
    assert args.grpo.vllm_server_host == "localhost"


SIZES = ["1.5b", "3b", "7b", "14b", "32b"]


def sbatch_dry_run(*args, env=None):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    layout = {
        name: ""
        for name in (
            "GPU_MEMORY_GIB",
            "VLLM_GPU",
            "VLLM_TENSOR_PARALLEL_SIZE",
            "ACCELERATE_CONFIG",
            "NCCL_P2P_DISABLE",
            "MAX_MODEL_LEN",
        )
    }
    return subprocess.run(
        [str(SBATCH), "--dry-run", *args],
        cwd=ROOT,
        env={**clean, **layout, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("memory", ["79.6", "140.4"])  # GiB: GPUs of 80 GB and 141 GB
@pytest.mark.parametrize("nodes", ["1", "3"])
@pytest.mark.parametrize("size", SIZES)
def test_every_size_fits_the_slurm_layouts(size, nodes, memory):
    """One node splits as exps.sh does (32b on 80 GB: a two-GPU server, six trainers with the optimizer offloaded);
    on three nodes node 0 serves with as many shards as hold a step and 16 GPUs train without offloading."""
    result = sbatch_dry_run(
        "--nodes",
        nodes,
        "--model",
        f"/ckpts/q-{size}-sft",
        "--preset",
        size,
        env={"GPU_MEMORY_GIB": memory, "MAX_MODEL_LEN": "8192"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("#   memory plan: ") and not [line for line in lines if "warning" in line]
    server, *trainers = [shlex.split(line[2:]) for line in lines if line.startswith("+ ")]
    server_gpus = server[1].removeprefix("VLLM_GPU=").split(",")
    tensor_parallel_size = int(server[-1]) if "--tensor_parallel_size" in server else 1
    assert len(server_gpus) == tensor_parallel_size
    for trainer in trainers:
        config = trainer[trainer.index("--config-file") + 1]
        processes = int(trainer[trainer.index("--num-processes") + 1])
        if nodes == "1":
            training_gpus = trainer[1].removeprefix("CUDA_VISIBLE_DEVICES=").split(",")
            assert not set(training_gpus) & set(server_gpus) and len(training_gpus) == 8 - tensor_parallel_size
            assert processes == len(training_gpus)
        else:
            assert processes == 16
        offloads = size == "32b" and memory == "79.6" and nodes == "1"
        assert config == ("config/zero3_offload_optimizer.yaml" if offloads else "config/zero3.yaml")
        # a server of two or more shards exactly where one GPU's KV cache cannot hold the step's sequences at once
        one_gpu = memory_plan.plan_launch(
            *memory_plan.model_shape(None, size)[:1],
            memory_plan.settings_from_flags(size, [])[0],
            memory_plan.Hardware(8, float(memory), int(nodes)),
            memory_plan.Choice(
                tensor_parallel_size=1, max_model_len=8192, accelerate_config="config/zero3_offload.yaml"
            ),
        )
        assert (tensor_parallel_size >= 2) is (one_gpu.waves > 1)
    if size == "32b" and memory == "79.6":
        assert tensor_parallel_size >= 2


@pytest.mark.parametrize("value", ["", "1"])
def test_nccl_p2p_disable_goes_to_the_server_and_the_trainers_or_neither(value):
    result = sbatch_dry_run("--nodes", "2", "--model", "m", "--preset", "7b", env={"NCCL_P2P_DISABLE": value})
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line[2:]) for line in result.stdout.splitlines() if line.startswith("+ ")]
    assert len(commands) == 2
    assert all((f"NCCL_P2P_DISABLE={value}" in command) is bool(value) for command in commands)


def test_a_layout_that_does_not_fit_stops_the_job_with_one_line():
    result = sbatch_dry_run(
        "--nodes", "1", "--model", "m", "--preset", "32b", "--accelerate-config", "config/zero3.yaml"
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "train.sbatch: 32b: on 1 node of 8 x 79.6 GiB GPUs: training needs 92.6 GiB per GPU of 71.6 (0.9 x 79.6) "
        "under config/zero3.yaml; fix: the optimizer in host RAM, ACCELERATE_CONFIG=config/zero3_offload_optimizer.yaml"
    ]


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--dry-run", "--nodes", "3"], {}, "name the model to train: --model"),
        (["--dry-run", "--nodes", "3", "--model", "m", "--preset", "9b"], {}, "--preset 9b: no such preset"),
        (["--dry-run", "--nodes", "3", "--model", "m", "--bogus"], {}, "unknown argument '--bogus'"),
        (["--dry-run", "--cpu", "--nodes", "2"], {"VLLM_WAIT": "soon"}, "VLLM_WAIT takes a whole number"),
        (["--cpu"], {}, "not in a Slurm job; submit it with sbatch"),
        (["--dry-run", "--nodes", "1", "--model", "m"], {"GPUS_PER_NODE": "1"}, "leaves no GPU to train on"),
    ],
)
def test_bad_settings_stop_with_one_line(args, env, message):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    result = subprocess.run(
        [str(SBATCH), *args], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_latest_checkpoint_skips_one_cut_off_while_saving(tmp_path):
    """trainer_state.json is written last: a newer checkpoint without a readable one was being saved when the job
    stopped, and resuming takes the one before it."""
    folder = RunFolder(tmp_path)
    for step, state in ((2, '{"global_step": 2}'), (3, '{"global_st'), (4, None)):
        checkpoint = folder.checkpoints / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        if state is not None:
            (checkpoint / "trainer_state.json").write_text(state)
    assert folder.latest_checkpoint() == str(folder.checkpoints / "checkpoint-2")
    assert folder.resolve_checkpoint("latest") == str(folder.checkpoints / "checkpoint-2")
    assert folder.holds_outputs()


@pytest.mark.slow
def test_exps_slurm_runs_the_gpu_layout_with_node_0s_server(slurm, tmp_path):
    """exps.sh --slurm --nodes 2 for two sizes: two real jobs of train.sbatch's GPU layout, with stand-ins for vLLM
    and accelerate (tests/helpers/launch_stand_ins.py). In each, node 0 serves, the job waits for its /health, the trainer
    node reaches it at node 0's address, and the server is stopped when training ends."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "config", checkout / "config")
    shutil.copytree(ROOT / "scripts", checkout / "scripts", ignore=shutil.ignore_patterns("*.py"))
    shutil.copy2(ROOT / "exps.sh", checkout / "exps.sh")
    (checkout / "training").mkdir()
    for name in ("__init__.py", "memory_plan.py", "arguments.py"):  # the launchers' memory plan, and its defaults
        shutil.copy2(ROOT / "training" / name, checkout / "training" / name)
    (checkout / "rl_trainer.py").write_text("# never run: the accelerate stand-in takes its place\n")
    bin_dir, record = tmp_path / "bin", tmp_path / "launches.txt"
    launch_stand_ins.install(bin_dir, record)
    port = free_port()
    env = {
        **slurm,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VLLM_PORT": port,
        "CKPT_1_5B": "/ckpts/a",
        "CKPT_3B": "/ckpts/b",
    }
    result = subprocess.run(
        ["./exps.sh", "--slurm", "--nodes", "2", "--name", "t", "1.5b", "3b"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    jobs = re.findall(r"^Submitted batch job (\d+)$", result.stdout, flags=re.M)
    assert len(jobs) == 2
    for job in jobs:
        state, exit_code = wait_for_job(slurm, job, timeout=300)
        output = (checkout / f"slurm-{job_field(slurm, job, 'JobName')}-{job}.out").read_text()
        assert (state, exit_code) == ("COMPLETED", "0:0"), output
        assert "# n1 (node 0): vLLM server; the trainers start once http://127.0.0.1:" in output
    assert record.read_text().splitlines() == [
        "/ckpts/a served=/ckpts/a rank=- gpus=-",
        "/ckpts/b served=/ckpts/b rank=- gpus=-",
    ]
    for size in ("1.5b", "3b"):
        logs = list((checkout / "final_outputs" / "t" / size / "non_reasoning" / "slurm").glob("*-n1-vllm.log"))
        assert len(logs) == 1 and "VLLM_SERVER_DEV_MODE=1 vllm serve" in logs[0].read_text()
    assert processes_mentioning(str(bin_dir / "vllm")) == [], "the job left its server running"


@pytest.mark.slow
@pytest.mark.parametrize(
    "server, wait, message",
    [
        (
            "import sys; sys.exit(1)",
            "1800",
            "the vLLM server on n1 exited before answering http://127.0.0.1:{port}/health",
        ),
        ("import time; time.sleep(600)", "5", "no answer from http://127.0.0.1:{port}/health after 5s"),
    ],
    ids=["server-exits", "server-silent"],
)
def test_a_server_that_never_answers_stops_the_job_with_one_line(slurm, tmp_path, server, wait, message):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launch_stand_ins.write_executable(bin_dir / "vllm", f"#!{sys.executable}\n# Stand-in, not vLLM.\n{server}\n")
    port, output = free_port(), tmp_path / "job.out"
    env = {**slurm, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VLLM_PORT": port, "VLLM_WAIT": wait}
    job = submit(env, "--model", "/ckpts/a", "--output-dir", str(tmp_path / "run"), output=output)
    state, exit_code = wait_for_job(slurm, job, timeout=300)
    assert (state, exit_code) == ("FAILED", "1:0")
    errors = [line for line in output.read_text().splitlines() if line.startswith("train.sbatch:")]
    assert len(errors) == 1 and errors[0].startswith(f"train.sbatch: {message.format(port=port)}; see ")
    assert not list((tmp_path / "run" / "slurm").glob("*-n2.log")), "no trainer starts without a server"
    assert processes_mentioning(str(bin_dir / "vllm")) == []


@pytest.mark.slow
def test_scancel_stops_the_server_and_the_trainers_of_the_gpu_layout(slurm, tmp_path):
    """Stand-ins (tests/helpers/launch_stand_ins.py) for vLLM and for a trainer that never ends: once the trainer has
    reached the server, scancel leaves neither running."""
    bin_dir, record = tmp_path / "bin", tmp_path / "launches.txt"
    launch_stand_ins.install(bin_dir, record)
    accelerate = (bin_dir / "accelerate").read_text()
    (bin_dir / "accelerate").write_text(accelerate + "import time\ntime.sleep(600)\n")
    env = {**slurm, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VLLM_PORT": free_port()}
    job = submit(env, "--model", "/ckpts/a", "--output-dir", str(tmp_path / "run"))
    deadline = time.monotonic() + 120
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert record.read_text() == "/ckpts/a served=/ckpts/a rank=- gpus=-\n"
    assert len(processes_mentioning(str(bin_dir))) >= 2, "the server and the trainer run"
    subprocess.run(["scancel", job], env=slurm, check=True, timeout=30)
    assert wait_for_job(slurm, job)[0] == "CANCELLED"
    deadline = time.monotonic() + 60
    while processes_mentioning(str(bin_dir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert processes_mentioning(str(bin_dir)) == []


@pytest.mark.slow
def test_a_folder_holding_a_run_stops_the_job_before_any_step_starts(slurm, tmp_path):
    run, output = tmp_path / "run", tmp_path / "job.out"
    (run / "checkpoints").mkdir(parents=True)
    job = submit(slurm, "--cpu", "--output-dir", str(run), output=output)
    assert wait_for_job(slurm, job, timeout=120) == ("FAILED", "2:0")
    assert output.read_text().splitlines()[-1] == (
        f"train.sbatch: {run} already holds a run; pass another --output-dir, or -- --resume_from_checkpoint latest"
    )
    assert not (run / "slurm").exists() and not (run / "tiny_model").exists()
