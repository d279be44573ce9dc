# sys.exit(True): a bool is an int, 1.
# expected output: '3'
# test
print(3)
import sys
sys.exit(True)
