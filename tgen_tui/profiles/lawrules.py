"""What every law-drawn quantity of a profile shares (frame sizes, an app flow's response
sizes and think times): the checks of a law's parameter and its default, in one place.

Imports: nothing heavy (the profile models import it at load)."""

from __future__ import annotations

#: the law's parameter when none is given: normal sd as a fraction of the mean, lognormal
#: sigma of ln(x), gamma/weibull/pareto shape
DEFAULT_PARAM = {"normal": 0.25, "lognormal": 0.5, "gamma": 2.0, "weibull": 1.5, "pareto": 2.5}


def law_problem(dist: str, param: float | None) -> str | None:
    """What is wrong with ``param`` for ``dist``, in one line; None when it is fine."""
    if dist == "exponential" and param is not None:
        return "param: the exponential law has none (give the mean)"
    if dist == "pareto" and param is not None and param <= 1:
        return "param: a pareto shape must be > 1 for the mean to exist"
    return None


def law_param(dist: str, param: float | None) -> float:
    """The parameter the draw uses: the given one, else the law's default."""
    return param if param is not None else DEFAULT_PARAM.get(dist, 0.0)


__all__ = ["DEFAULT_PARAM", "law_param", "law_problem"]
