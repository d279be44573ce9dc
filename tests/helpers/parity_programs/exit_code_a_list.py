# sys.exit([3]): not an int, printed to stderr, exit 1.
# expected output: '3'
# test
print(3)
import sys
sys.exit([3])
