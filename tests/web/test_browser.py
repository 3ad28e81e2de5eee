"""The served console in headless Chromium, on a real lab (issue 12, "Must show" 1 and 2).

Opens the page, waits for the port table, types 0 then s, sees p0's interface Tx
counter rise in the lab, takes a screenshot (into the test's tmp dir; into
screenshots/web-console.png with TGEN_UPDATE_SCREENSHOTS=1), types T and sees the
counter stop, checks that a second browser is refused, closes the page, and finds no
console, no worker and no /dev/shm/tgen-* file of that console left.

Chromium is Debian's (/usr/bin/chromium, installed by bootstrap.sh), driven by
Playwright through executable_path: nothing is downloaded.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from .web_helpers import REPO, alive, cmdline, descendants, lab_profile, start_serve, tx_packets

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",  # as root
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TRACKED_SCREENSHOT = REPO / "screenshots" / "web-console.png"

# Keep every byte the console sends to the page; window.__tgenText() is that stream as
# text, escape codes removed (xterm.js draws on a canvas, so the DOM holds no text).
CAPTURE_JS = r"""
(() => {
  const Native = window.WebSocket;
  const chunks = [];
  function Capturing(url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    ws.addEventListener("message", (e) => {
      if (typeof e.data !== "string") chunks.push(new Uint8Array(e.data));
    });
    return ws;
  }
  Capturing.prototype = Native.prototype;
  Object.assign(Capturing, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  window.WebSocket = Capturing;
  window.__tgenText = () => {
    const d = new TextDecoder();
    return chunks.map((c) => d.decode(c)).join("").replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
  };
})();
"""


def _open_files(pid: int) -> list[str]:
    try:
        return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []


def _wait(cond, timeout: float, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    return cond()


@pytest.fixture
def chromium() -> str:
    """Debian's chromium, checked before the lab is built."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (bash bootstrap.sh installs it)")
    return CHROMIUM


@pytest.mark.root
@pytest.mark.slow
def test_browser_starts_and_stops_p0_and_leaves_nothing(
    chromium: str, web_lab: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright  # a test dependency: fail if missing

    prefix = web_lab
    update = os.environ.get("TGEN_UPDATE_SCREENSHOTS") == "1"
    shot = TRACKED_SCREENSHOT if update else tmp_path / "web-console.png"
    profile = tmp_path / "web.yaml"
    profile.write_text(lab_profile(prefix))
    srv = start_serve(str(profile), "--port", "0", "--cores", "1")
    profile_dir = tempfile.mkdtemp(prefix="tgen-web-chromium-")
    console: int | None = None
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                profile_dir,  # a fresh --user-data-dir
                executable_path=chromium,
                args=CHROMIUM_ARGS,
                headless=True,
                viewport={"width": 1400, "height": 900},
            )
            browser.add_init_script(CAPTURE_JS)
            page = browser.new_page()
            page.goto(srv.url)
            page.wait_for_function(
                "() => window.__tgenText && /Tx pps/.test(__tgenText()) && /0:p0/.test(__tgenText())",
                timeout=30_000,
            )
            consoles = [p for p in descendants(srv.proc.pid) if " tui " in cmdline(p)]
            assert len(consoles) == 1
            console = consoles[0]

            before = tx_packets(prefix)
            page.click("#terminal")
            page.keyboard.press("0")
            page.keyboard.press("s")
            risen = _wait(lambda: tx_packets(prefix) - before >= 500, timeout=20)
            assert risen, f"p0 tx_packets rose by only {tx_packets(prefix) - before} after 0 s"
            print(f"p0 tx_packets {before} -> {tx_packets(prefix)} after 0 s")
            workers = [p for p in descendants(console) if "tgen_tui.worker" in cmdline(p)]
            assert workers, "no worker process under the console"
            # the engine unlinks each counter file once mapped; the workers still hold it
            shm = [f for p in workers for f in _open_files(p) if f.startswith("/dev/shm/tgen-")]
            counters = [f for f in shm if "-wts-" not in f]  # -wts-: the shared tx stamp table
            assert len(counters) == len(workers), f"workers without a counter file: {shm}"
            assert len(shm) == 2 * len(workers), f"workers without the tx stamp table: {shm}"
            page.wait_for_function("() => /1 running/.test(__tgenText())", timeout=10_000)
            page.wait_for_timeout(1500)  # a few redraws with the rates on screen
            page.screenshot(path=str(shot))

            page.keyboard.press("T")

            def stopped() -> bool:
                a = tx_packets(prefix)
                time.sleep(0.7)
                return tx_packets(prefix) == a

            assert _wait(stopped, timeout=15), "p0 kept sending after T"
            settled = tx_packets(prefix)
            time.sleep(1.0)
            assert tx_packets(prefix) == settled
            print(f"p0 tx_packets stays at {settled} after T")

            # a second browser gets the explanation, not a second console
            other = browser.new_page()
            other.goto(srv.url)
            other.wait_for_function(
                "() => window.__tgenText && /already open in another browser/.test(__tgenText())",
                timeout=15_000,
            )
            assert f"console pid {console}" in other.evaluate("__tgenText()")
            assert [p for p in descendants(srv.proc.pid) if " tui " in cmdline(p)] == [console]
            other.close()

            page.close()
            gone = _wait(lambda: not any(alive(p) for p in [console, *workers]), timeout=30)
            assert gone, f"left running: {[cmdline(p) for p in [console, *workers] if alive(p)]}"
            assert glob.glob(f"/dev/shm/tgen-{console}-*") == []
            browser.close()
        assert shot.stat().st_size > 10_000
    finally:
        rc = srv.stop()
        shutil.rmtree(profile_dir, ignore_errors=True)
    assert rc == 0
    out = srv.output()
    assert f"console pid {console} ended" in out and "Traceback" not in out
    assert descendants(srv.proc.pid) == []
