"""Run the os-ken fabric controller: the manager process, and starting/stopping it from Python.

os-ken 4.x (the version installed; Ryu does not run on Python 3.11) no longer
ships ``osken-manager``.  This module is its equivalent for the fabric apps:

    python -m testbed.controllers.launcher --config-file fabric.conf \\
        testbed.controllers.fabric_app testbed.controllers.notify [testbed.controllers.te_app]

loads the apps with os-ken's ``AppManager`` (contexts, events, observers as
usual), runs them with the native-thread hub (``OSKEN_HUB_TYPE=native``;
eventlet breaks gRPC, see :mod:`testbed.controllers.fabric_app`), and stops
them cleanly on SIGTERM/SIGINT/SIGHUP, or when a one-shot programming run is
done.  Its exit status is 0, 1 (programming failed in one-shot mode, or the
REST port was unusable) or 2 (bad configuration).

Configuration: an oslo.config file (``--config-file``) whose ``[fabric]``
section holds the options of :data:`testbed.controllers.fabric_app.FABRIC_OPTS`,
e.g.::

    [fabric]
    state_file = /run/testbed/net.json
    program = p4src/l3_ecmp.p4
    routing = ecmp
    rest_port = 8080
    flowlet_interval_us = 256

From Python, :class:`FabricController` writes that file (and the TE flows
file) into a temporary directory, starts the manager as a subprocess in its
own session, waits until the fabric is programmed (readiness through
``GET /fabric/status``; an error there or an early exit raises with the log's
tail) and stops it (SIGTERM, then SIGKILL after 10 s), removing the
temporary directory: nothing is left behind.  It also sets ``watch_pid`` to
its own pid, so a controller whose starter died without stopping it exits by
itself::

    with FabricController(state_file, program="p4src/l3_ecmp.p4") as controller:
        controller.client.link_status("leaf0", "spine0", "down")

``kill -USR1 PID`` makes a running controller dump its threads' stacks into its log.

:func:`program_fabric` is the route-only one-shot run used by
``testbed net up --program``.
"""
import faulthandler
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
import time

from testbed.emulation.logs import log_tail
from testbed.errors import ParameterError, TestbedError
from testbed.log_format import configure_process_logging

HUB_ENV = "OSKEN_HUB_TYPE"
APP_ROUTING = "testbed.controllers.fabric_app"
APP_REST = "testbed.controllers.notify"
APP_TE = "testbed.controllers.te_app"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
DEFAULT_STATE_FILE = "/run/testbed/net.json"


def apps_for_routing(routing, rest=True):
    """The app modules a controller runs for ``routing`` (``ecmp``, ``route-only``, ``te``).

    Raises:
        ParameterError: unknown routing.
    """
    from testbed.controllers.fabric_app import ROUTINGS

    if routing not in ROUTINGS:
        raise ParameterError("routing", routing, "one of: " + ", ".join(ROUTINGS))
    apps = [APP_ROUTING]
    if rest:
        apps.append(APP_REST)
    if routing == "te":
        apps.append(APP_TE)
    return apps


# -- the manager (runs inside the controller process) --------------------------------------
def main(argv=None):
    """Run fabric apps like ``osken-manager``: ``[--config-file F] APP...``; returns the exit status.

    Log lines go to stderr (the controller's log file) in :mod:`testbed.log_format`'s format (timestamped).
    """
    configure_process_logging(logging.INFO)
    log = logging.getLogger("testbed.controllers.launcher")
    hub_type = os.environ.setdefault(HUB_ENV, "native")
    if hub_type != "native":
        log.error("%s=%s: the fabric apps need the native hub (gRPC does not work under eventlet monkey "
                  "patching)", HUB_ENV, hub_type)
        return 2
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    # Loggers created after Mininet is imported are MininetLoggers at level 25 ("output"); fix the
    # level of the parent of the fabric apps' loggers now, so their INFO lines are kept.
    for name in ("testbed", "testbed.controllers", "testbed.controllers.launcher"):
        logging.getLogger(name).setLevel(logging.INFO)
    conf = cfg.CONF
    conf.register_cli_opts([cfg.MultiStrOpt("app", positional=True, default=[APP_ROUTING, APP_REST],
                                            help="app modules to run")])
    try:
        conf(args=sys.argv[1:] if argv is None else argv, project="testbed-fabric",
             default_config_files=[])
    except cfg.ConfigFilesNotFoundError as error:
        log.error("configuration: %s", error)
        return 2
    stop = threading.Event()

    def request_stop(signum, _frame):
        log.info("signal %d: stopping", signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, request_stop)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: dump the threads' stacks
    manager = AppManager.get_instance()
    fabric = None
    try:
        manager.load_apps(list(conf.app))
        contexts = manager.create_contexts()
        fabric = contexts.get("fabric")
        manager.instantiate_apps(**contexts)
        watch_pid = fabric.config.watch_pid if fabric is not None else None
        while not stop.is_set() and not (fabric is not None and fabric.finished.is_set()):
            if watch_pid and os.getppid() != watch_pid:
                log.info("process %d that started the controller is gone: stopping", watch_pid)
                break
            stop.wait(0.2)
    except (ParameterError, ImportError) as error:
        log.error("configuration: %s", error)
        return 2
    finally:
        manager.close()
    return fabric.exit_status if fabric is not None else 0


# -- starting and stopping it ----------------------------------------------------------------
def free_port(host="127.0.0.1"):
    """Return a TCP port that is free right now on ``host``."""
    return free_ports(1, host)[0]


def free_ports(count, host="127.0.0.1"):
    """``count`` distinct TCP ports free right now on ``host`` (all bound at once: ports taken one
    at a time may repeat, as each is free again once its probe closes)."""
    sockets = []
    try:
        for _ in range(count):
            sockets.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sockets[-1].bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _conf_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{key}:{item}" for key, item in sorted(value.items()))
    return str(value)


def write_config(path, options):
    """Write an oslo.config file with a ``[fabric]`` section (options whose value is None are left out)."""
    with open(path, "w") as handle:
        handle.write("[fabric]\n")
        for key, value in sorted(options.items()):
            if value is not None:
                handle.write(f"{key} = {_conf_value(value)}\n")


class FabricController:
    """The fabric controller as a subprocess: start, wait until programmed, stop.

    Args:
        state_file: the running network's state file.
        program: P4 program to push (default: the one the switches name, else l3_ecmp).
        routing: ``ecmp``, ``route-only`` or ``te`` (``mode``: its deprecated old name).
        target: ``auto``, ``embedded`` or ``bmv2``.
        rest_port: REST port (default: a free port).
        log_path: where the controller logs (default: a temporary file, removed at stop).
        flows: TE flows at start (dicts or :class:`testbed.controllers.te.Flow`).
        **options: any other ``[fabric]`` option (``flowlet_interval_us``, ``hash_seed``,
            ``port_poll_ms``, ``te_table``, ``push_pipeline``...).

    Attributes:
        client: a :class:`testbed.controllers.notify.FabricControllerClient` for it.
        process: the ``subprocess.Popen`` while it runs.
    """

    def __init__(self, state_file=DEFAULT_STATE_FILE, program=None, routing="ecmp", target="auto",
                 rest_port=None, log_path=None, flows=None, **options):
        from testbed.controllers.fabric_app import FABRIC_OPTS
        from testbed.controllers.notify import FabricControllerClient

        if "mode" in options:
            warnings.warn("the os-ken controller's option 'mode' is now 'routing'", DeprecationWarning,
                          stacklevel=2)
            routing = options.pop("mode")
        known = {opt.dest for opt in FABRIC_OPTS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ParameterError("controller option", unknown[0], ", ".join(sorted(known)))
        self.apps = apps_for_routing(routing, rest=not options.get("oneshot"))
        self.rest_port = rest_port or free_port()
        options.setdefault("watch_pid", os.getpid())
        self.options = dict(options, state_file=state_file, program=program, routing=routing, target=target,
                            rest_port=self.rest_port)
        self.flows = flows
        self.log_path = log_path
        self.process = None
        self._workdir = None
        self.client = FabricControllerClient(f"http://127.0.0.1:{self.rest_port}")

    def argv(self, conf_path):
        """The command line of the controller process."""
        return [sys.executable, "-m", "testbed.controllers.launcher", "--config-file", conf_path] + self.apps

    def _prepare(self):
        self._workdir = tempfile.mkdtemp(prefix="testbed-controller-")
        if self.log_path is None:
            self.log_path = os.path.join(self._workdir, "controller.log")
        options = dict(self.options)
        if self.flows:
            import json

            flows_path = os.path.join(self._workdir, "flows.json")
            with open(flows_path, "w") as handle:
                json.dump([flow if isinstance(flow, dict) else
                           {"name": flow.name, "src": flow.src, "dst": flow.dst, "rate": flow.rate,
                            "match": dict(flow.match)} for flow in self.flows], handle)
            options["te_flows_file"] = flows_path
        conf_path = os.path.join(self._workdir, "fabric.conf")
        write_config(conf_path, options)
        return conf_path

    def launch(self):
        """Start the process without waiting (see :meth:`start`)."""
        conf_path = self._prepare()
        env = dict(os.environ, **{HUB_ENV: "native"})
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(self.argv(conf_path), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except BaseException:
            self.stop()
            raise
        finally:
            log.close()
        return self

    def start(self, timeout=READY_TIMEOUT_S):
        """Start the controller and wait until it has programmed the fabric.

        Returns:
            dict: the controller status once ready.

        Raises:
            TestbedError: the process exited, reported an error, or was not ready in time
                (with the tail of its log); the process is stopped first.
        """
        self.launch()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.process.poll() is not None:
                    raise TestbedError(f"controller exited with status {self.process.returncode}; "
                                       f"log {self.log_path}:\n{log_tail(self.log_path, 25)}")
                try:
                    status = self.client.status()
                except TestbedError:
                    status = None
                if status is not None and status.get("error"):
                    raise TestbedError(f"controller failed: {status['error']}; log {self.log_path}:\n"
                                       f"{log_tail(self.log_path, 25)}")
                if status is not None and status.get("ready"):
                    return status
                if time.monotonic() > deadline:
                    raise TestbedError(f"controller not ready after {timeout:.0f} s; log {self.log_path}:\n"
                                       f"{log_tail(self.log_path, 25)}")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def wait(self, timeout=READY_TIMEOUT_S):
        """Wait for the process to exit (one-shot runs); returns its exit status.

        Raises:
            TestbedError: still running after ``timeout`` (it is stopped).
        """
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TestbedError(f"controller still running after {timeout:.0f} s; log {self.log_path}:\n"
                               f"{log_tail(self.log_path, 25)}") from None

    def alive(self):
        """True while the controller process runs."""
        return self.process is not None and self.process.poll() is None

    def log_text(self):
        """The controller's log so far ("" if unreadable)."""
        try:
            with open(self.log_path, errors="replace") as handle:
                return handle.read()
        except (OSError, TypeError):
            return ""

    def stop(self, timeout=STOP_TIMEOUT_S):
        """Stop the process (SIGTERM, then SIGKILL) and remove its temporary files; safe to call twice.

        Returns:
            int or None: the process's exit status.
        """
        process, self.process = self.process, None
        status = None
        try:
            if process is not None:
                if process.poll() is None:
                    try:
                        os.killpg(process.pid, signal.SIGTERM)
                        process.wait(timeout=timeout)
                    except ProcessLookupError:
                        pass
                    except subprocess.TimeoutExpired:
                        try:
                            os.killpg(process.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                status = process.wait()
        finally:
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
        return status

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()
        return False


def program_fabric(state_file=DEFAULT_STATE_FILE, program=None, target="auto", timeout=READY_TIMEOUT_S,
                   log_path=None, **options):
    """Program routes once (route-only mode) through the os-ken controller, then let it exit.

    Args:
        state_file: the running network's state file.
        program: P4 program to push (default: the one the switches name, else l3_ecmp).
        target: ``auto``, ``embedded`` or ``bmv2``.
        timeout: seconds to wait for the run.
        log_path: keep the controller's log there.
        **options: other ``[fabric]`` options (``flowlet_interval_us``, ``hash_seed``...).

    Raises:
        TestbedError: programming failed (with the controller's log tail).
    """
    controller = FabricController(state_file, program=program, routing="route-only", target=target,
                                  log_path=log_path, oneshot=True, **options)
    controller.launch()
    try:
        status = controller.wait(timeout)
        if status != 0:
            raise TestbedError(f"programming the fabric failed (controller exit status {status}):\n"
                               f"{log_tail(controller.log_path, 25)}")
    finally:
        controller.stop()


if __name__ == "__main__":
    sys.exit(main())
