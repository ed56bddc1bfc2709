"""Run one bring-up or teardown step on many nodes at once, so that a signal never cuts a node's work in half.

The work runs in worker threads while the calling thread only waits.  Python
runs signal handlers in the main thread, so Ctrl-C or SIGTERM (as
KeyboardInterrupt, :func:`testbed.emulation.signals.termination_as_interrupt`)
lands in that thread, and only in one place: a plain sleep between two looks
at the finished items.  Everything else the calling thread does
(handing work to the pool, taking results, progress, shutting the pool down)
runs with signals held (:func:`~testbed.emulation.signals.signals_held`),
because an exception raised inside library code that holds a lock (a
future's condition, a thread that is starting) leaves that lock held and the
pool's shutdown waiting forever.  On an interrupt, items not yet started are
dropped, a ``cancel`` event tells long waits to give up, the running ones
finish, and then the interrupt is raised.  What was built is then in a known
state and the caller tears it down.
"""
import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from testbed.emulation.signals import signals_deferred, signals_held

POLL_S = 0.002  # how often the calling thread looks for finished items


def for_each(items, work, workers, done=None, cancel=None, name="fabric"):
    """Call ``work(item)`` for every item, at most ``workers`` at a time, in worker threads.

    Args:
        items: the items (nodes, links...).
        work: ``callable(item) -> result``, run in a worker thread.
        workers: most calls running at once (at least 1).
        done: ``callable(item, result)`` called in the calling thread each time an item
            finishes (progress), or None.
        cancel: a :class:`threading.Event` set when the step stops early (an error or an
            interrupt), for ``work`` that waits long to poll; None: a private one.
        name: prefix of the worker threads' names.

    Returns:
        list: the results, in the order of ``items``.

    Raises:
        Exception: the first error a ``work`` call raised (in the order they finished),
            once the calls already running returned; the remaining items are not started.
        KeyboardInterrupt: the calling thread was interrupted; the same happens first.
    """
    items = list(items)
    if not items:
        return []
    cancel = cancel if cancel is not None else threading.Event()
    results = [None] * len(items)
    finished = collections.deque()  # (index, result, error), appended by the workers (atomic)

    def run(index):
        try:
            finished.append((index, work(items[index]), None))
        except BaseException as error:  # noqa: BLE001 - raised in the calling thread
            finished.append((index, None, error))

    pool = None
    try:
        with signals_held():
            pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))), thread_name_prefix=name)
            for index in range(len(items)):
                pool.submit(run, index)
        remaining = len(items)
        while remaining:
            while not finished:
                time.sleep(POLL_S)  # the one place a signal lands
            with signals_held():
                index, result, error = finished.popleft()
                remaining -= 1
                if error is None:
                    results[index] = result
                    if done is not None:
                        done(items[index], result)
            if error is not None:
                raise error
    except BaseException:
        with signals_deferred():
            cancel.set()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)  # nothing starts now; the running ones finish
        raise
    with signals_held():
        pool.shutdown(wait=True)
    return results
