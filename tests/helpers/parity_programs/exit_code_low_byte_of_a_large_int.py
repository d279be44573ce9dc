# sys.exit(2 ** 40 + 512), a C long: its low byte.
# expected output: '3'
# test
print(3)
import sys
sys.exit(2 ** 40 + 512)
