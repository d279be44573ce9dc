"""``python -m rewards score|passk``: the command lives in ``commands/score.py``, above ``data``, whose loaders
it uses."""

import sys

from commands.score import main

sys.exit(main())
