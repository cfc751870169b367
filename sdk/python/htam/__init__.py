"""htam: Python client of htamd, the organization-wide memory of GPU-kernel optimization experience.

    import htam
    with htam.Client("tcp://127.0.0.1:7878") as c:
        s = c.open_session("cpu_relu", backend="cpu", budget=6)
        step = c.next_step(s["session"]["id"])
        r = c.submit(s["session"]["id"], source, direction_id=step["direction"]["id"],
                     summary="vectorized loads")

The wire types (generated from schema/*.fbs) are in ``htam.fb``. See docs/protocol.md.
"""

from htam.client import (BOTTLENECK_NAMES, OUTCOME_NAMES, QUERY_KINDS, Client, HtamError,
                         HtamTimeout, bottleneck_value, default_identity_secret, parse_status,
                         read_key_file, to_dict)

__all__ = ["BOTTLENECK_NAMES", "Client", "HtamError", "HtamTimeout", "OUTCOME_NAMES",
           "QUERY_KINDS", "bottleneck_value", "default_identity_secret", "parse_status", "read_key_file", "to_dict"]
__version__ = "0.1.0"
