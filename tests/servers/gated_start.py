"""A stdio backend that starts only once a flag file exists, then runs the demo server.

    python gated_start.py FLAGFILE

Until FLAGFILE exists it reads nothing and answers nothing (it checks every 20 ms):
a backend that is slow to start, for as long as a test wants, for the admission
tests of session creation. Then it becomes ``python -m hopline.demo``.
"""

import os
import sys
import time

while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
os.execv(sys.executable, [sys.executable, "-m", "hopline.demo"])
