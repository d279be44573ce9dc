"""--async_generation's parts that need no server: the schedule (training/async_generation.py) over fake
submit/collect/sync, the rows it chooses ahead against TRL's own dataloader, the sampling settings it sends against
TRL's own request, and the refusal outside server mode. The runs against the real `vllm serve` (two processes
under ZeRO-3, a kill and a resume, the benchmark's smoke size) are in tests/training/test_vllm.py."""

import threading
import time

import pytest

from cli import UsageError
from trainer_runs import run_trainer
from training.arguments import parse_args
from training.async_generation import Batch, OverlappedGeneration, RequestThread, RowSchedule


class FakeServer:
    """submit/collect/sync as the trainer gives them to the schedule, recording each call and failing the test
    on a sync or a second request while a request is in flight."""

    def __init__(self):
        self.events: list[tuple] = []
        self.in_flight: int | None = None
        self.step = 0

    def submit(self, batch: Batch):
        assert self.in_flight is None, f"generation {batch.generation} submitted while {self.in_flight} is in flight"
        self.in_flight = batch.generation
        self.events.append(("submit", batch.generation))
        return {"generation": batch.generation, "weights": self.step}

    def collect(self, handle):
        assert self.in_flight == handle["generation"]
        self.in_flight = None
        self.events.append(("collect", handle["generation"]))
        return f"completions of {handle['generation']}", 0.5

    def sync(self):
        assert self.in_flight is None, f"weights synced while generation {self.in_flight} is in flight"
        self.events.append(("sync", self.step))

    def schedule(self) -> OverlappedGeneration:
        return OverlappedGeneration(submit=self.submit, collect=self.collect, sync=self.sync, step=lambda: self.step)


def train(server: FakeServer, steps: int, evaluate_at=(), save_at=(), first: int = 0) -> list:
    """The trainer's loop as the schedule sees it: one generation a step (TRL's default), then the step's
    training; an evaluation or a checkpoint after a step drains first; training's end closes the schedule."""
    overlap, received = server.schedule(), []
    server.step = first
    for step in range(first, steps):
        next_batch = Batch(step + 1, [step + 1]) if step + 1 < steps else None
        got = overlap.exchange(overlap.ahead or Batch(step, [step]), next_batch)
        assert got.output == f"completions of {step}"
        received.append(got)
        server.events.append(("train", step))
        server.step += 1
        if server.step in save_at:
            overlap.drain()
            server.events.append(("checkpoint", server.step))
        if server.step in evaluate_at:
            overlap.drain()
            server.sync()  # evaluation syncs and generates on its own
            server.events.append(("evaluate", server.step))
    overlap.close()
    assert server.in_flight is None
    return received


def test_each_step_collects_then_syncs_then_submits_the_next_batch_before_training():
    server = FakeServer()
    received = train(server, 4)
    assert server.events == [
        ("sync", 0),
        ("submit", 0),
        ("collect", 0),
        ("sync", 0),
        ("submit", 1),
        ("train", 0),
        ("collect", 1),
        ("sync", 1),
        ("submit", 2),
        ("train", 1),
        ("collect", 2),
        ("sync", 2),
        ("submit", 3),
        ("train", 2),
        ("collect", 3),
        ("sync", 3),
        ("train", 3),  # the last step submits nothing
    ]
    # the first batch is generated synchronously by the weights that train on it; every later one a step back
    assert [r.batch.generation for r in received] == [0, 1, 2, 3]
    assert [step - r.weights_step for step, r in enumerate(received)] == [0, 1, 1, 1]


def test_evaluation_and_checkpoint_drain_the_request_in_flight_and_its_step_uses_it():
    server = FakeServer()
    received = train(server, 4, evaluate_at=(2,), save_at=(2,))
    assert server.events[10:] == [
        ("collect", 2),
        ("checkpoint", 2),
        ("sync", 2),
        ("evaluate", 2),  # drained once, before both
        ("sync", 2),
        ("submit", 3),
        ("train", 2),  # step 2 trains the drained batch, asks for no other
        ("collect", 3),
        ("sync", 3),
        ("train", 3),
    ]
    assert received[2].wait_s == 0.0 and received[2].weights_step == 1  # still one step off-policy


def test_a_resumed_run_starts_with_a_synchronous_batch():
    server = FakeServer()
    received = train(server, 5, first=3)
    assert server.events[:5] == [("sync", 3), ("submit", 3), ("collect", 3), ("sync", 3), ("submit", 4)]
    assert [step - r.weights_step for step, r in zip((3, 4), received)] == [0, 1]


def test_training_stopped_early_drops_the_batch_in_flight():
    server = FakeServer()
    overlap = server.schedule()
    overlap.exchange(Batch(0, [0]), Batch(1, [1]))
    overlap.close()
    assert server.events[-1] == ("collect", 1) and overlap.ahead is None and server.in_flight is None


def test_a_batch_ahead_for_another_generation_is_an_error():
    overlap = FakeServer().schedule()
    overlap.exchange(Batch(0, [0]), Batch(1, [1]))
    with pytest.raises(RuntimeError, match="generation 1, but this step trains generation 2"):
        overlap.exchange(Batch(2, [2]), None)


def test_the_request_thread_makes_its_error_the_collectors():
    started = threading.Event()

    def request():
        started.set()
        time.sleep(0.05)
        raise ConnectionError("server gone")

    thread = RequestThread(request)
    assert started.wait(5)
    with pytest.raises(ConnectionError, match="server gone"):
        thread.result()
    value, seconds = RequestThread(lambda: 42).result()
    assert value == 42 and seconds >= 0


@pytest.mark.parametrize(
    "accumulation, steps_per_generation, max_steps, at_steps, expected",
    [
        (1, 1, 4, [0, 1, 2, 3], [(0, True), (1, True), (2, True), (3, False)]),  # TRL's default: one a step
        (2, 4, 6, [0, 2, 4], [(0, True), (1, True), (2, False)]),  # a generation every 2 optimizer steps
        (2, 4, 6, [3], [(2, True)]),  # resumed at step 3, between two generations: TRL generates at once, a new index
    ],
)
def test_a_generation_is_placed_in_the_run_as_trl_generates(
    accumulation, steps_per_generation, max_steps, at_steps, expected
):
    from types import SimpleNamespace

    from training.trainer import QGRPOTrainer

    args = SimpleNamespace(
        gradient_accumulation_steps=accumulation, steps_per_generation=steps_per_generation, num_iterations=1
    )
    found = []
    for step in at_steps:
        trainer = SimpleNamespace(args=args, state=SimpleNamespace(global_step=step, max_steps=max_steps), _step=0)
        found.append(QGRPOTrainer._generation_position(trainer))
    assert found == expected


@pytest.mark.slow
def test_rows_ahead_are_the_rows_trls_dataloader_yields_over_epochs_and_after_a_resume(tiny_model):
    """RowSchedule against the dataloader TRL builds for GRPOTrainer (prepared by accelerate, as training runs
    it), over three epochs, with each generation reused for two steps."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": f"problem {i}", "id": f"p{i}"} for i in range(7)]
    config = GRPOConfig(
        output_dir="/tmp/unused",
        per_device_train_batch_size=2,
        num_generations=2,
        steps_per_generation=2,
        gradient_accumulation_steps=1,
        num_iterations=2,
        seed=5,
        report_to=[],
        max_completion_length=4,
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=str(tiny_model),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=config,
        train_dataset=Dataset.from_list(rows),
    )
    loader = trainer.accelerator.prepare(trainer.get_train_dataloader())
    repeat = config.steps_per_generation * config.num_iterations
    seen = [batch for _ in range(3) for batch in loader]  # each pass is an epoch, as the trainer runs it
    generations = [[row["id"] for row in batch] for batch in seen[::repeat]]
    assert len(generations) == 9  # 2 prompts (of 7) a generation: 3 generations an epoch
    ahead = RowSchedule(trainer._get_train_sampler, config.generation_batch_size, repeat)
    ids = trainer.train_dataset["id"]
    assert [[ids[r] for r in ahead.rows(g)] for g in range(len(generations))] == generations
    resumed = RowSchedule(trainer._get_train_sampler, config.generation_batch_size, repeat)
    assert [ids[r] for r in resumed.rows(7)] == generations[7]
    assert [ids[r] for r in resumed.rows(2)] == generations[2]  # asked for an earlier one: replays from the start


def test_async_requests_carry_the_sampling_settings_trls_own_request_carries(monkeypatch):
    """The settings sent with --async_generation's request, against what TRL's VLLMGeneration.generate sends in
    server mode (one process) to a client that records it."""
    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration

    from training.trainer import server_sampling_params

    class Recorder:
        def generate(self, prompts, **kwargs):
            self.kwargs = kwargs
            n = kwargs["n"]
            return {
                "prompt_ids": prompts,
                "completion_ids": [[1]] * (len(prompts) * n),
                "logprobs": [[[-0.5]]] * (len(prompts) * n),
            }

    monkeypatch.setattr(VLLMGeneration, "_init_vllm", lambda self: None)
    generation = VLLMGeneration(
        model=None,
        accelerator=Accelerator(cpu=True),
        processing_class=None,
        mode="server",
        temperature=0.7,
        top_p=0.9,
        top_k=20,
        min_p=None,
        repetition_penalty=1.1,
        max_completion_length=33,
        logprobs=0,
        structured_outputs_regex="[a-z]+",
        generation_kwargs={"seed": 3},
    )
    generation.vllm_client = Recorder()
    generation.generate(prompts=[[5, 6], [5, 6], [7], [7]], images=None, num_generations=2)
    sent = generation.vllm_client.kwargs
    assert sent.pop("features") is None
    assert server_sampling_params(generation, 2) == sent


@pytest.mark.parametrize(
    "flags, problem",
    [
        (
            ["--use_vllm", "--vllm_mode", "colocate"],
            "needs --vllm_mode server, not colocate: colocated vLLM generates ",
        ),
        ([], "overlaps a vLLM server's generation with training, but vLLM is off: add --use_vllm"),
        (["--use_vllm", "--vllm_importance_sampling_correction", "false"], "corrects for: keep it on, or drop"),
    ],
)
def test_async_generation_outside_its_setting_is_a_usage_error(flags, problem):
    with pytest.raises(UsageError, match=problem):
        parse_args(["--async_generation", *flags])
    assert parse_args(["--async_generation", "--use_vllm"]).grpo.async_generation  # server mode is the default


@pytest.mark.slow
def test_async_generation_in_colocate_mode_exits_2_with_one_line_before_anything_starts(tmp_path, tiny_model):
    run = tmp_path / "run"
    started = time.monotonic()
    result = run_trainer(
        "--model",
        tiny_model,
        "--language",
        "python",
        "--output_dir",
        run,
        "--use_vllm",
        "--vllm_mode",
        "colocate",
        "--async_generation",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("rl_trainer.py: error: --async_generation needs --vllm_mode server, not colocate"), line
    assert not run.exists()
    assert time.monotonic() - started < 60
