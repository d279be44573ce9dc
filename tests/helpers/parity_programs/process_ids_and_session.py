# pid 1, no parent in sight, leading its session and process group.
# expected output: '1 0 True True'
import os
# test
print(os.getpid(), os.getppid(), os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())
