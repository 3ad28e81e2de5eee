"""The web server of ``tgen serve``: textual-serve's page, one console at a time, guarded.

textual-serve spawns one app process per browser websocket. Here that process is
``tgen tui PROFILE``, and its engine owns the ports, so this server lets exactly one
session run: a second browser's page says who holds the console (when, from where,
which pid), and nothing is spawned for it. A reloaded page waits for its previous
console to stop, then gets a new one. The port locks (:mod:`tgen_tui.engine.portlock`)
are the second fence, against a ``tgen run`` or another server on the same ports.

Every request passes :mod:`.access` before any handler runs: 403 and nothing started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
import textual_serve
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.web import access

log = logging.getLogger("tgen.serve")

QUIT_GRACE_S = 10.0  # a console stops its workers and writes its results on quit
TERM_GRACE_S = 3.0
HANDOVER_WAIT_S = 15.0  # a reloaded page waits this long for the previous console to stop


class ConsoleService(AppService):
    """One console process. Its stderr goes to a file so that, when the console exits on
    its own with an error (not root, a port in use), the page shows that error."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.quitting = False
        self.exit_requested = False
        fd, name = tempfile.mkstemp(prefix="tgen-serve-", suffix=".stderr")
        os.close(fd)
        self.stderr_path = Path(name)

    async def _open_app_process(self, width: int = 80, height: int = 24):  # type: ignore[override]
        self.command = f"exec {self.command} 2>>{shlex.quote(str(self.stderr_path))}"
        return await super()._open_app_process(width, height)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        return self._process is None or self._process.returncode is None

    async def on_meta(self, data: bytes) -> None:
        """Hold the console's "exit" until it has exited: a failure is shown, not closed over."""
        if json.loads(data).get("type") == "exit":
            self.exit_requested = True
            return
        await super().on_meta(data)

    async def run(self) -> None:
        await super().run()  # returns when the console closes its stdout
        assert self._process is not None
        rc = await self._process.wait()
        tail = self.stderr_tail()
        if tail:
            log.warning("console pid %s (exit %s) said: %s", self._process.pid, rc, tail[-1])
        if rc == 0 or self.quitting:  # q in the console: the page shows "Session ended"
            with contextlib.suppress(Exception):
                await self.remote_close()
            return
        text = "\r\n".join(tail[-8:]) or f"the console exited with status {rc}"
        msg = f"\x1b[0m\x1b[2J\x1b[H\x1b[1;31m{text}\x1b[0m\r\n\r\n(close or reload this page)\r\n"
        with contextlib.suppress(Exception):
            await self.remote_write_bytes(msg.encode())

    def stderr_tail(self) -> list[str]:
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [ln for ln in lines if ln.strip()][-20:]

    async def stop_within(self, grace: float = QUIT_GRACE_S) -> int | None:
        """Ask the console to quit, then SIGTERM, then SIGKILL; return its exit status."""
        proc = self._process
        if proc is None:
            self.stderr_path.unlink(missing_ok=True)
            return None
        self.quitting = True
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send_meta({"type": "quit"}), 1.0)
        for sig, wait in ((None, grace), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if proc.returncode is not None:
                break
            if sig is not None:
                log.warning("console pid %s did not quit; sending %s", proc.pid, sig.name)
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), wait)
        if self._task is not None:
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(self._task, 2.0)
            self._task = None
        self.stderr_path.unlink(missing_ok=True)
        return proc.returncode


@dataclass
class ConsoleHolder:
    """Who holds the one running console: their address, since when, their page and console."""

    peer: str
    started: float = field(default_factory=time.time)
    service: ConsoleService | None = None
    websocket: web.WebSocketResponse | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def describe(self) -> str:
        pid = f", console pid {self.service.pid}" if self.service and self.service.pid else ""
        return f"opened {time.strftime('%H:%M:%S', time.localtime(self.started))} from {self.peer}{pid}"


def _index_template() -> str:
    """textual-serve's page without its web-font link (labs are often offline)."""
    path = Path(textual_serve.__file__).parent / "templates" / "app_index.html"
    return re.sub(r"<link[^>]*fonts\.googleapis\.com[^>]*/>\s*", "", path.read_text())


class ConsoleServer(Server):
    """textual-serve's Server with the access checks and the one-console rule (one holder)."""

    def __init__(self, command: str, *, host: str, port: int, token: str | None, title: str):
        super().__init__(command, host=host, port=port, title=title)
        self.token = token
        self.holder: ConsoleHolder | None = None
        self.services: set[ConsoleService] = set()
        self.bound: tuple[str, int] | None = None

    # --- access ---------------------------------------------------------------------

    @property
    def cookie_name(self) -> str:
        return f"tgen_serve_{self.bound[1] if self.bound else self.port}"

    @web.middleware
    async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """403 before any handler unless host, token and origin all pass."""
        peer = request.remote or "?"
        if not access.host_header_ok(self.host, request.host, self.token):
            log.warning(
                "403 %s %s: Host %r is not a loopback name", peer, request.path, request.host
            )
            return web.Response(status=403, text="403: this console answers loopback names only\n")
        presented = request.query.get("token") or request.cookies.get(self.cookie_name)
        if not access.token_ok(self.token, presented):
            log.warning("403 %s %s: missing or wrong token", peer, request.path)
            return web.Response(
                status=403,
                text="403: missing or wrong token: open the URL that tgen serve printed\n",
            )
        if request.path == "/ws" and not access.origin_ok(
            request.headers.get("Origin"), request.host
        ):
            log.warning("403 %s: websocket from another site (%s)", peer, request.headers["Origin"])
            return web.Response(status=403, text="403: cross-site websocket refused\n")
        response = await handler(request)
        if self.token and request.query.get("token") and not response.prepared:
            response.set_cookie(
                self.cookie_name, self.token, httponly=True, samesite="Strict", path="/"
            )
        return response

    # --- routes -----------------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"index.html": _index_template()}))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        scheme = "wss" if request.secure else "ws"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{scheme}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
            "ping_url": "",
        }
        return aiohttp_jinja2.render_template("index.html", request, context)

    @staticmethod
    def _live(holder: ConsoleHolder) -> bool:
        """A holder blocks others while its page is open and its console runs."""
        ws, svc = holder.websocket, holder.service
        return not (ws is not None and ws.closed) and (svc is None or svc.alive)

    async def _claim(self, peer: str) -> ConsoleHolder | None:
        """Take the one console; a reloaded page waits for the previous console to stop."""
        current = self.holder
        if current is not None:
            deadline = time.monotonic() + 2.0  # a reload's close frame may trail its new page
            while self._live(current) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if self._live(current):
                return None
            if current.service is not None and current.service.alive:  # page gone, console stopping
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(current.done.wait(), HANDOVER_WAIT_S)
                if current.service.alive:
                    return None  # the old console would not stop
            if self.holder is not None and self.holder is not current:
                return None  # another page took it meanwhile
        self.holder = ConsoleHolder(peer=peer)
        return self.holder

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        peer = request.remote or "?"
        holder = await self._claim(peer)
        if holder is None:
            assert self.holder is not None
            log.warning("refused a second console from %s: %s", peer, self.holder.describe())
            await websocket.send_bytes(_refusal(self.holder.describe()))
            async for _ in websocket:  # keep the message on screen until the page goes
                pass
            return websocket
        holder.websocket = websocket
        service = ConsoleService(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        holder.service = service
        self.services.add(service)
        try:
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            await service.start(width, height)
            log.info("console pid %s started for %s (%dx%d)", service.pid, peer, width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # noqa: BLE001 - a broken page must not stop the server
            log.error("session from %s failed: %s: %s", peer, type(error).__name__, error)
        finally:
            rc = await asyncio.shield(service.stop_within())
            log.info("console pid %s ended (exit %s)", service.pid, rc)
            self.services.discard(service)
            if self.holder is holder:
                self.holder = None
            holder.done.set()
            with contextlib.suppress(Exception):
                await websocket.close()
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        """Close every page and stop every console this server started."""

        async def close_page(ws: web.WebSocketResponse) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2.0)

        ws = self.holder.websocket if self.holder is not None else None
        pages = [close_page(ws)] if ws is not None else []
        await asyncio.gather(*(s.stop_within() for s in list(self.services)), *pages)

    # --- running ----------------------------------------------------------------------

    async def run(self, on_ready: Any = None) -> None:
        """Bind, call ``on_ready(host, port)``, serve until SIGINT/SIGTERM, then clean up."""
        runner = web.AppRunner(await self._make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise EnvironmentProblem(
                f"cannot listen on {self.host}:{self.port}: {e.strerror or e}"
            ) from None
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the bound port
        self.bound = (self.host, sockets[0].getsockname()[1] if sockets else self.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            if on_ready is not None:
                on_ready(*self.bound)
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await runner.cleanup()


def _refusal(who: str) -> bytes:
    text = (
        "\x1b[2J\x1b[H\x1b[1;31mtgen: the console is already open in another browser\x1b[0m\r\n\r\n"
        f"  {who}.\r\n\r\n"
        "  One console drives the ports at a time, so that two browsers never start\r\n"
        "  two sets of workers on the same ports. Close it there, then reload this page.\r\n"
    )
    return text.encode()
