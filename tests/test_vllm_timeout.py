"""training/vllm_timeout.py, through training/trainer.py's bound_vllm_client, against a real loopback HTTP server
and TRL's real VLLMClient; and the real rl_trainer.py in server mode against the same server.

The server below is a stand-in for vLLM, not vLLM: it answers /health and /v1/models as vLLM does, so that a
VLLMClient can be built against it, and then accepts every other request and never answers it (a wedged server),
or answers it after a delay (a slow but healthy one), or serves one training step and then goes silent. vLLM is not
installed here; the client's constructor only checks that it is, so that check is lifted while the client is
built, and the trainer runs with tests/vllm_stand_in/ (a stand-in package named vllm that says what it is) on its
path. Everything stays on 127.0.0.1.
"""

import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests
from transformers import AutoModelForCausalLM
from trl.generation import vllm_client, vllm_generation
from trl.trainer import grpo_trainer

from conftest import ROOT
from trained_run_checks import assert_moved
from training.trainer import bound_vllm_client
from training.vllm_timeout import VLLMServerUnresponsive, bound_session
from warm_model import PYTHON_COMPLETIONS, PYTHON_PROBLEMS as WARM_PYTHON_DATA

STAND_IN = ROOT / "tests" / "vllm_stand_in"

ANSWERED = {"/health": b"", "/v1/models": json.dumps({"data": [{"id": "stand-in"}]}).encode()}
COMPLETION = json.dumps({"choices": [{"prompt_token_ids": [1, 2], "token_ids": [3, 4], "logprobs": None}]}).encode()


class LoopbackServer:
    """Answers ANSWERED paths at once; any other request is recorded and then left unanswered, or answered with a
    completion after `answer_after` seconds when that is set."""

    def __init__(self, answer_after: float | None = None):
        self.answer_after = answer_after
        self.requests: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket):
        reader = connection.makefile("rb")
        try:
            while True:
                request_line = reader.readline().decode().strip()
                if not request_line:
                    return
                headers = {}
                for line in iter(reader.readline, b"\r\n"):
                    name, _, value = line.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = reader.read(int(headers.get("content-length", 0)))
                method, path, _ = request_line.split(" ", 2)
                self.requests.append(f"{method} {path}")
                answer = self.respond(path.split("?")[0], body)
                if answer is None:
                    self.stopped.wait()  # wedged: the connection stays open and silent
                    return
                self._answer(connection, answer)
        except OSError:
            return

    def respond(self, path: str, body: bytes) -> bytes | None:
        """The answer to a request, or None to leave it unanswered."""
        if path in ANSWERED:
            return ANSWERED[path]
        if self.answer_after is not None:
            time.sleep(self.answer_after)
            return COMPLETION
        return None

    @staticmethod
    def _answer(connection: socket.socket, body: bytes):
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        connection.sendall(head.encode() + body)

    def stop(self):
        """Stop listening and drop every connection: from now on the server is gone."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way; close() alone would leave it
        self.listener.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def make_client(monkeypatch):
    servers = []

    def make(answer_after: float | None = None):
        server = LoopbackServer(answer_after)
        servers.append(server)
        monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *args, **kwargs: True)
        client = vllm_client.VLLMClient(base_url=server.url)
        monkeypatch.undo()
        return server, client

    yield make
    for server in servers:
        server.stop()


def raises_within(seconds: float, call, *args) -> tuple[VLLMServerUnresponsive, float]:
    """Run `call` in a thread, so that a client that hangs fails the test after `seconds` instead of hanging it."""
    outcome = {}

    def run():
        try:
            outcome["returned"] = call(*args)
        except Exception as error:  # noqa: BLE001 - whatever it is, the assertions below name it
            outcome["raised"] = error

    start = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    elapsed = time.monotonic() - start
    assert not worker.is_alive(), f"still waiting on the server after {seconds} s"
    assert isinstance(outcome.get("raised"), VLLMServerUnresponsive), outcome
    return outcome["raised"], elapsed


def test_a_silent_server_stops_generation_with_one_line_naming_it(make_client):
    server, client = make_client()
    assert bound_vllm_client(client, 0.5) is client
    error, elapsed = raises_within(10, client.generate, ["solve:{sum x}"])
    assert elapsed >= 0.5
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"the vLLM server at {server.url} did not answer POST /v1/completions within 0.5 s")
    assert f"`curl {server.url}/health`" in message and "--vllm_request_timeout" in message
    assert error.server == server.url
    assert server.requests.count("POST /v1/completions") == 1, "a request that used up its time was sent again"


def test_weight_updates_and_cache_resets_are_bounded_too(make_client):
    server, client = make_client()
    bound_vllm_client(client, 0.3)
    error, _ = raises_within(10, client.update_named_params, [("w", "float32", [1])], iter([]))
    assert "POST /start_weight_update within 0.3 s" in str(error)
    error, _ = raises_within(10, client.reset_prefix_cache)
    assert "POST /reset_prefix_cache" in str(error)
    error, _ = raises_within(10, client.get_world_size)
    assert "GET /get_world_size" in str(error)


def test_a_server_that_went_away_is_named_too(make_client):
    server, client = make_client()
    # TRL waits 0+4+8+16+32 s between its connection retries; without that back-off the test need not wait a minute.
    for adapter in client.session.adapters.values():
        adapter.max_retries = adapter.max_retries.new(backoff_factor=0)
    bound_vllm_client(client, 5)
    server.stop()
    error, _ = raises_within(10, client.generate, ["x"])
    assert str(error).startswith(f"the vLLM server at {server.url} failed POST /v1/completions: ")
    assert "Connection refused" in str(error) and "\n" not in str(error)


def test_a_slow_answer_within_the_bound_still_arrives(make_client):
    server, client = make_client(answer_after=0.5)
    bound_vllm_client(client, 5)
    assert client.generate(["x"])["completion_ids"] == [[3, 4]]
    assert server.requests[-1] == "POST /v1/completions"


def test_without_the_bound_trl_waits_on_a_silent_server(make_client):
    """The defect this module exists for: TRL's own client is still waiting after several seconds, neither
    answered nor failed."""
    server, client = make_client()
    outcome = {}

    def ask():
        try:
            outcome["returned"] = client.get_world_size()
        except requests.RequestException as error:
            outcome["raised"] = error

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(3)
    assert asking.is_alive() and not outcome, outcome
    assert server.requests[-1] == "GET /get_world_size"


def test_the_client_keeps_its_session_where_the_bound_reaches_it():
    """Where TRL 1.16 builds the client, and what bound_vllm_client reaches into; a TRL that moves them fails here."""
    assert "self.vllm_generation = VLLMGeneration(" in inspect.getsource(grpo_trainer.GRPOTrainer.__init__)
    assert "self.vllm_client = VLLMClient(" in inspect.getsource(vllm_generation.VLLMGeneration._init_vllm)
    assert "self.session = requests.Session()" in inspect.getsource(vllm_client.VLLMClient.__init__)


def test_rejects_a_bound_that_is_no_bound():
    with pytest.raises(ValueError, match="positive"):
        bound_session(requests.Session(), "http://127.0.0.1:1", 0)


class ServerThatGoesSilent(LoopbackServer):
    """Serves one whole training step as a vLLM server would (the weight-sync requests, one generation whose samples
    alternate between `completions`, given as token ids), then answers nothing but /health."""

    def __init__(self, tokenizer, completions: list[list[int]]):
        super().__init__()
        self.tokenizer = tokenizer
        self.completions = completions
        self.generated = False

    def respond(self, path: str, body: bytes) -> bytes | None:
        if path in ANSWERED:
            return ANSWERED[path]
        if self.generated:
            return None
        if path != "/v1/completions":
            return b"{}"  # weight-update start, tensors, finish; prefix-cache reset
        self.generated = True
        request = json.loads(body)
        prompts = [p if isinstance(p, list) else self.tokenizer(p, add_special_tokens=False)["input_ids"]
                   for p in request["prompt"]]
        choices = []
        for prompt in prompts:
            for i in range(request["n"]):
                ids = self.completions[i % len(self.completions)]
                # The sampled tokens' log-probabilities, as vLLM sends them with return_tokens_as_token_ids.
                logprobs = {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-0.05] * len(ids),
                            "top_logprobs": [None] * len(ids)}
                choices.append({"prompt_token_ids": prompt, "token_ids": ids, "logprobs": logprobs})
        return json.dumps({"choices": choices}).encode()


@pytest.mark.slow
def test_grpo_trainer_stops_with_one_line_and_a_whole_checkpoint_when_the_server_goes_silent(warm_model, tmp_path):
    """The real rl_trainer.py in server mode (tests/vllm_stand_in/run_trainer.py leaves out only the NCCL group,
    which needs CUDA), through TRL's real client: step 1 is served and saved, step 2's first request is not
    answered, and the run stops with one line and exit 1, its checkpoint-1 whole."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    completions = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                   for text in PYTHON_COMPLETIONS]
    server = ServerThatGoesSilent(tokenizer, completions)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STAND_IN), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = tmp_path / "run"
    try:
        result = subprocess.run(
            [sys.executable, str(STAND_IN / "run_trainer.py"), "--model", str(warm_model), "--data",
             str(WARM_PYTHON_DATA), "--language", "python", "--output_dir", str(run), "--max_steps", "3",
             "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
             "--max_completion_length", "16", "--eval_pass_at_k", "false", "--save_steps", "1", "--use_vllm",
             "--vllm_mode", "server", "--vllm_server_base_url", server.url, "--vllm_request_timeout", "2",
             "--vllm_importance_sampling_correction", "false"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    finally:
        server.stop()
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("rl_trainer.py: ")]
    assert line.startswith(f"rl_trainer.py: the vLLM server at {server.url} did not answer POST /"), line
    assert " within 2 s; check it with " in line and "--vllm_request_timeout" in line
    silent = server.requests[server.requests.index("POST /v1/completions") + 1:]
    assert len(silent) == 1, server.requests  # one unanswered request, not resent
    assert sorted(path.name for path in (run / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1"]
    checkpoint = run / "checkpoints/checkpoint-1"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 1
    assert_moved(warm_model, checkpoint)  # step 1 trained on the served samples, half of them passing
    _, loading = AutoModelForCausalLM.from_pretrained(checkpoint, output_loading_info=True)
    assert not any(loading.values()), loading
    assert not (run / "final_model").exists()
