"""The lab as a middlebox for transport flows: ``--delay`` and ``--loss`` next to ``--tbf``.

``tgen lab up --transport-hosts`` makes the transport hosts (:mod:`.hosts`); ``--delay``
or ``--loss`` imply them. ``tgen lab up/set --delay 20ms --loss 1%`` starts the user-space delay line
(:mod:`.delayline`) in the middlebox namespace PREFIX-mb between x1 and y1 (see :mod:`.hosts`): each way,
every frame waits DELAY and LOSS % are dropped at random, so a flow between the transport
hosts sees an RTT of 2 x DELAY plus the path's own. Without either, a kernel bridge joins
x1 and y1. ``--tbf`` applies to e1 (the transport hosts' bottleneck) as well as d1.

The process is started detached (it outlives ``tgen lab up``), its pid and arguments are
kept in the lab's state file, and ``set``/``down`` stop it by that pid after checking that
the pid still runs the delay line for this lab.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.lab import hosts as hosts_mod
from tgen_tui.lab.naming import STATE_DIR

_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us)?\s*$", re.I)
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
MAX_DELAY_S = 2.0


def parse_delay(spec: str | None) -> float:
    """``20ms``, ``0.15s``, ``500us`` (bare: ms) → seconds; None or 0 → 0."""
    if spec is None:
        return 0.0
    m = _TIME_RE.match(str(spec))
    if not m:
        raise BadInput(f"--delay {spec!r}: write e.g. 20ms, 75ms or 0.15s (each way)")
    v = float(m.group(1)) * _SCALE[(m.group(2) or "ms").lower()]
    if v > MAX_DELAY_S:
        raise BadInput(f"--delay {spec!r}: at most {MAX_DELAY_S:g} s each way")
    return v


def validate(delay: str | None, loss: float) -> None:
    parse_delay(delay)
    if isinstance(loss, bool) or not isinstance(loss, int | float) or not 0 <= loss < 100:
        raise BadInput(f"loss must be a percentage from 0 to below 100, got {loss!r}")


def stats_path(prefix: str) -> str:
    return os.path.join(STATE_DIR, f"{prefix}-delayline.json")


def _log_path(prefix: str) -> str:
    return os.path.join(STATE_DIR, f"{prefix}-delayline.log")


def _argv(prefix: str, delay_s: float, loss: float) -> list[str]:
    return [
        sys.executable, "-m", "tgen_tui.lab.delayline", "--a", hosts_mod.Y1, "--b", hosts_mod.X1,
        "--delay", repr(delay_s), "--loss", repr(float(loss)), "--seed", "1",
        "--stats", stats_path(prefix), "--tag", prefix,
    ]  # fmt: skip


def _ours(pid: int, prefix: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return b"tgen_tui.lab.delayline" in argv and prefix.encode() in argv


def _running(prefix: str) -> list[int]:
    """Every delay line of this lab that runs, found by its command line (a pid that was
    never recorded, e.g. when a later step of `lab up` failed, is found too)."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and _ours(int(d), prefix)]


def stop(prefix: str, state: dict) -> None:
    """Stop the lab's delay line(s): the recorded pid and any other of this lab's."""
    rec = state.pop("delayline", None) or {}
    pids = set(_running(prefix))
    if int(rec.get("pid", 0)) > 0:
        pids.add(int(rec["pid"]))
    for pid in pids:
        if not _ours(pid, prefix):
            continue
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if not _ours(pid, prefix):
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
    for path in (stats_path(prefix), _log_path(prefix)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _start(prefix: str, delay_s: float, loss: float) -> int:
    os.makedirs(STATE_DIR, exist_ok=True)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    argv = ["ip", "netns", "exec", hosts_mod.mb_netns(prefix), *_argv(prefix, delay_s, loss)]
    with open(_log_path(prefix), "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    time.sleep(0.2)
    if proc.poll() is not None:
        raise EnvironmentProblem(
            f"the delay line exited at once (code {proc.returncode}); see {_log_path(prefix)}"
        )
    return proc.pid


def apply(
    prefix: str, state: dict, *, hosts: bool, delay: str | None, loss: float, tbf_args
) -> None:
    """Converge the transport hosts: present when asked (or when a delay or loss is),
    side 1 bridged or through the delay line, the TBF on e1; absent otherwise."""
    delay_s = parse_delay(delay)
    if not (hosts or delay_s > 0 or loss > 0):
        stop(prefix, state)
        hosts_mod.remove(prefix)
        return
    hosts_mod.build(prefix)
    hosts_mod.apply_tbf(prefix, tbf_args)
    want = {"delay_s": delay_s, "loss": float(loss)} if (delay_s > 0 or loss > 0) else None
    rec = state.get("delayline")
    if want and rec and {k: rec.get(k) for k in want} == want and _ours(rec["pid"], prefix):
        return
    stop(prefix, state)
    if want is None:
        hosts_mod.bridge(prefix, True)
        return
    hosts_mod.bridge(prefix, False)
    state["delayline"] = {**want, "pid": _start(prefix, delay_s, float(loss))}


def status(prefix: str, state: dict) -> dict | None:
    """The delay line's last counters and hold times (None when none runs)."""
    rec = state.get("delayline")
    if not rec:
        return None
    import json

    out = {"pid": rec.get("pid"), "running": _ours(int(rec.get("pid", 0)), prefix)}
    try:
        with open(stats_path(prefix)) as f:
            out |= json.load(f)
    except (OSError, ValueError):
        pass
    return out


def status_lines(st: dict) -> list[str]:
    """``tgen lab status`` lines for the transport hosts and the delay line."""
    lines = []
    th = st.get("transport_hosts")
    if th:
        for port, h in th.items():
            lines.append(
                f"  transport host for {port}: {h['netns']} {h['ipv4']} via {h['gateway']}"
            )
            if h.get("clients"):
                lines.append(
                    f"    clients {h['clients']} (app flows' clients: first "
                    f"{h['clients'].split('/')[0][:-1]}1), NATed to {h['clients_nat']} toward h1"
                )
    dl = st.get("delay_line")
    if dl:
        hold = dl.get("hold_us") or {}

        def ms(k: str) -> str:
            return f"{hold[k] / 1e3:.3f}" if hold.get(k) is not None else "-"

        fw, dr = dl.get("forwarded") or {}, dl.get("dropped") or {}
        lines.append(
            f"  delay line (pid {dl.get('pid')}, {'running' if dl.get('running') else 'NOT RUNNING'}):"
            f" {_num(dl.get('delay_ms'))} ms each way, loss {_num(dl.get('loss_pct'))} %;"
            f" held min/p50/p99/max {ms('min')}/{ms('p50')}/{ms('p99')}/{ms('max')} ms"
            f" over the last {hold.get('n', 0)} frames; forwarded {sum(fw.values())},"
            f" dropped {sum(dr.values())}"
        )
    return lines


def _num(v) -> str:
    return "-" if v is None else f"{v:g}"
