# SIGALRM raised: its default action ends the process.
# expected output: 'unused'
import signal
# test
signal.raise_signal(signal.SIGALRM)
