"""The warm worker's program: ``python -I -S -B /warm_worker/main.py CONTROL_FD UID RULES`` inside one slot's
bubblewrap sandbox (judging/warm.py starts it, with this folder's modules copied, read-only, into /warm_worker).

The interpreter runs isolated (``-I``: not even this folder on its path), so this file puts its folder on
``sys.path`` for its own imports, then takes it away and drops its modules' names from ``sys.modules`` before any
program runs: a program sees the path a cold interpreter has, and ``import loop`` fails for it as it does cold.
The modules stay alive through the names bound here.
"""

import sys

FOLDER = __file__.rpartition("/")[0]
OWN_MODULES = ("protocol", "isolation", "ending", "finalization", "loop")
sys.path.insert(0, FOLDER)
import loop  # noqa: E402  (after the path it is found on)

sys.path.remove(FOLDER)
for name in OWN_MODULES:
    del sys.modules[name]
loop.main(sys.argv)
