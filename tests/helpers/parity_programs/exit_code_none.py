# sys.exit(None): 0.
# expected output: '3'
# test
print(3)
import sys
sys.exit(None)
