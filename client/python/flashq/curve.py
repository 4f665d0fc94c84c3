"""CurveZMQ client keys (docs/security.md): the broker's public key and this client's own pair, each
given as the 40-character Z85 key or as a file holding it (what `flashq keygen --out` writes; the
same KEY|FILE rule as the command-line flags)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

import zmq

Z85_KEY_CHARS = 40
_Z85 = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")


def load_key(value: Union[str, bytes, os.PathLike], name: str) -> bytes:
    """A Z85 key from `value`: a file of that name when it exists (surrounding whitespace
    ignored), else the key itself. ValueError naming `name` for anything else."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a Z85 key or a key file path, got {type(value).__name__}")
    text = os.fspath(value)
    if os.path.isfile(text):
        with open(text, encoding="ascii", errors="replace") as f:
            text = f.read().strip()
        where = f"{name} (file {os.fspath(value)})"
    else:
        where = name
    if len(text) != Z85_KEY_CHARS or not set(text) <= _Z85:
        raise ValueError(f"{where} must be a {Z85_KEY_CHARS}-character Z85 CurveZMQ key or a file holding one")
    return text.encode("ascii")


@dataclass(frozen=True)
class CurveKeys:
    """The keys of a CurveZMQ client: the broker's public key and this client's secret key (its
    public key is derived from the secret unless given)."""

    server_key: bytes
    secret_key: bytes
    public_key: bytes

    @classmethod
    def load(cls, server_key, secret_key, public_key=None) -> "CurveKeys":
        server = load_key(server_key, "server_key")
        secret = load_key(secret_key, "secret_key")
        derived = zmq.curve_public(secret)
        if public_key is not None and load_key(public_key, "public_key") != derived:
            raise ValueError("public_key is not the public key of secret_key")
        return cls(server, secret, derived)

    def apply(self, socket: zmq.Socket) -> None:
        """Makes `socket` a CURVE client; call before connect."""
        socket.curve_serverkey = self.server_key
        socket.curve_secretkey = self.secret_key
        socket.curve_publickey = self.public_key


def as_curve_keys(curve: Optional[object]) -> Optional[CurveKeys]:
    """CurveKeys from a CurveKeys, a (server_key, secret_key) pair or a dict of CurveKeys.load's
    arguments; None stays None."""
    if curve is None or isinstance(curve, CurveKeys):
        return curve
    if isinstance(curve, dict):
        return CurveKeys.load(**curve)
    if isinstance(curve, (tuple, list)) and len(curve) in (2, 3):
        return CurveKeys.load(*curve)
    raise TypeError("curve must be CurveKeys, (server_key, secret_key) or a dict of CurveKeys.load's arguments")
