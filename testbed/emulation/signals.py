"""Signals during a fabric's life: termination as an interrupt, and teardown that signals cannot cut short.

Python runs signal handlers in the main thread only.  A run turns SIGINT,
SIGTERM and SIGHUP into :class:`KeyboardInterrupt` (:func:`termination_as_interrupt`),
so a polite kill tears the fabric down exactly as Ctrl-C does; teardown itself
runs with those signals ignored (:func:`signals_deferred`), so a second Ctrl-C
cannot leave half a network behind.  Short steps that must not be cut in half
and must not lose a signal either (handing work to worker threads) hold the
signals pending (:func:`signals_held`).

SIGINT is set explicitly rather than left to Python's default: a process
started in the background by a non-interactive shell (``testbed net up ... &``
in a script, a CI job) inherits SIGINT ignored, and Python then installs no
handler, so ``kill -INT`` would leave the network up forever.
"""
import contextlib
import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_name(signum):
    """``"SIGTERM"`` for 15; ``"signal N"`` for numbers without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def termination_as_interrupt():
    """Turn SIGINT, SIGTERM and SIGHUP into KeyboardInterrupt inside the block (main thread only).

    The interrupt's text names the signal (``KeyboardInterrupt("SIGTERM")``), so
    ``finally`` clauses (network teardown) run when a run is killed politely,
    exactly as they do on Ctrl-C, even when the process inherited SIGINT
    ignored.  Outside the main thread (where Python cannot set signal handlers)
    it does nothing.
    """

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(signal_name(signum))

    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred():
    """Ignore SIGINT/SIGTERM/SIGHUP inside the block (teardown must finish), then restore them.

    Main thread only; elsewhere it does nothing.
    """
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held():
    """Hold SIGINT/SIGTERM/SIGHUP inside the block and deliver the first one that came right after it.

    Unlike :func:`signals_deferred` nothing is lost: the signal is raised again
    (``signal.raise_signal``) once the handlers the block replaced are back, so a
    run interrupted during the block sees its KeyboardInterrupt just after it.
    Meant for short steps an interrupt must not cut in half, such as starting
    worker threads and handing them work (an interrupt inside
    ``ThreadPoolExecutor.submit`` can leave a started thread the pool no longer
    waits for).  Main thread only (Python's handlers run there); elsewhere it
    does nothing.
    """
    if not _in_main_thread():
        yield
        return
    caught = []
    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, _frame: caught.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])
