"""The network-namespace test bed: tester ports, a NAT44 DUT with nftables and conntrack.

API (the engine and methodology import these from :mod:`tgen_tui.lab.topology`):
``LabConfig``, ``up``, ``down``, ``status``, ``set_dut``, ``flush_conntrack``,
``conntrack_count``, ``tester_netns``, ``dut_netns``. Names, MACs and addresses are
constants in :mod:`tgen_tui.lab.naming`; the ``tgen lab`` verbs are in
:mod:`tgen_tui.lab.cli`. Nothing here imports textual, trio or scapy.
"""
