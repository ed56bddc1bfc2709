"""Write notifications of state objects (the native backend mirrors the state through them)."""
import functools


def notifies(method):
    """Decorate a write method: after it succeeds, call each of the object's ``watchers`` with the object,
    the write's name and what it returned (a table's insert, modify and delete return the entry).

    A watcher must be cheap (writers wait for it): the native backend only notes what changed and
    copies it before the next packet.

    >>> class Box:
    ...     def __init__(self):
    ...         self.watchers = [lambda box, write, result: print(write, box.value, result)]
    ...     @notifies
    ...     def set(self, value):
    ...         self.value = value
    ...         return value * 2
    >>> Box().set(3)
    set 3 6
    6
    """
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        for watcher in self.watchers:
            watcher(self, name, result)
        return result
    return wrapper
