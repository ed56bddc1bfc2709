"""The client's pipeline part: the switch's P4Info (what names resolve against) and its forwarding pipeline."""
import os

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from testbed.errors import ParameterError
from testbed.p4runtime.client.errors import P4RuntimeClientError
from testbed.p4runtime.embedded import embedded_pipeline
from testbed.p4runtime.p4info import p4info_from_text
from testbed.p4runtime.p4info_index import P4InfoIndex


class PipelineMixin:
    """Getting and setting the forwarding pipeline; looking up P4Info objects by name."""

    def load_p4info(self):
        """Fetch the switch's P4Info (None when no pipeline is set); returns the P4Info."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            response = self._call(self.stub.GetForwardingPipelineConfig, request)
        except P4RuntimeClientError as exc:
            if exc.code == "FAILED_PRECONDITION":
                self.index = None
                return None
            raise
        if response.config.HasField("p4info") and (response.config.p4info.tables
                                                   or response.config.p4info.actions):
            self.index = P4InfoIndex(response.config.p4info)
        else:
            self.index = None
        return response.config.p4info

    def get_pipeline(self):
        """(P4Info, device config bytes, cookie or None) of the switch."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id)
        config = self._call(self.stub.GetForwardingPipelineConfig, request).config
        return config.p4info, config.p4_device_config, (config.cookie.cookie if config.HasField("cookie")
                                                         else None)

    def set_pipeline(self, program=None, p4info=None, device_config=None, target="embedded",
                     cookie=None, action="VERIFY_AND_COMMIT"):
        """Set the forwarding pipeline.

        Args:
            program: embedded target: path of a .p4 file (loaded here to build P4Info
                and the device config), or a loaded program object; or, for either
                target, a ``(p4info, device_config)`` pair (same forms as below).
            p4info: a P4Info message, its text, or the path of a p4info.txt file
                (BMv2: as p4c wrote it; embedded: optional, generated otherwise).
            device_config: bytes, or the path of a file (BMv2: the JSON p4c wrote).
            target: "embedded" or "bmv2".
            cookie: optional int stored with the config.
            action: a SetForwardingPipelineConfigRequest.Action name.

        Raises:
            ParameterError: missing or contradictory arguments.
            P4RuntimeClientError: the switch refused the config.
        """
        if target not in ("embedded", "bmv2"):
            raise ParameterError("target", target, "embedded or bmv2")
        if isinstance(program, tuple):
            if len(program) != 2:
                raise ParameterError("program", program, "a .p4 path or a (p4info, device_config) pair")
            program, p4info, device_config = None, program[0], program[1]
        if program is not None:
            if target != "embedded":
                raise ParameterError("program", program, "None for target bmv2 (give p4info and "
                                                         "device_config files from p4c)")
            built_p4info, built_config = embedded_pipeline(program)
            p4info = built_p4info if p4info is None else p4info
            device_config = built_config if device_config is None else device_config
        if p4info is None or device_config is None:
            raise ParameterError("p4info/device_config", (p4info, device_config),
                                 "both given (or a program for the embedded target)")
        p4info = p4info_message(p4info)
        if isinstance(device_config, str):
            with open(device_config, "rb") as handle:
                device_config = handle.read()
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        self._election(request)
        request.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action)
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = bytes(device_config)
        if cookie is not None:
            request.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, request)
        if action in ("VERIFY_AND_COMMIT", "VERIFY_AND_SAVE", "RECONCILE_AND_COMMIT"):
            self.index = P4InfoIndex(p4info)

    def _idx(self):
        """The :class:`P4InfoIndex` of the switch's P4Info, fetched if not known yet.

        Raises:
            P4RuntimeClientError: FAILED_PRECONDITION when the switch has no pipeline.
        """
        if self.index is None:
            self.load_p4info()
        if self.index is None:
            raise P4RuntimeClientError("FAILED_PRECONDITION", "the switch has no pipeline; call set_pipeline")
        return self.index

    def _lookup(self, kind, name):
        """The P4Info object of a kind ("tables", "actions", ...) by name or alias.

        Raises:
            P4RuntimeClientError: NOT_FOUND for an unknown name; FAILED_PRECONDITION without a pipeline.
        """
        try:
            return self._idx().by_name(kind, name)
        except KeyError as exc:
            raise P4RuntimeClientError("NOT_FOUND", str(exc)) from None


def p4info_message(p4info):
    """A P4Info message from a message, its text or binary form, or the path of a text/binary file.

    Args:
        p4info: a ``P4Info`` message; the path of a file (``.bin``/``.pb``: binary, else
            text); serialized bytes; or the text form.

    Returns:
        p4.config.v1.p4info_pb2.P4Info

    Raises:
        google.protobuf.message.DecodeError, google.protobuf.text_format.ParseError: not a P4Info.
    """
    if isinstance(p4info, p4info_pb2.P4Info):
        return p4info
    if isinstance(p4info, str) and os.path.exists(p4info):
        with open(p4info, "rb") as handle:
            data = handle.read()
        if p4info.endswith((".bin", ".pb")):
            message = p4info_pb2.P4Info()
            message.ParseFromString(data)
            return message
        return p4info_from_text(data.decode())
    if isinstance(p4info, (bytes, bytearray)):
        message = p4info_pb2.P4Info()
        message.ParseFromString(bytes(p4info))
        return message
    return p4info_from_text(p4info)
