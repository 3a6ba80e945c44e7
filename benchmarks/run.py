"""Run the uqconform benchmarks from a source checkout: ``python benchmarks/run.py --suite quick``.

The suites live in the package (``uqconform/benchmarks/``); this script is the same as
``uqconform benchmark ...`` and runs the checkout it sits in, installed or not (its
dependencies must be installed).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's uqconform

from uqconform.cli import main

if __name__ == "__main__":
    sys.exit(main(["benchmark", *sys.argv[1:]]))
