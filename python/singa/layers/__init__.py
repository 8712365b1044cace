"""Layer implementations by family; ``singa.layer`` is the public module."""
