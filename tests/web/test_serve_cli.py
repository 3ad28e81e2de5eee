"""`tgen serve` safety: refusals at start, 403 before anything runs, same-origin websockets.

These run a real server process on 127.0.0.1 (one test binds 0.0.0.0 for a moment,
with a token, to check the 403 from 127.0.0.1) and never open a console.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import urllib.error
import urllib.request

import aiohttp
import pytest

from tgen_tui.web import access

from .web_helpers import REPO, clean_env, descendants, start_serve, tgen_argv

TOKEN = "t0ken-for-the-tests-0123456789"


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        tgen_argv(*args),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        env=env or clean_env(),
    )


def _get(url: str, headers: dict | None = None) -> tuple[int, str, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def _ws_status(url: str, headers: dict | None = None) -> int:
    """Status of a websocket handshake (101 when accepted)."""

    async def go() -> int:
        async with aiohttp.ClientSession() as s:
            try:
                ws = await s.ws_connect(url, headers=headers or {})
            except aiohttp.WSServerHandshakeError as e:
                return e.status
            await ws.close()
            return 101

    return asyncio.run(go())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "lab-host.example"])
def test_public_host_without_token_refuses_to_start(host: str) -> None:
    port = _free_port()
    r = _run("serve", "profiles/lab.yaml", "--host", host, "--port", str(port))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tgen: error: --host {host} is reachable")
    assert "--token" in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""  # no URL: it never listened
    with socket.socket() as s:  # and the port is still free
        s.bind(("127.0.0.1", port))


def test_bad_token_profile_and_port_are_one_line_errors(tmp_path) -> None:
    spaced = _run("serve", "--host", "0.0.0.0", "--token", "two words")
    assert spaced.returncode == 2 and spaced.stderr.startswith("tgen: error: --token must be")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nports: 7\n")
    prof = _run("serve", str(bad))
    assert prof.returncode == 2 and str(bad) in prof.stderr and "Traceback" not in prof.stderr
    port = _run("serve", "--port", "70000")
    assert (
        port.returncode == 2
        and port.stderr.strip() == "tgen: error: --port 70000: must be 0..65535"
    )


def test_address_in_use_is_an_environment_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = _run("serve", "--port", str(s.getsockname()[1]))
    assert r.returncode == 3
    assert r.stderr.strip().startswith("tgen: error: cannot listen on 127.0.0.1:")


def test_token_required_everywhere_and_nothing_spawned() -> None:
    """With a token: every path without it (or with a wrong one) is 403 and no console starts."""
    srv = start_serve("profiles/lab.yaml", "--fake", "--port", "0", "--token", TOKEN)
    try:
        assert srv.url == f"{srv.base}/?token={TOKEN}"
        for path in ("/", "/?token=wrong-token-wrong-token", "/static/js/textual.js", "/ws"):
            status, body, _ = _get(srv.base + path)
            assert status == 403, path
            assert "token" in body
        assert _ws_status(srv.base.replace("http", "ws") + "/ws?width=80&height=24") == 403
        assert descendants(srv.proc.pid) == []  # no console process was spawned
        status, body, headers = _get(srv.url)
        assert status == 200 and "textual-terminal" in body
        assert "fonts.googleapis" not in body  # the page works offline
        cookie = headers.get("Set-Cookie", "")
        assert TOKEN in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        name = cookie.split("=", 1)[0]
        assert _get(srv.base + "/static/js/textual.js", {"Cookie": f"{name}={TOKEN}"})[0] == 200
        assert descendants(srv.proc.pid) == []  # the page alone starts nothing either
    finally:
        rc = srv.stop()
    assert rc == 0
    out = srv.output()
    assert out.count(TOKEN) == 1  # printed once, never logged
    assert "403" in out and "Traceback" not in out


def test_public_host_with_token_answers_403_without_it() -> None:
    srv = start_serve("--host", "0.0.0.0", "--port", "0", "--token", "auto", "--fake")
    try:
        token = srv.url.split("token=", 1)[1]
        assert len(token) >= access.MIN_TOKEN
        base = f"http://127.0.0.1:{srv.port}"
        assert _get(base + "/")[0] == 403
        assert _get(base + "/ws")[0] == 403
        assert descendants(srv.proc.pid) == []
        assert _get(f"{base}/?token={token}")[0] == 200
    finally:
        assert srv.stop() == 0


def test_short_token_works_with_a_warning() -> None:
    srv = start_serve("--host", "127.0.0.1", "--port", "0", "--token", "secret", "--fake")
    try:
        assert srv.url.endswith("/?token=secret")
        assert _get(srv.base + "/")[0] == 403 and _get(srv.url)[0] == 200
    finally:
        assert srv.stop() == 0
    assert "warning: a 6-character token is easy to guess" in srv.output()


def test_loopback_rejects_other_host_names_and_cross_site_websockets() -> None:
    srv = start_serve("--port", "0", "--fake")
    try:
        assert "token" not in srv.url
        assert _get(srv.base + "/")[0] == 200
        # a DNS-rebinding page reaches 127.0.0.1 under its own name
        assert _get(srv.base + "/", {"Host": f"attacker.example:{srv.port}"})[0] == 403
        ws = srv.base.replace("http", "ws") + "/ws"
        assert _ws_status(ws, {"Origin": "http://attacker.example"}) == 403
        assert descendants(srv.proc.pid) == []
    finally:
        assert srv.stop() == 0


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert access.is_loopback(host) is loopback


def test_access_rules() -> None:
    assert access.resolve_token("127.0.0.1", None) is None
    assert access.resolve_token("0.0.0.0", TOKEN) == TOKEN
    a, b = access.resolve_token("0.0.0.0", "auto"), access.resolve_token("0.0.0.0", "auto")
    assert a != b and len(a or "") >= access.MIN_TOKEN
    assert access.token_ok(None, None) and access.token_ok(TOKEN, TOKEN)
    assert not access.token_ok(TOKEN, None) and not access.token_ok(TOKEN, TOKEN + "x")
    assert access.host_header_ok("127.0.0.1", "localhost:8000", None)
    assert access.host_header_ok("127.0.0.1", "[::1]:8000", None)
    assert not access.host_header_ok("127.0.0.1", "evil.example:8000", None)
    assert not access.host_header_ok("127.0.0.1", None, None)
    assert access.host_header_ok("0.0.0.0", "lab.example:8000", TOKEN)
    assert access.origin_ok("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert access.origin_ok(None, "127.0.0.1:8000")  # not a browser
    assert not access.origin_ok("http://evil.example", "127.0.0.1:8000")
    assert not access.origin_ok("null", "127.0.0.1:8000")
