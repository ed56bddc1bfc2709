"""Signal handling of a fabric's owner: SIGINT/SIGTERM/SIGHUP interrupt it, teardown is not cut short.

Each case runs in a child interpreter so that this process's own signal handlers stay untouched.
"""
import subprocess
import sys
import textwrap

import pytest


def run_child(body):
    """Run ``body`` (Python source) in a child interpreter; return its stdout lines."""
    prelude = textwrap.dedent("""
        import os, signal, time
        from testbed.emulation.signals import signals_deferred, signals_held, termination_as_interrupt
    """)
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_each_stop_signal_becomes_an_interrupt_naming_it(name):
    lines = run_child(f"""
        with termination_as_interrupt():
            try:
                os.kill(os.getpid(), signal.{name})
                time.sleep(30)
            except KeyboardInterrupt as interrupt:
                print(interrupt.args[0])
    """)
    assert lines == [name]


def test_sigint_interrupts_a_process_that_inherited_it_ignored():
    # a background job of a non-interactive shell (`testbed net up ... &` in a script, a CI job)
    # starts with SIGINT ignored; Python then installs no handler of its own
    lines = run_child("""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with termination_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(30)
            except KeyboardInterrupt as interrupt:
                print(interrupt.args[0])
        print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)  # the inherited disposition is back
    """)
    assert lines == ["SIGINT", "True"]


def test_signals_during_a_deferred_block_are_ignored_and_handlers_restored():
    lines = run_child("""
        with termination_as_interrupt():
            with signals_deferred():
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    os.kill(os.getpid(), sig)
                time.sleep(0.2)
                print("teardown-finished")
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(30)
            except KeyboardInterrupt as interrupt:
                print(interrupt.args[0])
    """)
    assert lines == ["teardown-finished", "SIGTERM"]


def test_a_signal_during_a_held_block_is_raised_right_after_it_not_inside_or_never():
    lines = run_child("""
        with termination_as_interrupt():
            try:
                with signals_held():
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.2)
                    print("block-finished")
                time.sleep(30)
            except KeyboardInterrupt as interrupt:
                print(interrupt.args[0])
            print(signal.getsignal(signal.SIGTERM).__name__)  # the block's own handler is gone
    """)
    assert lines == ["block-finished", "SIGTERM", "interrupt"]
