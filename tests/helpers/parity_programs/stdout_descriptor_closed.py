# fd 1 closed: the final flush fails and the interpreter exits 120.
# expected output: '3'
import os
# test
print(3)
os.close(1)
