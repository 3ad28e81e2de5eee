"""Worker processes: one per core, AF_PACKET TX and TPACKET_V3 RX, paced, with shared counters.

Import-light by rule: the standard library, numpy and tgen_tui.packets.{program,batch,schedule} only.
"""
