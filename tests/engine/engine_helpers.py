"""Profile text builders for engine and `tgen run` tests (lab MACs and addresses)."""

from __future__ import annotations

from tgen_tui.lab.naming import D0_MAC, D1_MAC, P0_MAC, P1_MAC


def stream_yaml(
    name: str,
    port: str,
    *,
    rx_port: str,
    nat: bool = True,
    pps: int = 2000,
    extra: str = "",
    src_ports: str = "{min: 10000, max: 10063, mode: inc}",
) -> str:
    if port == "p0":
        src_mac, dst_mac = P0_MAC, (D0_MAC if nat else P1_MAC)
        src, dst = "198.18.0.2", "198.19.0.2"
    else:
        src_mac, dst_mac = P1_MAC, (D1_MAC if nat else P0_MAC)
        src, dst = "198.19.0.2", ("198.19.0.1" if nat else "198.18.0.2")
    return f"""
  - name: {name}
    port: {port}
    rx_port: {rx_port}
    eth: {{src: "{src_mac}", dst: "{dst_mac}"}}
    ipv4: {{src: {src}, dst: {dst}}}
    udp:
      src_port: {src_ports}
      dst_port: 7
    size: 64
    rate: {{pps: {pps}}}
{extra}"""


def profile_yaml(prefix: str, streams: str, *, dut: bool = True) -> str:
    text = f"""
name: test
seed: 5
ports:
  p0: {{interface: p0, netns: {prefix}-tester}}
  p1: {{interface: p1, netns: {prefix}-tester}}
streams:{streams}
"""
    if dut:
        text += f"dut: {{netns: {prefix}-dut}}\n"
    return text


async def wait_sent(eng, want: dict[str, int], timeout: float = 30.0):
    """The engine's live snapshot once each stream of ``want`` has sent at least that many
    frames. Tests wait for counts, not for wall time: the timeout is generous (a loaded
    host sends late, which is not what these tests check) and fails naming what was not
    reached."""
    import trio

    end = trio.current_time() + timeout
    while True:
        snap = await eng.sample_now()
        short = {
            n: snap.stream(n).tx_frames for n, k in want.items() if snap.stream(n).tx_frames < k
        }
        if not short:
            return snap
        if trio.current_time() > end:
            raise AssertionError(f"after {timeout:g} s, sent only {short} of {want}")
        await trio.sleep(0.05)
