"""ONNX import and export for singa; the public face is ``singa.sonnx``.

Modules: ``errors`` (exception types), ``dtypes`` (ONNX element types to
singa dtypes), ``registry`` (the importer's op table), ``ops_*`` (the
importer's handlers by family), ``importer`` (prepare / run / SONNXModel),
``backend`` (``onnx.backend.base.Backend``) and ``exporter`` (to_onnx).
"""
