"""The wish to teach the bot in one of its threads (reviewbot.replies.intent), on many
phrasings: recognised when it is one, conservatively (a question, a condition, a quote, code
or a negated wish is none); the globs a wish names. End to end: tests/test_reply_teaching.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.learnings.learning import EXCLUSION_WORDS, MAX_LEARNING_CHARS
from reviewbot.replies.intent import mentioned_globs, teaching_intent
from tests.hypothesis_profiles import examples

BOT = "reviewbot"


@pytest.mark.parametrize(
    ("note", "text"),
    [
        ("@reviewbot don't flag this", "don't flag this"),
        ("@reviewbot don’t flag this", "don't flag this"),  # a typographic apostrophe
        ("@reviewbot dont flag this please", "dont flag this please"),
        ("@ReviewBot Do not flag this, we compare to None on purpose.", None),
        ("please @reviewbot stop flagging this", "please stop flagging this"),
        ("@reviewbot never report this kind of thing in tests/**", None),
        ("@reviewbot: no need to mention it here!", "no need to mention it here!"),
        ("thanks @reviewbot, don't comment on asserts in tests", None),
        (
            "We do this on purpose. @reviewbot, don't flag it.",
            "We do this on purpose. don't flag it.",
        ),
        ("@reviewbot\n\ndon't flag `x == None` here, it is a sentinel", None),
        ("@reviewbot don't flag this in app.py, it is fine", None),
    ],
)
def test_a_wish_is_recognised(note: str, text: str | None) -> None:
    intent = teaching_intent(note, BOT)
    assert intent is not None
    if text is not None:
        assert intent.text == text
    assert EXCLUSION_WORDS.search(intent.text)  # so the learning suppresses, not only instructs
    assert "@reviewbot" not in intent.text.lower()


@pytest.mark.parametrize(
    "note",
    [
        "@reviewbot why?",
        "@reviewbot don't flag this?",  # a question
        "@reviewbot should I not flag this?",
        "@reviewbot don't flag app.py's None check?",  # a "." inside a word ends no sentence
        "@reviewbot why don't you flag the other one",
        "@reviewbot if you don't flag this we miss bugs",
        "@reviewbot would you not flag this next time",
        "@reviewbot could you stop flagging these",
        "@reviewbot don't stop flagging this",  # negated: flag it
        "@reviewbot never stop reporting these",
        "@reviewbot the docs say don't flag this, but is that right?",
        "@reviewbot don't flag this. Why would that be wrong?",  # asks: gets an answer
        "> @reviewbot don't flag this\nno idea what that meant",  # quoted
        "```\n@reviewbot don't flag this\n```",  # code
        "`@reviewbot` don't flag this",  # the mention is code
        "@reviewbot `don't flag` is what the linter prints",  # the words are code
        "don't flag this",  # no mention
        "mail a@reviewbot.example: don't flag this",  # not a mention
        "@reviewbots don't flag this",  # another user
        "@reviewbot I don't think this is a bug",
        "@reviewbot please flag more of these",
        "@reviewbot don't flag this " + "x" * 600,  # too long for a learning
    ],
)
def test_what_is_no_wish_is_not_recognised(note: str) -> None:
    assert teaching_intent(note, BOT) is None


@pytest.mark.parametrize(
    ("text", "globs"),
    [
        ("don't flag == None in tests/**", ("tests/**",)),
        ("don't flag it under src/legacy/", ("src/legacy/**",)),
        ("don't flag it in `docs/*.md` or in scripts/*.sh.", ("docs/*.md", "scripts/*.sh")),
        ("don't flag it for *.py files", ("*.py",)),
        ("don't flag it in app.py", ()),  # no / or *: maybe a word, never guessed
        ("don't flag it in general", ()),
        ("don't flag it in ../outside/**", ()),  # not a usable glob
        ("don't flag it in /tests/**", ("tests/**",)),
    ],
)
def test_the_globs_a_wish_names(text: str, globs: tuple[str, ...]) -> None:
    assert mentioned_globs(text) == globs


def test_a_wish_keeps_its_globs() -> None:
    intent = teaching_intent("@reviewbot don't flag this in tests/**", BOT)
    assert intent is not None and intent.globs == ("tests/**",)


@given(st.text(max_size=300), st.sampled_from(["", "@reviewbot ", "@reviewbot don't flag "]))
@settings(max_examples=examples(300), deadline=None)
def test_any_note_gives_a_wish_that_fits_a_learning_or_none(note: str, prefix: str) -> None:
    intent = teaching_intent(prefix + note, BOT)
    if intent is not None:
        assert 0 < len(intent.text) <= MAX_LEARNING_CHARS
        assert EXCLUSION_WORDS.search(intent.text)
