"""A fork server for switch processes: one Python start-up per fabric instead of one per switch.

Every embedded switch is a Python process that imports gRPC, the P4 frontend
and the v1model device before it can listen: about 0.3-0.5 s of CPU each, 30 s
for the 80 switches of a k=8 FatTree on two cores.  The fork server is a
process that imports a module (``testbed.embedded_switch.switchd``) once,
optionally warms it (loads the P4 program the fabric will push with the module's
``warm(path)``, so every child shares that program instead of loading its own copy),
and then forks one child per switch; a child
starts in milliseconds and runs the module's ``main(argv)`` as the switch
process would.

The server is single-threaded and has opened no gRPC channel or server when it
forks (so the children's gRPC starts clean).  Each child runs in its own
session (its pid is its process group, already when the server answers with
it), at the requested CPU priority, with stdout and stderr appended to its log
and stdin on /dev/null, exactly like a switch started with
:class:`subprocess.Popen`.

Protocol, one JSON object per line: the owner writes ``{"id": n, "argv": [...],
"log": path, "niceness": -10, "name": "e0_0"}`` on the server's stdin; the server
answers ``{"id": n, "pid": p}`` (or ``{"id": n, "error": text}``) and, whenever a
child exits, ``{"exit": pid, "status": s}`` (``s`` as Popen's returncode: the
exit code, or minus the signal number).  The server exits when its stdin
closes.

Owner side: :class:`ForkServer` (``spawn`` returns a :class:`ForkedProcess`,
which behaves like the parts of :class:`subprocess.Popen` the switches use:
``pid``, ``poll()``, ``wait(timeout)``, ``returncode``).

Run as ``python -m testbed.emulation.forkserver MODULE [--warm PROGRAM]``.
"""
import argparse
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import traceback

from testbed.emulation.logs import log_tail
from testbed.errors import EmulationError

SPAWN_TIMEOUT_S = 120.0  # the server imports its module first: slow on a loaded machine
_PR_SET_NAME = 15


# -- server (the forking process) ------------------------------------------------------------
def _set_process_name(name):
    """Best effort: the child's name in ``ps -o comm`` / top (15 bytes at most)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _run_child(module, request, closed_fds, ready_fd):
    """In the forked child: become the switch process and never return.

    ``ready_fd`` is written and closed once the child leads its own session, the
    moment from which the owner may signal its process group.
    """
    status = 1
    try:
        os.setsid()
        os.write(ready_fd, b"1")
        os.close(ready_fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        for fd in closed_fds:
            os.close(fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        if request.get("niceness") is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, int(request["niceness"]))
            except OSError:
                pass  # without the privilege the priority stays
        if request.get("name"):
            _set_process_name(request["name"])
        gc.enable()
        sys.argv = [module.__name__] + list(request["argv"])
        result = module.main(list(request["argv"]))
        status = result if isinstance(result, int) else 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child reports everything in its log
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


class _Server:
    """The forking loop: requests on stdin, answers and exit statuses on stdout."""

    def __init__(self, module):
        self.module = module
        self.wakeup_read, self.wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_write, False)
        os.set_blocking(self.wakeup_read, False)
        signal.signal(signal.SIGCHLD, lambda *_args: None)
        signal.set_wakeup_fd(self.wakeup_write)
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ)
        self.selector.register(self.wakeup_read, selectors.EVENT_READ)
        self.buffer = b""

    def _send(self, message):
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(1, data):]

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._send({"exit": pid, "status": os.waitstatus_to_exitcode(status)})

    def _spawn(self, request):
        ready_read, ready_write = os.pipe()
        closed = [self.wakeup_read, self.wakeup_write, self.selector.fileno(), ready_read]
        gc.freeze()  # the children share the imported modules' pages instead of copying them
        pid = os.fork()
        if pid == 0:
            _run_child(self.module, request, closed, ready_write)
        os.close(ready_write)
        try:
            # answer only once the child leads its own session (or died): a stop request that
            # signals its process group right after the answer must reach it, not miss it
            os.read(ready_read, 1)
        finally:
            os.close(ready_read)
        return pid

    def _handle(self, line):
        request = None
        try:
            request = json.loads(line)
            answer = {"id": request["id"], "pid": self._spawn(request)}
        except (ValueError, KeyError, TypeError, OSError) as error:
            answer = {"id": request.get("id") if isinstance(request, dict) else None,
                      "error": f"{type(error).__name__}: {error}"}
        self._send(answer)

    def serve(self):
        """Fork on every request until stdin closes; report every child's exit."""
        while True:
            for key, _ in self.selector.select():
                if key.fd == self.wakeup_read:
                    try:
                        os.read(self.wakeup_read, 4096)
                    except BlockingIOError:
                        pass
                    continue
                data = os.read(0, 65536)
                if not data:
                    self._reap()
                    return
                self.buffer += data
                while b"\n" in self.buffer:
                    line, self.buffer = self.buffer.split(b"\n", 1)
                    if line.strip():
                        self._handle(line)
            self._reap()


def _warm(module, program):
    """Load ``program`` once before forking (best effort): with the module's ``warm(path)`` when it has
    one (the children then share what it loaded), else so the frontend's parser tables exist."""
    from testbed.p4.loader import load_program

    try:
        getattr(module, "warm", load_program)(program)
    except Exception as error:  # noqa: BLE001 - the controller reports a bad program properly
        print(f"forkserver: warming with {program} failed: {error}", file=sys.stderr, flush=True)


def main(argv=None):
    """Import the module, warm it, serve fork requests until stdin closes; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m testbed.emulation.forkserver",
                                     description="Fork processes that run MODULE.main(argv) from one import.")
    parser.add_argument("module", help="module whose main(argv) each child runs")
    parser.add_argument("--warm", metavar="PROGRAM", help="a P4 program to load once before forking")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner stops it by closing stdin
    module = importlib.import_module(args.module)
    if args.warm:
        _warm(module, args.warm)
    gc.collect()
    _Server(module).serve()
    return 0


# -- owner side -----------------------------------------------------------------------------------
class ForkedProcess:
    """A process the fork server started (the :class:`subprocess.Popen` calls the switches use).

    Attributes:
        pid: its process id (also its process group id).
        args: what it runs (for messages).
        returncode: None while it runs; its exit code, or minus the signal that
            ended it; -1 if the fork server went away before it could tell.
    """

    def __init__(self, server, pid, args):
        self._server = server
        self.pid = pid
        self.args = args
        self.returncode = None

    def poll(self):
        """Return the exit status once the process ended, else None."""
        if self.returncode is None:
            self.returncode = self._server.exit_status(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        """Wait for the process to end and return its status.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        if self.returncode is None:
            self.returncode = self._server.wait_exit(self.pid, timeout, self.args)
        return self.returncode


class ForkServer:
    """Owner side of a fork server process (see the module's description).

    Args:
        module: the module each child runs (its ``main(argv)``).
        log_path: the server's own log (its stderr); None: discarded.
        warm: a P4 program the server loads once before forking, or None.
        env: environment variables the server (and so its children) gets in addition to this
            process's, or None.
    """

    def __init__(self, module, log_path=None, warm=None, env=None):
        self.module = module
        self.log_path = log_path
        self.warm = warm
        self.env = env
        self.process = None
        self._reader = None
        self._lock = threading.Lock()  # one request written at a time
        self._changed = threading.Condition()
        self._answers = {}
        self._exits = {}
        self._next_id = 0
        self._gone = False

    def start(self):
        """Start the server process (it imports its module in the background); returns ``self``."""
        argv = [sys.executable, "-m", "testbed.emulation.forkserver", self.module]
        if self.warm:
            argv += ["--warm", self.warm]
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            start_new_session=True,
                                            env=dict(os.environ, **self.env) if self.env else None)
        finally:
            if self.log_path:
                log.close()
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()
        return self

    def _read(self):
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._changed:
                if "exit" in message:
                    self._exits[message["exit"]] = message["status"]
                else:
                    self._answers[message.get("id")] = message
                self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()

    def _failure(self, what):
        tail = log_tail(self.log_path) if self.log_path else ""
        return EmulationError(f"fork server for {self.module}: {what}" + (f"; log {self.log_path}:\n{tail}"
                                                                          if tail else ""))

    def spawn(self, argv, log_path, niceness=None, name=None, timeout=SPAWN_TIMEOUT_S):
        """Start a child running ``module.main(argv)``.

        Args:
            argv: the module's arguments.
            log_path: the child's stdout and stderr (appended).
            niceness: the child's CPU priority, or None to keep the server's.
            name: the child's process name (``ps -o comm``), or None.
            timeout: how long to wait for the server's answer.

        Returns:
            ForkedProcess

        Raises:
            EmulationError: the server is not running, refused, or did not answer in time.
        """
        if self.process is None:
            raise self._failure("not started")
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            request = {"id": request_id, "argv": list(argv), "log": log_path, "niceness": niceness, "name": name}
            try:
                self.process.stdin.write((json.dumps(request) + "\n").encode())
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise self._failure("the server exited") from None
        with self._changed:
            self._changed.wait_for(lambda: request_id in self._answers or self._gone, timeout=timeout)
            answer = self._answers.pop(request_id, None)
        if answer is None:
            raise self._failure("the server exited" if self._gone else f"no answer within {timeout:.0f} s")
        if "error" in answer:
            raise self._failure(answer["error"])
        return ForkedProcess(self, answer["pid"], [self.module] + list(argv))

    def _orphan_status(self, pid):
        """Status of a child after the server went away: -1 once the process is gone, else None."""
        try:
            with open(f"/proc/{pid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return -1
        return -1 if state in ("Z", "X") else None

    def exit_status(self, pid):
        """The exit status of child ``pid`` if it ended, else None."""
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
            gone = self._gone
        return self._orphan_status(pid) if gone else None

    def wait_exit(self, pid, timeout, args=None):
        """Wait until child ``pid`` ended and return its status.

        Raises:
            subprocess.TimeoutExpired: not ended within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout=timeout)
            if pid in self._exits:
                return self._exits[pid]
            gone = self._gone
        while gone:  # nobody reports its exit any more: watch the process itself
            status = self._orphan_status(pid)
            if status is not None:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        raise subprocess.TimeoutExpired(args or [pid], timeout)

    def stop(self, timeout=10.0):
        """Close the server's stdin and wait for it to exit (killed after ``timeout``); safe to call twice."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._reader is not None:
            self._reader.join(timeout=timeout)
        process.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
