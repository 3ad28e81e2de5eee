"""Fixtures for console tests: the app on the fake engine (no root), a lab for the real one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile
from tgen_tui.ui.app import TgenApp
from tgen_tui.ui.fake import FakeEngine
from tgen_tui.ui.host import AsyncioEngineHost, fake_engine_cm

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "profiles"


class FrozenClock:
    """A clock the test moves by hand (snapshot tests keep it still)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_app(
    profile: str | Path = PROFILES / "lab.yaml",
    *,
    clock=None,
    keymap: dict[str, str] | None = None,
    json_path: str | None = None,
    conntrack_max: int = 65536,
    loss: float = 0.0,
    tick_s: float = 0.1,
) -> tuple[TgenApp, FakeEngine]:
    """The console on a fake engine, as ``tgen tui PROFILE --fake`` builds it."""
    compiled = compile_profile(load_profile(profile))
    kw = {}
    if clock is not None:
        kw = {"clock": clock, "wall": lambda: 1_790_000_000.0}
    eng = FakeEngine(compiled, conntrack_max=conntrack_max, loss=loss, **kw)
    host = AsyncioEngineHost(lambda: fake_engine_cm(eng))
    app = TgenApp(
        host,
        compiled=compiled,
        profile_path=str(profile),
        keymap=keymap,
        json_path=json_path,
        profiles_dir=str(PROFILES),
        tick_s=tick_s,
    )
    return app, eng


async def settle(pilot, app: TgenApp, cond=None, timeout: float = 10.0) -> None:
    """Let the 10 Hz tick run until ``cond()`` holds; without ``cond``, a couple of ticks.

    A ``cond`` that does not hold within ``timeout`` seconds fails the test, naming what was
    awaited (the condition's source) and the screen the console was on. The timeout is
    generous (a loaded host): a condition that holds returns as soon as it does."""
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    await pilot.pause(0.15)
    if cond is None:
        return
    while not cond():
        if loop.time() >= end:
            pytest.fail(
                f"settle: {_source(cond)} did not hold within {timeout:g} s "
                f"(screen: {type(app.screen).__name__})"
            )
        await pilot.pause(0.05)


def _source(cond) -> str:
    """The awaited condition as written (the source lines of the call), for the message."""
    import inspect

    try:
        return " ".join(line.strip() for line in inspect.getsource(cond).splitlines())
    except (OSError, TypeError):
        return repr(cond)


@pytest.fixture
def lab_copy(tmp_path: Path) -> Path:
    """A writable copy of profiles/lab.yaml (the editor saves into it)."""
    dst = tmp_path / "lab.yaml"
    shutil.copy(PROFILES / "lab.yaml", dst)
    return dst


@pytest.fixture
def ui_nat_lab(nat_lab):
    """A NAT44 lab with a unique prefix, removed afterwards even on failure."""
    return nat_lab
