"""A finished result as arrays and JSON, read back by the type its key declares.

:mod:`ui.runtime.kept_results` writes results to disk, where anyone who can write to the cache
folder could replace them; so a file must hold data, never code. :func:`encode` turns a result
into a JSON tree and a list of NumPy arrays (numeric dtypes only): dataclasses and named tuples
become their fields, dicts become lists of pairs (keys may be tuples), tuples become lists.
:func:`decode` rebuilds it guided only by the type the job's key declares (``JobKey[R]``): the
file names no class, so reading it can only ever make the value types that ``R`` is built from,
and anything that does not match them is refused with :class:`UnreadableResult`. No Streamlit.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Hashable
from typing import Any, Literal, TypeVar, Union, overload

import numpy as np

from ui.runtime.store import JobKey

R = TypeVar("R")

_ARRAY, _BYTES, _DICT = "$array", "$bytes", "$dict"
# A tree as JSON holds it: what encode writes and decode reads.
Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"]

_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex: nothing NumPy pickles


class UnreadableResult(ValueError):
    """A value that cannot be written as data, or a file that does not match its type."""


def result_type(key_type: type) -> object:
    """The ``R`` a key class declares as ``JobKey[R]`` (``Any`` when it declares none), as a
    type expression :func:`decode` reads."""
    for klass in key_type.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if args and not isinstance(args[0], typing.TypeVar):
                return args[0]
    return Any


def encode(value: object) -> tuple[Json, list[np.ndarray]]:
    """``value`` as a JSON-able tree and the arrays it refers to by index.

    Raises:
        UnreadableResult: something that is not plain data (a model, a function, an object array).
    """
    arrays: list[np.ndarray] = []
    return _encode(value, arrays, 0), arrays


def _encode(value: Any, arrays: list[np.ndarray], depth: int) -> Json:
    if depth > 32:
        raise UnreadableResult("nested too deep")
    inner = depth + 1
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return _encode(value.item(), arrays, inner)
    if isinstance(value, (bytes, bytearray)):
        arrays.append(np.frombuffer(bytes(value), dtype=np.uint8))
        return {_BYTES: len(arrays) - 1}
    if callable(getattr(value, "detach", None)) and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _KINDS:
            raise UnreadableResult(f"an array of {value.dtype} is not plain numbers")
        arrays.append(np.ascontiguousarray(value))
        return {_ARRAY: len(arrays) - 1}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _encode(getattr(value, f.name), arrays, inner)
            for f in dataclasses.fields(value)
            if f.init
        }
    if isinstance(value, dict):
        return {
            _DICT: [
                [_encode(k, arrays, inner), _encode(v, arrays, inner)] for k, v in value.items()
            ]
        }
    if isinstance(value, (list, tuple)):  # a named tuple too: its fields in order
        return [_encode(item, arrays, inner) for item in value]
    raise UnreadableResult(f"a {type(value).__name__} is not plain data")


def decode(tree: Any, kind: object, arrays: list[np.ndarray]) -> object:
    """The value of type ``kind`` that :func:`encode` wrote as ``tree`` and ``arrays``.

    Raises:
        UnreadableResult: the tree does not match ``kind``.
    """
    try:
        return _decode(tree, kind, arrays)
    except (TypeError, KeyError, IndexError, AttributeError) as err:
        raise UnreadableResult(f"does not match {kind}: {err}") from None


@overload
def decode_result(key: JobKey[R], tree: Any, arrays: list[np.ndarray]) -> R: ...


@overload
def decode_result(key: Hashable, tree: Any, arrays: list[np.ndarray]) -> object: ...


def decode_result(key: Hashable, tree: Any, arrays: list[np.ndarray]) -> object:
    """``key``'s result that :func:`encode` wrote as ``tree`` and ``arrays``, decoded as the type
    its key class declares (so a ``JobKey[R]`` gives an ``R``: anything else is refused).

    Raises:
        UnreadableResult: the tree does not match that type.
    """
    return decode(tree, result_type(type(key)), arrays)


def _array(tree: Any, arrays: list[np.ndarray], tag: str = _ARRAY) -> np.ndarray:
    if not (isinstance(tree, dict) and set(tree) == {tag} and type(tree[tag]) is int):
        raise UnreadableResult("an array was expected")
    return arrays[tree[tag]]


def _is_array_type(kind: Any) -> bool:
    """``np.ndarray``, or a jaxtyping annotation of one (``Float[np.ndarray, "layer head"]``)."""
    return kind is np.ndarray or getattr(kind, "array_type", None) is np.ndarray


def _is_tensor_type(kind: Any) -> bool:
    """``torch.Tensor``, or a jaxtyping annotation of one (``Float[torch.Tensor, "pos d"]``)."""
    kind = getattr(kind, "array_type", kind)
    return getattr(kind, "__module__", "") == "torch" and getattr(kind, "__name__", "") == "Tensor"


def _decode(tree: Any, kind: Any, arrays: list[np.ndarray]) -> object:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any or kind is object:
        return _generic(tree, arrays)
    if kind is None or kind is type(None):
        if tree is not None:
            raise UnreadableResult("None was expected")
        return None
    if origin in (Union, types.UnionType):
        return _union(tree, args, arrays)
    if origin is Literal:
        if tree not in args:
            raise UnreadableResult(f"{tree!r} is not one of {args}")
        return tree
    if kind in (bool, str) or kind is int:
        if type(tree) is not kind:
            raise UnreadableResult(f"a {kind.__name__} was expected")
        return tree
    if kind is float:
        if type(tree) not in (int, float):
            raise UnreadableResult("a number was expected")
        return float(tree)
    if _is_array_type(kind):
        return _array(tree, arrays)
    if kind is bytes:
        return _array(tree, arrays, _BYTES).tobytes()
    if _is_tensor_type(kind):
        import torch

        return torch.from_numpy(np.array(_array(tree, arrays)))
    if origin in (list, tuple, dict) or kind in (list, tuple, dict):
        return _container(tree, origin or kind, args, arrays)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass(tree, kind, arrays)
    if isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields"):
        hints = typing.get_type_hints(kind)
        if not isinstance(tree, list) or len(tree) != len(kind._fields):
            raise UnreadableResult(f"{kind.__name__} has {len(kind._fields)} fields")
        make: Callable[..., object] = kind  # a named tuple: one argument per field
        return make(
            *(_decode(t, hints[f], arrays) for t, f in zip(tree, kind._fields, strict=True))
        )
    raise UnreadableResult(f"{kind} is not a type a kept result may hold")


def _union(tree: Any, args: tuple[Any, ...], arrays: list[np.ndarray]) -> object:
    if tree is None and type(None) in args:
        return None
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _decode(tree, arg, arrays)
        except UnreadableResult:
            continue
    raise UnreadableResult(f"matches none of {args}")


def _container(tree: Any, origin: Any, args: tuple[Any, ...], arrays: list[np.ndarray]) -> object:
    if origin is dict:
        key, value = args or (Any, Any)
        if not isinstance(tree, dict) or set(tree) != {_DICT} or not isinstance(tree[_DICT], list):
            raise UnreadableResult("a dict was expected")
        return {_decode(k, key, arrays): _decode(v, value, arrays) for k, v in tree[_DICT]}
    if not isinstance(tree, list):
        raise UnreadableResult("a sequence was expected")
    if origin is list:
        item = args[0] if args else Any
        return [_decode(t, item, arrays) for t in tree]
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(t, args[0], arrays) for t in tree)
    if not args:
        return tuple(_generic(t, arrays) for t in tree)
    if len(args) != len(tree):
        raise UnreadableResult(f"a tuple of {len(args)} was expected")
    return tuple(_decode(t, a, arrays) for t, a in zip(tree, args, strict=True))


def _dataclass(tree: Any, kind: type, arrays: list[np.ndarray]) -> object:
    hints = typing.get_type_hints(kind)
    fields = [f for f in dataclasses.fields(kind) if f.init]
    if not isinstance(tree, dict) or set(tree) != {f.name for f in fields}:
        raise UnreadableResult(f"the fields of {kind.__name__} were expected")
    return kind(**{f.name: _decode(tree[f.name], hints[f.name], arrays) for f in fields})


def _generic(tree: Any, arrays: list[np.ndarray]) -> object:
    """A value whose type is not declared: numbers, strings, lists, dicts and arrays only."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [_generic(t, arrays) for t in tree]
    if isinstance(tree, dict) and set(tree) == {_ARRAY}:
        return _array(tree, arrays)
    if isinstance(tree, dict) and set(tree) == {_BYTES}:
        return _array(tree, arrays, _BYTES).tobytes()
    if isinstance(tree, dict) and set(tree) == {_DICT}:
        return {_hashable(_generic(k, arrays)): _generic(v, arrays) for k, v in tree[_DICT]}
    raise UnreadableResult("not data this reader knows")


def _hashable(value: object) -> Hashable:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value
