"""The committed JSON schema matches the models; worker-side modules stay import-light."""

from __future__ import annotations

import json
import subprocess
import sys

from tgen_unit_helpers import REPO

from tgen_tui.commands.profile_cmds import schema_json


def test_schema_json_is_up_to_date():
    committed = (REPO / "profiles" / "schema.json").read_text(encoding="utf-8")
    assert committed == schema_json(), (
        "profiles/schema.json is out of date with tgen_tui.profiles.models: "
        "regenerate it with `tgen schema` (writes profiles/schema.json) and commit it"
    )


def test_schema_describes_profiles():
    schema = json.loads(schema_json())
    assert schema["title"] == "Profile"
    assert {"ports", "streams"} <= set(schema["required"])
    assert "Stream" in schema["$defs"] and "Vlan" in schema["$defs"]
    vlan_id = schema["$defs"]["Vlan"]["properties"]["id"]
    assert (vlan_id["minimum"], vlan_id["maximum"]) == (0, 4094)


HEAVY = ("scapy", "pydantic", "trio", "textual")
PROBE = """
import sys
import tgen_tui.packets.batch, tgen_tui.packets.schedule, tgen_tui.packets.program
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
print(",".join(heavy))
"""


def test_worker_modules_do_not_import_heavy_packages():
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"worker modules imported: {r.stdout.strip()}"


def test_import_probe_detects_heavy_imports():
    """Guard against a vacuous pass: the same probe does see pydantic when the loader is imported."""
    probe = PROBE.replace(
        "tgen_tui.packets.program\n", "tgen_tui.packets.program, tgen_tui.profiles.loader\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, *HEAVY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "pydantic" in r.stdout.strip().split(",")
