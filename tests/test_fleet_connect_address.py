"""`--ray`'s address parsed before Ray is asked (fleet_connect.py): a bracketed IPv6 host (`[::1]:6379`,
`ray://[::1]:10001`) was handed to the address lookup with its brackets, which no lookup takes ("Name or service not
known"); it is given without them. No cluster is needed: the parse, and a port listening on this machine."""

import socket

import pytest

from dlperf import fleet_connect
from dlperf.errors import UsageError


@pytest.mark.parametrize(
    ("address", "expected"),
    [("[::1]:6379", ("::1", 6379)),
     ("ray://[::1]:10001", ("::1", 10001)),
     ("[fe80::1%eth0]:6379", ("fe80::1%eth0", 6379)),  # a link-local address with its zone
     ("10.0.0.1:6379", ("10.0.0.1", 6379)),
     ("ray://head.example:10001", ("head.example", 10001)),
     ("localhost:6379", ("localhost", 6379))],
)  # fmt: skip
def test_a_host_and_port_are_read_an_ipv6_host_without_its_brackets(address, expected):
    assert fleet_connect.host_port(address) == expected


@pytest.mark.parametrize(
    "address",
    ["::1:6379", "[::1]", "[::1]:", "[::1:6379", "[::1]x:6379", "host", "host:", ":6379", "host:abc", "host:70000",
     "user@host:6379", "host:6379/path", "ray://"],
)  # fmt: skip
def test_anything_else_is_one_line_naming_the_forms(address):
    with pytest.raises(UsageError) as raised:
        fleet_connect.host_port(address)
    said = str(raised.value)
    assert said.startswith(f"--ray {address!r}: give auto, local, HOST:PORT or ray://HOST:PORT") and "\n" not in said
    assert "[::1]:6379" in said  # how an IPv6 host is written


def _listening(family: int, host: str) -> socket.socket:
    try:
        s = socket.socket(family)
        s.bind((host, 0))
    except OSError:
        pytest.skip(f"this machine cannot listen on {host}")
    s.listen()
    return s


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_bracketed_ipv6_address_listening_here_is_reachable(scheme):
    with _listening(socket.AF_INET6, "::1") as s:
        fleet_connect._check_reachable(f"{scheme}[::1]:{s.getsockname()[1]}")


def test_a_closed_port_is_still_unreachable():
    with _listening(socket.AF_INET6, "::1") as s:
        port = s.getsockname()[1]
    with pytest.raises(UsageError, match=rf"^--ray \[::1\]:{port}: unreachable"):
        fleet_connect._check_reachable(f"[::1]:{port}")


def test_a_port_out_of_range_is_the_usage_line_not_a_traceback():
    """`--ray 127.0.0.1:70000` passed the old digit check and was tried, as if a port ("unreachable")."""
    with pytest.raises(UsageError, match=r"^--ray '127.0.0.1:70000': give auto, local, HOST:PORT"):
        fleet_connect._check_reachable("127.0.0.1:70000")
