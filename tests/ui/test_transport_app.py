"""The transport console draws what the snapshots say (fed directly: no lab, no root)."""

from __future__ import annotations

import asyncio

from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.ui.transport_app import TransportApp, chart_line, row_cells

PROFILE = """\
name: tp
duration: 3s
ports: {p0: {interface: p0}, p1: {interface: p1}}
streams: []
hosts: {p0: {ipv4: 198.18.100.2}, p1: {ipv4: 198.19.100.2}}
transport:
  - {name: bulk, port: p0, rx_port: p1, cc: reno}
  - {name: bg, port: p0, rx_port: p1, protocol: udp, rate: 1M, schedule: {on: 1s, off: 1s}}
"""


def _snap(t: float, bulk: float, bg: float, on: bool) -> dict:
    return {
        "t": t,
        "kind": "transport",
        "fairness_jain": 1.0,
        "flows": {
            "bulk": {
                "goodput_bps": bulk,
                "rtt_ms": 40.5,
                "cwnd": 12,
                "retransmits": 3,
                "delivery_rate_bps": 4e6,
                "on": True,
            },  # fmt: skip
            "bg": {"goodput_bps": bg, "loss_pct": 1.5, "jitter_ms": 0.25, "on": on},
        },
    }


def test_rows_and_chart_cells():
    cells = row_cells("bulk", _snap(1, 8e6, 0, False)["flows"]["bulk"], "tcp")
    assert cells == ["bulk", "tcp", "on", "8.000", "40.5", "12", "3", "4.000", "-", "-"]
    assert chart_line([0, 4, 8], 8, 10) == " ▄█"


def test_table_and_charts_follow_the_snapshots():
    prof = load_profile_text(PROFILE)

    async def go():
        app = TransportApp(prof)
        async with app.run_test(size=(100, 24)) as pilot:
            app.show_snapshot(_snap(1.0, 8e6, 1e6, True))
            app.show_snapshot(_snap(2.0, 9e6, 0.0, False))
            await pilot.pause()
            table = app.query_one("#streams")
            assert table.row_count == 2
            assert table.get_cell("bulk", "goodput Mbit/s") == "9.000"
            assert table.get_cell("bg", "on") == "off"
            assert table.get_cell("bg", "loss %") == "1.50"
            assert app.history == {"bulk": [8e6, 9e6], "bg": [1e6, 0.0]}
            charts = str(app.query_one("#charts").render())
            assert "bulk" in charts and "bg" in charts and "9.00 Mbit/s" in charts

    asyncio.run(go())


def test_tgen_tui_opens_the_transport_console(tmp_path, monkeypatch):
    """`tgen tui PROFILE` with transport: flows runs TransportApp (its run() stubbed here)."""
    from tgen_tui import cli
    from tgen_tui.ui import transport_app

    seen = {}

    def fake_run(self):
        seen["profile"] = self.prof.name
        seen["starts_idle"] = self.state

    monkeypatch.setattr(transport_app.TransportApp, "run", fake_run)
    path = tmp_path / "tp.yaml"
    path.write_text(PROFILE)
    assert cli.main(["tui", str(path), "--no-store"]) == 0
    assert seen == {"profile": "tp", "starts_idle": "idle"}
    path.write_text(PROFILE.replace("duration: 3s\n", ""))
    assert cli.main(["tui", str(path), "--no-store"]) == 2  # a transport profile needs duration:
