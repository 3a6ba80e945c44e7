"""``python -m uqconform``: the command line of `uqconform.cli` (``uqconform benchmark ...``)."""

import sys

from uqconform.cli import main

sys.exit(main())
