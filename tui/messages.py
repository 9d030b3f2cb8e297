"""Messages the loading worker posts to the app (past tense, immutable payloads)."""

from __future__ import annotations

from textual.message import Message

from npuscope.analysis import Diagnosis
from npuscope.parsers import Profile


class LoadProgressed(Message):
    """Bytes parsed so far; floods coalesce, only the latest matters."""

    def __init__(self, done: int, total: int, label: str) -> None:
        super().__init__()
        self.done = done
        self.total = total
        self.label = label

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed)


class ProfileLoaded(Message):
    def __init__(self, profile: Profile, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.profile = profile
        self.diagnosis = diagnosis


class LoadFailed(Message):
    def __init__(self, message: str, title: str = "Cannot load") -> None:
        super().__init__()
        self.message = message
        self.title = title
