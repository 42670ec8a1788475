"""Reading JSON request bodies, with the tensor data of KServe v2 infer bodies read straight into arrays.

A v2 infer body is mostly tensor data (256 floats are 2.7 KB of the benchmark's 2.8 KB body).
orjson reads each number into a Python float that NumPy then reads again: 9.8 us for those 256
floats, 6.0 ms for a 224x224x3 image. simdjson's parser hands a JSON array of numbers over as one
float64 buffer: 4.0 us and 1.8 ms, parse included (``load_infer_body`` in all, walking the rest of
the document too: 7.2 us for the benchmark's body). ``load_infer_body`` takes that path for the
``data`` of floating-point inputs; anything it does not fully understand (NaN or Infinity literals,
integers past 64 bits, malformed bodies) is read again by ``load_json_object``, so error messages
and edge cases are those of the general reader.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import simdjson

from serving.errors import InvalidRequest

FLOAT_DATATYPES = frozenset({"FP16", "BF16", "FP32", "FP64"})
_OBJECT, _ARRAY = simdjson.Object, simdjson.Array


def parse_json(raw: bytes | memoryview) -> Any:
    """orjson's reading where it has one (tensor data parses 7-10x faster than with ``json``: 7 us
    for 256 floats against 50-75 us), else the standard library's: NaN and Infinity literals,
    numbers past float64's range, lone surrogates and UTF-16/32 bodies read as ``json.loads``
    reads them, and malformed bodies get its error messages. (Integers past 64 bits read as
    floats under orjson; every tensor datatype refuses them either way.)"""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(bytes(raw))


def load_json_object(raw: bytes | memoryview, what: str = "request body") -> dict:
    """The body as a dict, or ``InvalidRequest`` saying why ``what`` is not a JSON object."""
    try:
        doc = parse_json(raw)
    except UnicodeDecodeError:
        raise InvalidRequest(f"{what} is not valid JSON: {_not_text(bytes(raw))}") from None
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidRequest(f"{what} is not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise InvalidRequest(f"{what} must be a JSON object, got {type(doc).__name__}")
    return doc


def _not_text(raw: bytes) -> str:
    """Why ``raw`` is no JSON text, in the client's terms. ``json.loads`` guesses UTF-16 or UTF-32
    from NUL bytes among the first four, and its error then names a codec the client never chose."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte {exc.start} (0x{raw[exc.start]:02x}) is not UTF-8 text"
    return f"byte {raw.index(0)} is a NUL byte, not JSON text"


def load_infer_body(raw: bytes | memoryview, what: str = "request body") -> dict:
    """A v2 infer body as ``load_json_object`` reads it, except that the ``data`` of an input with a
    floating-point datatype, when it is a flat array of numbers, comes as a float64 ndarray."""
    try:
        # A parser per body: one costs ~0.3 us, and a shared one refuses to parse again while any
        # value of its last document is still referenced (by a traceback, say); this also makes
        # the function safe to call from any thread.
        root = simdjson.Parser().parse(bytes(raw))
        if isinstance(root, simdjson.Object):
            doc = _object(root, inputs=True)
            if doc is not None:
                return doc
    except (ValueError, TypeError, RuntimeError):  # simdjson's errors, UnicodeDecodeError included
        pass
    return load_json_object(raw, what)


def _object(obj: "simdjson.Object", *, inputs: bool = False, floats: bool = False) -> dict | None:
    """The object's members as Python values (containers converted whole, except as below), or None
    when a key repeats: simdjson's lookup finds the first of them, JSON readers keep the last.
    With ``inputs``, its "inputs" array is read item by item; with ``floats``, its "data"."""
    doc = {}
    for key in obj.keys():  # (items() would convert every value, tensor data included)
        value = obj[key]
        kind = type(value)  # numbers, strings, booleans and null come converted
        if kind is _ARRAY:
            if inputs and key == "inputs":
                items = []
                for item in value:  # iterating an Array gives its containers unconverted
                    if type(item) is _OBJECT:
                        item = _object(item, floats=item.get("datatype") in FLOAT_DATATYPES)
                        if item is None:
                            return None
                    elif type(item) is _ARRAY:
                        item = item.as_list()
                    items.append(item)
                value = items
            elif floats and key == "data":
                value = _float_array(value)
            else:
                value = value.as_list()
        elif kind is _OBJECT:
            value = value.as_dict()
        doc[key] = value
    return doc if len(doc) == len(obj) else None  # fewer members than fields: a key repeats


def _float_array(value: "simdjson.Array") -> Any:
    """A flat array of numbers as float64; anything else (nested or ragged arrays, booleans,
    strings, nulls) as Python lists, for the general decoding to judge."""
    try:
        flat = np.frombuffer(value.as_buffer(of_type="d"), np.float64)
    except TypeError:  # an element that is not a number
        return value.as_list()
    # as_buffer flattens nested arrays: only a length equal to the element count means flat.
    return flat if len(flat) == len(value) else value.as_list()
