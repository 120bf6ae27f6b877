def fine(value):
    return value + 1


def broken(items):
    total = sum(items,
    for item in items:
        if item:
            total = item * 2
            print(total)
    return None


class Later:
    def method(self):
        first = 1
        second = 2
        return first + second
