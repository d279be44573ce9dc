"""training/trainer.py, the one file that touches TRL's internals: an upgrade that removes one of them fails here,
naming it, instead of failing silently or deep inside a step on a GPU node."""

import pytest
import trl
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from training import trainer as seam
from training.trainer import QGRPOTrainer, TrlInternalsChanged, missing_trl_internals


def build(tiny_model, tmp_path):
    async def reward(prompts, completions, **kwargs):
        return [0.0 for _ in completions]

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=4, report_to=[], use_cpu=True)
    return QGRPOTrainer(model=str(tiny_model), reward_funcs=[reward], args=args,
                        train_dataset=Dataset.from_list([{"prompt": "p", "id": "a"}] * 2))


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
