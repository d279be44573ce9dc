# A thread joined before atexit runs.
# expected output: '3\n4'
import atexit, threading, time
# test
atexit.register(print, 4)
threading.Thread(target=lambda: (time.sleep(0.1), print(3))).start()
