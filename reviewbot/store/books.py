"""The store's books: the query objects of one part of the database (the team's learnings, the
answers in the bot's threads), each built from a :class:`~reviewbot.store.store.Store` here and
nowhere else (the App hands them out: :meth:`reviewbot.app.App.learnings`,
:meth:`reviewbot.app.App.replies`).

Owns: building each book from a Store's engine. Must not: hold a query (each book's
module does).
"""

from __future__ import annotations

from reviewbot.store.learning_queries import LearningBook
from reviewbot.store.reply_queries import ReplyStore
from reviewbot.store.store import Store, utc_now

__all__ = ["learning_book", "reply_book"]


def learning_book(store: Store) -> LearningBook:
    """The learnings of ``store``'s database."""
    return LearningBook(store.engine)


def reply_book(store: Store) -> ReplyStore:
    """The answers in threads of ``store``'s database, timed by the wall clock (a reply's age
    is measured against the worker's clock, reviewbot.replies.answer)."""
    return ReplyStore(store.engine, utc_now)
