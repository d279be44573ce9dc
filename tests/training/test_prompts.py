"""Prompts name the language, follow the reference's plain layout, and work as chat messages."""

from transformers import AutoTokenizer

from data import load_problems
from training.prompts import make_prompt, prompt_rows


def test_plain_prompt_is_the_reference_layout():
    prompt = make_prompt("Sum a list.", "q", use_reasoning_format=False, style="plain")
    assert prompt.endswith("\n\nHuman: Problem:\nSum a list.\n\nAssistant:")
    assert "Q (kdb+/q)" in prompt and "```q" in prompt and "<reasoning>" not in prompt


def test_reasoning_format_asks_for_reasoning_then_answer():
    prompt = make_prompt("Sum a list.", "python", use_reasoning_format=True, style="plain")
    assert "Python" in prompt and prompt.index("<reasoning>") < prompt.index("<answer>")


def test_chat_prompt_goes_through_the_model_template(tiny_model):
    messages = make_prompt("Sum a list.", "q", use_reasoning_format=False, style="chat")
    assert [m["role"] for m in messages] == ["system", "user"] and "Q (kdb+/q)" in messages[0]["content"]
    text = AutoTokenizer.from_pretrained(tiny_model).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert "Problem:\nSum a list." in text


def test_training_rows_carry_the_id_and_the_records_other_fields_not_its_tests(tmp_path):
    """A row's id names its problem (the test-case reward looks it up); a record's extra fields are columns for the
    reward functions; its tests and solution stay with the problem."""
    data = tmp_path / "p.jsonl"
    data.write_text(
        '{"id": "sum", "language": "python", "description": "Sum a list.", "solution": "solve = sum", '
        '"tests": [{"test_code": "print(solve([1, 2]))", "expected_output": "3"}], "difficulty": "easy", '
        '"tags": ["lists"]}\n'
    )
    (problem,) = load_problems(str(data), "python")
    (row,) = prompt_rows([problem], use_reasoning_format=False, style="plain")
    assert row == {
        "id": "sum",
        "language": "python",
        "description": "Sum a list.",
        "difficulty": "easy",
        "tags": ["lists"],
        "prompt": make_prompt("Sum a list.", "python", False, "plain"),
    }


def test_the_prompt_names_the_problems_function_or_asks_for_a_program_reading_standard_input():
    from judging.records import Problem, Test
    from training.prompts import problem_prompt

    named = Problem("p", "python", "Add two numbers.", (Test("print(add(1, 2))", "3"),), entry_point="add")
    reading = Problem("r", "python", "Add the two numbers of the input.", (Test("", "3", input="1 2\n"),))
    assert "writing a function named `add`." in problem_prompt(named, False, "plain")
    prompt = problem_prompt(reading, True, "plain")
    assert "a program that reads its input from standard input and prints its answer" in prompt
    assert "function" not in prompt and prompt.endswith("Problem:\nAdd the two numbers of the input.\n\nAssistant:")
    assert "writing a function named `solve`." in make_prompt("Sum a list.", "q", False, "plain")
