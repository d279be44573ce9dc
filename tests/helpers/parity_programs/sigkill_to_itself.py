# SIGKILL to itself ends even pid 1.
# expected output: '3'
import os, signal
# test
print(3, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
