"""training/vllm_timeout.py, through training/trainer.py's bound_vllm_client, against a real loopback HTTP server
and TRL's real VLLMClient. The whole trainer against the real vLLM server stopped mid-run: tests/training/test_vllm.py.

The server below is a stand-in for vLLM, not vLLM: it answers /health and /v1/models as vLLM does, so that a
VLLMClient can be built against it, and then accepts every other request and never answers it (a wedged server),
or answers it after a delay (a slow but healthy one), which a real server cannot be made to do on cue. The
client's constructor checks that vLLM is installed, so that check is lifted while the client is built (these tests
run where vLLM is not installed too). Everything stays on 127.0.0.1.
"""

import inspect
import json
import socket
import threading
import time

import pytest
import requests
from trl.generation import vllm_client, vllm_generation
from trl.trainer import grpo_trainer

from training.trainer import bound_vllm_client
from training.vllm_timeout import VLLMServerUnresponsive, bound_session

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


@pytest.mark.slow
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
