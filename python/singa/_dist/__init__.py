"""Data-parallel training: ``DistOpt`` and the communicators it drives.

``singa.opt.DistOpt`` is ``singa._dist.distopt.DistOpt``; importing either
needs no MPI. Creating a DistOpt imports mpi4py (the ``dist`` extra).
"""

from singa._dist.distopt import DistOpt

__all__ = ["DistOpt"]
