"""A time bound on every request the trainer sends to the vLLM server (`--vllm_request_timeout`).

TRL 1.16's `VLLMClient` (trl/generation/vllm_client.py) sends all its requests after start-up (generation, server
info, weight-update start/finish/update, prefix-cache reset) through `client.session` with no timeout, and its retry
policy sends a request again after a failed read, up to five times. A server that accepts connections but never
answers (a wedged engine, a stuck NCCL call) therefore holds the main process in a socket read forever, and every
other rank with it in its next collective. `bound_session` gives each of those requests `timeout_s` to be
answered, does not resend a request that used it all up, and turns a timeout or an unreachable server into one
`VLLMServerUnresponsive` whose message names the server and how to check it.

Start-up requests (the health check, /v1/models, /server_info, the weight-transfer rendezvous) run inside
`GRPOTrainer.__init__`, before `QGRPOTrainer.__init__` can reach the client to bound it; the health check before
training (3 s, training/prerequisites.py) covers a server that is already dead or wedged then. Not covered: the
NCCL broadcast of the weights itself, which runs beside the /update_weights request and is no HTTP request.
"""

import inspect
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

_RETRY_SETTINGS = [name for name in inspect.signature(Retry.__init__).parameters if name != "self"]


class VLLMServerUnresponsive(RuntimeError):
    """A request to the vLLM server went unanswered for the whole bound, or the server could not be reached.

    `str()` is the one line to show the user; `server` is the server's base URL."""

    def __init__(self, server: str, method: str, url: str, timeout_s: float, error: requests.RequestException):
        self.server = server
        path = urlsplit(url).path or "/"
        if isinstance(error, requests.ConnectionError):
            what = f"failed {method} {path}: {_reason(error)}"
        else:
            what = f"did not answer {method} {path} within {timeout_s:g} s"
        super().__init__(
            f"the vLLM server at {server} {what}; check it with `curl {server}/health` and its log "
            f"(exps.sh writes final_outputs/<size>/vllm_server.log), restart it with scripts/serve_vllm.sh and "
            f"resume from the last checkpoint (--resume_from_checkpoint); if generation legitimately takes longer, "
            f"raise --vllm_request_timeout"
        )


def _reason(error: Exception) -> str:
    """The innermost cause of a connection failure, e.g. `[Errno 111] Connection refused`, without urllib3's
    pool and retry wrapping around it."""
    while True:
        inner = getattr(error, "reason", None) or (error.args[0] if error.args else None)
        if not isinstance(inner, Exception):
            break
        error = inner
    text = str(error)
    return text[text.find("[Errno") :] if "[Errno" in text else text.split(": ")[-1] or type(error).__name__


class _NoResendAfterTimeout(Retry):
    """TRL's retry policy, except that a request left unanswered for the whole timeout is not sent again: a wedged
    server would otherwise hold it for six timeouts, and a generation resent to a busy server only adds to its work.
    Refused connections and 5xx answers are still retried as TRL configured."""

    @classmethod
    def like(cls, retry: Retry) -> "_NoResendAfterTimeout":
        return cls(**{name: getattr(retry, name) for name in _RETRY_SETTINGS})

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if isinstance(error, ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def bound_session(session: requests.Session, server: str, timeout_s: float) -> requests.Session:
    """Bound every request sent through ``session`` (the vLLM client's) to ``timeout_s``; returns ``session``.

    Once bounded, a request that gets no answer within ``timeout_s``, or a server that cannot be reached, raises
    `VLLMServerUnresponsive` naming ``server`` out of the trainer's step. training/trainer.py finds TRL's client and
    hands its session here, inside the trainer's constructor."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    for adapter in session.adapters.values():
        if isinstance(adapter, HTTPAdapter):
            adapter.max_retries = _NoResendAfterTimeout.like(adapter.max_retries)
    send = session.request

    def request(method, url, **kwargs):
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = timeout_s
        try:
            return send(method, url, **kwargs)
        except (requests.Timeout, requests.ConnectionError) as error:
            raise VLLMServerUnresponsive(server, method, url, timeout_s, error) from error

    session.request = request
    return session
