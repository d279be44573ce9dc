"""rl_trainer.py with a planted judge fault, for tests/training/test_canary.py: from the first pass@k evaluation on, every
test whose program printed a wrong answer is judged passed, the kind of hole a policy could find in a judge.

    python tests/helpers/judge_fault.py [rl_trainer.py flags]

The fault is armed at the first evaluation, not at start: the canaries are checked against their solutions before
then, and a judge that passes everything from the start makes every variant fail that check (tested apart). It
lives here, in the tests, so the trainer has no switch that weakens its judge.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import judging.execution  # noqa: E402
from training.evaluation import PassAtKEvaluator  # noqa: E402

armed = False
grade = judging.execution.grade
grade_calls = judging.execution.grade_calls
evaluate = PassAtKEvaluator.evaluate


def wrong_answers_pass(*args, **kwargs):
    """The judge's grading of a test run alone (judging/grading.py), with every wrong output taken for right once
    armed."""
    result = grade(*args, **kwargs)
    if armed and result.status == "failed":
        result.status = "passed"
    return result


def wrong_calls_pass(*args, **kwargs):
    """The same for a run of calls (a completion's last given test is judged in one with its pool sample)."""
    results = grade_calls(*args, **kwargs)
    for result in results:
        if armed and result.status == "failed":
            result.status = "passed"
    return results


def armed_evaluate(self, *args, **kwargs):
    global armed
    armed = True
    return evaluate(self, *args, **kwargs)


judging.execution.grade = wrong_answers_pass
judging.execution.grade_calls = wrong_calls_pass
PassAtKEvaluator.evaluate = armed_evaluate

if __name__ == "__main__":
    import rl_trainer

    sys.exit(rl_trainer.main(sys.argv[1:]))
