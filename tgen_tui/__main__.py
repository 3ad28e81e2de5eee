"""``python -m tgen_tui`` is ``tgen``."""

import sys

from tgen_tui.cli import main

sys.exit(main())
