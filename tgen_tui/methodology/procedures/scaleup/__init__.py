"""``tgen scaleup``: a test once per core count, and the relative scale-up (``run``,
``report``, ``output``)."""
