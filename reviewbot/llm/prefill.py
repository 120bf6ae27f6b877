"""Prefill share: how many prompt tokens one review may have waiting for their first token.

vLLM prefills concurrent long prompts one after another (chunked prefill, first come first
served): measured on one H200, the 8th of 8 simultaneous 61K-token prompts waited 12.6 s for
its first token while one alone took 1.8 s (issue 12). A review that sends all its large chunks
at once therefore puts every other merge request's first token behind all of them.

A :class:`PrefillGate` belongs to one review (one ``ChunkRunner.review_chunks`` call). A request
enters it with its estimated prompt tokens before it asks for a model slot, and leaves it at its
first streamed token (its prefill is done) or when the request ends. The gate lets a request in
while the tokens waiting stay within ``limit``, so another review's request queues behind at
most ``limit`` tokens of this one; a request larger than ``limit`` goes alone. Once prefilled,
requests decode together, so small chunks still run at full concurrency and a review alone on
the server loses only the short gap between one prompt's first token and the next prompt's
arrival (``tests/bench/bench_prefill.py`` measures both).

Owns: :class:`PrefillGate` (one review's prompt tokens waiting for their first token) and the check
of its limit. Must not: send a request or hold a model slot (the runner does both).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = [
    "NO_PREFILL_LIMIT",
    "PrefillGate",
    "PrefillTicket",
    "check_prefill_limit",
    "first_token_callback",
]

NO_PREFILL_LIMIT = 0  # the setting's value that turns the gate off


def check_prefill_limit(limit: int, name: str = "the prefill limit") -> None:
    """Refuse a limit below 0 (0 is no limit), naming the setting it came from."""
    if limit < NO_PREFILL_LIMIT:
        raise ValueError(f"{name} must be 0 (off) or more, got {limit}")


class PrefillTicket:
    """One request's place in the gate; :meth:`release` may be called any number of times."""

    def __init__(self, gate: PrefillGate, tokens: int, waited_s: float) -> None:
        self._gate = gate
        self.tokens = tokens
        self.waited_s = waited_s
        self.released = False

    def release(self) -> None:
        self._gate.leave(self)


class PrefillGate:
    """Prompt tokens of one review awaiting their first token, at most ``limit`` at a time.

    ``limit`` 0 (:data:`NO_PREFILL_LIMIT`) lets every request in at once. Requests are let in
    in the order they asked, so a large chunk is never overtaken forever by small ones.
    """

    def __init__(self, limit: int) -> None:
        check_prefill_limit(limit)
        self.limit = limit
        self._cond = threading.Condition()
        self._waiting_tokens = 0  # admitted, not yet at their first token
        self._requests_in_prefill = 0
        self._queue: list[object] = []
        self.peak_tokens = 0

    @property
    def waiting_tokens(self) -> int:
        with self._cond:
            return self._waiting_tokens

    @property
    def queued_requests(self) -> int:
        """Requests waiting to enter."""
        with self._cond:
            return len(self._queue)

    def enter(self, tokens: int) -> PrefillTicket:
        """Wait until a request of ``tokens`` prompt tokens may be sent; its ticket."""
        tokens = max(0, tokens)
        started = time.monotonic()
        turn = object()
        with self._cond:
            self._queue.append(turn)
            try:
                while not self._may_enter(turn, tokens):
                    self._cond.wait()
            finally:
                self._queue.remove(turn)
                self._cond.notify_all()
            self._waiting_tokens += tokens
            self._requests_in_prefill += 1
            self.peak_tokens = max(self.peak_tokens, self._waiting_tokens)
        return PrefillTicket(self, tokens, time.monotonic() - started)

    def _may_enter(self, turn: object, tokens: int) -> bool:
        if self.limit == NO_PREFILL_LIMIT:
            return True
        if self._queue[0] is not turn:
            return False
        # Alone, any request goes: one larger than the limit must not wait forever.
        return self._requests_in_prefill == 0 or self._waiting_tokens + tokens <= self.limit

    def leave(self, ticket: PrefillTicket) -> None:
        """The ticket's request has its first token, or ended; a second call does nothing."""
        with self._cond:
            if ticket.released:
                return
            ticket.released = True
            self._waiting_tokens -= ticket.tokens
            self._requests_in_prefill -= 1
            self._cond.notify_all()


def first_token_callback(
    ticket: PrefillTicket, first_token: threading.Event | None
) -> Callable[[], None]:
    """What to do at a request's first token: leave the prefill gate, wake the warm-up wait."""

    def on_first_token() -> None:
        ticket.release()
        if first_token is not None:
            first_token.set()

    return on_first_token
