"""One console at a time: the second browser is told who holds it; closing a page ends its console.

Real `tgen serve` and real `tgen tui --fake` consoles (simulated engine: no root, no
lab), driven over the same websocket protocol the browser page speaks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import aiohttp

from .web_helpers import (
    REPO,
    alive,
    cmdline,
    descendants,
    lab_profile,
    start_serve,
    tgen_argv,
    tx_packets,
)

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


async def _read_until(ws: aiohttp.ClientWebSocketResponse, needle: str, timeout: float = 20) -> str:
    """Terminal text (escape codes removed) received until ``needle`` shows up."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
        if msg.type == aiohttp.WSMsgType.BINARY:
            buf += msg.data
            text = ANSI.sub(b"", buf).decode(errors="replace")
            if needle in text:
                return text
        elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            break
    raise AssertionError(f"{needle!r} not seen; got {ANSI.sub(b'', buf)[-600:]!r}")


async def _wait_gone(pids: list[int], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        await asyncio.sleep(0.1)
    return [p for p in pids if alive(p)]


async def _until(cond, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.2)
    return bool(cond())


def _consoles(server_pid: int) -> list[int]:
    return [p for p in descendants(server_pid) if " tui " in cmdline(p)]


def test_second_browser_is_refused_and_closing_ends_the_console() -> None:
    srv = start_serve("profiles/lab.yaml", "--fake", "--port", "0")
    ws_url = srv.base.replace("http", "ws") + "/ws?width=120&height=40"
    origin = {"Origin": srv.base}

    async def scenario() -> None:
        async with aiohttp.ClientSession() as s:
            first = await s.ws_connect(ws_url, headers=origin)
            await _read_until(first, "Tx pps")  # the port table of the first console
            consoles = _consoles(srv.proc.pid)
            assert len(consoles) == 1 and "--fake" in cmdline(consoles[0])

            second = await s.ws_connect(ws_url, headers=origin)
            text = await _read_until(second, "already open in another browser")
            assert f"console pid {consoles[0]}" in text and "from 127.0.0.1" in text
            assert _consoles(srv.proc.pid) == consoles  # nothing spawned for the second

            await first.close()
            assert await _wait_gone(consoles) == []  # the page went, its console quit

            third = await s.ws_connect(ws_url, headers=origin)  # the console is free again
            await _read_until(third, "Tx pps")
            again = _consoles(srv.proc.pid)
            assert len(again) == 1 and again != consoles
            await second.close()
            # the server stops with a console open: it quits that console too
            assert await asyncio.to_thread(srv.stop) == 0
            assert await _wait_gone(again) == []
            await third.close()

    try:
        asyncio.run(scenario())
    finally:
        srv.stop()
    out = srv.output()
    assert "refused a second console" in out and "Traceback" not in out
    assert descendants(srv.proc.pid) == []


def test_a_console_that_fails_shows_its_error_in_the_page(tmp_path) -> None:
    """No --fake and a namespace that does not exist: the console exits, the page says why."""
    prof = tmp_path / "gone.yaml"
    prof.write_text(
        "name: gone\nports:\n  p0: {interface: p0, netns: tgen-web-no-such-ns}\n"
        "streams:\n  - name: s\n    port: p0\n    eth: {src: 02:00:00:00:00:01, dst: 02:00:00:00:00:02}\n"
        "    ipv4: {src: 198.18.0.2, dst: 198.19.0.2}\n    udp: {src_port: 1, dst_port: 7}\n"
        "    size: 64\n    rate: {pps: 10}\n"
    )
    srv = start_serve(str(prof), "--port", "0")

    async def scenario() -> str:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(
                srv.base.replace("http", "ws") + "/ws", headers={"Origin": srv.base}
            )
            text = await _read_until(ws, "close or reload this page")
            await ws.close()
            return text

    try:
        text = asyncio.run(scenario())
    finally:
        assert srv.stop() == 0
    assert "tgen: error:" in text
    assert "tgen-web-no-such-ns" in text or "needs root" in text
    assert descendants(srv.proc.pid) == []


def test_a_second_server_on_the_same_ports_is_refused_by_the_port_lock(
    web_lab: str, tmp_path: Path
) -> None:
    """Two servers (or a server and `tgen run`) never drive the same ports: the lock says who."""
    profile = tmp_path / "web.yaml"
    profile.write_text(lab_profile(web_lab))
    a = start_serve(str(profile), "--port", "0", "--cores", "1")
    b = start_serve(str(profile), "--port", "0", "--cores", "1")

    async def scenario() -> tuple[int, str, subprocess.CompletedProcess]:
        async with aiohttp.ClientSession() as s:
            ws_a = await s.ws_connect(
                a.base.replace("http", "ws") + "/ws", headers={"Origin": a.base}
            )
            await _read_until(ws_a, "Tx pps")
            (holder,) = _consoles(a.proc.pid)
            ws_b = await s.ws_connect(
                b.base.replace("http", "ws") + "/ws", headers={"Origin": b.base}
            )
            text = await _read_until(ws_b, "close or reload this page")
            run = await asyncio.to_thread(
                subprocess.run,
                tgen_argv("run", str(profile), "--duration", "1", "--quiet"),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=REPO,
            )
            await ws_b.close()
            # Ctrl-C in a terminal reaches the whole group: server, console and workers
            await ws_a.send_str(json.dumps(["stdin", "0"]))
            await ws_a.send_str(json.dumps(["stdin", "s"]))
            before = tx_packets(web_lab)
            assert await _until(lambda: tx_packets(web_lab) - before > 200), "p0 never sent"
            group = [holder, *descendants(holder)]
            assert len(group) >= 2  # the console and its workers
            os.killpg(a.proc.pid, signal.SIGINT)
            assert await asyncio.to_thread(a.proc.wait, 30) == 0
            assert await _wait_gone(group) == []
            stopped = tx_packets(web_lab)
            await asyncio.sleep(0.5)
            assert tx_packets(web_lab) == stopped
            return holder, text, run

    try:
        holder, text, run = asyncio.run(scenario())
    finally:
        assert a.stop() == 0 and b.stop() == 0
    assert f"port p0 is in use by tgen pid {holder} (tgen tui web.yaml" in text.replace("\r\n", " ")
    assert run.returncode == 3
    assert run.stderr.startswith(
        f"tgen: error: port p0 is in use by tgen pid {holder} (tgen tui web.yaml"
    )
    assert descendants(a.proc.pid) == [] and descendants(b.proc.pid) == []
