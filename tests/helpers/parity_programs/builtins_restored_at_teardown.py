# Builtins as the interpreter started (without what the program added, or open), for a
# __del__ the last collection runs (a cycle holds it).
# expected output: 'unused'
import builtins
builtins.extra = 3
class Late:
    def __del__(self):
        print('extra' in vars(__builtins__), len(vars(__builtins__)))
late = Late()
late.cycle = late
# test
