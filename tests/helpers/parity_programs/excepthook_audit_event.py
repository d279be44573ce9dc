# The sys.excepthook audit event, seen by an audit hook.
# expected output: 'unused'
import sys
sys.addaudithook(lambda event, args: event == 'sys.excepthook' and print(event, args[1:3]))
# test
raise ValueError(3)
