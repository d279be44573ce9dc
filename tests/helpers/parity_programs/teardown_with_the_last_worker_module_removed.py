# The same after the program removed sys.modules' last entry before its own: the
# teardown walks every entry.
# expected output: 'late mine'
import sys, types
del sys.modules[next(reversed(sys.modules))]
class Late:
    def __del__(self):
        print('late', self.name)
sys.modules['mine'] = types.ModuleType('mine')
sys.modules['mine'].late = Late()
sys.modules['mine'].late.name = 'mine'
# test
