"""The embedded target's device config: a P4 program's sources as one document.

The ``p4_device_config`` bytes of a P4Runtime ForwardingPipelineConfig for the
embedded target are UTF-8 JSON::

    {"format": "testbed-embedded-v1", "main": "l3_ecmp.p4",
     "sources": {"l3_ecmp.p4": "...", "include/headers.p4": "..."}}

i.e. the P4 sources themselves (BMv2 gets p4c's JSON instead); the switch
compiles them with :func:`testbed.p4.loader.load_program_from_sources`.
"""
import json

from testbed.errors import TestbedError

DEVICE_CONFIG_FORMAT = "testbed-embedded-v1"
MAX_DEVICE_CONFIG_BYTES = 4 << 20
"""Largest device config (sources with comments; the loader bounds the preprocessed program further)."""


class DeviceConfigError(TestbedError):
    """Device config bytes that are not the embedded target's document."""


def device_config_for(program):
    """The embedded target's device config bytes of a loaded program.

    Args:
        program: a loaded program (``.main_file`` and ``.sources``), as returned by
            ``testbed.p4.loader.load_program``.

    Returns:
        bytes: the JSON document described in the module docstring.
    """
    document = {"format": DEVICE_CONFIG_FORMAT, "main": program.main_file, "sources": dict(program.sources)}
    return json.dumps(document, sort_keys=True).encode()


def parse_device_config(data):
    """(main_file, sources) of embedded-target device config bytes.

    Raises:
        DeviceConfigError: it is not the JSON document of the module docstring (not
            JSON, nested too deeply, a field missing, a source that is not a string), or it is
            larger than MAX_DEVICE_CONFIG_BYTES.
    """
    if len(data) > MAX_DEVICE_CONFIG_BYTES:
        raise DeviceConfigError(f"p4_device_config of {len(data)} bytes is larger than the embedded target's "
                                f"limit of {MAX_DEVICE_CONFIG_BYTES} bytes (MAX_DEVICE_CONFIG_BYTES)")
    try:
        document = json.loads(bytes(data).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise DeviceConfigError(f"p4_device_config is not the embedded target's JSON ({exc}); "
                                f"expected {{\"format\": \"{DEVICE_CONFIG_FORMAT}\", ...}}") from None
    except RecursionError:
        raise DeviceConfigError("p4_device_config: JSON nested too deeply; expected "
                                f"{{\"format\": \"{DEVICE_CONFIG_FORMAT}\", \"main\": ..., "
                                f"\"sources\": {{...}}}}") from None
    if not isinstance(document, dict) or document.get("format") != DEVICE_CONFIG_FORMAT:
        raise DeviceConfigError(f"p4_device_config: format must be {DEVICE_CONFIG_FORMAT!r}")
    main, sources = document.get("main"), document.get("sources")
    if not isinstance(main, str) or not isinstance(sources, dict) or main not in sources:
        raise DeviceConfigError("p4_device_config: needs 'main' (a file name) and 'sources' containing it")
    for name, text in sources.items():
        if not isinstance(text, str):
            raise DeviceConfigError(f"p4_device_config: sources[{name[:80]!r}] must be the file's text (a string), "
                                    f"not {type(text).__name__}")
    return main, sources
