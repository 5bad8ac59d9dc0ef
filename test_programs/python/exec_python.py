"""Replaces itself (os.execv) by a new interpreter running lru_growth.py (stdlib only).

Under ``growtrace run`` the agent took its start-up folder off PYTHONPATH in this process; the
exec'd interpreter must get it back, so that its own trace (<stem>.exec1.gtrace) holds the
growing cache of lru_growth.py, not only its allocations.
usage: exec_python.py [ARGS FOR lru_growth.py...]
"""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
print(f"exec_python: PYTHONPATH={os.environ.get('PYTHONPATH', '')!r}", flush=True)  # the program's own
os.execv(sys.executable, [sys.executable, os.path.join(here, "lru_growth.py"), *sys.argv[1:]])
