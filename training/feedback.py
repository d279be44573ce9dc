"""`--feedback_turns N`: the model runs its code on the problem's examples and writes again, up to N more turns.

`FeedbackRounds` is TRL's ``rollout_func``: TRL calls it in place of its own tokenize-and-generate with the batch's
prompts, and trains on what it returns. It generates the first turn as TRL would (`_generate_single_turn`: plain
generation, colocated vLLM or the server, whichever the run uses), then, for each round:

1. each completion whose last turn ended holding code and whose problem is not yet passed has that code run by the
   judge on its problem's examples (rewards/feedback.py: which tests, and the message); one whose examples all
   passed, or whose code did not run for the judge's own fault, ends there;
2. every rank says how many completions it continues (one all-gather, on every rank, every round);
   when none does, every rank stops alike;
3. each continued completion gets the message as the next user turn (its tokens appended to the completion's
   own, never tokenized again) and one new turn is generated for it. Each rank sends as many as the most any
   rank continues, filling with copies of its first prompt whose answers it drops: TRL's server request slices
   the answers by equal shares, and under ZeRO-3 every rank takes part in each generation.

So every rank makes the same collective calls in the same order, whatever its completions do.

What TRL trains on: the prompt's ids, then every turn and message as one completion; the messages' tokens are
masked out of the loss (``env_mask``, TRL's tool mask) and carry log-probability 0 from the sampler, so
importance sampling compares each model token's probability under the trainer with the sampler's, both
conditioned on the same prompt and earlier turns. The completion stays within ``max_completion_length``: a
completion continues only while its next message fits, and a turn that reaches the limit is cut there and judged
on its last complete code (rewards/feedback.py, `judged_turn`).

Costs: each round is one more generation (of the continued completions only, and the fill) and one run of the
examples through the warm judge, with the judge's isolation and limits.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from data.quality.trivial import described_example
from judging.judge import Judge
from judging.records import Problem, Test
from rewards.feedback import ANSWER_COLUMN, feedback_tests, judged_turn, make_turn, verdict

REPLIES_COLUMN = "feedback_replies"  # how many replies each completion wrote, for the per-problem records
PLAIN_TURN = "\n\nHuman: {message}\n\nAssistant:"  # the plain prompt style's next user turn (training/prompts.py)


def example_tests(problem: Problem) -> tuple[Test, ...]:
    """The tests ``problem`` shows the model: those its record marks ``"example": true``, and those whose arguments
    and expected output its description shows, each as a whole word (data/quality/trivial.py, the same rule by
    which a program that copies them counts as trivial). Hidden tests never."""
    return tuple(
        test
        for test in problem.tests
        if not test.hidden and (test.extra.get("example") is True or described_example(problem, test))
    )


@dataclass
class Row:
    """One completion being written: its ids after the prompt (turns and messages), which of them the model wrote
    (mask 1), the sampler's log-probabilities (0 on messages), its turns, and the messages it got."""

    prompt_ids: list[int]
    problem: Problem
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    turns: list = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    passed_at: int | None = None  # the turn (1-based) whose code passed the examples


class FeedbackRounds:
    """TRL's ``rollout_func`` for ``turns`` feedback rounds; the trainer sets `problem_ids` (one per prompt) before
    each generation."""

    def __init__(self, turns: int, judge: Judge, problems: Mapping[str, Problem], tokenizer, chat: bool):
        if turns < 1:
            raise ValueError("feedback rounds need --feedback_turns 1 or more")
        self.turns, self.judge, self.problems, self.tokenizer, self.chat = turns, judge, problems, tokenizer, chat
        self.problem_ids: list[str] | None = None
        self._tests: dict[str, tuple[Test, ...]] = {}  # what each problem's code is run on, by id
        self.transcripts: list[list[str]] = []  # every message of the last batch or text rounds, each row's in order

    def __call__(self, prompts: list, trainer) -> dict:
        if self.problem_ids is None or len(self.problem_ids) != len(prompts):
            raise RuntimeError("feedback rounds: the trainer did not say which problems this batch's prompts are")
        ids, self.problem_ids = self.problem_ids, None
        training = trainer.model.training
        n = trainer.num_generations if training else trainer.num_generations_eval
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
        completion_ids, logprobs = trainer._generate_single_turn(prompt_ids, None, {}, n)
        rows = [
            Row(list(p), self.problems[pid], logprobs=None if logprobs is None else [])
            for p, pid in zip(prompt_ids, ids)
        ]
        stop = {*trainer.eos_token_ids, self.tokenizer.pad_token_id}
        limit = trainer.max_completion_length
        for i, row in enumerate(rows):
            self._add_turn(row, list(completion_ids[i]), None if logprobs is None else logprobs[i], stop, limit)
        feedback_s, passed, continued_share, filled = 0.0, [], [], 0
        for round_ in range(1, self.turns + 1):
            started = time.perf_counter()
            continued = self._feedback(rows, round_, limit)
            feedback_s += time.perf_counter() - started
            passed.append(sum(row.passed_at is not None for row in rows))
            counts = trainer.accelerator.gather(torch.tensor([len(continued)], device=trainer.accelerator.device))
            most = int(counts.max().item())
            continued_share.append(int(counts.sum().item()))
            if most == 0:
                break
            filled += most * counts.numel() - continued_share[-1]
            requests = [row.prompt_ids + row.ids for row in continued]
            requests += [list(prompt_ids[0])] * (most - len(continued))  # the fill: answers dropped
            new_ids, new_logprobs = trainer._generate_single_turn(requests, None, {}, 1)
            for i, row in enumerate(continued):
                self._add_turn(row, list(new_ids[i]), None if new_logprobs is None else new_logprobs[i], stop, limit)
        self.transcripts = [row.messages for row in rows]
        self._log(trainer, rows, passed, continued_share, filled, feedback_s, training)
        return {
            "prompt_ids": [row.prompt_ids for row in rows],
            "completion_ids": [row.ids for row in rows],
            "logprobs": None if logprobs is None else [row.logprobs for row in rows],
            "env_mask": [row.mask for row in rows],
            ANSWER_COLUMN: [judged_turn(row.turns).text for row in rows],
            REPLIES_COLUMN: [len(row.turns) for row in rows],
        }

    def _add_turn(self, row: Row, new: list[int], logprobs, stop: set, limit: int) -> None:
        """Append a generated turn, cut at the length limit (a cut turn did not end)."""
        room = limit - len(row.ids)
        ended = bool(new) and new[-1] in stop and len(new) <= room
        new = new[:room]
        if row.logprobs is not None:
            row.logprobs += list(logprobs)[: len(new)]
        row.ids += new
        row.mask += [1] * len(new)
        row.turns.append(make_turn(self.tokenizer.decode(new, skip_special_tokens=True), ended, row.problem.language))

    def _feedback(self, rows: list[Row], round_: int, limit: int) -> list[Row]:
        """Run the code of each row's newest turn on its examples; the rows that go on, each with its message
        appended."""
        checked = [
            (row, self.tests(row.problem))
            for row in rows
            if row.passed_at is None
            and len(row.turns) == round_
            and row.turns[-1].ended
            and row.turns[-1].code is not None
        ]
        checked = [(row, tests) for row, tests in checked if tests]
        judgements = (
            self.judge.run_many([(row.turns[-1].code, tests, row.problem.language) for row, tests in checked])
            if checked
            else []
        )
        continued = []
        for (row, tests), judgement in zip(checked, judgements):
            said = verdict(row.problem, tests, judgement)
            if said.passed:
                row.passed_at = round_
            if said.message is None:
                continue
            message_ids = self.message_ids(said.message)
            if len(row.ids) + len(message_ids) >= limit:
                continue  # no room left to answer
            row.messages.append(said.message)
            row.ids += message_ids
            row.mask += [0] * len(message_ids)
            if row.logprobs is not None:
                row.logprobs += [0.0] * len(message_ids)
            continued.append(row)
        return continued

    def text_rounds(
        self,
        problems: list[Problem],
        prompts: list[str],
        first: list[str],
        generate,
        accelerator,
        chat_prompts: list | None = None,
    ) -> list[list[str]]:
        """Evaluation's rounds, on text (pass@k's sampling returns text): ``first[i]`` is the first reply to
        ``prompts[i]`` (the rendered prompt) for ``problems[i]``; ``generate(texts)`` samples one reply to each
        text, on every rank at once (a collective under ZeRO-3 or a vLLM server). Each reply holding code whose
        examples fail gets the message and one more reply, up to `turns` rounds, the ranks agreeing as in training
        (one all-gather a round, fills dropped). Returns each completion's replies. A reply cut by
        ``--eval_max_tokens`` cannot be told from text: its unclosed block holds no code, so it is not judged
        while an earlier reply holds code."""
        from accelerate.utils import gather_object

        replies = [[text] for text in first]
        messages: list[list[str]] = [[] for _ in first]
        contexts = list(prompts)
        for round_ in range(1, self.turns + 1):
            candidates = [(i, self.tests(problems[i])) for i, turns in enumerate(replies) if len(turns) == round_]
            candidates = [
                (i, make_turn(replies[i][-1], True, problems[i].language), tests) for i, tests in candidates if tests
            ]
            candidates = [(i, turn, tests) for i, turn, tests in candidates if turn.code is not None]
            judgements = (
                self.judge.run_many([(turn.code, tests, problems[i].language) for i, turn, tests in candidates])
                if candidates
                else []
            )
            continued = []
            for (i, _, tests), judgement in zip(candidates, judgements):
                said = verdict(problems[i], tests, judgement)
                if said.message is not None:
                    messages[i].append(said.message)
                    contexts[i] = self.next_context(
                        contexts[i], replies[i], messages[i], None if chat_prompts is None else chat_prompts[i]
                    )
                    continued.append(i)
            most = max(gather_object([len(continued)]))
            if most == 0:
                break
            fill = prompts[0] if prompts else (self.tokenizer.eos_token or " ")  # a rank without samples fills too
            answers = generate([contexts[i] for i in continued] + [fill] * (most - len(continued)))
            for i, answer in zip(continued, answers):
                replies[i].append(answer)
        self.transcripts = messages
        return replies

    def next_context(self, context: str, replies: list[str], messages: list[str], chat_prompt: list | None) -> str:
        """The text that asks for the next reply after ``replies``, each answered by one of ``messages``, as
        training's `message_ids` lays them out."""
        if chat_prompt is None:
            return context + replies[-1] + (self.tokenizer.eos_token or "") + PLAIN_TURN.format(message=messages[-1])
        chat = list(chat_prompt)
        for reply, message in zip(replies, messages):
            chat += [{"role": "assistant", "content": reply}, {"role": "user", "content": message}]
        return self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)

    def tests(self, problem: Problem) -> tuple[Test, ...]:
        if problem.id not in self._tests:
            self._tests[problem.id] = feedback_tests(problem, example_tests(problem))
        return self._tests[problem.id]

    def message_ids(self, message: str) -> list[int]:
        """The tokens that follow a finished model turn to give it ``message`` as the next user turn and open the
        model's next turn: the plain style's ``Human: ... Assistant:``, or the chat template's user turn."""
        if not self.chat:
            return self.tokenizer(PLAIN_TURN.format(message=message), add_special_tokens=False)["input_ids"]
        before = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = self.tokenizer.apply_chat_template(before, tokenize=True, return_dict=False)
        full = self.tokenizer.apply_chat_template(
            before + [{"role": "user", "content": message}],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
        )
        ends = [i for i, token in enumerate(prefix) if token == self.tokenizer.eos_token_id]
        if ends:  # the model's turn ends at its end-of-turn token; what the template puts after it is ours
            prefix = prefix[: ends[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template renders an earlier turn differently once a user turn follows it")
        return list(full[len(prefix) :])

    def _log(
        self,
        trainer,
        rows: list[Row],
        passed: list[int],
        continued: list[int],
        filled: int,
        feedback_s: float,
        training: bool,
    ) -> None:
        """Per step: the share of completions whose examples passed by each turn, the share continued after each
        turn (0 past the round where every rank stopped), the turns used, the generations made only to keep the
        ranks in step (all ranks), and the feedback time (the slowest rank's)."""
        accelerator = trainer.accelerator
        passed = passed + [passed[-1]] * (self.turns - len(passed))
        local = [len(rows), sum(len(row.turns) for row in rows), feedback_s, *passed]
        gathered = accelerator.gather(torch.tensor([local], dtype=torch.float64, device=accelerator.device))
        total = gathered.sum(dim=0).tolist()
        count = max(total[0], 1.0)
        metrics = trainer._metrics["train" if training else "eval"]
        metrics["feedback/turns"].append(total[1] / count)
        metrics["feedback/time_s"].append(gathered[:, 2].max().item())
        metrics["feedback/fill_generations"].append(float(filled))
        continued = continued + [0] * (self.turns - len(continued))
        for turn in range(1, self.turns + 1):
            metrics[f"feedback/examples_passed_by_turn_{turn}"].append(total[2 + turn] / count)
            metrics[f"feedback/continued_after_turn_{turn}"].append(continued[turn - 1] / count)
