"""Exceptions raised by singa's ONNX import and export.

Every error names the node (or graph element) and the reason. The classes
also derive from the matching built-in so callers can catch them either way.
"""


class SonnxError(Exception):
    """Base class of every ONNX import/export error."""


class UnsupportedError(SonnxError, NotImplementedError):
    """An operator, opset, attribute value or data type singa cannot handle."""


class GraphError(SonnxError, ValueError):
    """A malformed graph or a bad input (shape, count, missing value)."""


class OnnxTypeError(SonnxError, TypeError):
    """A value of the wrong type (e.g. a non-tensor input)."""


def describe(node):
    """'Conv node "conv1"' style label for messages."""
    name = node.name or (node.output[0] if len(node.output) else "")
    return f'{node.op_type} node "{name}"'


def wrap_node_error(node, exc):
    """A SonnxError naming node, chained to exc, of the matching category."""
    if isinstance(exc, SonnxError):
        label = describe(node)
        if label in str(exc):
            return exc
        cls = type(exc)
    elif isinstance(exc, NotImplementedError):
        cls = UnsupportedError
    elif isinstance(exc, TypeError):
        cls = OnnxTypeError
    else:
        # ValueError, IndexError, RuntimeError from the C++ core and so on:
        # for a graph these all mean the node's inputs do not fit together.
        cls = GraphError
    err = cls(f"{describe(node)}: {exc}")
    err.__cause__ = exc
    return err
