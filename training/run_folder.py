"""The run folder and the callback that writes its logs.

<run>/config.yaml                every resolved setting; `--config <run>/config.yaml` repeats the run
<run>/trivial_shares.json        each problem's trivial share, measured once (--partial_credit above_trivial)
<run>/checkpoints/checkpoint-N/  TRL/transformers checkpoints (resumable)
<run>/logs/training_log.txt      one readable line per logged step
<run>/logs/metrics.jsonl         one JSON object per logged step (evaluations included)
<run>/logs/eval_results.json     every pass@k evaluation, appended
<run>/logs/eval_samples/step-N.jsonl   the evaluation's completions with their judgements
<run>/logs/eval_samples/step-N-eval_only.jsonl   the same for an `--eval_only` evaluation of the step's model
<run>/logs/problem_stats.jsonl   one line per training problem per step it was sampled (training/problem_records.py)
<run>/logs/canary/step-N.jsonl   completions that passed a canary, an impossible problem (training/canary.py)
<run>/final_model/               the trained model (or LoRA adapter) and tokenizer
"""

import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from transformers import TrainerCallback, TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from cli import UsageError

logger = logging.getLogger(__name__)

# training_log.txt lines that belong to a step (readable_line): "step N/M | ...", "eval step N/M | ...", "finished at
# step N/M | ...".
LOGGED_STEP = re.compile(r"^(?:eval |finished at )?step (\d+)/")
CONSTANT_SCHEDULES = ("constant", "constant_with_warmup")
OUTPUT_FILES = ("config.yaml", "logs/metrics.jsonl", "logs/eval_results.json", "final_model")


@dataclass(frozen=True)
class Resume:
    """The checkpoint a run resumes from (`RunFolder.resume` chooses it), its step, and why it was chosen."""

    checkpoint: str
    step: int
    why: str

    def continue_training(self, grpo, tracker) -> None:
        """What resuming changes before the trainer is built. --eval_on_start evaluated the model the run started
        from, which the run did before its first step; transformers would evaluate again at every resume, adding an
        entry at the checkpoint's step. The per-problem tracker takes back the difficulty filter's saved state."""
        grpo.eval_on_start = False
        tracker.restore(self.checkpoint)


class RunFolder:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.config = self.root / "config.yaml"
        self.trivial_shares = self.root / "trivial_shares.json"
        self.checkpoints = self.root / "checkpoints"
        self.logs = self.root / "logs"
        self.training_log = self.logs / "training_log.txt"
        self.metrics = self.logs / "metrics.jsonl"
        self.eval_results = self.logs / "eval_results.json"
        self.eval_samples = self.logs / "eval_samples"
        self.canary = self.logs / "canary"
        self.problem_stats = self.logs / "problem_stats.jsonl"
        self.final_model = self.root / "final_model"

    def holds_outputs(self) -> bool:
        started = any(self.checkpoints.glob(f"{PREFIX_CHECKPOINT_DIR}-*"))
        return started or any((self.root / name).exists() for name in OUTPUT_FILES)

    def latest_checkpoint(self) -> str | None:
        """The newest whole checkpoint. The trainer writes trainer_state.json last, so a checkpoint without a
        readable one was cut off while being saved (a run stopped by scancel or a kill) and is skipped."""
        steps = {}
        for path in self.checkpoints.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
            step = path.name.removeprefix(f"{PREFIX_CHECKPOINT_DIR}-")
            if step.isdigit() and _readable_state(path):
                steps[int(step)] = path
        return str(steps[max(steps)]) if steps else None

    def resolve_checkpoint(self, resume: str | None) -> str | None:
        """`latest` means the newest checkpoint of this run folder; anything else is a checkpoint path."""
        if resume is None:
            return None
        if resume == "latest":
            latest = self.latest_checkpoint()
            if latest is None:
                raise UsageError(
                    f"--resume_from_checkpoint latest: no checkpoint in {self.checkpoints}; start without it"
                )
            return latest
        if not (Path(resume) / TRAINER_STATE_NAME).exists():
            raise UsageError(f"--resume_from_checkpoint {resume}: not a checkpoint folder (no {TRAINER_STATE_NAME})")
        return resume

    def resume(self, grpo) -> Resume | None:
        """What this run resumes (``grpo.resume_from_checkpoint``; None: a new run), decided and checked before
        any model loads, and why, in a log line: `latest` is the newest whole checkpoint here, a path is that
        checkpoint, and its learning-rate schedule must reach ``grpo.max_steps``."""
        requested = grpo.resume_from_checkpoint
        checkpoint = self.resolve_checkpoint(requested)
        if checkpoint is None:
            return None
        scheduler = grpo.lr_scheduler_type
        self.check_resume_schedule(checkpoint, grpo.max_steps, getattr(scheduler, "value", scheduler))
        step = checkpoint_step(checkpoint)
        if requested == "latest":
            why = f"--resume_from_checkpoint latest: the newest whole checkpoint in {self.checkpoints}"
            cut_off = sorted(
                path.name for path in self.checkpoints.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if not _readable_state(path)
            )
            if cut_off:
                why += f" ({', '.join(cut_off)} skipped: cut off while being saved)"
        else:
            why = "named by --resume_from_checkpoint"
        resume = Resume(checkpoint, step, why)
        logger.info(
            "resuming from %s at step %d (%s); what was logged after step %d is dropped, and "
            "--eval_on_start is not repeated",
            checkpoint,
            step,
            why,
            step,
        )
        return resume

    def prepare(self, overwrite: bool, resume: Resume | None, evaluation_only: bool = False) -> None:
        """Create the folders, refusing to write a new run over a finished or started one (unless resuming it).

        An evaluation-only run appends to whatever the folder holds and needs only logs/.
        """
        resuming = resume is not None
        if self.holds_outputs() and not (overwrite or resuming or evaluation_only):
            raise UsageError(
                f"{self.root} already holds a run's outputs; pass --overwrite_output_dir, "
                f"--resume_from_checkpoint latest, or another --output_dir"
            )
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            if not evaluation_only:
                self.checkpoints.mkdir(exist_ok=True)
            probe = self.logs / f".write_test-{os.getpid()}"  # one per rank: ranks prepare the folder at once
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise UsageError(
                f"--output_dir {self.root}: cannot write there ({e.strerror}); choose a writable folder"
            ) from None
        if overwrite and not (resuming or evaluation_only):
            for path in (self.metrics, self.eval_results, self.training_log, self.problem_stats):
                path.unlink(missing_ok=True)

    def start(self, settings: dict, resume: Resume | None) -> None:
        """Before training (main process): every setting into config.yaml, and on resume the logs cut back to the
        checkpoint's step."""
        self.config.write_text(yaml.safe_dump(settings, sort_keys=True))
        if resume is not None:
            self.forget_after(resume.step)

    def last_step(self) -> int:
        """The step training reached: its newest checkpoint's, or the last step logged (the run's end is logged)."""
        steps = [checkpoint_step(latest)] if (latest := self.latest_checkpoint()) else []
        if self.metrics.exists():
            steps += [json.loads(line).get("step", 0) for line in self.metrics.read_text().splitlines() if line.strip()]
        return max(steps, default=0)

    def eval_samples_file(self, step: int, eval_only: bool, folder: Path | None = None) -> Path:
        """Where an evaluation's samples go (in ``folder``, default eval_samples/). Training's evaluation of a step
        owns `step-N.jsonl`; an `--eval_only` evaluation takes `step-N-eval_only.jsonl`, or the next free `-2`,
        `-3` ..., and never overwrites a file."""
        folder = folder or self.eval_samples
        if not eval_only:
            return folder / f"step-{step}.jsonl"
        path, copy = folder / f"step-{step}-eval_only.jsonl", 1
        while path.exists():
            copy += 1
            path = folder / f"step-{step}-eval_only-{copy}.jsonl"
        return path

    def canary_samples_file(self, step: int, eval_only: bool) -> Path:
        """Where the completions that passed a canary at an evaluation are kept (training/canary.py)."""
        return self.eval_samples_file(step, eval_only, self.canary)

    def read_eval_results(self) -> list[dict]:
        if not self.eval_results.exists():
            return []
        return json.loads(self.eval_results.read_text())

    def append_eval(self, entry: dict) -> None:
        """Append one evaluation; the file is replaced atomically, so it is valid JSON even if the run dies."""
        self._write_json_atomic(self.eval_results, self.read_eval_results() + [entry])

    def forget_after(self, step: int) -> None:
        """On resume from checkpoint `step`: drop what was logged after it, since training repeats those steps."""
        for path in (self.metrics, self.problem_stats):
            if path.exists():
                kept = [line for line in path.read_text().splitlines() if json.loads(line).get("step", 0) <= step]
                tmp = path.with_suffix(".tmp")
                tmp.write_text("".join(line + "\n" for line in kept))
                os.replace(tmp, path)
        if self.eval_results.exists():
            self._write_json_atomic(self.eval_results, [e for e in self.read_eval_results() if e["step"] <= step])
        kept = []
        if self.training_log.exists():
            for line in self.training_log.read_text().splitlines():
                logged = LOGGED_STEP.match(line)
                if logged is None or int(logged.group(1)) <= step:
                    kept.append(line)
        kept.append(f"--- resumed from checkpoint-{step} at {time.strftime('%Y-%m-%d %H:%M:%S')} ---")
        tmp = self.training_log.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, self.training_log)

    def check_resume_schedule(self, checkpoint: str, max_steps: int, scheduler: str) -> None:
        """A resumed run continues the checkpoint's learning-rate schedule, which ends at the step count it was
        saved with: more steps than that would train at the schedule's end rate (0 for the default linear decay)."""
        saved = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME)).max_steps
        if max_steps > 0 and max_steps != saved and scheduler not in CONSTANT_SCHEDULES:
            raise UsageError(
                f"--max_steps {max_steps}: {checkpoint} is from a run of {saved} steps, and its {scheduler} learning-"
                f"rate schedule ends there; resume with --max_steps {saved}, or train on from it as a new run "
                f"(--model {checkpoint} --output_dir NEW_FOLDER)"
            )

    @staticmethod
    def _write_json_atomic(path: Path, value) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(value, indent=1))
        os.replace(tmp, path)


def _readable_state(checkpoint: Path) -> bool:
    try:
        json.loads((checkpoint / TRAINER_STATE_NAME).read_text())
        return True
    except (OSError, ValueError):
        return False


def checkpoint_step(path: str) -> int:
    """The training step a checkpoint was taken at; 0 for a folder without a trainer state."""
    state = Path(path) / TRAINER_STATE_NAME
    return TrainerState.load_from_json(str(state)).global_step if state.exists() else 0


def run_of_model(model: str) -> Path | None:
    """The run folder that holds ``model`` as one of its checkpoints (`RUN/checkpoints/checkpoint-N`) or as its
    final model (`RUN/final_model`), recognised by the run's config.yaml; None for any other model."""
    path = Path(model).expanduser()
    if path.name == "final_model":
        root = path.parent
    elif path.parent.name == "checkpoints" and path.name.startswith("checkpoint-"):
        root = path.parent.parent
    else:
        return None
    return root if (root / "config.yaml").is_file() else None


def model_step(model: str) -> int:
    """The training step a model stands for: a checkpoint's own step, a run's final model the run's last step, and 0
    for a model that never trained in a run here."""
    if (Path(model) / TRAINER_STATE_NAME).exists():
        return checkpoint_step(model)
    root = run_of_model(model)
    return RunFolder(root).last_step() if root else 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


READABLE_KEYS = (
    "reward",
    "reward_std",
    "rewards/test_cases/mean",
    "rewards/format/mean",
    "status/passed",
    "status/syntax_error",
    "status/timeout",
    "hidden_tests/failed_share",
    "frac_reward_zero_std",
    "difficulty/settled",
    "kl",
    "entropy",
    "completions/mean_length",
    "learning_rate",
    "step_time",
    "async/generation_wait_s",
)


def readable_line(step: int, max_steps: int, logs: dict, keys: tuple[str, ...] = READABLE_KEYS) -> str:
    """One line of training_log.txt: the numbers a person watches (all of them are in metrics.jsonl). An
    evaluation shows its pass@k and mean reward; the summary transformers logs when training ends, its run time."""
    if "train_runtime" in logs:
        return f"finished at step {step}/{max_steps} | train_runtime={_fmt(logs['train_runtime'])}s"
    shown = [k for k in logs if k.startswith("eval_pass@") or k in ("eval_mean_reward", "eval_canary/pass_rate")] or [
        k for k in keys if k in logs
    ]
    parts = [f"{k}={_fmt(logs[k])}" for k in shown if logs[k] is not None]
    kind = "eval " if any(k.startswith("eval_") for k in logs) else ""
    return f"{kind}step {step}/{max_steps} | " + " ".join(parts)


class RunLogCallback(TrainerCallback):
    """Writes every logged step to logs/metrics.jsonl and logs/training_log.txt (main process only)."""

    def __init__(self, run: RunFolder):
        self.run = run

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        record = {k: v for k, v in logs.items() if not (isinstance(v, float) and math.isnan(v))}
        record = {"step": state.global_step, "time": round(time.time(), 3), **record}
        with self.run.metrics.open("a") as f:
            f.write(json.dumps(record) + "\n")
        with self.run.training_log.open("a") as f:
            shown = {k: v for k, v in record.items() if k not in ("step", "time")}
            f.write(readable_line(state.global_step, state.max_steps, shown) + "\n")
