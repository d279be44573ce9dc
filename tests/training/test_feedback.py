"""--feedback_turns: what the model is told between turns, which turn the reward judges, and the rounds.

The rounds run here through `FeedbackRounds` with a scripted policy in place of the model (`ScriptedTrainer`, a
stand-in for TRL's trainer: it answers each request by the feedback it holds) and a character tokenizer (a
stand-in for a model's), judged by the real judge; tests/training/test_feedback_runs.py trains with them."""

import asyncio
import threading
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from judging import Judge, Problem, Test
from rewards import ScoringArguments, make_reward_funcs
from rewards.feedback import ANSWER_COLUMN, LOAD_CHECK, feedback_tests
from training.feedback import FeedbackRounds, example_tests

FAKE_Q = str(Path(__file__).resolve().parents[1] / "helpers" / "fake_q" / "q")
EXAMPLE = Test("print(solve(2, 3))", "5")
JUDGED = (Test("print(solve(1000, 2345))", "3345"), Test("print(solve(-77, 10))", "-67"))
HIDDEN = Test("print(solve(4000, 4321))", "8321", hidden=True)
ADD = Problem(
    "add",
    "python",
    "Write solve(a, b) that returns a + b.\nExample:\n>>> print(solve(2, 3))\n5",
    (EXAMPLE, *JUDGED, HIDDEN),
)
WRONG = "```python\ndef solve(a, b):\n    return a - b\n```"
FIXED = "```python\ndef solve(a, b):\n    return a + b\n```"
CHEAT = "```python\ndef solve(a, b):\n    return 5\n```"
RAISES = "```python\ndef solve(a, b):\n    return a / 0\n```"
EOS = 0


class CharTokenizer:
    """A stand-in tokenizer: one token per character, 0 the end of a turn."""

    eos_token_id = pad_token_id = EOS

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i != EOS)


class ScriptedTrainer:
    """A stand-in for TRL's trainer as FeedbackRounds uses it: ``policy(text so far, turn) -> (reply, ended)``
    writes each turn; every request is recorded."""

    def __init__(self, policy, max_completion_length=2000, num_generations=2):
        self.policy, self.requests = policy, []
        self.model = SimpleNamespace(training=True)
        self.num_generations = self.num_generations_eval = num_generations
        self.eos_token_ids = [EOS]
        self.max_completion_length = max_completion_length
        self.accelerator = SimpleNamespace(device="cpu", gather=lambda tensor: tensor)
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.tokenizer = CharTokenizer()

    def _tokenize_prompts(self, prompts):
        return [self.tokenizer(p)["input_ids"] for p in prompts], None, None

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        self.requests.append((len(prompt_ids), num_generations))
        out = []
        for ids in prompt_ids:
            text = self.tokenizer.decode(ids)
            reply, ended = self.policy(text, text.count("Human:"))
            out.append([ord(c) for c in reply] + ([EOS] if ended else []))
        return out, [[-0.5] * len(ids) for ids in out]


@pytest.fixture(scope="module")
def judge():
    with Judge(timeout=2.0, workers=2) as judge:
        yield judge


def roll(judge, policy, problems=(ADD,), turns=1, **trainer):
    trainer = ScriptedTrainer(policy, **trainer)
    rounds = FeedbackRounds(turns, judge, {p.id: p for p in problems}, trainer.tokenizer, chat=False)
    ids = [p.id for p in problems for _ in range(trainer.num_generations)]
    rounds.problem_ids = ids
    output = rounds([f"Problem {pid}\n\nAssistant:" for pid in ids], trainer)
    return output, rounds, trainer


def rewards(judge, output, problems=(ADD,), ids=None):
    (test_cases,) = make_reward_funcs(["test_cases"], judge, ScoringArguments(), problems)
    ids = ids or [p.id for p in problems for _ in range(len(output["completion_ids"]) // len(problems))]
    return asyncio.run(
        test_cases(
            prompts=ids,
            completions=["unused"] * len(ids),
            id=ids,
            language=[p.language for p in problems for _ in ids[: len(ids) // len(problems)]],
            **{ANSWER_COLUMN: output[ANSWER_COLUMN]},
        )
    )


def test_examples_are_the_tests_the_description_shows_or_the_record_marks():
    assert example_tests(ADD) == (EXAMPLE,)
    marked = Test("print(solve(7, 7))", "14", extra={"example": True})
    assert example_tests(Problem("p", "python", "Add.", (*JUDGED, marked))) == (marked,)
    # Arguments the description shows without the expected output make no example; a hidden test never is.
    shown_call = Problem("p", "python", "solve(1000, 2345) adds", JUDGED)
    assert example_tests(shown_call) == () and feedback_tests(shown_call, ()) == (LOAD_CHECK,)
    hidden = Test("print(solve(2, 3))", "5", hidden=True)
    assert example_tests(Problem("p", "python", ADD.description, (*JUDGED, hidden))) == ()


def test_a_completion_that_fixes_its_code_after_feedback_earns_the_fixed_codes_reward(judge):
    output, rounds, trainer = roll(judge, lambda text, turn: (FIXED if "Example 1" in text else WRONG, True))
    (message,) = rounds.transcripts[0]
    assert "Example 1: print(solve(2, 3))" in message and "printed: -1" in message and "expected: 5" in message
    assert rewards(judge, output) == pytest.approx([2.0, 2.0])  # the fixed code passes every judged test
    assert trainer.requests == [(2, 2), (2, 1)]  # the first turn in groups, then one turn per completion
    (wrong,) = make_reward_funcs(["test_cases"], judge, ScoringArguments(), [ADD])
    assert list(asyncio.run(wrong(prompts=["p"], completions=[WRONG], id=["add"], language=["python"]))) == [0.0]
    metrics = trainer._metrics["train"]
    assert metrics["feedback/turns"] == [2.0] and metrics["feedback/examples_passed_by_turn_1"] == [0.0]
    assert metrics["feedback/continued_after_turn_1"] == [1.0] and metrics["feedback/time_s"][0] > 0


def test_feedback_tokens_are_masked_and_carry_no_sampler_log_probability(judge):
    output, rounds, trainer = roll(judge, lambda text, turn: (FIXED if "Example 1" in text else WRONG, True))
    tokenizer = CharTokenizer()
    for ids, mask, logprobs, messages in zip(
        output["completion_ids"], output["env_mask"], output["logprobs"], rounds.transcripts
    ):
        assert len(ids) == len(mask) == len(logprobs)
        masked = tokenizer.decode([i for i, m in zip(ids, mask) if m == 0])
        assert masked == f"\n\nHuman: {messages[0]}\n\nAssistant:"
        assert tokenizer.decode([i for i, m in zip(ids, mask) if m == 1]) == WRONG + FIXED
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0)
        assert all(lp == -0.5 for lp, m in zip(logprobs, mask) if m == 1)


def test_code_that_prints_the_expected_outputs_it_saw_fails_the_judged_tests(judge):
    output, rounds, _ = roll(judge, lambda text, turn: (CHEAT if "Example 1" in text else WRONG, True))
    assert all(messages for messages in rounds.transcripts)
    assert output[ANSWER_COLUMN] == [CHEAT, CHEAT]
    cheated = rewards(judge, output)
    # It passes the example it saw (the description shows it, so it is judged like any test) and no other.
    assert cheated.passed_all == [False, False] and cheated == pytest.approx([1 / 3, 1 / 3])


def test_a_turn_cut_by_the_length_limit_is_judged_on_the_last_complete_code(judge):
    # The second turn starts the fixed code but reaches the limit: the first turn's code is judged.
    output, rounds, _ = roll(
        judge,
        lambda text, turn: (FIXED[:-6], False) if turn else (WRONG, True),
        max_completion_length=len(WRONG) + 1 + 400,
    )
    assert output[ANSWER_COLUMN] == [WRONG, WRONG]
    assert all(len(ids) <= len(WRONG) + 1 + 400 for ids in output["completion_ids"])
    assert rewards(judge, output) == pytest.approx([0.0, 0.0])
    # A second turn that runs past the limit is cut there, and judged no more than a turn that never ended.
    output, _, _ = roll(
        judge,
        lambda text, turn: (FIXED + " " * 500, True) if turn else (WRONG, True),
        max_completion_length=len(WRONG) + 1 + 400,
    )
    assert output[ANSWER_COLUMN] == [WRONG, WRONG]


def test_a_turn_without_code_or_whose_examples_pass_ends_the_completion(judge):
    output, rounds, trainer = roll(judge, lambda text, turn: (FIXED, True))
    assert rounds.transcripts == [[], []] and trainer.requests == [(2, 2)]
    assert trainer._metrics["train"]["feedback/examples_passed_by_turn_1"] == [1.0]
    output, rounds, trainer = roll(judge, lambda text, turn: ("I cannot.", True))
    assert rounds.transcripts == [[], []] and output[ANSWER_COLUMN] == ["I cannot.", "I cannot."]


def test_an_error_reads_as_the_tracebacks_last_lines(judge):
    _, rounds, _ = roll(judge, lambda text, turn: (RAISES, True))
    (message,) = rounds.transcripts[0]
    assert "raised:" in message and "ZeroDivisionError: division by zero" in message
    assert "expected: 5" in message


def test_a_problem_without_examples_gets_what_loading_its_code_raised(judge):
    plain = Problem("plain", "python", "Write solve(a, b) that returns a + b.", JUDGED)
    broken = "```python\nimport nosuchmodule\ndef solve(a, b):\n    return a + b\n```"
    _, rounds, _ = roll(judge, lambda text, turn: (FIXED if turn else broken, True), problems=(plain,))
    (message,) = rounds.transcripts[0]
    assert message.startswith("I loaded your code. It raised:") and "ModuleNotFoundError" in message
    _, rounds, _ = roll(judge, lambda text, turn: (WRONG, True), problems=(plain,))
    assert rounds.transcripts == [[], []], "code that loads gets no round: no example says it is wrong"


def test_no_message_of_a_run_holds_a_judged_or_hidden_tests_expected_output(judge):
    # Every kind of wrong code, over several rounds, on problems with and without examples.
    plain = Problem("plain", "python", "Write solve(a, b) that returns a + b.", (*JUDGED, HIDDEN))
    codes = [
        WRONG,
        RAISES,
        CHEAT,
        "```python\ndef solve(a, b):\n    print(a * 1000, b * 1000)\n```",
        "```python\nimport nosuchmodule\n```",
        "```python\ndef solve(a, b:\n```",
    ]

    def policy(text, turn):
        return codes[(turn + len(text)) % len(codes)], True

    _, rounds, _ = roll(judge, policy, problems=(ADD, plain), turns=3, num_generations=6)
    messages = [m for row in rounds.transcripts for m in row]
    assert len(messages) > 6
    secret = [t.expected_output for p in (ADD, plain) for t in p.tests if t not in example_tests(p)]
    assert not [(m, s) for m in messages for s in secret if s in m]


def test_q_feedback_reads_like_qs_errors(qhome):
    # tests/helpers/fake_q/q is a stand-in for q: it prints 'type for a line 'type, as q signals the error.
    six = Problem("six", "q", "Print 6.", (Test('-1 "6";', "6", extra={"example": True}), Test('-1 "66";', "66")))
    with Judge(timeout=2.0, workers=2, q_binary=FAKE_Q) as judge:
        _, rounds, _ = roll(judge, lambda text, turn: ("```q\n'type\n```", True), problems=(six,))
    (message,) = rounds.transcripts[0]
    assert 'Example 1: -1 "6";\n    raised:\n        \'type\n  expected: 6' in message
    assert "FAKEQ" not in message and "66" not in message


def test_every_rank_generates_alike_each_round(judge):
    # Rank 0 has nothing to continue, rank 1 one completion: both send one request per round, the same size.
    def gather(tensor):  # the other rank continues one completion each round; its metrics are this rank's
        return torch.cat([tensor, torch.tensor([1])]) if tensor.dim() == 1 else torch.cat([tensor, tensor])

    trainer = ScriptedTrainer(lambda text, turn: (FIXED, True))
    trainer.accelerator.gather = gather
    rounds = FeedbackRounds(2, judge, {"add": ADD}, trainer.tokenizer, chat=False)
    rounds.problem_ids = ["add", "add"]
    output = rounds(["Problem add\n\nAssistant:"] * 2, trainer)
    assert trainer.requests == [(2, 2), (1, 1), (1, 1)], "a rank with nothing to continue fills the request"
    assert output[ANSWER_COLUMN] == [FIXED, FIXED] and rounds.transcripts == [[], []]
    assert trainer._metrics["train"]["feedback/fill_generations"] == [2.0]


@pytest.mark.parametrize("language", ["python", "q"])
def test_on_the_bundled_problems_no_message_holds_an_expected_output_the_model_has_not_seen(language, qhome):
    # Every bundled problem whose description shows an example, answered with code that prints nothing useful
    # (q's answer raises in the stand-in, tests/helpers/fake_q/q, which is not q), over two rounds.
    from data import load_problems

    problems = [
        p
        for p in load_problems(
            str(Path(__file__).resolve().parents[2] / "data" / f"{language}_problems.jsonl"), language
        )
        if example_tests(p)
    ]
    wrong = "```python\ndef solve(*args):\n    return None\n```" if language == "python" else "```q\n'type\n```"
    with Judge(timeout=2.0, workers=2, q_binary=FAKE_Q) as judge:
        _, rounds, _ = roll(judge, lambda text, turn: (wrong, True), problems=problems, turns=2)
    messages = [m for row in rounds.transcripts for m in row]
    assert len(messages) >= 2 * len(problems)
    for problem, row in zip([p for p in problems for _ in range(2)], rounds.transcripts):
        seen = problem.description + "".join(t.test_code + t.expected_output for t in example_tests(problem))
        secret = [
            t.expected_output.strip()
            for t in (*problem.tests, *problem.pool)
            if len(t.expected_output.strip()) >= 3 and t.expected_output.strip() not in seen
        ]
        assert not [s for m in row for s in secret if s in m], problem.id


def test_evaluations_rounds_on_text_continue_each_failing_reply_in_its_context(judge):
    trainer = ScriptedTrainer(lambda text, turn: (WRONG, True))
    tokenizer = CharTokenizer()
    tokenizer.eos_token = "<eos>"
    rounds = FeedbackRounds(2, judge, {"add": ADD}, tokenizer, chat=False)
    asked = []

    def generate(texts):
        asked.append(texts)
        return [FIXED if "Example 1" in text else WRONG for text in texts]

    replies = rounds.text_rounds([ADD, ADD], ["P:", "P:"], [WRONG, FIXED], generate, trainer.accelerator)
    assert replies == [[WRONG, FIXED], [FIXED]]
    ((context,),) = asked  # one round: the fixed reply passes its example
    assert context.startswith("P:" + WRONG + "<eos>\n\nHuman: I ran your code on the problem's examples.")
    assert context.endswith("\n\nAssistant:")


def test_a_chat_models_message_is_its_templates_user_turn_after_the_reply(warm_model):
    # Prompt, reply and message tokens laid end to end are what the chat template renders for the conversation.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    rounds = FeedbackRounds(1, None, {}, tokenizer, chat=True)
    prompt = [{"role": "user", "content": "Problem add"}]

    def render(messages):
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)

    reply = tokenizer(FIXED, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    conversation = prompt + [{"role": "assistant", "content": FIXED}, {"role": "user", "content": "Example 1: passed"}]
    assert render(prompt) + reply + rounds.message_ids("Example 1: passed") == render(conversation)


class TwoRanks:
    """Two ranks as two threads: `gather` is a collective (each waits for the other, at most 30 s: a rank left
    waiting fails the test instead of hanging it), and each rank's calls are recorded in order."""

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=30)
        self.slots = [None, None]
        self.calls = [[], []]

    def gather(self, rank: int, tensor):
        self.calls[rank].append(("gather", tuple(tensor.shape)))
        self.slots[rank] = tensor
        self.barrier.wait()
        gathered = torch.cat(self.slots)
        self.barrier.wait()
        return gathered


def test_ranks_whose_completions_need_different_rounds_make_the_same_calls_in_the_same_order(judge):
    # Rank 0's replies pass their examples at once; rank 1's never do, so it continues for every round.
    ranks, outputs = TwoRanks(), [None, None]
    trainers = [ScriptedTrainer(lambda text, turn: (FIXED, True)), ScriptedTrainer(lambda text, turn: (WRONG, True))]

    def run(rank):
        trainer = trainers[rank]
        trainer.accelerator.gather = lambda tensor: ranks.gather(rank, tensor)
        generate = trainer._generate_single_turn

        def recorded(prompt_ids, images, fields, n):
            ranks.calls[rank].append(("generate", len(prompt_ids), n))
            return generate(prompt_ids, images, fields, n)

        trainer._generate_single_turn = recorded
        rounds = FeedbackRounds(3, judge, {"add": ADD}, trainer.tokenizer, chat=False)
        rounds.problem_ids = ["add", "add"]
        outputs[rank] = rounds(["Problem add\n\nAssistant:"] * 2, trainer)

    threads = [threading.Thread(target=run, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(output is not None for output in outputs), "a rank did not finish"
    assert ranks.calls[0] == ranks.calls[1]
    assert [call[0] for call in ranks.calls[0]] == ["generate"] + ["gather", "generate"] * 3 + ["gather"]
    assert outputs[0][ANSWER_COLUMN] == [FIXED, FIXED] and outputs[1][ANSWER_COLUMN] == [WRONG, WRONG]
    assert outputs[0]["feedback_replies"] == [1, 1] and outputs[1]["feedback_replies"] == [4, 4]
    assert trainers[0]._metrics["train"]["feedback/turns"] == [2.5]  # 1 reply each on rank 0, 4 on rank 1
