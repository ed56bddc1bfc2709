"""DSF-like disaggregated scheduled fabric (seed 000): RDSWs, FDSWs, optional SDSW stage, planes.

Structure, per plane (planes are identical, disjoint copies of the fabric):

* ``clusters`` clusters (DSF L1 zones / "Cluster X"), each with
  ``rdsw_per_cluster`` interface nodes (RDSW, role ``rdsw``, level 1) and
  ``fdsw_per_cluster`` fabric nodes (FDSW, role ``fdsw``, level 2); every RDSW
  connects to every FDSW of its cluster with ``rdsw_fdsw_links`` links;
* ``sdsw`` spine nodes (SDSW, role ``sdsw``, level 3) joining the clusters:
  every FDSW connects to every SDSW of its plane with ``fdsw_sdsw_links``
  links.  ``sdsw=0`` gives a single-stage fabric (one cluster only).

Hosts (GPU NICs) attach to RDSWs, ``hosts_per_rdsw`` each.  With
``rail_optimized=true`` hosts are grouped into servers of ``gpus_per_server``
NICs: NIC ``g`` is rail ``g``; rails are spread over the planes (rail ``g`` in
plane ``g mod planes``) and each rail of a cluster has its own RDSWs, so NIC
``g`` of every server of a scaling unit lands on the same RDSW.

The defaults are the fabric of seed 000 Figure 4: two clusters of four RDSWs
and two FDSWs, two SDSWs, one link per RDSW-FDSW pair and two per FDSW-SDSW
pair (so each FDSW has 4 links down and 4 up, each SDSW 4 links to each cluster).

Names: ``rdsw0 ..``, ``fdsw0 ..``, ``sdsw0 ..`` numbered plane by plane and
cluster by cluster (attributes ``plane``, ``cluster``, ``index`` give the
position; :meth:`DSFTopo.device` maps back), hosts ``h1 ..``.

Ports: RDSW hosts ``1..H`` then uplinks (FDSW by FDSW); FDSW downlinks first
(RDSW by RDSW) then uplinks (SDSW by SDSW); SDSW ports cluster by cluster,
FDSW by FDSW.  Hosts use port 0.

Addressing: host ``h`` of the RDSW with global number ``i`` is
``10.<i div 256>.<i mod 256>.<h + 1>``; RDSW ``i`` owns ``10.<hi>.<lo>.0/24``.
Hosts of different planes are in disjoint fabrics.

Input Balanced Mode reachability (capacity toward a destination RDSW) is in
:mod:`testbed.topologies.dsf.reachability`.
"""
from testbed.errors import ParameterError
from testbed.topologies.base import (DEFAULT_FABRIC_LINK_MBPS, DEFAULT_HOST_LINK_MBPS, FabricTopo,
                                     check_int, check_multiplier, check_node_count, check_ports,
                                     check_positive_number, check_switch_ports, leaf_host_address,
                                     leaf_prefix)
from testbed.topologies.clos import MAX_HOSTS_PER_LEAF


class DSFTopo(FabricTopo):
    """A DSF-like fabric of RDSWs, FDSWs and an optional SDSW stage, in one or more planes.

    Args:
        clusters: clusters (L1 zones) per plane (>= 1).
        planes: identical fabric planes (>= 1).
        rdsw_per_cluster: RDSWs per cluster and plane (>= 1).
        fdsw_per_cluster: FDSWs per cluster and plane (>= 1).
        sdsw: SDSWs per plane (>= 0; >= 1 when clusters > 1).
        hosts_per_rdsw: host ports per RDSW (1..254).
        rdsw_fdsw_links: links per RDSW-FDSW pair (>= 1).
        fdsw_sdsw_links: links per FDSW-SDSW pair (>= 1).
        rail_optimized: attach server NICs rail by rail (needs ``gpus_per_server``).
        gpus_per_server: NICs (rails) per server; a multiple of ``planes`` whose
            rails per plane divide ``rdsw_per_cluster``.
        rdsw_ports, fdsw_ports, sdsw_ports: port counts (None: unlimited).
        hosts_link_mbps, fabric_link_mbps: link capacities.

    Raises:
        ParameterError: bad counts, a rail layout that does not fit, or more
            links than ports.
    """

    kind = "dsf"
    PARAMETERS = (
        ("clusters", 2, "clusters (L1 zones) joined by the SDSW stage"),
        ("planes", 1, "identical fabric planes"),
        ("rdsw_per_cluster", 4, "interface nodes (RDSW) per cluster and plane"),
        ("fdsw_per_cluster", 2, "fabric nodes (FDSW) per cluster and plane"),
        ("sdsw", 2, "spine nodes (SDSW) per plane; 0 = single stage (one cluster)"),
        ("hosts_per_rdsw", 2, "host ports per RDSW"),
        ("rdsw_fdsw_links", 1, "links per RDSW-FDSW pair"),
        ("fdsw_sdsw_links", 2, "links per FDSW-SDSW pair"),
        ("rail_optimized", False, "attach server NICs rail by rail"),
        ("gpus_per_server", None, "NICs (rails) per server, for rail_optimized"),
        ("rdsw_ports", None, "ports per RDSW (unset: unlimited)"),
        ("fdsw_ports", None, "ports per FDSW (unset: unlimited)"),
        ("sdsw_ports", None, "ports per SDSW (unset: unlimited)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of fabric links (Mbit/s)"),
    )

    def __init__(self, clusters=2, planes=1, rdsw_per_cluster=4, fdsw_per_cluster=2, sdsw=2,
                 hosts_per_rdsw=2, rdsw_fdsw_links=1, fdsw_sdsw_links=2, rail_optimized=False,
                 gpus_per_server=None, rdsw_ports=None, fdsw_ports=None, sdsw_ports=None,
                 hosts_link_mbps=DEFAULT_HOST_LINK_MBPS, fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS,
                 **topo_opts):
        check_int("clusters", clusters, minimum=1)
        check_int("planes", planes, minimum=1)
        check_int("rdsw_per_cluster", rdsw_per_cluster, minimum=1)
        check_int("fdsw_per_cluster", fdsw_per_cluster, minimum=1)
        check_int("sdsw", sdsw, minimum=0)
        if clusters > 1 and sdsw == 0:
            raise ParameterError("sdsw", sdsw, "an integer >= 1 when clusters > 1",
                                 "the SDSW stage joins the clusters")
        check_int("hosts_per_rdsw", hosts_per_rdsw, minimum=1, maximum=MAX_HOSTS_PER_LEAF)
        check_int("rdsw_fdsw_links", rdsw_fdsw_links, minimum=1)
        check_int("fdsw_sdsw_links", fdsw_sdsw_links, minimum=1)
        if not isinstance(rail_optimized, bool):
            raise ParameterError("rail_optimized", rail_optimized, "true or false")
        for field, value in (("rdsw_ports", rdsw_ports), ("fdsw_ports", fdsw_ports), ("sdsw_ports", sdsw_ports)):
            check_ports(field, value)
        if rail_optimized:
            if gpus_per_server is None:
                raise ParameterError("gpus_per_server", None, "an integer >= 1 when rail_optimized is true")
            check_int("gpus_per_server", gpus_per_server, minimum=1)
            if gpus_per_server % planes:
                raise ParameterError("gpus_per_server", gpus_per_server, f"a multiple of planes={planes}",
                                     "rails are spread evenly over the planes")
            rails_per_plane = gpus_per_server // planes
            if rdsw_per_cluster % rails_per_plane:
                raise ParameterError("rdsw_per_cluster", rdsw_per_cluster,
                                     f"a multiple of the rails per plane ({rails_per_plane})",
                                     "each rail gets the same number of RDSWs")
        elif gpus_per_server is not None:
            check_int("gpus_per_server", gpus_per_server, minimum=1)
        check_node_count("clusters", clusters, planes * (sdsw + clusters * (fdsw_per_cluster + rdsw_per_cluster))
                         + planes * clusters * rdsw_per_cluster * hosts_per_rdsw)
        check_switch_ports("fdsw_per_cluster", fdsw_per_cluster, "an RDSW", hosts_per_rdsw + fdsw_per_cluster)
        check_switch_ports("rdsw_per_cluster", rdsw_per_cluster, "an FDSW", rdsw_per_cluster + sdsw)
        check_switch_ports("clusters", clusters, "an SDSW", clusters * fdsw_per_cluster)
        check_multiplier("rdsw_fdsw_links", rdsw_fdsw_links,
                         [("an RDSW", hosts_per_rdsw, fdsw_per_cluster), ("an FDSW", sdsw, rdsw_per_cluster)])
        check_multiplier("fdsw_sdsw_links", fdsw_sdsw_links,
                         [("an FDSW", rdsw_per_cluster * rdsw_fdsw_links, sdsw),
                          ("an SDSW", 0, clusters * fdsw_per_cluster)])
        rdsw_needed = hosts_per_rdsw + fdsw_per_cluster * rdsw_fdsw_links
        if rdsw_ports is not None and rdsw_needed > rdsw_ports:
            raise ParameterError("rdsw_ports", rdsw_ports, f"an integer >= {rdsw_needed}",
                                 f"{hosts_per_rdsw} host ports + {rdsw_needed - hosts_per_rdsw} uplinks")
        fdsw_needed = rdsw_per_cluster * rdsw_fdsw_links + sdsw * fdsw_sdsw_links
        if fdsw_ports is not None and fdsw_needed > fdsw_ports:
            raise ParameterError("fdsw_ports", fdsw_ports, f"an integer >= {fdsw_needed}",
                                 "each FDSW links to every RDSW of its cluster and every SDSW")
        sdsw_needed = clusters * fdsw_per_cluster * fdsw_sdsw_links
        if sdsw and sdsw_ports is not None and sdsw_needed > sdsw_ports:
            raise ParameterError("sdsw_ports", sdsw_ports, f"an integer >= {sdsw_needed}",
                                 "each SDSW links to every FDSW of every cluster")
        self.params = {"clusters": clusters, "planes": planes, "rdsw_per_cluster": rdsw_per_cluster,
                       "fdsw_per_cluster": fdsw_per_cluster, "sdsw": sdsw, "hosts_per_rdsw": hosts_per_rdsw,
                       "rdsw_fdsw_links": rdsw_fdsw_links, "fdsw_sdsw_links": fdsw_sdsw_links,
                       "rail_optimized": rail_optimized, "gpus_per_server": gpus_per_server,
                       "rdsw_ports": rdsw_ports, "fdsw_ports": fdsw_ports, "sdsw_ports": sdsw_ports,
                       "hosts_link_mbps": check_positive_number("hosts_link_mbps", hosts_link_mbps),
                       "fabric_link_mbps": check_positive_number("fabric_link_mbps", fabric_link_mbps)}
        self._devices = {}
        super().__init__(**topo_opts)

    # -------------------------------------------------------------- naming
    def rdsw_number(self, plane, cluster, index):
        """Global number of an RDSW (also its address index)."""
        prm = self.params
        return (plane * prm["clusters"] + cluster) * prm["rdsw_per_cluster"] + index

    def device(self, role, cluster=0, index=0, plane=0):
        """Name of the ``index``-th device of ``role`` in ``cluster`` (SDSWs: cluster ignored) and ``plane``.

        Raises:
            ParameterError: if no such device exists.
        """
        key = (role, plane, 0 if role == "sdsw" else cluster, index)
        try:
            return self._devices[key]
        except KeyError:
            raise ParameterError("device", f"{role}/plane{plane}/cluster{cluster}/{index}",
                                 "an existing rdsw, fdsw or sdsw position") from None

    def _add_device(self, role, level, plane, cluster, index, number, **attrs):
        """Add one RDSW/FDSW/SDSW and remember its position."""
        name = f"{role}{number}"
        if cluster is not None:
            attrs["cluster"] = cluster
        self._devices[(role, plane, cluster if cluster is not None else 0, index)] = name
        return self.add_fabric_switch(name, role, level, plane=plane, index=index, **attrs)

    # --------------------------------------------------------------- build
    def build(self):
        """Add SDSWs, FDSWs, RDSWs and hosts, then host links and the two tiers of bundles."""
        prm = self.params
        P, C = prm["planes"], prm["clusters"]
        R, F, S = prm["rdsw_per_cluster"], prm["fdsw_per_cluster"], prm["sdsw"]
        for plane in range(P):
            for s in range(S):
                self._add_device("sdsw", 3, plane, None, s, plane * S + s)
        for plane in range(P):
            for cluster in range(C):
                for f in range(F):
                    self._add_device("fdsw", 2, plane, cluster, f, (plane * C + cluster) * F + f)
        for plane in range(P):
            for cluster in range(C):
                for r in range(R):
                    number = self.rdsw_number(plane, cluster, r)
                    self._add_device("rdsw", 1, plane, cluster, r, number, prefix=leaf_prefix(number))
        self._add_hosts()
        fdsw_port = {}
        for plane in range(P):
            for cluster in range(C):
                for r in range(R):
                    rdsw = self.device("rdsw", cluster, r, plane)
                    port = prm["hosts_per_rdsw"] + 1
                    for f in range(F):
                        fdsw = self.device("fdsw", cluster, f, plane)
                        for _ in range(prm["rdsw_fdsw_links"]):
                            fdsw_port[fdsw] = fdsw_port.get(fdsw, 0) + 1
                            self.add_fabric_link(rdsw, port, fdsw, fdsw_port[fdsw], prm["fabric_link_mbps"])
                            port += 1
        sdsw_port = {}
        for plane in range(P):
            for cluster in range(C):
                for f in range(F):
                    fdsw = self.device("fdsw", cluster, f, plane)
                    for s in range(S):
                        sdsw = self.device("sdsw", 0, s, plane)
                        for _ in range(prm["fdsw_sdsw_links"]):
                            fdsw_port[fdsw] += 1
                            sdsw_port[sdsw] = sdsw_port.get(sdsw, 0) + 1
                            self.add_fabric_link(fdsw, fdsw_port[fdsw], sdsw, sdsw_port[sdsw],
                                                 prm["fabric_link_mbps"])

    def _add_hosts(self):
        """Attach hosts: RDSW by RDSW, or server by server and rail by rail when rail-optimized."""
        prm = self.params
        H, mbps = prm["hosts_per_rdsw"], prm["hosts_link_mbps"]
        count = 0
        if not prm["rail_optimized"]:
            for plane in range(prm["planes"]):
                for cluster in range(prm["clusters"]):
                    for r in range(prm["rdsw_per_cluster"]):
                        rdsw = self.device("rdsw", cluster, r, plane)
                        number = self.rdsw_number(plane, cluster, r)
                        for h in range(H):
                            count += 1
                            name = self.add_fabric_host(f"h{count}", leaf_host_address(number, h), rdsw=rdsw,
                                                        plane=plane, cluster=cluster, host_index=h)
                            self.add_fabric_link(name, 0, rdsw, h + 1, mbps)
            return
        gpus, planes = prm["gpus_per_server"], prm["planes"]
        rdsw_per_rail = prm["rdsw_per_cluster"] // (gpus // planes)
        servers_per_cluster = rdsw_per_rail * H
        for cluster in range(prm["clusters"]):
            for server in range(servers_per_cluster):
                for gpu in range(gpus):
                    plane, rail_in_plane = gpu % planes, gpu // planes
                    r = rail_in_plane * rdsw_per_rail + server // H
                    h = server % H
                    rdsw = self.device("rdsw", cluster, r, plane)
                    count += 1
                    name = self.add_fabric_host(
                        f"h{count}", leaf_host_address(self.rdsw_number(plane, cluster, r), h), rdsw=rdsw,
                        plane=plane, cluster=cluster, host_index=h,
                        server=cluster * servers_per_cluster + server, gpu=gpu, rail=gpu)
                    self.add_fabric_link(name, 0, rdsw, h + 1, mbps)

    def extra_summary(self):
        """DSF rows: devices per cluster and the per-FDSW / per-SDSW link balance."""
        prm = self.params
        fdsw_down = prm["rdsw_per_cluster"] * prm["rdsw_fdsw_links"]
        fdsw_up = prm["sdsw"] * prm["fdsw_sdsw_links"]
        rows = [("FDSW links down/up", f"{fdsw_down}/{fdsw_up}")]
        if prm["sdsw"]:
            rows.append(("SDSW links per cluster", prm["fdsw_per_cluster"] * prm["fdsw_sdsw_links"]))
        return rows
