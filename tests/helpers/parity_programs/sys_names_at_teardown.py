# What a __del__ at teardown sees of sys: its special names cleared, its files restored.
# expected output: 'unused'
import sys
class Late:
    def __del__(self):
        print(sys.argv, sys.path, sys.meta_path, sys.stdout is sys.__stdout__, sys.stdin is sys.__stdin__)
late = Late()
# test
sys.stdout = open(1, 'w', closefd=False)
sys.stdin = None
