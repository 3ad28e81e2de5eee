"""``tgen sweep``: throughput and connection rate against sessions (``sessions``, ``run``,
``report``, ``output``)."""
