"""reviewbot: a self-hosted reviewer for GitLab merge requests, backed by a local vLLM server.

Owns: the package's version (``__version__``). Must not: import a submodule (every layer may import
this package, and ``import reviewbot`` loads nothing else).
"""

__version__ = "0.1.0"
