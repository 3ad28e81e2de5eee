"""Frame geometry shared by profiles (validation, line rates) and packets (programs, batches).

Plain integers, no imports: the worker reaches them through ``tgen_tui.packets.program``
(stdlib + numpy only, DESIGN rule 2), and ``profiles`` must not import ``packets`` (layers).
"""

SIG_LEN = 12  # the test-frame signature at the end of every frame (see packets.program)
FCS_LEN = 4  # frame sizes in profiles include the FCS, as in RFC 2544; the kernel adds it
L1_OVERHEAD = 20  # preamble (7) + start delimiter (1) + inter-frame gap (12) per frame
VLAN_TAG_LEN = 4  # one 802.1Q/802.1ad tag
