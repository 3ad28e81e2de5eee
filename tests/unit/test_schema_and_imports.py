"""The committed JSON schema matches the models (import hygiene: tests/test_import_hygiene.py)."""

from __future__ import annotations

import json

from tgen_tui.commands.profile_cmds import schema_json

from .tgen_unit_helpers import REPO


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


# Import hygiene (workers stay light, the core never loads Textual): tests/test_import_hygiene.py


def test_profile_hash_ignores_fields_left_at_their_defaults():
    from tgen_tui.packets.compile import profile_hash
    from tgen_tui.profiles.loader import load_profile_text

    base = """
name: h
ports: {p0: {interface: p0}}
streams:
  - {name: s, port: p0, eth: {src: "02:00:00:00:00:01", dst: "02:00:00:00:00:02"},
     ipv4: {src: 198.18.0.1, dst: 198.19.0.1}, udp: {src_port: 1, dst_port: 7}, rate: 1000pps}
"""
    a = profile_hash(load_profile_text(base))
    b = profile_hash(
        load_profile_text(base.replace("{interface: p0}", "{interface: p0, speed: 10G}"))
    )
    c = profile_hash(load_profile_text(base.replace("rate: 1000pps", "rate: 2000pps")))
    assert a == b  # 10G is the default speed: writing it out changes nothing
    assert a != c
