# sys.exit with an int subclass whose & lies: the interpreter reads the C long.
# expected output: '3'
class Code(int):
    def __and__(self, other):
        return 0
# test
print(3)
import sys
sys.exit(Code(7))
