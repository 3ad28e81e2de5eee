"""RFC 9693 stateful NAT benchmarks: ``run`` (cps, capacity, teardown), ``stateful`` (the
phase-1/phase-2 trial), ``capacity`` (the pure search), ``phase2`` (the Responder),
``tcpflow`` (connections as TCP handshakes), ``report``, ``output``."""
