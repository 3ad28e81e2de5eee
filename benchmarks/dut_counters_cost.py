"""What reading the DUT's drop counters costs per sampling interval, and the console's CPU
with the reading on and off.

Brings up a lab (unique prefix, 1 % drop rule and a TBF so that nft and tc have something
to list) and removes it afterwards. Run as root:
``.venv/bin/python benchmarks/dut_counters_cost.py [--reads 50 --cpu-seconds 8]``.

1. **Per read** (:class:`tgen_tui.dut.counters.DutCounters`, ``reads`` reads 100 ms apart):
   wall ms (median, p90) and CPU ms (this process + the long-lived DUT shell and the
   ``tc``/``nft`` it runs), for
   - ``netns``: ``/proc`` through namespace fds, qdiscs and nft rules through netlink
     sockets opened in the namespace (no process);
   - ``prefix``: the command-prefix path through ``ip netns exec NS sh -c`` (everything in
     one request to one long-lived shell);
   - ``ssh``: the same over a real sshd in the DUT namespace on loopback (when installed);
   - ``one_process_per_read``: for comparison, what a new ``ip netns exec`` per read costs.
2. **Console CPU**: the real ``tgen tui`` (tmux, 160x48) on ``profiles/lab.yaml``, both
   ports started, the DUT screen shown; its own CPU (user+system) plus its DUT shell's
   (with the ``tc``/``nft`` children) over ``cpu-seconds``, as % of one core, with the
   counters on and with ``TGEN_DUT_COUNTERS=off``.

Writes ``benchmarks/results/dut_counters_cost.json`` with ``hostname`` and the load
average: on a shared machine compare only within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "dut_counters_cost.json"


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and of its waited-for children."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system + t.children_user + t.children_system


def per_read(channel, reads: int) -> dict:
    import psutil

    from tgen_tui.dut.counters import DutCounters

    r = DutCounters(channel)
    r.read()  # start the shell, discover the drop chains
    me = psutil.Process()
    shell = r.shell._p.pid if r.shell is not None and r.shell._p else None
    walls = []
    c0 = me.cpu_times()
    s0 = _tree_cpu(shell) if shell else 0.0
    for _ in range(reads):
        t = time.perf_counter()
        got = r.read()
        walls.append(1000 * (time.perf_counter() - t))
        time.sleep(0.1)
    c1 = me.cpu_times()
    s1 = _tree_cpu(shell) if shell else 0.0
    r.close()
    cpu = (c1.user - c0.user) + (c1.system - c0.system) + (s1 - s0)
    walls.sort()
    return {
        "reads": reads,
        "counters": len(got.values),
        "errors": list(got.errors),
        "wall_ms_median": round(statistics.median(walls), 3),
        "wall_ms_p90": round(walls[int(0.9 * (len(walls) - 1))], 3),
        "cpu_ms_per_read": round(1000 * cpu / reads, 3),
        "cpu_counts": "this process + the local shell process and the children it waited for "
        "(netns: no process; prefix/ssh: the remote side's sh, tc and nft are not counted, "
        "over ssh they run on the DUT)",
        "cpu_pct_of_core_at_10hz": round(100 * cpu / reads * 10, 2),
        "shell_starts": r.shell.starts if r.shell is not None else 0,
    }


def one_process_per_read(ns: str, reads: int) -> dict:
    script = (
        "cat /proc/net/stat/nf_conntrack /proc/net/dev /proc/net/snmp /proc/net/softnet_stat "
        ">/dev/null; tc -s -j qdisc >/dev/null; nft -j list ruleset >/dev/null"
    )
    walls = []
    for _ in range(reads):
        t = time.perf_counter()
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], check=True)
        walls.append(1000 * (time.perf_counter() - t))
    walls.sort()
    return {"reads": reads, "wall_ms_median": round(statistics.median(walls), 3)}


def start_sshd(ns: str, d: Path) -> tuple[subprocess.Popen, str] | None:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd) or not shutil.which("ssh"):
        return None
    for k in ("host", "client"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / k)], check=True
        )
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    port = 2700 + os.getpid() % 500
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
    )
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, sshd, "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ssh = (
        f"ip netns exec {ns} ssh -p {port} -i {d}/client -o BatchMode=yes "
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
        "root@127.0.0.1"
    )
    from tgen_tui.dut.channel import DutChannel

    for _ in range(100):
        if DutChannel(ssh=ssh).run("true", timeout=5).ok:
            return proc, ssh
        time.sleep(0.1)
    proc.terminate()
    return None


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def console_cpu(prefix: str, seconds: float, off: bool) -> dict:
    import psutil

    text = (ROOT / "profiles" / "lab.yaml").read_text()
    text = text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
    prof = Path(f"/tmp/{prefix}-lab.yaml")
    prof.write_text(text)
    session = f"{prefix}-{'off' if off else 'on'}"
    env = "TGEN_DUT_COUNTERS=off " if off else ""
    tgen = ROOT / ".venv" / "bin" / "tgen"
    cmd = f"env {env}{tgen} tui {prof}; sleep 30"  # the pane stays: a failure can be read
    tmux("new", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    pid = None
    try:
        deadline = time.time() + 30
        while "port 0:p0" not in tmux("capture-pane", "-p", "-t", session):
            if time.time() > deadline:
                raise RuntimeError(
                    "the console did not come up: "
                    + tmux("capture-pane", "-p", "-t", session)[-600:]
                )
            time.sleep(0.2)
        pid = next(
            p.pid
            for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "tgen" and str(prof) in " ".join(p.info["cmdline"] or [])
        )
        tmux("send-keys", "-t", session, "S")
        time.sleep(1.0)
        tmux("send-keys", "-t", session, "d")
        time.sleep(1.0)
        proc = psutil.Process(pid)
        shells = [c for c in proc.children() if c.name() in ("ip", "sh")]
        c0 = proc.cpu_times()
        s0 = sum(_tree_cpu(s.pid) for s in shells)
        w0 = time.perf_counter()
        time.sleep(seconds)
        c1 = proc.cpu_times()
        s1 = sum(_tree_cpu(s.pid) for s in shells)
        wall = time.perf_counter() - w0
        screen = tmux("capture-pane", "-p", "-t", session).splitlines()
        tmux("send-keys", "-t", session, "q")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "y")
    finally:
        # wait for the console to quit (2-3 s) before the pane goes: a console whose
        # terminal is closed while it shuts down can hang in Textual's writer thread; and
        # its port locks must be gone before the next console starts
        if pid is not None:
            try:
                psutil.Process(pid).wait(timeout=20)
            except psutil.TimeoutExpired:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        prof.unlink(missing_ok=True)
    own = (c1.user - c0.user) + (c1.system - c0.system)
    return {
        "counters": "off" if off else "on",
        "wall_s": round(wall, 2),
        "console_cpu_pct_of_core": round(100 * own / wall, 2),
        "dut_shell_cpu_pct_of_core": round(100 * (s1 - s0) / wall, 2),
        "total_pct_of_core": round(100 * (own + s1 - s0) / wall, 2),
        "screen": [ln.rstrip() for ln in screen if ln.strip()][-14:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reads", type=int, default=50)
    ap.add_argument("--cpu-seconds", type=float, default=8.0)
    ap.add_argument("--console-repeats", type=int, default=2)
    args = ap.parse_args()
    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "b" + secrets.token_hex(3)[:5]
    ns = f"{prefix}-dut"
    out: dict = {
        "benchmark": "dut_counters_cost",
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "load_avg_before": os.getloadavg(),
        "note": "shared machine: compare figures only within this run",
    }
    sshd = None
    topology.up(LabConfig(prefix=prefix, drop_percent=1.0, tbf="100mbit,20ms"))
    try:
        out["netns"] = per_read(DutChannel(netns=ns), args.reads)
        out["prefix"] = per_read(DutChannel(ssh=f"ip netns exec {ns} sh -c"), args.reads)
        out["one_process_per_read"] = one_process_per_read(ns, min(args.reads, 20))
        with tempfile.TemporaryDirectory() as d:
            sshd = start_sshd(ns, Path(d))
            if sshd is not None:
                out["ssh"] = per_read(DutChannel(ssh=sshd[1]), args.reads)
                sshd[0].terminate()
                sshd[0].wait(timeout=10)
            else:
                out["ssh"] = "sshd not installed"
        for i in range(args.console_repeats):  # alternated: the load on the machine drifts
            out[f"console_on_{i}"] = console_cpu(prefix, args.cpu_seconds, off=False)
            out[f"console_off_{i}"] = console_cpu(prefix, args.cpu_seconds, off=True)
    finally:
        topology.down(prefix)
    out["load_avg_after"] = os.getloadavg()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if not k.startswith("console")}, indent=2))
    for k in [k for k in out if k.startswith("console")]:
        print(k, {x: y for x, y in out[k].items() if x != "screen"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
