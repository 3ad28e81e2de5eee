"""Packets: templates (scapy, built once), field programs and the numpy batch builder.

Submodules are imported explicitly: ``program``, ``batch`` and ``schedule`` are
import-light (stdlib + numpy) for workers; ``compile`` and ``pcap`` use scapy and
pydantic models and are for the engine and CLI only.
"""
