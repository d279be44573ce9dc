# __file__ as a __del__ at teardown sees it.
# expected output: 'unused'
class Late:
    def __del__(self):
        print(globals().get('__file__'))
late = Late()
# test
