"""Assembles and runs one training (or evaluation-only) session from checked settings."""

import json
from dataclasses import dataclass
from pathlib import Path

from accelerate import PartialState
from datasets import Dataset

from rewards import Judge, RewardSettings, make_reward_funcs, test_reward
from training.config import QArguments, QGRPOConfig
from training.evaluation import PassAtKCallback, PassAtKEvaluator
from training.prompts import make_prompt
from training.run_folder import RunFolder, RunLogCallback, resolved_settings


@dataclass
class Session:
    q_args: QArguments
    config: QGRPOConfig
    train: list[dict]
    test: list[dict]

    @property
    def eval_problems(self) -> list[dict]:
        return self.test if self.q_args.eval_split == "test" else self.train

    tokenizer: object
    judge: Judge
    eval_judge: Judge
    run: RunFolder
    resume: str | None
    state: PartialState


def run(session: Session) -> int:
    q = session.q_args
    if q.test_reward_function:
        return test_reward_function(session)
    if q.eval_only:
        return evaluate_only(session)
    return train(session)


def reward_settings(session: Session) -> RewardSettings:
    q = session.q_args
    return RewardSettings(
        judge=session.judge, language=q.language, max_tests_per_problem=q.max_tests_per_problem,
        base_reward_weight=q.base_reward_weight, perfect_reward_weight=q.perfect_reward_weight,
        perfect_bonus=q.perfect_bonus, use_reasoning_format=q.use_reasoning_format,
    )


def prompt_dataset(problems: list[dict], q: QArguments) -> Dataset:
    rows = []
    for problem in problems:
        language = problem.get("language") or q.language
        row = {key: value for key, value in problem.items() if key != "solution"}  # rewards never need it
        row["language"] = language
        row["prompt"] = make_prompt(problem["description"], language, q.use_reasoning_format, q.prompt_style)
        rows.append(row)
    return Dataset.from_list(rows)


def peft_config(q: QArguments):
    if not q.use_lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=q.lora_rank, lora_alpha=q.lora_alpha, lora_dropout=q.lora_dropout,
                      target_modules="all-linear", task_type="CAUSAL_LM")


def four_bit_quantization():
    """QLoRA's base model: 4-bit NF4 weights, bf16 compute (bitsandbytes, CUDA only)."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_type="nf4")


def train(session: Session) -> int:
    from trl import GRPOTrainer

    q, config, run_folder = session.q_args, session.config, session.run
    if session.state.is_main_process:
        run_folder.write_config(resolved_settings(q, config))
        if session.resume:
            run_folder.forget_after(int(Path(session.resume).name.split("-")[-1]))
    session.state.wait_for_everyone()

    evaluate_on_start = config.eval_on_start
    config.eval_on_start = False  # the pass@k callback does it; TRL's own evaluation has no eval set here
    if q.use_wandb:
        config.log_completions = True  # TRL's wandb table of sampled completions, with status and tests passed
    if q.use_qlora:
        config.model_init_kwargs = {**(config.model_init_kwargs or {}), "quantization_config": four_bit_quantization()}

    trainer = GRPOTrainer(
        model=q.model,
        reward_funcs=make_reward_funcs(q.reward_funcs, reward_settings(session)),
        args=config,
        train_dataset=prompt_dataset(session.train, q),
        processing_class=session.tokenizer,
        peft_config=peft_config(q),
        callbacks=[RunLogCallback(run_folder)],
    )
    if q.eval_pass_at_k:
        evaluator = PassAtKEvaluator(session.eval_problems, session.tokenizer, session.eval_judge, q, run_folder)
        trainer.add_callback(PassAtKCallback(evaluator, trainer, int(config.eval_steps or 0), evaluate_on_start))

    trainer.train(resume_from_checkpoint=session.resume)
    trainer.save_model(str(run_folder.final_model))
    if session.state.is_main_process:
        session.tokenizer.save_pretrained(run_folder.final_model)
    summary(session, trainer.state.global_step)
    return 0


def load_for_eval(model_path: str):
    """A model, a run's checkpoint, or a LoRA adapter folder (loaded onto its base model)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
    if (Path(model_path) / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    return AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)


def checkpoint_step(model_path: str) -> int:
    state_file = Path(model_path) / "trainer_state.json"
    return json.loads(state_file.read_text())["global_step"] if state_file.exists() else 0


def evaluate_only(session: Session) -> int:
    from accelerate import Accelerator

    q = session.q_args
    accelerator = Accelerator()
    model = load_for_eval(q.model).to(accelerator.device)
    evaluator = PassAtKEvaluator(session.eval_problems, session.tokenizer, session.eval_judge, q, session.run)
    metrics = evaluator.evaluate(model, accelerator, checkpoint_step(q.model))
    if accelerator.is_main_process:
        print(json.dumps(metrics))
        print(f"evaluation written to {session.run.eval_results} (samples in {session.run.eval_samples}/)")
    return 0


def test_reward_function(session: Session) -> int:
    """Judge each training problem's canonical solution with the training reward and print what it earns."""
    q = session.q_args
    problems = [p for p in session.train if p.get("solution")]
    items = [(p["solution"], p["tests"][: q.max_tests_per_problem], p.get("language") or q.language) for p in problems]
    judgements = session.judge.run_many(items, progress=True)
    best = q.base_reward_weight + q.perfect_bonus * q.perfect_reward_weight
    short = 0
    for problem, judgement in zip(problems, judgements):
        reward = test_reward(judgement, q.base_reward_weight, q.perfect_reward_weight, q.perfect_bonus)
        short += reward < best
        print(f"{problem['id']}: reward {reward:.3f} ({judgement.passed}/{judgement.total} tests, {judgement.status})")
    print(f"{len(problems) - short}/{len(problems)} canonical solutions earn the full reward {best:g}")
    return 0 if short == 0 else 1


def summary(session: Session, step: int) -> None:
    if not session.state.is_main_process:
        return
    run_folder = session.run
    last = run_folder.read_eval_results()[-1:] or [{}]
    passk = {k: round(v, 3) for k, v in last[0].get("metrics", {}).items() if k.startswith("pass@")}
    print(f"finished {step} steps{'; last eval ' + json.dumps(passk) if passk else ''}. Outputs in {run_folder.root}/ "
          f"(final model: {run_folder.final_model}, logs: {run_folder.logs})")
