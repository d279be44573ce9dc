# PR_GET_DUMPABLE: 1, as after a cold exec.
# expected output: '1'
import ctypes
# test
print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
