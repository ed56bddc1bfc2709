"""``testbed cleanup --servers``: remove what runs started here left on the other servers.

Each server is asked over ssh which runs left something there (processes marked with
``TESTBED_SERVER=<name>``, interfaces in a server-slot owner group); the runs whose
process is gone here (or every run, with ``--all``) are removed there, nothing else.
"""
import json
import shlex

from testbed.emulation.cleanup import owner_alive
from testbed.emulation.cluster.network import remote_cleanup
from testbed.emulation.cluster.servers import parse_servers_option, resolve
from testbed.errors import EmulationError


def clean_servers(servers_option, include_running=False, dry_run=False, log=print):
    """Clean every remote server named in ``servers_option`` (``a,b``); return ``{server: [owners removed]}``.

    Raises:
        ParameterError: an unknown server.
        EmulationError: a server that cannot be reached (named).
    """
    removed = {}
    for server in [resolve(entry) for entry in parse_servers_option(servers_option)]:
        if server.local:
            continue
        listing = server.run(f"{shlex.quote(server.interpreter)} -m testbed.cli cleanup "
                             f"--server-marks {shlex.quote(server.name)}")
        if listing.returncode != 0:
            raise EmulationError(f"server {server.name} ({server.address}): cannot list what runs left there: "
                                 f"{(listing.stderr or listing.stdout).strip() or 'ssh failed'}")
        found = {int(owner): counts for owner, counts in json.loads(listing.stdout or "{}").items()}
        gone = sorted(owner for owner in found if include_running or not owner_alive(owner))
        for owner in sorted(found):
            what = f"{found[owner]['processes']} process(es), {found[owner]['interfaces']} interface(s)"
            state = "removing" if owner in gone else "left alone (run still going)"
            log(f"{server.name}: run {owner}: {what}: {'would remove' if dry_run and owner in gone else state}")
        if gone and not dry_run:
            remote_cleanup(server, gone)
        if not found:
            log(f"{server.name}: nothing left behind")
        removed[server.name] = gone
    return removed
