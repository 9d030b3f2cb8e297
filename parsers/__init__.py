"""Profile files to polars frames: every msprof export layout, torch_npu, Paddle traces.

This layer never imports Textual or Rich: the headless commands and the explorer share it.
"""

from .cache import FrameCache
from .errors import ProfileError
from .layout import Capture, Source, discover
from .profile import Profile, open_profile
from .progress import Cancelled
from .read_options import ReadOptions

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
