"""The committed JSON schema matches the models (import hygiene: tests/test_import_hygiene.py)."""

from __future__ import annotations

import json

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


# Import hygiene (workers stay light, the core never loads Textual): tests/test_import_hygiene.py
