"""The lab's DUT keeps its static neighbours and routes across a link flap.

The ``nat`` lab's tester ports have no addresses, so nothing answers the DUT's ARP: the
DUT reaches them through static, permanent neighbours (``198.18.0.2`` on d0,
``198.19.0.2`` on d1) and routes via them (``198.18.0.0/16`` via p0, ``default`` via
p1). ``ip link set d1 down`` makes the kernel flush both, permanent neighbours included
(only a carrier loss keeps them), and ``up`` brings back only the connected route: the
DUT would lose everything it sends out of d1 for good, and a user's link-flap test
would measure the lab instead of the flap (issue 36).

This process runs in the DUT namespace for as long as the lab is up (``tgen lab up``
starts it, ``tgen lab down`` stops it: :func:`ensure`, :func:`stop`). It listens on an
rtnetlink socket for link changes (``RTNLGRP_LINK``), and when d0 or d1 comes up it puts
that interface's neighbours and routes back (``ip neigh replace ... nud permanent``,
``ip route replace``), within milliseconds of the ``up``. It exits when its namespace is
gone or on SIGTERM. What it did goes to ``/run/tgen-lab/PREFIX-keeper.json``
(``restores``: how many times, ``last``: the last one). The ``router`` lab has dynamic
ARP and ND (its ports answer when the profile gives them addresses), so only its routes
are kept.

Run as ``python -m tgen_tui.lab.keeper --tag PREFIX --netns PREFIX-dut --neigh IP,MAC,DEV
--route DST,VIA,DEV [--route6 DST,VIA,DEV]`` inside the namespace. The process imports
the standard library only (the part that starts it imports the lab).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

STATE_DIR = "/run/tgen-lab"  # as tgen_tui.lab.naming.STATE_DIR (this process imports no lab)
RTMGRP_LINK = 1
RTM_NEWLINK = 16
IFLA_IFNAME = 3
IFF_UP = 0x1
NLMSG = struct.Struct("=IHHII")
IFINFO = struct.Struct("=BxHiII")
RTA = struct.Struct("=HH")
RETRIES = 20  # a restore that fails (the interface is going down again) is tried again
RETRY_S = 0.05


def stats_path(tag: str) -> str:
    return os.path.join(STATE_DIR, f"{tag}-keeper.json")


def log_path(tag: str) -> str:
    return os.path.join(STATE_DIR, f"{tag}-keeper.log")


def link_messages(data: bytes) -> list[tuple[str, bool]]:
    """(interface, set up) of every RTM_NEWLINK in one netlink read."""
    out = []
    off = 0
    while off + NLMSG.size <= len(data):
        ln, typ = NLMSG.unpack_from(data, off)[:2]
        if ln < NLMSG.size:
            break
        body = data[off + NLMSG.size : off + ln]
        off += (ln + 3) & ~3
        if typ != RTM_NEWLINK or len(body) < IFINFO.size:
            continue
        flags = IFINFO.unpack_from(body)[3]
        a = IFINFO.size
        while a + 4 <= len(body):
            alen, atyp = RTA.unpack_from(body, a)
            if alen < 4:
                break
            if atyp & 0x3FFF == IFLA_IFNAME:
                name = body[a + 4 : a + alen].split(b"\0", 1)[0].decode(errors="replace")
                out.append((name, bool(flags & IFF_UP)))
                break
            a += (alen + 3) & ~3
    return out


def _triples(items: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for it in items:
        parts = it.split(",")
        if len(parts) != 3:
            raise SystemExit(f"keeper: {it!r}: give A,B,DEV")
        out.append((parts[0], parts[1], parts[2]))
    return out


class Keeper:
    def __init__(self, tag: str, netns: str, neighs, routes, routes6) -> None:
        self.tag, self.netns = tag, netns
        self.neighs, self.routes, self.routes6 = neighs, routes, routes6
        self.devs = {d for *_, d in (*neighs, *routes, *routes6)}
        self.up: dict[str, bool] = {}
        self.restores = 0
        self.last: dict | None = None
        self.my_ns = os.stat("/proc/self/ns/net").st_ino

    def commands(self, dev: str) -> list[list[str]]:
        out = [
            ["ip", "neigh", "replace", ip, "lladdr", mac, "dev", d, "nud", "permanent"]
            for ip, mac, d in self.neighs
            if d == dev
        ]
        out += [
            ["ip", "route", "replace", dst, "via", via, "dev", d]
            for dst, via, d in self.routes
            if d == dev
        ]
        out += [
            ["ip", "-6", "route", "replace", dst, "via", via, "dev", d]
            for dst, via, d in self.routes6
            if d == dev
        ]
        return out

    def restore(self, dev: str, why: str) -> None:
        t0 = time.monotonic()
        todo = self.commands(dev)
        errors: list[str] = []
        for _ in range(RETRIES):
            errors = []
            left = []
            for argv in todo:
                cp = subprocess.run(argv, capture_output=True, text=True, check=False)
                if cp.returncode != 0:
                    left.append(argv)
                    errors.append(f"{' '.join(argv)}: {cp.stderr.strip()}")
            todo = left
            if not todo:
                break
            time.sleep(RETRY_S)
        self.restores += 1
        self.last = {
            "dev": dev,
            "why": why,
            "wall": time.time(),
            "took_ms": round((time.monotonic() - t0) * 1000, 1),
            "commands": len(self.commands(dev)),
            "errors": errors,
        }
        print(json.dumps({"restored": self.last}), flush=True)
        self.write()

    def write(self) -> None:
        doc = {"pid": os.getpid(), "tag": self.tag, "restores": self.restores, "last": self.last}
        tmp = stats_path(self.tag) + ".tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, stats_path(self.tag))
        except OSError:
            pass

    def ns_alive(self) -> bool:
        try:
            return os.stat(f"/run/netns/{self.netns}").st_ino == self.my_ns
        except OSError:
            return False

    def run(self) -> int:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind((0, RTMGRP_LINK))
        sock.settimeout(1.0)
        for dev in sorted(self.devs):  # what the lab set is there now (a restart of the keeper)
            self.restore(dev, "start")
            self.up[dev] = True
        while True:
            try:
                data = sock.recv(1 << 16)
            except TimeoutError:
                if not self.ns_alive():
                    return 0
                continue
            except OSError:  # ENOBUFS: messages lost; restore whatever is up
                for dev in sorted(self.devs):
                    self.restore(dev, "missed link messages")
                continue
            for dev, up in link_messages(data):
                if dev not in self.devs:
                    continue
                if up and not self.up.get(dev, False):
                    self.restore(dev, "link up")
                self.up[dev] = up


# ---------------------------------------------------------------- started by the lab
def _ours(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return b"tgen_tui.lab.keeper" in argv and tag.encode() in argv


def running(tag: str) -> list[int]:
    """Every keeper of this lab that runs, found by its command line."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and _ours(int(d), tag)]


def stop(tag: str, state: dict) -> None:
    """Stop the lab's keeper(s): the recorded pid and any other of this lab's."""
    rec = state.pop("keeper", None) or {}
    pids = set(running(tag))
    if int(rec.get("pid", 0)) > 0:
        pids.add(int(rec["pid"]))
    for pid in pids:
        if not _ours(pid, tag):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(50):
            if not _ours(pid, tag):
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
    for path in (stats_path(tag), log_path(tag)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def ensure(tag: str, netns: str, state: dict, spec: dict) -> None:
    """A keeper of ``spec`` (``neigh``, ``route``, ``route6``: lists of (A, B, DEV)) runs
    in ``netns``: left alone when one with the same spec runs, else (re)started."""
    want = {k: [list(t) for t in spec.get(k, ())] for k in ("neigh", "route", "route6")}
    rec = state.get("keeper")
    if rec and rec.get("spec") == want and _ours(int(rec.get("pid", 0)), tag):
        return
    stop(tag, state)
    argv = [sys.executable, "-m", "tgen_tui.lab.keeper", "--tag", tag, "--netns", netns]
    for k, items in want.items():
        for t in items:
            argv += [f"--{k}", ",".join(t)]
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(log_path(tag), "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv
            ["ip", "netns", "exec", netns, *argv], stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, env=env, cwd="/", start_new_session=True, close_fds=True,
        )  # fmt: skip
    for _ in range(100):  # its first restores written: it listens from then on
        if proc.poll() is not None or os.path.exists(stats_path(tag)):
            break
        time.sleep(0.01)
    if proc.poll() is not None:
        from tgen_tui.diagnostics import EnvironmentProblem

        raise EnvironmentProblem(
            f"the lab's keeper exited at once (code {proc.returncode}); see {log_path(tag)}"
        )
    state["keeper"] = {"pid": proc.pid, "spec": want}


def status(tag: str, state: dict) -> dict | None:
    """The keeper's pid, whether it runs, its restores (None when the lab has none)."""
    rec = state.get("keeper")
    if not rec:
        return None
    out: dict = {"pid": rec.get("pid"), "running": _ours(int(rec.get("pid", 0)), tag)}
    try:
        with open(stats_path(tag)) as f:
            doc = json.load(f)
        out |= {"restores": doc.get("restores"), "last": doc.get("last")}
    except (OSError, ValueError):
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgen_tui.lab.keeper")
    ap.add_argument("--tag", required=True, help="the lab's prefix (names the state files)")
    ap.add_argument("--netns", required=True, help="the namespace this runs in (exit when gone)")
    ap.add_argument("--neigh", action="append", default=[], metavar="IP,MAC,DEV")
    ap.add_argument("--route", action="append", default=[], metavar="DST,VIA,DEV")
    ap.add_argument("--route6", action="append", default=[], metavar="DST,VIA,DEV")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    k = Keeper(a.tag, a.netns, _triples(a.neigh), _triples(a.route), _triples(a.route6))
    return k.run()


if __name__ == "__main__":
    sys.exit(main())
