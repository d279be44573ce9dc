# Modules the program added, holding objects whose __del__ prints: gone in sys.modules' order
# as their entries are dropped, before __main__'s (kept alive by a cycle through its class) is collected.
# expected output: 'late first\nlate second\nlate main'
import sys, types
class Late:
    def __del__(self):
        print('late', self.name)
for name in ('first', 'second'):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].late = Late()
    sys.modules[name].late.name = name
main_late = Late()
main_late.name = 'main'
# test
