"""The labs' words (issue 32): a written answer's model answer keeps to the length its prompt asks for,
and a lab's introduction reads in short sentences.

- **Written answers.** Every instructor-graded question states its length ("4–6 sentences", "300–500
  words"); the model answer (the manual cell's text before the mark scheme) is counted by the rule of
  tests/test_book_length.py and must fall inside that range. A prompt that asks for short sentences gets a
  model answer whose sentences average at most ``SENTENCE_WORDS`` (the book's bound). Lab 7's question 7
  asked for 8–12 sentences and its model answer had 6 (of 50 words on average): this test failed on it.
- **Introductions.** A lab's introduction (its Markdown before question 1) holds no sentence over
  ``INTRO_LONGEST`` words, and its sentences average at most ``SENTENCE_WORDS``, counted as the book's
  lessons are (``test_book_length.lesson_sentences``). Before: 9 sentences over 40 words in 5 labs' intros
  (Lab 6's 59, Lab 7's 57 and 55, Lab 8's 55, the capstone's 48, Lab 3's 47, ...), and Lab 7's intro averaged
  27.0 words, Lab 1's 23.8, the capstone's 23.1; after: the longest 40 (Lab 5), the highest mean 21.9 (Lab 4).
  The labs' other Markdown (questions, "what this run shows" boxes) is not bounded: 33 of its sentences are
  over 40 words.
- **Counting rule** (``sentences``, ``word_count``): the text's whitespace is collapsed; a sentence ends at
  ``.``, ``!`` or ``?`` (a closing bracket, quote or emphasis mark may follow) before whitespace and a
  capital, a digit or inline code; "e.g.", "i.e.", "etc.", "vs." and "cf." end none. A colon or a
  semicolon ends no sentence. A word is a run of letters, digits, ``_`` and ``` `'’.%- ``` holding at least
  one letter or digit (so `ncclCommInitRank` is one word, "1,966" two).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_book_length import SENTENCE_WORDS, _END, _WORD, lesson_sentences

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
HEADING = re.compile(r"^## Question (\d+) \(")
#: a stated length: "4–6 sentences", "300-500 words" (an en dash or a hyphen)
LENGTH = re.compile(r"\b(\d+)\s*[–-]\s*(\d+) (sentences|words)\b")
SCHEME = "=== BEGIN MARK SCHEME ==="
#: the longest sentence a lab's introduction may hold, in words (the longest now: Lab 5's 40)
INTRO_LONGEST = 40


def sentences(text: str) -> list[str]:
    """``text``'s sentences by the module's counting rule (every piece that holds a word)."""
    return [s for s in _END.split(" ".join(text.split())) if _WORD.search(s)]


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def written_questions() -> list[tuple[str, str, str, str]]:
    """(lab, question, prompt, model answer) of every instructor-graded question: the prompt is the
    question's Markdown from its heading to the written-answer cell, the model answer that cell's text
    before the mark scheme."""
    out = []
    for path in SOLUTIONS:
        prompt = ""
        for cell in nbformat.read(path, 4).cells:
            meta = cell.metadata.get("course", {})
            if cell.cell_type == "markdown" and meta.get("manual"):
                out.append((path.stem, meta["question"], prompt, cell.source.split(SCHEME)[0]))
            elif cell.cell_type == "markdown":
                prompt = cell.source if HEADING.match(cell.source) else prompt + "\n\n" + cell.source
    return out


WRITTEN = written_questions()


def stated_length(prompt: str) -> tuple[int, int, str]:
    found = LENGTH.findall(prompt)
    assert len(found) == 1, f"the prompt should state one length (sentences or words); found {found}"
    lo, hi, unit = found[0]
    return int(lo), int(hi), unit


def length_problems(prompt: str, answer: str) -> list[str]:
    lo, hi, unit = stated_length(prompt)
    said = sentences(answer)
    n = len(said) if unit == "sentences" else word_count(answer)
    out = [] if lo <= n <= hi else [f"{n} {unit}, the prompt asks for {lo}–{hi}"]
    if "short sentences" in prompt:
        mean = sum(word_count(s) for s in said) / len(said)
        if mean > SENTENCE_WORDS:
            out.append(f"its sentences average {mean:.1f} words, the prompt asks for short ones (at most "
                       f"{SENTENCE_WORDS} words on average)")
    return out


def test_the_counter_reads_sentences_and_words_by_the_documented_rule():
    text = ("A communicator is fixed at init: N ranks, e.g. 512. Its rings (and trees) follow; then `init` ends.\n"
            "`ncclCommShrink` builds N−1! Why? 511 of 512 is wrong (i.e. not close).")
    assert sentences(text) == ["A communicator is fixed at init: N ranks, e.g. 512.",
                               "Its rings (and trees) follow; then `init` ends.", "`ncclCommShrink` builds N−1!",
                               "Why?", "511 of 512 is wrong (i.e. not close)."]
    assert word_count("`ncclCommInitRank` joins 1,966 GPU-hours, e.g. 3.5 h.") == 8
    assert stated_length("In the cell below (4–6 sentences), explain") == (4, 6, "sentences")
    assert stated_length("(300-500 words, in short sentences)") == (300, 500, "words")


def test_every_written_question_states_a_length_and_is_found():
    """Each lab has a written answer, and every one of them says how long it should be."""
    assert {lab for lab, *_ in WRITTEN} == {p.stem for p in SOLUTIONS}
    assert len(WRITTEN) >= 10
    for lab, q, prompt, answer in WRITTEN:
        assert answer.strip(), (lab, q)
        stated_length(prompt)


@pytest.mark.parametrize("lab, question, prompt, answer", WRITTEN, ids=[f"{w[0]}-{w[1]}" for w in WRITTEN])
def test_a_model_answer_keeps_to_the_length_its_prompt_states(lab, question, prompt, answer):
    problems = length_problems(prompt, answer)
    assert not problems, f"{lab} {question}'s model answer: {'; '.join(problems)}"


def test_the_length_check_fails_a_model_answer_too_short_too_long_or_in_long_sentences():
    prompt = "## Question 9 (3 points, graded by your instructor): x\n\nIn the cell below (3–4 sentences): why?"
    assert length_problems(prompt, "One two three. Four five six. Seven eight nine.") == []
    assert length_problems(prompt, "One two three; four five six. Seven eight nine.") == [
        "2 sentences, the prompt asks for 3–4"]
    assert length_problems(prompt, "A b. C d. E f. G h. I j.") == ["5 sentences, the prompt asks for 3–4"]
    short = "Write it (4–6 words, in short sentences)."
    assert length_problems(short, "One two three four five.") == []
    assert length_problems(short, " ".join(["word"] * 24) + ".") == [
        "24 words, the prompt asks for 4–6",
        f"its sentences average 24.0 words, the prompt asks for short ones (at most {SENTENCE_WORDS} words on "
        "average)"]


# ---- the introductions --------------------------------------------------------------------------------

def intro(path: Path) -> str:
    """The lab's Markdown before its first question (the header, and any story told before question 1)."""
    out = []
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type == "markdown" and HEADING.match(cell.source):
            break
        if cell.cell_type == "markdown":
            out.append(cell.source)
    return "\n\n".join(out)


def intro_problems(text: str) -> list[str]:
    said = lesson_sentences(text)
    lengths = [word_count(s) for s in said]
    out = [f"a sentence of {n} words (at most {INTRO_LONGEST}): {s!r}" for n, s in zip(lengths, said)
           if n > INTRO_LONGEST]
    mean = sum(lengths) / len(lengths)
    if mean > SENTENCE_WORDS:
        out.append(f"its sentences average {mean:.1f} words (at most {SENTENCE_WORDS})")
    return out


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_a_labs_introduction_reads_in_short_sentences(path):
    text = intro(path)
    assert len(lesson_sentences(text)) >= 5, f"{path.name}: no introduction found"
    problems = intro_problems(text)
    assert not problems, f"{path.name}'s introduction: " + "; ".join(problems)


def test_the_intro_check_fails_lab_8s_old_55_word_sentence():
    old = ("**How to work.** Replace each `...` with your answer, then run the check cell below it. The check\n"
           "cells in your copy check that an answer is there and has the right form (a function, a number, a pair);\n"
           "whether it is *right* is decided by your instructor's checks when your lab is graded, on your own\n"
           "numbers (your copy may carry a seed: its numbers are yours, not your classmates'). Questions are\n"
           "independent: a wrong answer to one costs only that question's points.\n")
    problems = intro_problems(old)
    assert problems[0].startswith("a sentence of 55 words"), problems
    assert len(problems) == 2 and problems[1].startswith("its sentences average"), problems
