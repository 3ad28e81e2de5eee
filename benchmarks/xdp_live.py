"""tgen's XDP live-frames path against a minimal live-frames sender and trafgen, one core.

A veth pair between two fresh namespaces (198.18.0.0/15); the receiving end runs a
native XDP_DROP program (``tgen_drop``: NAPI on, every frame dropped at once), and each
figure is its ``rx_packets`` delta over a window after a warm-up. Every sender is pinned
to one CPU (default: the last). Variants, interleaved, ``--runs`` times:

- ``tgen_xdp``: :class:`tgen_tui.worker.xdplive.XdpLiveTx` flat out, ``--batch`` frames
  per BPF_PROG_RUN, on the same IPv4/UDP program as tx_vs_trafgen.py (random source and
  destination ports, RFC 4814), signature and checksums: the path tx_path: xdp runs;
- ``tgen_worker``: the real worker process (``python -m tgen_tui.worker``) on ``tx_path:
  xdp``, one stream at an unreachable rate (its burst loop, calls of ``--batch``), as a
  run sends it;
- ``minimal``: the issue's reference: one fixed program written here (a counter into the
  UDP source port, the counter and ``bpf_ktime_get_ns()`` into the payload, XDP_TX, no
  checksum), loaded through the same libbpf, kept attached to an idle veth, in a plain
  loop of BPF_PROG_RUN calls;
- ``trafgen``: netsniff-ng trafgen with random ports (tx_vs_trafgen.py's config);
- ``op_<mode>`` (``--ops``): tgen's path with one varying field of each mode (none,
  inc, random, unique, table) on the source port: the cost of each field op is
  ``1/pps(op) - 1/pps(none)``.

Ratios of medians of valid runs: tgen_xdp and tgen_worker over trafgen and over minimal. The host,
its load before the run and each CPU's busy share per window go with the runs. Writes
``benchmarks/results/xdp_live.json``. Root: ``.venv/bin/python benchmarks/xdp_live.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tx_vs_trafgen as tvt  # noqa: E402

from tgen_tui.packets.program import CSUM_L4, FieldOp  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

MINIMAL_C = r"""
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
__u64 count = 0;
SEC("xdp")
int minimal(struct xdp_md *x)
{
	__u8 *d = (void *)(long)x->data, *e = (void *)(long)x->data_end;
	__u64 c = count++;
	__u32 ts = bpf_ktime_get_ns();
	if (d + 60 > e)
		return XDP_ABORTED;
	d[34] = 4 + ((c >> 8) & 0x7f);
	d[35] = c;
	__builtin_memcpy(d + 52, &c, 4);
	__builtin_memcpy(d + 56, &ts, 4);
	return XDP_TX;
}
char LICENSE[] SEC("license") = "GPL";
"""


def program(mode: str | None = "udp64"):
    """The benchmark stream: tx_vs_trafgen's (mode udp64), or one field op of ``mode``
    on the source port (none: no varying field)."""
    p = tvt.udp64_program(pps=1e9)
    if mode == "udp64":
        return p
    if mode == "none":
        return dataclasses.replace(p, fields=(), unique=())
    sport = {
        "inc": FieldOp("sport", 34, 2, "inc", 1024, 65535, csum=CSUM_L4),
        "random": FieldOp("sport", 34, 2, "random", 1024, 65535, key=7, csum=CSUM_L4),
        "unique": FieldOp("sport", 34, 2, "unique", 1024, 65535, csum=CSUM_L4),
        "table": FieldOp("sport", 34, 2, "table", 0, 65535, csum=CSUM_L4, column=2),
    }[mode]
    extra: dict = {"unique": (0,), "unique_key": 3} if mode == "unique" else {"unique": ()}
    if mode == "table":
        t = np.zeros((4096, 4), dtype=np.uint32)
        t[:, 2] = 1024 + np.arange(4096)
        path = Path(tempfile.gettempdir()) / "tgen_xdp_bench_table.npy"
        np.save(path, t)
        extra |= {"table": str(path), "table_order": "inc"}
    return dataclasses.replace(p, fields=(sport,), **extra)


# ---------------------------------------------------------------------- the senders
def child(kind: str, interface: str, batch: int, seconds: float) -> int:
    """In the sender namespace, pinned: send flat out for ``seconds``; print a JSON line."""
    from tgen_tui.worker import xdplive as xl

    t_end = time.monotonic() + seconds
    calls = 0
    if kind == "minimal":
        with tempfile.TemporaryDirectory() as d:
            src, obj = Path(d) / "m.c", Path(d) / "m.o"
            src.write_text(MINIMAL_C)
            subprocess.run(xl.clang_command(str(src), str(obj)), check=True)
            made = _minimal_loop(xl, str(obj), interface, batch, t_end)
        print(json.dumps({"produced": made}))
        return 0
    mode = "udp64" if kind == "tgen_xdp" else kind.removeprefix("op_")
    tx = xl.XdpLiveTx(interface)
    try:
        slot = tx.add_stream(program(mode))
        k = 0
        while time.monotonic() < t_end:
            k += tx.send_stream(slot, k, batch)
            calls += 1
    finally:
        tx.close()
    print(json.dumps({"produced": tx.produced, "sent": tx.sent, "dropped": tx.dropped,
                      "calls": calls}))  # fmt: skip
    return 0


def _minimal_loop(xl, obj: str, interface: str, batch: int, t_end: float) -> int:
    import ctypes
    import socket

    lib = xl.libbpf()
    o = lib.bpf_object__open_file(obj.encode(), None)
    assert o and lib.bpf_object__load(o) == 0, "minimal program did not load"
    prog = lib.bpf_object__find_program_by_name(o, b"minimal")
    fd = lib.bpf_program__fd(prog)
    hold = f"tgxm{os.getpid() % 10**7}"
    subprocess.run(["ip", "link", "add", hold + "a", "type", "veth", "peer", "name", hold + "b"],
                   check=True)  # fmt: skip
    link = lib.bpf_program__attach_xdp(prog, socket.if_nametoindex(hold + "a"))
    frame = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    frame += bytes([0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2])
    frame += bytes([0x04, 0, 0, 9, 0, 26, 0, 0]) + bytes(18)
    data = (ctypes.c_uint8 * len(frame)).from_buffer_copy(frame)
    ctx = xl._XdpMd(0, len(frame), 0, socket.if_nametoindex(interface), 0, 0)
    opts = xl._TestRunOpts()
    opts.sz = ctypes.sizeof(opts)
    opts.data_in, opts.data_size_in = ctypes.addressof(data), len(frame)
    opts.ctx_in, opts.ctx_size_in = ctypes.addressof(ctx), ctypes.sizeof(ctx)
    opts.flags, opts.repeat = xl.BPF_F_TEST_XDP_LIVE_FRAMES, batch
    made = 0
    try:
        while time.monotonic() < t_end:
            if lib.bpf_prog_test_run_opts(fd, ctypes.addressof(opts)) != 0:
                raise OSError(ctypes.get_errno(), "minimal: BPF_PROG_RUN failed")
            made += batch
    finally:
        if link:
            lib.bpf_link__destroy(link)
        lib.bpf_object__close(o)
        subprocess.run(["ip", "link", "del", hold + "a"], capture_output=True)
    return made


def run_child(pair, kind: str, cpu: int, warm: float, seconds: float, batch: int) -> dict:
    argv = ["ip", "netns", "exec", pair.ns_a, "taskset", "-c", str(cpu), sys.executable,
            __file__, "--child", kind, "--interface", pair.if_a, "--batch", str(batch),
            "--seconds", str(warm + seconds + 0.5)]  # fmt: skip
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        res = tvt.measure_window(pair, warm, seconds, alive=lambda: p.poll() is None)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    res["rc"] = p.returncode
    try:
        res["sender"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res["sender"] = None
    why = []
    if res["frames"] <= 0:
        why.append("the sink counted no frames")
    if not res["alive_at_end"] or p.returncode != 0:
        why.append(f"sender ended early or failed (rc {p.returncode}): {err.strip()[-200:]}")
    res["valid"] = not why
    if why:
        res["why_invalid"] = "; ".join(why)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=4096, help="frames per BPF_PROG_RUN")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--ops", action="store_true", help="also the cost of each field op")
    ap.add_argument("--out", default=str(RESULTS / "xdp_live.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--interface", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.interface, a.batch, a.seconds)
    if os.geteuid() != 0:
        print("needs root (network namespaces, BPF)", file=sys.stderr)
        return 3
    from tgen_tui.worker import xdplive as xl
    from tgen_tui.worker.netns import netns

    xl.build_object()
    variants = ["tgen_worker", "tgen_xdp", "minimal", "trafgen"]
    if a.ops:
        variants += [f"op_{m}" for m in ("none", "inc", "random", "unique", "table")]
    host = tvt.host_facts()
    pair = tvt.Pair("xb").up()
    runs: dict[str, list] = {v: [] for v in variants}
    try:
        with netns(pair.ns_b):
            xl.attach_pass(pair.if_b, "tgen_drop")
        for r in range(a.runs):
            for v in variants:
                if v == "trafgen":
                    res = tvt.run_trafgen(pair, a.cpu, a.warm, a.seconds)
                elif v == "tgen_worker":
                    tx = {"tx_path": "xdp", "max_batch": a.batch, "pacing": "burst"}
                    res = tvt.run_worker(pair, a.cpu, a.warm, a.seconds, tx=tx)
                else:
                    res = run_child(pair, v, a.cpu, a.warm, a.seconds, a.batch)
                runs[v].append(res)
                flag = "" if res.get("valid") else f"  INVALID: {res.get('why_invalid')}"
                busy = res.get("cpu_busy_pct", [])
                print(f"run {r} {v:10s} {res['pps'] / 1e6:7.3f} Mpps  cpu {busy}{flag}",
                      flush=True)  # fmt: skip
    finally:
        pair.down()
    med = {
        v: statistics.median([x["pps"] for x in rs if x.get("valid")])
        for v, rs in runs.items()
        if any(x.get("valid") for x in rs)
    }

    def ratio(x: str, y: str) -> float | None:
        return round(med[x] / med[y], 3) if x in med and y in med and med[y] else None

    ops = {}
    if "op_none" in med:
        base = 1e9 / med["op_none"]
        ops = {v[3:]: round(1e9 / med[v] - base, 2) for v in med if v.startswith("op_")}
    res = {
        "benchmark": "xdp_live",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": host | {"loadavg_after": list(os.getloadavg())},
        "setup": {
            "frame_bytes_with_fcs": 64,
            "sender_cpu": a.cpu,
            "batch": a.batch,
            "seconds": a.seconds,
            "runs": a.runs,
            "counted_by": "rx_packets of the receiving veth (native XDP_DROP: tgen_drop)",
        },
        "median_mpps": {v: round(x / 1e6, 3) for v, x in med.items()},
        "tgen_xdp_over_trafgen": ratio("tgen_xdp", "trafgen"),
        "tgen_xdp_over_minimal": ratio("tgen_xdp", "minimal"),
        "tgen_worker_over_trafgen": ratio("tgen_worker", "trafgen"),
        "tgen_worker_over_minimal": ratio("tgen_worker", "minimal"),
        "field_op_cost_ns": ops,
        "runs_detail": runs,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    keys = ("median_mpps", "tgen_xdp_over_trafgen", "tgen_xdp_over_minimal",
            "tgen_worker_over_trafgen", "tgen_worker_over_minimal", "field_op_cost_ns")  # fmt: skip
    print(json.dumps({k: res[k] for k in keys}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
