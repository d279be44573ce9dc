"""GRPO training of code models on problems with test cases (Q or Python), judged in a sandbox.

    accelerate launch --config_file config/zero3.yaml rl_trainer.py --model CKPT --use_vllm ...
    python rl_trainer.py --model tiny_model --language python --max_steps 3

Every GRPOConfig field is a flag; `--preset 7b` and `--config FILE.yaml` give defaults that flags override.
Outputs go to final_outputs/<size>/<format>/ (or --output_dir); see README.md.
"""

import logging
import os
import sys
from contextlib import ExitStack, closing

from accelerate import PartialState

from training.config import UsageError, parse_args

logger = logging.getLogger("rl_trainer")


def fail(message: str) -> None:
    print(f"rl_trainer.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    try:
        q_args, config = parse_args(argv)
        session = prepare(q_args, config)
    except UsageError as e:
        fail(str(e))
    from training.session import run

    try:
        return run(session)
    finally:
        session.judge.close()
        session.eval_judge.close()


def prepare(q_args, config):
    """Everything that can fail on a user's input, before any model weights load."""
    from data import DataError, bundled_path, load_problems, split_problems, verify_problems
    from rewards import Judge, JudgeUnavailable
    from training.preflight import check_model, check_vllm_server, check_wandb, load_tokenizer
    from training.run_folder import RunFolder
    from training.session import Session

    state = PartialState()
    logging.basicConfig(
        level=logging.INFO if state.is_main_process else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    source = q_args.data or str(bundled_path(q_args.language))
    try:
        problems = load_problems(source, q_args.language)
    except DataError as e:
        raise UsageError(str(e)) from None
    train, test = split_problems(problems, q_args.test_fraction, config.seed, q_args.max_train_problems,
                                 q_args.max_test_problems)
    if not q_args.eval_only and not train:
        raise UsageError(f"--data {source}: no training problems after the split; lower --test_fraction")
    if (q_args.eval_only or q_args.eval_pass_at_k) and not (test if q_args.eval_split == "test" else train):
        raise UsageError(f"--data {source}: no {q_args.eval_split} problems to evaluate; raise --test_fraction "
                         "or pass --eval_pass_at_k false")

    run_folder = RunFolder(q_args.run_dir)
    resume = run_folder.resolve_checkpoint(config.resume_from_checkpoint)
    check_model(q_args.model)
    tokenizer = load_tokenizer(q_args.model, q_args.prompt_style)
    if q_args.use_wandb:
        check_wandb()
    if config.use_vllm and config.vllm_mode == "server" and not q_args.test_reward_function:
        check_vllm_server(config, q_args.model)
    # Every rank judges its own completions: share the cores among the ranks on this node.
    workers = q_args.judge_workers or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    with ExitStack() as on_failure:
        try:
            judge, eval_judge = (
                on_failure.enter_context(closing(Judge(timeout=timeout, workers=workers, sandbox=q_args.sandbox,
                                                       memory_mb=q_args.judge_memory_mb, q_binary=q_args.q_binary)))
                for timeout in (q_args.judge_timeout, q_args.eval_timeout)
            )
            for language in sorted({p.get("language") or q_args.language for p in problems}):
                judge.preflight(language)
            if not q_args.test_reward_function:
                run_folder.prepare(q_args.overwrite_output_dir, resuming=resume is not None,
                                   evaluation_only=q_args.eval_only)
            if q_args.verify_data:
                report = verify_problems(train + test, judge, q_args.language, show_progress=state.is_main_process)
                if not report.clean:
                    raise UsageError(f"--verify_data: {report.summary()}; `python -m data verify {source} "
                                     f"--language {q_args.language}` shows each broken test")
        except JudgeUnavailable as e:
            raise UsageError(str(e)) from None
        on_failure.pop_all()  # checks passed: the session owns the judges now
    state.wait_for_everyone()  # every rank has checked the run folder before the main one writes into it
    if state.is_main_process:
        logger.info("judging: %s", judge.isolation)
        logger.info("data: %s (%d train, %d held-out problems)", source, len(train), len(test))
    return Session(q_args=q_args, config=config, train=train, test=test, tokenizer=tokenizer, judge=judge,
                   eval_judge=eval_judge, run=run_folder, resume=resume, state=state)


if __name__ == "__main__":
    sys.exit(main())
