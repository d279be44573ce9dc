"""training/trainer.py, the one file that touches TRL's internals: an upgrade that removes one of them fails here,
naming it, instead of failing silently or deep inside a step on a GPU node."""

import re

import pytest
import trl
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from training import trainer as seam
from conftest import ROOT
from training.trainer import TRL_INTERNALS, QGRPOTrainer, TrlInternalsChanged, missing_trl_internals


def build(tiny_model, tmp_path):
    async def reward(prompts, completions, **kwargs):
        return [0.0 for _ in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        report_to=[],
        use_cpu=True,
    )
    return QGRPOTrainer(
        model=str(tiny_model),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "p", "id": "a"}] * 2),
    )


def test_the_installed_trl_is_the_pinned_one_and_has_every_name_relied_on(tiny_model, tmp_path):
    assert trl.__version__ == seam.TRL_VERSION, "requirements.txt pins another TRL than training/trainer.py names"
    assert missing_trl_internals() == []
    assert missing_trl_internals(build(tiny_model, tmp_path)) == []


def test_a_removed_method_is_named_before_the_trainer_is_built(monkeypatch, tiny_model, tmp_path):
    monkeypatch.delattr(GRPOTrainer, "_calculate_rewards")
    with pytest.raises(TrlInternalsChanged, match=r"lacks GRPOTrainer\._calculate_rewards, which training/trainer"):
        build(tiny_model, tmp_path)


def test_a_removed_attribute_is_named_once_the_trainer_is_built(monkeypatch, tiny_model, tmp_path):
    original = GRPOTrainer.__init__

    def init_without_metrics(self, *args, **kwargs):
        original(self, *args, **kwargs)
        del self._metrics

    monkeypatch.setattr(GRPOTrainer, "__init__", init_without_metrics)
    with pytest.raises(TrlInternalsChanged, match=r"lacks GRPOTrainer\._metrics.*pip install -r requirements.txt"):
        build(tiny_model, tmp_path)


def sets_nothing(self, *args, **kwargs):
    """Stands in for a method of TRL's that an upgrade changed so that it no longer sets the attribute."""


@pytest.mark.parametrize("internal", TRL_INTERNALS, ids=str)
def test_every_listed_name_is_checked(monkeypatch, internal):
    """Each name the header's list holds, taken away as an upgrade would (a method deleted, an attribute no longer
    set), is named by the check: the list is the check, so the two cannot drift apart."""
    if internal.set_by:
        monkeypatch.setattr(internal.owner, internal.set_by, sets_nothing)
    else:
        monkeypatch.delattr(internal.owner, internal.name)
    assert str(internal) in missing_trl_internals()


def test_an_attribute_a_built_trainer_lacks_is_named(monkeypatch, tiny_model, tmp_path):
    trainer = build(tiny_model, tmp_path)
    monkeypatch.delattr(trainer, "reward_weights")
    assert missing_trl_internals(trainer) == ["GRPOTrainer.reward_weights"]


TRL_CLASS = re.compile(r"\b(GRPOTrainer|VLLMGeneration|VLLMClient|ProfilingContext|Trainer)\.(\w+)")


@pytest.mark.parametrize("path", ["benchmarks/step_overhead.py", "tests/helpers/run_with_vllm.py"])
def test_every_internal_the_patching_files_name_is_listed(path):
    """The files outside training/trainer.py that patch TRL's classes: each name of theirs they reach is in the list
    (so the check covers it); the constructors are public."""
    source = (ROOT / path).read_text()
    listed = {str(internal) for internal in TRL_INTERNALS} | {"GRPOTrainer.__init__", "VLLMGeneration.__init__"}
    named = {f"{owner}.{name}" for owner, name in TRL_CLASS.findall(source.split('"""', 2)[-1])}
    assert named and named <= listed, sorted(named - listed)
