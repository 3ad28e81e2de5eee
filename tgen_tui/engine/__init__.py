"""The engine: trio controller of worker processes, stats sampling and probes (never Textual).

``open_engine(compiled, options)`` is the one API that both front ends drive.
"""
