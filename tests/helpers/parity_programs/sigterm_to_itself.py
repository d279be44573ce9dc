# SIGTERM to itself: pid 1 ignores it while its action is the default.
# expected output: '3'
import os, signal
# test
print(3, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
