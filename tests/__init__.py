"""The test suite, a package: test helpers are modules imported relatively
(``from .engine_helpers import ...``), never through ``sys.path`` inserts."""
