# The Python side of seqbus._codec_support (the Cython support of seqc-generated codecs); its
# C side is for generated modules only (_codec_support.pxd).
from collections.abc import Callable
from typing import Any

#: The codec support ABI: generated modules name the one they were generated for.
ABI: int

def require_abi(module: str, abi: int) -> None: ...
def repr_of(name: str, d: dict[str, Any]) -> str: ...
def rebuild(cls: type, d: dict[str, Any]) -> Any: ...

class Handler:
    """A node class's handler (``on_<message>``), as ``seqbus.Node`` subclasses hold it."""

    func: Callable[..., Any]
    name: str
    overridden: int
    def __init__(self, func: Callable[..., Any], name: str) -> None: ...
    def __get__(self, instance: object, owner: type | None = ...) -> Any: ...
    def __set__(self, instance: object, value: Any) -> None: ...
    def __delete__(self, instance: object) -> None: ...

def __getattr__(name: str) -> Any: ...  # the classes generated codecs build on
