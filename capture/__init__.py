"""Capture layer: Textual-free code that records profiles on training hosts.

`bootstrap.py` is a self-contained script (standard library and ``paddle`` only, never
``npuscope``) that runs a user's PaddlePaddle training script unchanged and profiles a window of
its training steps. It is meant to be uploaded and run as a file, not imported:
`bootstrap_source()` returns its text for that upload.
"""

from pathlib import Path

BOOTSTRAP_PATH = Path(__file__).with_name("bootstrap.py")


def bootstrap_source() -> str:
    """The bootstrap script's text, ready to upload to a remote host."""
    return BOOTSTRAP_PATH.read_text(encoding="utf-8")


__all__ = ["BOOTSTRAP_PATH", "bootstrap_source"]
