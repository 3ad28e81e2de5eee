"""What the profile models share (profiles/models.py, profiles/transport.py): the strict
base model, seconds, and the start/stop/on-off schedule of a stream or a transport flow."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from tgen_tui.profiles.units import parse_duration

Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]


def check_netns_name(v: object) -> object:
    """A network namespace name (a file in /run/netns): no '/', not . or .., no NUL."""
    if isinstance(v, str) and ("/" in v or "\0" in v or v in ("", ".", "..")):
        raise ValueError(f"{v!r} is not a network namespace name (a name in /run/netns)")
    return v


NetnsName = Annotated[str, BeforeValidator(check_netns_name)]


class Strict(BaseModel):
    """Base: unknown keys are errors; values are validated on assignment (editor)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Schedule(Strict):
    """Timed start/stop relative to the port start, and optional on/off periods."""

    start: Seconds = Field(0.0, description="Start after, e.g. 2s")
    stop: Seconds | None = Field(None, description="Stop at (from the port start), e.g. 5s")
    on: Seconds = Field(0.0, description="On period of an on/off cycle (0 = always on)")
    off: Seconds = Field(0.0, description="Off period of an on/off cycle")

    @model_validator(mode="after")
    def _order(self):
        if self.stop is not None and self.stop <= self.start:
            raise ValueError(f"stop ({self.stop:g} s) must be after start ({self.start:g} s)")
        if (self.on > 0) != (self.off > 0):
            raise ValueError("on and off go together: give both or neither")
        return self


__all__ = ["NetnsName", "Schedule", "Seconds", "Strict", "check_netns_name"]
