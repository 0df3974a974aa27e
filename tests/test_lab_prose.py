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
- **Every Markdown cell** a learner reads (questions, "what this run shows" boxes, the solution's "why it
  came out this way"; not the written answers' model answers and mark schemes, which the learner's copy
  replaces and the length check bounds) holds no sentence over ``INTRO_LONGEST`` words, in the labs of
  ``EVERY_CELL``. A quoted box is read without its ``>`` marks, so its paragraphs and sentences split as
  any other's. Before: 15 such sentences in those five labs (Lab 3 3, Lab 4 1, Lab 8 3, the capstone 6,
  Lab 6 none; the longest the capstone's question 5 prompt, 122 words, then Lab 8's question 7, 83); each
  was split, its numbers, links and checks unchanged. Labs 1, 5 and 7 joined later (they were ``PENDING``):
  18 more such sentences (Lab 1 6, Lab 5 2, Lab 7 10; the longest Lab 7's question 6 note, 72 words, then
  Lab 5's question 6 prompt, 67), split the same way. Every lab is bounded now.
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


#: the most words a model answer's sentences may average (issue 32): before, 32.6 to 45.0 in seven of the ten
#: answers; their long sentences were split inside each prompt's stated range, and the highest now is Lab 8's
#: question 7, 32.6, whose 8 sentences are its prompt's maximum (shorter only by cutting what it says)
MODEL_ANSWER_MEAN = 33


@pytest.mark.parametrize("lab, question, prompt, answer", WRITTEN, ids=[f"{w[0]}-{w[1]}" for w in WRITTEN])
def test_a_model_answer_reads_in_sentences_of_moderate_length(lab, question, prompt, answer):
    lengths = [word_count(s) for s in sentences(answer)]
    mean = sum(lengths) / len(lengths)
    assert mean <= MODEL_ANSWER_MEAN, f"{lab} {question}'s model answer: its sentences average {mean:.1f} words"


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


# ---- every Markdown cell -------------------------------------------------------------------------------

#: the labs whose every Markdown cell a learner reads is bounded (``INTRO_LONGEST`` words a sentence): all
EVERY_CELL = ("01-namespaces-cgroups", "03-oom-killer", "04-images", "05-slurm", "06-gang-deadlock", "07-barrier",
              "08-gang-cost", "09-capstone")
QUOTE = re.compile(r"^[ \t]*>[ \t]?", re.M)


def cell_sentences(source: str) -> list[str]:
    """A Markdown cell's sentences, counted as the book's lessons are (``lesson_sentences``), a quoted box
    read without its ``>`` marks."""
    return lesson_sentences(QUOTE.sub("", source))


def long_sentences(path: Path) -> list[tuple[int, int, str]]:
    """(cell index, words, sentence) of every sentence over ``INTRO_LONGEST`` words in the lab's Markdown
    cells, leaving out the written answers' cells (the model answer and the mark scheme: the learner's copy
    holds "YOUR ANSWER HERE")."""
    out = []
    for i, cell in enumerate(nbformat.read(path, 4).cells):
        if cell.cell_type != "markdown" or cell.metadata.get("course", {}).get("manual"):
            continue
        out += [(i, n, s) for s in cell_sentences(cell.source) if (n := word_count(s)) > INTRO_LONGEST]
    return out


def test_every_lab_is_bounded_cell_by_cell():
    assert sorted(EVERY_CELL) == [p.stem for p in SOLUTIONS]


@pytest.mark.parametrize("lab", EVERY_CELL)
def test_every_markdown_cell_of_a_lab_reads_in_sentences_of_at_most_40_words(lab):
    found = long_sentences(ROOT / "solutions" / f"{lab}.ipynb")
    assert not found, f"{lab}: {len(found)} sentences over {INTRO_LONGEST} words: " + "; ".join(
        f"cell {i}, {n} words: {s!r}" for i, n, s in found)


def test_the_cell_check_reads_a_box_without_its_marks_and_fails_the_capstones_old_question_5():
    box = ("> **What this run shows, and what it does not.**\n>\n> **It shows** the real kernel's OOM killer\n"
           "> at work. **It does not show** Kubernetes.")
    assert cell_sentences(box) == ["**What this run shows, and what it does not.**",
                                   "**It shows** the real kernel's OOM killer at work.",
                                   "**It does not show** Kubernetes."]
    # read with its marks, the box's title and first sentence are one (Lab 3's box counted 45 words so)
    assert lesson_sentences(box)[0].startswith("> **What this run shows, and what it does not.** > > **It shows**")
    old = ("## Question 5 (4 points, graded by your instructor): defend your choice\n\n"
           "Write the recommendation you would send the platform team (300–500 words, in short sentences), in the "
           "cell below:\nwhich scheduler and configuration, and why, with your numbers from questions 1–4; what it\n"
           "guarantees and at which level (placement, quota, allocation), and what it does not: why GPUs stayed\n"
           "free while jobs waited (question 4); why the jobs of question 2 went before `urgent`, and what\n"
           "`urgent` did to the fine-tunes; one alternative you rejected and the\n"
           "consequence that made you reject it (run it); what your checkpoint interval costs and saves (the write "
           "time against the lost work, with question 3's waste and why a shorter or longer interval would be "
           "worse); and\none risk your choice does not remove.")
    assert [word_count(s) for s in cell_sentences(old)] == [122]
