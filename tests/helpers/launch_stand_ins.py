"""STAND-INS for `vllm` and `accelerate`, NOT those programs: executables put first on PATH so exps.sh and
scripts/slurm/train.sbatch can run their GPU layout where there is no GPU.

`vllm serve MODEL --port PORT` answers GET /health with MODEL until it is stopped. `accelerate launch ...
rl_trainer.py ...` asks the server at --vllm_server_host/--vllm_server_port for /health, writes the
--output_dir's config.yaml (the first thing the trainer writes), and appends one line to the record:
`MODEL served=<what /health answered> rank=<--machine-rank or -> gpus=<CUDA_VISIBLE_DEVICES or ->`.
"""

import stat
import sys
import textwrap
from pathlib import Path

VLLM = """\
    #!{python}
    # Stand-in for `vllm serve MODEL --port PORT`, not vLLM: answers /health with the model it was given.
    import http.server, sys
    model = sys.argv[sys.argv.index("serve") + 1]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(model.encode())
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("0.0.0.0", port), Health).serve_forever()
    """

ACCELERATE = """\
    #!{python}
    # Stand-in for `accelerate launch`, not accelerate: records the server it reached and its rank.
    import os, pathlib, sys, urllib.request
    def flag(name, default="-"):
        return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default
    host, port = flag("--vllm_server_host", "127.0.0.1"), flag("--vllm_server_port")
    host = "127.0.0.1" if host in ("localhost", "0.0.0.0") else host
    served = urllib.request.urlopen(f"http://{{host}}:{{port}}/health").read().decode()
    output = pathlib.Path(flag("--output_dir"))
    output.mkdir(parents=True, exist_ok=True)
    (output / "config.yaml").write_text("stand-in: true\\n")
    with open({record!r}, "a") as f:
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "-")
        f.write(f"{{flag('--model')}} served={{served}} rank={{flag('--machine-rank')}} gpus={{gpus}}\\n")
    """


def write_executable(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def install(bin_dir: Path, record: Path) -> None:
    """Write the `vllm` and `accelerate` stand-ins into bin_dir; the accelerate one appends to record."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    write_executable(bin_dir / "vllm", VLLM.format(python=sys.executable))
    write_executable(bin_dir / "accelerate", ACCELERATE.format(python=sys.executable, record=str(record)))
