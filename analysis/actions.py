"""What a finding's advice lets the user try without a code change: its actions, as data.

An action is a switch the advice names with its value, `KEY=VALUE` in its words, that an
experiment (`npuscope experiment`, the explorer's `x`) can set on the next capture: today an
environment variable of the job. `SWITCHES` lists the switches npuscope knows, per framework;
a finding's actions are those its advice names (analysis/advice.py picks the words for the
capture's framework and device, so an action never contradicts the capture). Advice that needs
a code change (a call such as torch_npu.npu.set_compile_mode, a model or data-loader edit) has
no action: `NO_ACTION` says so where the actions are shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ActionKind = Literal["env"]


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    key: str
    value: str
    framework: str  # whose switch it is (analysis/framework.py's names)
    effect: str = ""  # what it changes, in a few words

    @property
    def text(self) -> str:
        """As the user types it: `--env` takes this."""
        return f"{self.key}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "value": self.value, "framework": self.framework}


SWITCHES: tuple[Action, ...] = (
    Action("env", "FLAGS_npu_jit_compile", "false", "paddle", "turns off online (JIT) operator compilation"),
    Action(
        "env",
        "PYTORCH_NPU_ALLOC_CONF",
        "expandable_segments:True",
        "torch_npu",
        "lets the caching allocator grow segments instead of fragmenting",
    ),
)
"""Every switch an action can be: an environment variable with the value the advice gives."""

NO_ACTION = "needs a code change: no switch to try (the advice says what to change)"


def actions_in(advice: str) -> tuple[Action, ...]:
    """The switches `advice` names with their value, in the order of SWITCHES."""
    return tuple(a for a in SWITCHES if a.text in advice)


def action_for(key: str, value: str) -> Action | None:
    """The known switch `KEY=VALUE` is, if any (what motivates an experiment's change)."""
    return next((a for a in SWITCHES if a.key == key and a.value.lower() == value.lower()), None)
