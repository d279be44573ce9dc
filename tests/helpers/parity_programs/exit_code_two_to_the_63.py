# sys.exit(2 ** 63), one past a C long: 255.
# expected output: '3'
# test
print(3)
import sys
sys.exit(2 ** 63)
