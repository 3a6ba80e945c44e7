"""Run the uqconform benchmarks from a source checkout: ``python benchmarks/run.py --suite quick``.

The suites live in the installed package (``uqconform/benchmarks/``); this script is the
same as ``uqconform benchmark ...``.
"""

import sys

from uqconform.cli import main

if __name__ == "__main__":
    sys.exit(main(["benchmark", *sys.argv[1:]]))
