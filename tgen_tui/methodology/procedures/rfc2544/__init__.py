"""RFC 2544 throughput and frame loss, RFC 8219 latency and PDV: ``run`` (the
procedures), ``loss`` and ``latency`` (their pure figures), ``report``, ``output``."""
