"""Derived profiles: a validated profile, changed as plain data, validated again.

Every part that runs a variant of the user's profile (a trial at another frame size, a
seed from the command line, the TCP handshake's phase profiles, the RFC 9693 Responder's
reply stream) makes it here, so a variant is always a valid :class:`Profile` and a
change that makes it invalid is one line of bad input naming the field.
"""

from __future__ import annotations

from collections.abc import Callable

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles.models import Profile


def revalidate(profile: Profile, change: Callable[[dict], None]) -> Profile:
    """``profile`` as a dict (JSON mode, defaults left out), changed in place by
    ``change``, and validated again; BadInput names the first field that no longer
    validates."""
    from pydantic import ValidationError

    d = profile.model_dump(mode="json", exclude_none=True)
    change(d)
    try:
        return Profile.model_validate(d)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise BadInput(f"{where}: {first.get('msg')}") from None


def with_seed(profile: Profile, seed: int | None) -> Profile:
    """The profile with another PRNG seed (``--seed``), or as it is for None."""
    if seed is None:
        return profile
    return revalidate(profile, lambda d: d.__setitem__("seed", seed))


def with_pacing(profile: Profile, pacing: str | None) -> Profile:
    """Every port with the same ``pacing`` (``--pacing``), or the profile as it is for None."""
    if pacing is None:
        return profile

    def change(d: dict) -> None:
        for port in d.get("ports", {}).values():
            port["pacing"] = pacing

    return revalidate(profile, change)


def with_frame_size(profile: Profile, size: int) -> Profile:
    """Every stream of the profile at one fixed frame size (bytes incl. FCS)."""

    def change(d: dict) -> None:
        for s in d["streams"]:
            s["size"] = size

    return revalidate(profile, change)


__all__ = ["revalidate", "with_frame_size", "with_seed"]
