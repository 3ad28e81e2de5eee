"""YAML 1.2 plain scalars in flow mappings: an unquoted IPv6 address or MAC is a string
(libyaml, which follows 1.1, refuses them; the loader then asks the pure 1.2 parser)."""

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles.loader import parse_yaml


def test_unquoted_ipv6_and_mac_in_a_flow_mapping_are_strings():
    tree = parse_yaml(
        "p0: {ipv6: 2001:2::2/64, gateway6: 2001:2::1, mac: 02:74:67:00:00:01}\n", "x"
    )
    assert tree == {
        "p0": {"ipv6": "2001:2::2/64", "gateway6": "2001:2::1", "mac": "02:74:67:00:00:01"}
    }


def test_a_real_syntax_error_still_has_its_position():
    try:
        parse_yaml("a: [1, 2\n", "x.yaml")
    except BadInput as e:
        (p,) = e.problems
        assert (p.file, p.line) == ("x.yaml", 2) and "flow sequence" in p.message
    else:
        raise AssertionError("no error")
