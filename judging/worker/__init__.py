"""The warm worker: the program that runs inside each slot's bubblewrap sandbox, forking a process per Python test
(``judging/warm.py`` starts it and speaks ``protocol.py`` with it).

Copied read-only into the sandbox and run ``python -I -S -B``, it sees nothing of the judging package: every module
here imports only the standard library and this folder (``tests/product/test_package_layers.py``). The judge imports
``protocol`` alone. ``main.py`` starts it, ``loop.py`` serves the judge, ``isolation.py`` makes each test's
namespaces and drops its privileges, ``ending.py`` runs and ends the program as the interpreter would.
"""
