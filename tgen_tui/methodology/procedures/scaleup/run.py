"""Scale-up over cores: one run of a test per core count k, with the tester's workers
pinned to the last k cores, and ``relative scale-up = rate_k / (k × rate_1)``.

The state's test is ``scaleup-TEST``; its body holds ``counts`` (the core counts),
``avail`` (this machine's CPUs) and, as they run, ``runs``: one state per core count.
The procedure of TEST comes from ``scaled`` (the registry's lookup, passed in: a
procedure never imports the registry that imports it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from tgen_tui.methodology.kit.procedure import Procedure
from tgen_tui.methodology.kit.state import RunState

Lookup = Callable[[str], Procedure[Any]]  # scaleup-TEST -> TEST's procedure


async def run_scaleup(state: RunState, *, scaled: Lookup) -> None:
    """Run the scaled test once per core count, each in its own state."""
    test = state.test.split("-", 1)[1]
    inner = scaled(state.test)
    b = state.body
    for k in b["counts"]:
        cores = b["avail"][-k:]
        # over lanes: each port gets k sender lanes on the k cores (one port over its cores)
        lanes = k if b.get("over") == "lanes" else state.params.lanes
        how = f", {k} lane(s) per port" if b.get("over") == "lanes" else ""
        state.note(f"scaleup: {test} with {k} core(s): {cores}{how}")
        if state.progress:
            state.progress.restart()
        sub = RunState(
            test=test,
            params=dataclasses.replace(state.params, cores=cores, lanes=lanes),
            progress=state.progress,
        )
        b.setdefault("runs", []).append({"cores": k, "core_list": list(cores), "state": sub})
        await inner.run(sub)
        sub.finished = time.time()


def relative_scaleup(rates: dict[int, float | None]) -> dict[int, float | None]:
    """``rate_k / (k × rate_1)`` for each core count k (None where a rate is missing)."""
    r1 = rates.get(1)
    return {k: (None if (r is None or not r1) else r / (k * r1)) for k, r in sorted(rates.items())}
