# sys.exit with an int beyond a C long: the interpreter exits 255.
# expected output: '3'
# test
print(3)
import sys
sys.exit(2 ** 64)
