"""Profile files to polars frames: every msprof export layout, torch_npu, Paddle traces.

This layer never imports Textual or Rich: the headless commands and the explorer share it.
"""

from .cache import FrameCache
from .errors import ProfileError
from .layout import Capture, Source, discover
from .profile import Cancelled, Profile, ReadOptions, open_profile

__all__ = [
    "Cancelled",
    "Capture",
    "FrameCache",
    "Profile",
    "ProfileError",
    "ReadOptions",
    "Source",
    "discover",
    "open_profile",
]
