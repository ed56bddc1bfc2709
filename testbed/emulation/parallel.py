"""Run one bring-up or teardown step on many nodes at once, so that a signal never cuts a node's work in half.

The work runs in worker threads while the calling thread only waits.  Python
runs signal handlers in the main thread, so Ctrl-C or SIGTERM (as
KeyboardInterrupt, :func:`testbed.emulation.signals.termination_as_interrupt`)
lands in that wait, never inside a node's shell command or process start:
items not yet started are dropped, a ``cancel`` event tells long waits to give
up, the running ones finish, and then the interrupt is raised.  What was built
is then in a known state and the caller tears it down.
"""
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from testbed.emulation.signals import signals_deferred


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
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))), thread_name_prefix=name)
    try:
        pending = {pool.submit(work, item): index for index, item in enumerate(items)}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=pending.get):
                index = pending.pop(future)
                results[index] = future.result()
                if done is not None:
                    done(items[index], results[index])
    except BaseException:
        with signals_deferred():
            pool.shutdown(wait=False, cancel_futures=True)  # nothing starts from now on
            cancel.set()
            pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return results
