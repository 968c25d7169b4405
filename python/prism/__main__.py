"""python -m prism: the `prism` command (the same program, built from the same sources) with the
same arguments: `python -m prism devices`, `python -m prism pretune --shapes s.yaml`, ..."""
from __future__ import annotations

import os
import shutil
import sys


def command() -> str:
    """The `prism` executable: the one shipped in the package, else PRISM_CLI, else the build
    tree's (bin/ beside the build's python/), else `prism` on PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "bin", "prism"), os.environ.get("PRISM_CLI", ""),
                  os.path.join(here, "..", "..", "bin", "prism")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    found = shutil.which("prism")
    if found:
        return found
    sys.exit("python -m prism: no `prism` executable found (looked in " + ", ".join(c for c in candidates if c)
             + " and PATH); set PRISM_CLI to it")


def main() -> None:
    exe = command()
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
