# Every signal's disposition at start.
# expected output: 'unused'
import signal
# test
print(sorted((s.name, str(signal.getsignal(s))) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)))
