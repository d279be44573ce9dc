# gc.collect and gc.isenabled replaced: the last collection still runs the __del__.
# expected output: '3'
import gc
class Late:
    def __del__(self):
        print(3)
late = Late()
late.cycle = late
# test
gc.collect = gc.isenabled = int
