"""Telling the running fabric controller about failures, flows and parameters: REST API and client.

The controller (:mod:`testbed.controllers.fabric_app`) serves, on
``[fabric] rest_host:rest_port`` (default ``127.0.0.1:8080``):

=======  ====================  =============================================================
method   path                  body / answer
=======  ====================  =============================================================
GET      ``/fabric/status``    ``{"ready", "error", "routing", "routes_version",
                               "last_failure_notice", "last_routes_written",
                               "last_reaction_s", "reactions": [{"link", "status", "source",
                               "noticed_at", "routes_written_at", "reaction_s",
                               "entries_written", "changed", "routes_version"}],
                               "failed_links",
                               "params", "notes", "te": {...}}`` (times: Unix seconds)
POST     ``/fabric/links``     ``{"a": "leaf0", "b": "spine0", "status": "down"}`` -> 202
                               ``{"accepted": true, "noticed_at": t}``
POST     ``/fabric/flows``     ``{"flows": [{"name", "src", "dst", "rate", "match"}],
                               "replace": true}`` -> 202 (TE routing)
POST     ``/fabric/params``    ``{"flowlet_interval_us": 256, "hash_seed": 7,
                               "flowlet_load_aware": 1}`` -> 202
=======  ====================  =============================================================

A bad request gets 400 (404 for a link the topology does not have) with
``{"error": message, "field": name}``.  POSTs are asynchronous: the notice
becomes an os-ken event handled by the apps; poll ``/fabric/status``
(``routes_version``, ``reactions``) to see the reaction.

os-ken 4.x dropped ``os_ken.app.wsgi`` (Ryu's ``ControllerBase`` /
``WSGIApplication``), so :class:`FabricRestApp` serves the same kind of
WebOb/Routes WSGI application with the standard library's ``wsgiref`` server
in its own thread.  :class:`FabricControllerClient` is the Python client::

    client = FabricControllerClient("http://127.0.0.1:8080")
    client.wait_ready(timeout=60)
    client.link_status("leaf0", "spine0", "down")
    client.wait_for(lambda s: s["routes_version"] >= 2, timeout=10)

and, from a shell (exit status 1 with the controller's message on a refused request)::

    python -m testbed.controllers.notify --url http://127.0.0.1:8080 status
    python -m testbed.controllers.notify link leaf0 spine0 down
    python -m testbed.controllers.notify params flowlet_interval_us=256
    python -m testbed.controllers.notify flows flows.json
"""
import json
import logging
import socketserver
import threading
import time
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from os_ken.base import app_manager
from routes import Mapper
from webob import Request, Response

from testbed.controllers.fabric_app import (EventFlowsAnnounced, EventLinkStatus, EventParamsChanged,
                                            FabricContext)
from testbed.errors import ParameterError, TestbedError
from testbed.modes import PARAMETERS

LOG = logging.getLogger("testbed.controllers.notify")


class _BadRequest(Exception):
    def __init__(self, status, message, field=None):
        super().__init__(message)
        self.status = status
        self.field = field


class _QuietHandler(WSGIRequestHandler):
    """Request handler logging through ``logging`` (debug) instead of stderr."""

    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        LOG.debug("%s - %s", self.address_string(), format % args)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class FabricRestApi:
    """The WSGI application: routes requests to handlers that post os-ken events.

    Args:
        fabric: the shared :class:`testbed.controllers.fabric_app.FabricContext`.
        post_event: ``callable(event)`` delivering an event to the fabric apps.
    """

    def __init__(self, fabric, post_event):
        self.fabric = fabric
        self.post_event = post_event
        self.mapper = Mapper()
        self.mapper.connect("status", "/fabric/status", action="status", conditions={"method": ["GET"]})
        self.mapper.connect("links", "/fabric/links", action="links", conditions={"method": ["POST"]})
        self.mapper.connect("flows", "/fabric/flows", action="flows", conditions={"method": ["POST"]})
        self.mapper.connect("params", "/fabric/params", action="params", conditions={"method": ["POST"]})

    def __call__(self, environ, start_response):
        request = Request(environ)
        match = self.mapper.match(environ=environ)
        if match is None:
            response = _json_response({"error": f"no route {request.method} {request.path}"}, 404)
        else:
            try:
                response = getattr(self, match["action"])(request)
            except _BadRequest as bad:
                response = _json_response({"error": str(bad), "field": bad.field}, bad.status)
            except ParameterError as bad:
                response = _json_response({"error": str(bad), "field": bad.field}, 400)
            except Exception as error:  # the server must keep serving
                LOG.exception("REST %s %s failed", request.method, request.path)
                response = _json_response({"error": f"{type(error).__name__}: {error}"}, 500)
        return response(environ, start_response)

    @staticmethod
    def _body(request):
        try:
            body = json.loads(request.body or b"{}")
        except ValueError as error:
            raise _BadRequest(400, f"body is not JSON: {error}") from None
        if not isinstance(body, dict):
            raise _BadRequest(400, "body must be a JSON object")
        return body

    def status(self, _request):
        """GET /fabric/status."""
        return _json_response(self.fabric.status())

    def links(self, request):
        """POST /fabric/links: a link went down or up."""
        noticed_at, noticed_mono = time.time(), time.monotonic()
        body = self._body(request)
        for key in ("a", "b", "status"):
            if not isinstance(body.get(key), str):
                raise _BadRequest(400, f"'{key}' is required (a string)", key)
        if body["status"] not in ("up", "down"):
            raise _BadRequest(400, f"status {body['status']!r}: use 'up' or 'down'", "status")
        graph = self.fabric.graph
        if graph is not None and not graph.has_edge(body["a"], body["b"]):
            raise _BadRequest(404, f"no link between {body['a']!r} and {body['b']!r} in the topology", "a,b")
        self.post_event(EventLinkStatus(body["a"], body["b"], body["status"], noticed_at, noticed_mono, "rest"))
        return _json_response({"accepted": True, "noticed_at": noticed_at}, 202)

    def flows(self, request):
        """POST /fabric/flows: the known flows for TE."""
        from testbed.controllers.te import Flow

        body = self._body(request)
        flows = body.get("flows")
        if not isinstance(flows, list):
            raise _BadRequest(400, "'flows' must be a list of {name, src, dst, rate}", "flows")
        parsed = [Flow.from_dict(item) if isinstance(item, dict) else None for item in flows]
        if None in parsed:
            raise _BadRequest(400, "every flow must be an object", "flows")
        self.post_event(EventFlowsAnnounced(parsed, bool(body.get("replace", True))))
        return _json_response({"accepted": True, "flows": len(parsed)}, 202)

    def params(self, request):
        """POST /fabric/params: mechanism parameters."""
        body = self._body(request)
        unknown = sorted(set(body) - set(PARAMETERS))
        if unknown:
            raise _BadRequest(400, f"unknown parameter {unknown[0]!r} (known: {', '.join(PARAMETERS)})",
                              unknown[0])
        for key, value in body.items():
            try:
                body[key] = PARAMETERS[key].check(value)
            except ParameterError:
                raise _BadRequest(400, f"{key} must be {PARAMETERS[key].allowed()}", key) from None
        self.post_event(EventParamsChanged(body))
        return _json_response({"accepted": True}, 202)


def _json_response(data, status=200):
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(data, sort_keys=True).encode())


class FabricRestApp(app_manager.OSKenApp):
    """os-ken app serving the fabric REST API; turns requests into fabric events."""

    _CONTEXTS = {"fabric": FabricContext}
    _EVENTS = [EventLinkStatus, EventFlowsAnnounced, EventParamsChanged]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = kwargs["fabric"]
        self.server = None
        self._serve_thread = None

    def start(self):
        """Bind the REST port and serve in a thread (an unusable port is reported in the status)."""
        super().start()
        config = self.fabric.config
        api = FabricRestApi(self.fabric, self.send_event_to_observers)
        try:
            self.server = make_server(config.rest_host, config.rest_port, api,
                                      server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
        except OSError as error:
            LOG.error("REST: cannot listen on %s:%s: %s", config.rest_host, config.rest_port, error)
            self.fabric.update_status(error=f"REST cannot listen on {config.rest_host}:{config.rest_port}: "
                                            f"{error}")
            self.fabric.finish(1)
            return None
        self._serve_thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                              name="fabric-rest", daemon=True)
        self._serve_thread.start()
        host, port = self.server.server_address[:2]
        self.fabric.update_status(rest=f"http://{host}:{port}")
        LOG.info("REST API on http://%s:%s/fabric/status", host, port)
        return None

    def close(self):
        """Stop serving and release the port."""
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=5)


# -- client ------------------------------------------------------------------------------
class FabricControllerError(TestbedError):
    """The controller refused a request or could not be reached.

    Attributes:
        status: HTTP status (None when unreachable).
        field: the field the controller named, if any.
    """

    def __init__(self, message, status=None, field=None):
        super().__init__(message)
        self.status = status
        self.field = field


class FabricControllerClient:
    """Python client of the fabric REST API.

    Args:
        base_url: ``http://host:port`` of the controller.
        timeout: seconds per HTTP request.
    """

    def __init__(self, base_url="http://127.0.0.1:8080", timeout=5.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def _request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            try:
                detail = json.loads(error.read() or b"{}")
            except ValueError:
                detail = {}
            raise FabricControllerError(f"{method} {path}: HTTP {error.code}: {detail.get('error', error.reason)}",
                                        error.code, detail.get("field")) from None
        except (urllib.error.URLError, OSError) as error:
            raise FabricControllerError(f"{method} {path}: controller at {self.base_url} unreachable: "
                                        f"{getattr(error, 'reason', error)}") from None

    def status(self):
        """GET /fabric/status (see the module docstring)."""
        return self._request("GET", "/fabric/status")

    def link_status(self, a, b, status):
        """Tell the controller that every link between ``a`` and ``b`` is ``"up"`` or ``"down"``.

        Returns:
            dict: ``{"accepted": True, "noticed_at": t}``.

        Raises:
            FabricControllerError: bad request (400), unknown link (404), unreachable.
        """
        return self._request("POST", "/fabric/links", {"a": a, "b": b, "status": status})

    def announce_flows(self, flows, replace=True):
        """Send the known flows (dicts ``{name, src, dst, rate, match}`` or ``te.Flow``) for TE."""
        items = []
        for flow in flows:
            if isinstance(flow, dict):
                items.append(flow)
            else:
                items.append({"name": flow.name, "src": flow.src, "dst": flow.dst, "rate": flow.rate,
                              "match": dict(flow.match)})
        return self._request("POST", "/fabric/flows", {"flows": items, "replace": replace})

    def set_params(self, **params):
        """Set mechanism parameters (``flowlet_interval_us``, ``hash_seed``, ``flowlet_load_aware``) at run time."""
        return self._request("POST", "/fabric/params", params)

    def wait_for(self, predicate, timeout=10.0, interval=0.05):
        """Poll the status until ``predicate(status)`` is true; return that status.

        Raises:
            FabricControllerError: the timeout passed (the last status is in the message).
        """
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = self.status()
                if predicate(last):
                    return last
            except FabricControllerError:
                pass
            if time.monotonic() >= deadline:
                raise FabricControllerError(f"controller status did not reach the condition in {timeout} s; "
                                            f"last status: {last}")
            time.sleep(interval)

    def wait_ready(self, timeout=60.0):
        """Wait until the fabric is programmed; raise with the controller's error if it failed."""
        status = self.wait_for(lambda s: s.get("ready") or s.get("error"), timeout)
        if not status.get("ready"):
            raise FabricControllerError(f"controller failed: {status['error']}")
        return status


def main(argv=None):
    """Command line client: ``[--url URL] status | link A B up|down | params K=V... | flows FILE``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m testbed.controllers.notify",
                                     description="tell the running fabric controller about links, flows, "
                                                 "parameters; or show its status")
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="controller REST address")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="print the controller status (JSON)")
    link = commands.add_parser("link", help="links between two nodes went up or down")
    link.add_argument("a")
    link.add_argument("b")
    link.add_argument("status", choices=("up", "down"))
    params = commands.add_parser("params", help="set mechanism parameters")
    params.add_argument("assignments", nargs="+", metavar="NAME=INT", help=", ".join(PARAMETERS))
    flows = commands.add_parser("flows", help="announce the known flows (JSON list) for TE")
    flows.add_argument("file")
    flows.add_argument("--add", action="store_true", help="add to the known flows instead of replacing them")
    args = parser.parse_args(argv)
    client = FabricControllerClient(args.url)
    try:
        if args.command == "status":
            answer = client.status()
        elif args.command == "link":
            answer = client.link_status(args.a, args.b, args.status)
        elif args.command == "params":
            values = {}
            for assignment in args.assignments:
                name, _, value = assignment.partition("=")
                if name not in PARAMETERS:
                    parser.error(f"{assignment!r}: NAME is one of {', '.join(PARAMETERS)}")
                try:
                    values[name] = PARAMETERS[name].check(value, text=True)
                except ParameterError as error:
                    parser.error(str(error))
            answer = client.set_params(**values)
        else:
            from testbed.controllers.te_app import load_flows

            answer = client.announce_flows(load_flows(args.file), replace=not args.add)
    except (TestbedError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
