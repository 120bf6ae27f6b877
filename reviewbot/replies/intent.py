"""What a human means in one of the bot's threads, beyond the commands: a wish to teach it.

``@reviewbot don't flag this, we compare to None on purpose`` asks the reviewer to stop
flagging a kind of code: :func:`teaching_intent` recognises that wish, conservatively (a
wish it misses gets an ordinary answer; one it invents would propose a learning nobody
asked for, so it would rather miss):

- the note mentions the bot (``@<bot>``, not inside code or a quote);
- once quotes (lines starting with ``>``), code blocks and the mention are taken out, one
  sentence says not to flag something, in the words a learning that suppresses findings uses
  (``reviewbot.learnings.EXCLUSION_WORDS``: "don't flag", "do not report", "stop flagging",
  "never comment on", "no need to mention", ...);
- the note asks nothing (no sentence ends with "?": a question gets an answer), the sentence
  is no condition or hypothesis ("if", "why", "would", "could", ... before the words), and the
  words are not themselves negated ("don't stop flagging this");
- what is left fits a learning (:data:`reviewbot.learnings.MAX_LEARNING_CHARS`).

The wish's text is what the human wrote, on one line; :func:`mentioned_globs` reads the path
globs it names ("in tests/**", "under src/legacy/"), those with a ``/`` or ``*`` that are
usable globs (``reviewbot.rules.ruleset``), so a learning can be scoped as the human said.

Owns: :class:`TeachingIntent`, :func:`teaching_intent`, :func:`mentioned_globs`. Pure: text in,
data out. Must not: make a learning (``reviewbot.learnings.teaching``) or decide who may.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reviewbot.learnings.learning import EXCLUSION_WORDS, MAX_LEARNING_CHARS
from reviewbot.rules.pathglob import glob_problem

__all__ = ["TeachingIntent", "mentioned_globs", "teaching_intent"]

CODE_BLOCK = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
QUOTE_LINE = re.compile(r"^[ \t]*>.*$", re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# A sentence ends at ".", "!", "?" or a line's end; a "." inside a word ("app.py") is no end.
SENTENCE = re.compile(r"(?:[^.!?\n]|\.(?=[^\s.!?]))+[.!?]*")
TYPOGRAPHIC_APOSTROPHE = "\u2019"  # "don’t", as phones and some keyboards write it
# Words that make the sentence a question, a condition or a hypothesis rather than a wish.
NOT_A_WISH = re.compile(
    r"\b(?:why|whether|if|unless|would|could|might|can|did|does|didn't|doesn't|wouldn't|"
    r"couldn't|ok\s+to|okay\s+to)\b",
    re.IGNORECASE,
)
NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bno)\s*$", re.IGNORECASE)
GLOB_AFTER = re.compile(
    r"\b(?:in|under|inside|within|for)\s+`?([\w.*!/-]*[/*][\w.*!/-]*)`?", re.IGNORECASE
)
TRAILING_PUNCTUATION = ".,;:)"
WHITESPACE_RUN = re.compile(r"\s+")


@dataclass(frozen=True)
class TeachingIntent:
    """A wish to stop flagging something: the human's words, and the globs they name."""

    text: str  # one line, the mention taken out
    globs: tuple[str, ...] = ()


def _mention(bot_username: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.@-])@{re.escape(bot_username)}(?![\w.-])", re.IGNORECASE)


def teaching_intent(note: str, bot_username: str) -> TeachingIntent | None:
    """The wish to teach the bot that ``note`` states (module notes), or None."""
    plain = note.replace(TYPOGRAPHIC_APOSTROPHE, "'")
    prose = QUOTE_LINE.sub("", CODE_BLOCK.sub("", plain))
    mention = _mention(bot_username)
    if not mention.search(INLINE_CODE.sub("", prose)):
        return None
    addressed = re.compile(rf"{mention.pattern}(?:[ \t]*[,:])?", re.IGNORECASE)
    text = WHITESPACE_RUN.sub(" ", addressed.sub("", prose)).strip(" ,:;-")
    if not text or len(text) > MAX_LEARNING_CHARS:
        return None
    sentences = SENTENCE.findall(INLINE_CODE.sub(_blank, text))
    if any(sentence.rstrip().endswith("?") for sentence in sentences):
        return None  # a note that asks something gets an answer, not a proposal
    if not any(_is_wish(sentence) for sentence in sentences):
        return None
    return TeachingIntent(text=text, globs=mentioned_globs(text))


def _is_wish(sentence: str) -> bool:
    """One sentence says not to flag something, as a wish (module notes)."""
    found = EXCLUSION_WORDS.search(sentence)
    if found is None:
        return False
    before = sentence[: found.start()]
    return not NOT_A_WISH.search(before) and not NEGATED.search(before)


def _blank(match: re.Match[str]) -> str:
    """Code keeps its length but none of its words count."""
    return " " * len(match.group(0))


def mentioned_globs(text: str) -> tuple[str, ...]:
    """The usable path globs ``text`` names after "in", "under", "inside", "within" or "for"
    (with a ``/`` or ``*``; a folder "src/legacy/" means everything under it), in order."""
    found: list[str] = []
    for match in GLOB_AFTER.finditer(text):
        glob = match.group(1).rstrip(TRAILING_PUNCTUATION).lstrip("/")
        if glob.endswith("/"):
            glob += "**"
        usable = ("/" in glob or "*" in glob) and glob_problem(glob) is None
        if usable and glob not in found:
            found.append(glob)
    return tuple(found)
