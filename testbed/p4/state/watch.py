"""Write notifications of state objects (the native backend mirrors the state through them)."""
import functools


def notifies(method):
    """Decorate a write method: after it succeeds, call each of the object's ``watchers`` with the object.

    A watcher must be cheap (it runs inside the writer's lock): the native backend only marks
    what changed and copies it before the next packet.

    >>> class Box:
    ...     def __init__(self):
    ...         self.watchers = [lambda box: print("changed", box.value)]
    ...     @notifies
    ...     def set(self, value):
    ...         self.value = value
    >>> Box().set(3)
    changed 3
    """
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        for watcher in self.watchers:
            watcher(self)
        return result
    return wrapper
