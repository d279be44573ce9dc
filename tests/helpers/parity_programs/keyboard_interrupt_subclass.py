# A KeyboardInterrupt subclass: only KeyboardInterrupt itself ends by SIGINT.
# expected output: 'unused'
class Interrupt(KeyboardInterrupt):
    pass
# test
raise Interrupt
