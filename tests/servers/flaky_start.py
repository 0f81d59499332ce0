"""A stdio backend that refuses to start until a flag file exists, then runs the demo server.

    python flaky_start.py FLAGFILE

For tests of a backend that is down at startup and comes up later.
"""

import os
import sys

if not os.path.exists(sys.argv[1]):
    print("not ready yet", file=sys.stderr)
    raise SystemExit(1)
os.execv(sys.executable, [sys.executable, "-m", "hopline.demo"])
